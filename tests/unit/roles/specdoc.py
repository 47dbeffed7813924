"""Markdown variable tables generated from the roles' meta/argument_specs.yml.

`python -m tests.unit.roles.specdoc` is not needed: run `.venv/bin/python tests/unit/roles/specdoc.py --write`
to refresh the generated blocks in docs/roles.md and roles/<role>/README.md; test_docs_in_sync.py fails when a
block differs from the specs, so the operator documentation cannot drift from what Ansible validates.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
ROLES = ("broker", "mirror")
BEGIN = "<!-- BEGIN generated from roles/{role}/meta/argument_specs.yml -->"
END = "<!-- END generated from roles/{role}/meta/argument_specs.yml -->"


def _defaults(role):
    return yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}


def _text(desc):
    if isinstance(desc, list):
        desc = " ".join(desc)
    desc = re.sub(r"[ICB]\(([^)]*)\)", r"`\1`", str(desc or ""))
    return desc.replace("|", "\\|").replace("\n", " ").strip()


def _type(o):
    t = o.get("type", "str")
    if t == "list" and o.get("elements"):
        t = f"list of {o['elements']}"
    return t


def _rows(options, prefix="", defaults=None):
    rows = []
    for name, o in options.items():
        full = prefix + name
        extra = []
        if o.get("required"):
            extra.append("**required**")
        if o.get("choices"):
            extra.append("choices: " + ", ".join(f"`{c}`" for c in o["choices"]))
        if o.get("no_log"):
            extra.append("secret (no_log)")
        default = None
        if defaults is not None and name in defaults:
            default = defaults[name]
        elif "default" in o:
            default = o["default"]
        dumped = yaml.safe_dump(default, default_flow_style=True, width=1000).strip().removesuffix("...").strip()
        dtext = "" if default is None else f"`{dumped}`"
        dtext = dtext.replace("|", "\\|")
        desc = _text(o.get("description"))
        if extra:
            desc = desc + " (" + "; ".join(extra) + ")"
        rows.append(f"| `{full}` | {_type(o)} | {dtext} | {desc} |")
        if o.get("options"):
            sub = full + ("[]." if o.get("type") == "list" else ".")
            rows += _rows(o["options"], sub)
    return rows


def table(role):
    spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"]
    head = ["| variable | type | default | meaning |", "|---|---|---|---|"]
    body = "\n".join(head + _rows(options, defaults=_defaults(role)))
    return BEGIN.format(role=role) + "\n" + body + "\n" + END.format(role=role)


def replace_block(text, role):
    pattern = re.compile(re.escape(BEGIN.format(role=role)) + r".*?" + re.escape(END.format(role=role)), re.S)
    if not pattern.search(text):
        raise ValueError(f"no generated block for {role}")
    return pattern.sub(lambda _m: table(role), text)


def files():
    return {ROOT / "docs" / "roles.md": ROLES, **{ROOT / "roles" / r / "README.md": (r,) for r in ROLES}}


if __name__ == "__main__":
    if "--write" in sys.argv:
        for path, roles in files().items():
            text = path.read_text()
            for role in roles:
                text = replace_block(text, role)
            path.write_text(text)
    else:
        for role in ROLES:
            print(table(role))
