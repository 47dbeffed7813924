#!/usr/bin/env bash
# ansible-test must run from .../ansible_collections/<ns>/<name>. Copy what the Galaxy build would ship
# (tracked and new, not ignored, files minus the build_ignore folders) to a clean tree and run sanity there.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest="$root/build/sanity/ansible_collections/continuity/artemis"
rm -rf "$root/build/sanity"; mkdir -p "$dest"
cd "$root"
git ls-files --cached --others --exclude-standard -z \
  | grep -z -v -E '^(lab|benchmarks|\.ci)/' \
  | tar --null --ignore-failed-read -cf - -T - 2>/dev/null \
  | tar -xf - -C "$dest"
cd "$dest"
pyver=$("$root/.venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
"$root/.venv/bin/ansible-test" sanity --venv --requirements --python "$pyver" --color no "$@"
