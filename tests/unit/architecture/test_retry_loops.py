"""Retry loops (``until``) on the collection's own modules survive a failed attempt: such a module fails without its
return values (a broker that is still starting answers Jolokia with an error for a few seconds), so an ``until`` that
reads ``result.key`` bare stops the runbook with a template error ("object of type 'dict' has no attribute ...")
instead of trying again. Found by the fault suite: failback.yml's wait for the returning broker, on a loaded host."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
OWN_MODULE = re.compile(r"^continuity\.artemis\.\w+$")


def tasks(node):
    """Every task dict in a tasks/playbook YAML structure (blocks, plays, handlers, rescue/always included)."""
    if isinstance(node, list):
        for item in node:
            yield from tasks(item)
    elif isinstance(node, dict):
        if "until" in node:
            yield node
        for key in ("tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always"):
            if key in node:
                yield from tasks(node[key])


def bare_reads(task: dict) -> list[str]:
    """``register.key`` reads of the until expression with no ``| default(...)`` right after them."""
    register, until = task.get("register"), str(task["until"])
    if not register or task.get("failed_when") is False:
        return []
    found = []
    for match in re.finditer(rf"\b{re.escape(register)}\.\w+(?:\.\w+)*", until):
        if not re.match(r"\s*\|\s*default\(", until[match.end():]):
            found.append(match.group(0))
    return found


def own_module_loops() -> list[tuple[str, dict]]:
    loops = []
    for path in sorted([*ROOT.glob("playbooks/**/*.yml"), *ROOT.glob("roles/*/tasks/*.yml"),
                        *ROOT.glob("roles/*/handlers/*.yml")]):
        for task in tasks(yaml.safe_load(path.read_text()) or []):
            if any(OWN_MODULE.match(str(key)) for key in task):
                loops.append((f"{path.relative_to(ROOT)}: {task.get('name')}", task))
    return loops


def test_every_retry_loop_on_an_own_module_reads_its_result_with_a_default():
    loops = own_module_loops()
    # the rule must see the loops it is about (a walk that finds none would pass vacuously)
    assert any("failback.yml" in where for where, _ in loops), [where for where, _ in loops]
    bad = {where: reads for where, task in loops if (reads := bare_reads(task))}
    assert not bad, f"until reads these without | default(...): {bad}"


def test_the_rule_finds_a_bare_read_and_accepts_a_guarded_one():
    assert bare_reads({"register": "r", "until": "r.reachable"}) == ["r.reachable"]
    assert bare_reads({"register": "r", "until": "r.live | default(false)"}) == []
    assert bare_reads({"register": "r", "until": "r.a.b and r.c | default(0) > 1"}) == ["r.a.b"]
    assert bare_reads({"register": "r", "until": "r.reachable", "failed_when": False}) == []
