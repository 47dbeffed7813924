"""Append-only journal: length + crc32 framed `marshal` records, replayed and compacted at start.

Records are appended to a memory buffer during one loop iteration and written to the OS in one `write`
(group commit) before anything that depends on them is settled, so `kill -9` never loses a settled message.
A torn tail (crash in the middle of a write) is detected by length/crc and cut off at replay.
"""

from __future__ import annotations

import marshal
import os
import struct
import zlib
from collections.abc import Iterable, Iterator

_HDR = struct.Struct(">II")
FILE_NAME = "lab-journal.jnl"


class Journal:
    def __init__(self, directory: str, fsync: bool = False, enabled: bool = True):
        self.directory = directory
        self.path = os.path.join(directory, FILE_NAME)
        self.fsync = fsync
        self.enabled = enabled
        self._buf: list[bytes] = []
        self._fd: int | None = None
        self.records_written = 0
        self.size = 0  # bytes in the journal file
        self.compactions = 0

    def replay(self) -> Iterator[tuple]:
        """Yields every intact record; truncates the file after the last intact one."""
        if not self.enabled or not os.path.exists(self.path):
            return
        with open(self.path, "rb") as f:
            data = f.read()
        pos = 0
        n = len(data)
        while pos + _HDR.size <= n:
            length, crc = _HDR.unpack_from(data, pos)
            end = pos + _HDR.size + length
            if end > n:
                break
            body = data[pos + _HDR.size : end]
            if zlib.crc32(body) != crc:
                break
            try:
                rec = marshal.loads(body)
            except (EOFError, ValueError, TypeError):
                break
            yield rec
            pos = end

    def rewrite(self, records: Iterable[tuple]) -> None:
        """Compaction: write the live state to a new file and atomically replace the journal."""
        if not self.enabled:
            return
        self._buf.clear()  # the rewritten state already includes whatever was only buffered
        os.makedirs(self.directory, exist_ok=True)
        tmp = self.path + ".compact"
        with open(tmp, "wb") as f:
            chunk: list[bytes] = []
            for rec in records:
                chunk.append(self._frame(rec))
                if len(chunk) >= 1024:
                    f.write(b"".join(chunk))
                    chunk.clear()
            f.write(b"".join(chunk))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self.compactions += 1

    def open(self) -> None:
        if not self.enabled:
            return
        os.makedirs(self.directory, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size

    @staticmethod
    def _frame(rec: tuple) -> bytes:
        body = marshal.dumps(rec)
        return _HDR.pack(len(body), zlib.crc32(body)) + body

    def append(self, rec: tuple) -> None:
        if self.enabled:
            self._buf.append(self._frame(rec))

    @property
    def dirty(self) -> bool:
        return bool(self._buf)

    def flush(self) -> None:
        """One write() of everything appended since the last flush (plus fsync when configured)."""
        if not self._buf or self._fd is None:
            self._buf.clear()
            return
        data = b"".join(self._buf)
        self._buf.clear()
        self.size += len(data)
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self.records_written += 1
        if self.fsync:
            os.fsync(self._fd)

    def close(self) -> None:
        self.flush()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
