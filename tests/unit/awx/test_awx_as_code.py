"""AWX as code (extensions/awx) against the runbooks it launches.

The objects are rendered by Ansible itself (`configure.yml -e continuity_awx_render_to=...`: no AWX is called),
then every job template's survey is checked against its runbook's input contract, the validate_argument_spec task
of the runbook's play: each question asks for an input the runbook declares, with a type that validates as that
input, the same choices, required exactly when the runbook requires it, and the runbook's own default.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
PLAYBOOKS = ROOT / "playbooks"
AWX = ROOT / "extensions" / "awx"
AWX_COLLECTION = ROOT / "build" / "collections" / "ansible_collections" / "awx" / "awx"

# AWX survey question types that can carry each argument-spec type (AWX sends text/multiplechoice answers as
# strings, integer and float answers as JSON numbers).
SURVEY_TYPES = {
    "str": {"text", "textarea", "password", "multiplechoice"},
    "path": {"text"},
    "int": {"integer"},
    "float": {"float", "integer"},
    "bool": {"multiplechoice"},
}
BOOL_CHOICES = ["false", "true"]


def _imported_playbooks() -> set[str]:
    out = set()
    for path in PLAYBOOKS.glob("*.yml"):
        for play in yaml.safe_load(path.read_text()) or []:
            target = play.get("ansible.builtin.import_playbook") or play.get("import_playbook")
            if target:
                out.add(target)
    return out


def runbooks() -> list[str]:
    """Every playbook in playbooks/ that is not only a building block imported by the others (sites.yml)."""
    return sorted(f"playbooks/{p.name}" for p in PLAYBOOKS.glob("*.yml") if p.name not in _imported_playbooks())


def contract(playbook: str) -> tuple[dict[str, dict], dict[str, Any]]:
    """(argument_spec, defaults) of a runbook: the spec of its validate_argument_spec task and the values its play
    starts from (its vars_files, then its vars)."""
    spec: dict[str, dict] = {}
    defaults: dict[str, Any] = {}
    for play in yaml.safe_load((ROOT / playbook).read_text()):
        for task in play.get("tasks", []):
            v = task.get("ansible.builtin.validate_argument_spec")
            if v:
                spec.update(v["argument_spec"])
                for vf in play.get("vars_files", []):
                    defaults.update(yaml.safe_load((ROOT / playbook).parent.joinpath(vf).read_text()))
                defaults.update(play.get("vars") or {})
    return spec, defaults


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not (AWX_COLLECTION / "MANIFEST.json").exists():
        pytest.fail("awx.awx is not under build/collections: run `make awx-collection` (requirements/awx.txt)")
    out = tmp_path_factory.mktemp("awx") / "awx.json"
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}
    res = subprocess.run([str(BIN / "ansible-playbook"), str(AWX / "configure.yml"), "-i", "localhost,",
                          "-e", f"continuity_awx_render_to={out}"], capture_output=True, text=True, timeout=300,
                         env=env, cwd=ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(out.read_text())


def _templates(rendered: dict[str, Any]) -> dict[str, dict]:
    return {t["name"]: t for t in rendered["templates"]}


def _as_spec_type(value: Any, typ: str) -> Any:
    """What validate_argument_spec makes of a survey answer (AWX sends bool choices as strings)."""
    if typ == "bool":
        assert value in BOOL_CHOICES, value
        return value == "true"
    if typ == "int":
        assert isinstance(value, int) and not isinstance(value, bool), value
        return value
    if typ == "float":
        assert isinstance(value, int | float) and not isinstance(value, bool), value
        return float(value)
    assert isinstance(value, str), value
    return value


def _check_question(playbook: str, q: dict, spec: dict[str, dict], defaults: dict[str, Any], sites: list[str]):
    name = q["variable"]
    assert name in spec, f"{playbook}: the survey asks for {name}, which the runbook does not declare"
    arg = spec[name]
    typ = arg.get("type", "str")
    assert q["type"] in SURVEY_TYPES[typ], f"{playbook}: {name} is {typ}, survey type {q['type']}"
    assert bool(q.get("required")) == bool(arg.get("required")), f"{playbook}: {name} required differs"
    if typ == "bool":
        assert sorted(q["choices"]) == BOOL_CHOICES, f"{playbook}: {name} choices {q['choices']}"
    elif "choices" in arg:
        assert q["type"] == "multiplechoice" and sorted(q["choices"]) == sorted(arg["choices"]), name
    elif q["type"] == "multiplechoice":
        # a site question: the choices are the inventory's sites
        assert name.endswith("_site") and q["choices"] == sites, f"{playbook}: {name} choices {q['choices']}"
    if q["type"] == "multiplechoice" and "default" in q:
        assert q["default"] in q["choices"], f"{playbook}: {name} default {q['default']!r} is not a choice"
    if "default" in q:
        assert name in defaults, f"{playbook}: the survey gives {name} a default the runbook does not have"
        want = defaults[name]
        if typ == "float":
            want = float(want)
        assert _as_spec_type(q["default"], typ) == want, f"{playbook}: {name} default {q['default']!r} != {want!r}"
    else:
        assert arg.get("required") or name not in defaults or defaults[name] in ("", None), (
            f"{playbook}: {name} has a runbook default {defaults.get(name)!r}; give the question the same default")
    for bound in ("min", "max"):
        if bound in q:
            assert q["type"] in ("integer", "float"), f"{playbook}: {name} has {bound} but is {q['type']}"


def test_one_job_template_per_runbook(rendered):
    templates = _templates(rendered)
    assert sorted(t["playbook"] for t in templates.values()) == runbooks()
    for t in templates.values():
        assert (ROOT / t["playbook"]).is_file()
        assert t["extra_vars"]["continuity_evidence_dir"], "evidence must outlive the job (docs/awx.md)"


@pytest.mark.parametrize("playbook", runbooks())
def test_survey_matches_the_runbook_inputs(rendered, playbook):
    spec, defaults = contract(playbook)
    sites = rendered_sites()
    template = next(t for t in rendered["templates"] if t["playbook"] == playbook)
    if not spec:
        assert "survey_spec" not in template, f"{playbook} declares no inputs, so its template has no survey"
        return
    questions = template["survey_spec"]["spec"]
    assert questions, f"{playbook} declares inputs but its survey asks nothing"
    names = [q["variable"] for q in questions]
    assert len(names) == len(set(names)), f"{playbook}: a question is asked twice: {names}"
    required = sorted(n for n, a in spec.items() if a.get("required"))
    assert sorted(set(required) - set(names)) == [], f"{playbook}: required inputs the survey does not ask"
    for q in questions:
        _check_question(playbook, q, spec, defaults, sites)


def rendered_sites() -> list[str]:
    return yaml.safe_load((AWX / "vars" / "inputs.yml").read_text())["continuity_awx_sites"]


def test_the_default_sites_are_the_lab_and_example_sites():
    """The site questions offer the sites the shipped inventories define (mirror_sites, the groups sites.yml maps
    each artemis host to)."""
    for inv in ("lab", "example"):
        res = subprocess.run([str(BIN / "ansible-inventory"), "-i", str(ROOT / "inventories" / inv / "hosts.yml"),
                              "--list"], capture_output=True, text=True, timeout=120, cwd=ROOT,
                             env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")})
        assert res.returncode == 0, res.stderr
        listing = json.loads(res.stdout)
        sites = {tuple(v["mirror_sites"]) for v in listing["_meta"]["hostvars"].values() if "mirror_sites" in v}
        assert sites == {tuple(rendered_sites())}, inv
        assert set(rendered_sites()) <= set(listing), f"{inv}: every site is an inventory group"


def test_bool_inputs_are_read_with_the_bool_filter():
    """A multiplechoice answer reaches the runbook as the string "false", which is truthy: every use of a bool
    input in the runbooks must go through `| bool` (a survey bool would otherwise turn a safety switch on)."""
    bools = {n for p in runbooks() for n, a in contract(p)[0].items() if a.get("type") == "bool"}
    assert bools
    bad = []
    for path in sorted(PLAYBOOKS.rglob("*.yml")):
        for no, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0] if line.lstrip().startswith("#") else line
            for name in bools:
                for m in re.finditer(rf"\b{name}\b(?!\s*[:=])", code):
                    if "validate_argument_spec" in code or re.match(r"\s*\|\s*bool\b", code[m.end():]):
                        continue
                    bad.append(f"{path.relative_to(ROOT)}:{no}: {line.strip()}")
    assert bad == []


def test_workflow_approves_before_the_switch(rendered):
    (wf,) = rendered["workflows"]
    nodes = {n["identifier"]: n for n in wf["workflow_nodes"]}
    templates = _templates(rendered)

    def children(ident: str, kind: str) -> list[str]:
        return [c["identifier"] for c in nodes[ident].get("related", {}).get(kind, [])]

    def parents(ident: str) -> list[tuple[str, str]]:
        return [(p, k) for p in nodes for k in ("success_nodes", "failure_nodes", "always_nodes")
                if ident in children(p, k)]

    by_template = {}
    for ident, n in nodes.items():
        ujt = n["unified_job_template"]
        if ujt["type"] == "job_template":
            assert ujt["name"] in templates, ujt
            by_template.setdefault(templates[ujt["name"]]["playbook"], []).append(ident)
    (swap,) = by_template["playbooks/swapover.yml"]
    # the switch runs only after an approval node succeeded, which runs only after a status succeeded
    ((approval, kind),) = parents(swap)
    assert kind == "success_nodes" and nodes[approval]["unified_job_template"]["type"] == "workflow_approval"
    assert int(nodes[approval]["unified_job_template"]["timeout"]) > 0, "a forgotten approval must expire"
    ((before, kind),) = parents(approval)
    assert kind == "success_nodes" and before in by_template["playbooks/status.yml"]
    assert parents(before) == []
    # and the sites are looked at again whatever the switch did
    (after,) = children(swap, "always_nodes")
    assert after in by_template["playbooks/status.yml"]
    spec, defaults = contract("playbooks/swapover.yml")
    for q in wf["survey_spec"]["spec"]:
        _check_question("workflow -> playbooks/swapover.yml", q, spec, defaults, rendered_sites())


def test_schedules(rendered):
    templates = _templates(rendered)
    inputs = yaml.safe_load((AWX / "vars" / "inputs.yml").read_text())
    by_playbook = {templates[s["unified_job_template"]]["playbook"]: s for s in rendered["schedules"]}
    assert sorted(by_playbook) == ["playbooks/rehearsal.yml", "playbooks/status.yml"]
    status = by_playbook["playbooks/status.yml"]
    assert "FREQ=MINUTELY" in status["rrule"]
    assert f"INTERVAL={inputs['continuity_awx_status_every_minutes']};" in status["rrule"] + ";"
    assert "FREQ=WEEKLY" in by_playbook["playbooks/rehearsal.yml"]["rrule"]
    for playbook, s in by_playbook.items():
        # AWX accepts a schedule's extra_data only for variables the template's survey asks for
        questions = {q["variable"]: q for q in templates[s["unified_job_template"]]["survey_spec"]["spec"]}
        for name, value in s["extra_data"].items():
            assert name in questions, f"{playbook}: schedule sets {name}, which the survey does not ask"
            if questions[name]["type"] == "multiplechoice":
                assert value in questions[name]["choices"], (name, value)


def test_credential_type_injects_what_the_example_inventory_reads(rendered):
    (ct,) = rendered["credential_types"]
    fields = {f["id"] for f in ct["inputs"]["fields"]}
    assert set(ct["inputs"]["required"]) <= fields
    assert all(f.get("secret") for f in ct["inputs"]["fields"] if "password" in f["id"])
    inventory = (ROOT / "inventories" / "example" / "group_vars" / "artemis" / "main.yml").read_text()
    for var, value in ct["injectors"]["extra_vars"].items():
        # AWX renders the injector: it must still hold its {{ field }} reference, unrendered by Ansible
        (field,) = re.findall(r"\{\{\s*(\w+)\s*\}\}", value)
        assert field in fields, (var, value)
        assert re.search(rf"\{{\{{\s*{var}\s*\}}\}}", inventory), f"the example inventory does not read {var}"


def _awx_docs(modules: list[str]) -> dict[str, dict]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}
    res = subprocess.run([str(BIN / "ansible-doc"), "-t", "module", "--json", *modules], capture_output=True,
                         text=True, timeout=300, cwd=ROOT, env=env)
    assert res.returncode == 0, res.stderr
    return {name: d["doc"] for name, d in json.loads(res.stdout).items()}


def _names(options: dict[str, dict]) -> set[str]:
    return set(options) | {a for o in options.values() for a in o.get("aliases", [])}


def test_awx_tasks_use_the_options_the_awx_collection_documents(rendered):
    """ansible-lint's args rule cannot load awx.awx modules (their base class is imported before its mock), so the
    options are checked here against the documentation of the pinned awx.awx."""
    (play,) = yaml.safe_load((AWX / "configure.yml").read_text())
    tasks = [(k, v) for t in play["tasks"] for k, v in t.items() if k.startswith("awx.awx.")]
    docs = _awx_docs(sorted({k for k, _ in tasks}))
    for module, args in tasks:
        options = docs[module]["options"]
        assert set(args) <= _names(options), f"{module}: unknown options {sorted(set(args) - _names(options))}"
        required = {n for n, o in options.items() if o.get("required")}
        assert required <= set(args), f"{module}: missing required {sorted(required - set(args))}"
        for default in play["module_defaults"]["group/awx.awx.controller"]:
            assert default in _names(options), f"module_defaults sets {default}, which {module} does not take"
    nodes = docs["awx.awx.workflow_job_template"]["options"]["workflow_nodes"]["suboptions"]
    ujt = nodes["unified_job_template"]["suboptions"]
    related = nodes["related"]["suboptions"]
    for wf in rendered["workflows"]:
        for node in wf["workflow_nodes"]:
            assert set(node) <= _names(nodes), sorted(set(node) - _names(nodes))
            assert set(node["unified_job_template"]) <= _names(ujt), node["unified_job_template"]
            assert set(node.get("related", {})) <= _names(related), node["related"]
    jt = docs["awx.awx.job_template"]["options"]
    for t in rendered["templates"]:
        extra = set(t) - _names(jt)
        assert not extra, f"{t['name']}: {sorted(extra)} are not job_template options"


def _set_stats_keys(tasks: list) -> set[str]:
    keys: set[str] = set()
    for t in tasks or []:
        if "ansible.builtin.set_stats" in t:
            keys |= set(t["ansible.builtin.set_stats"]["data"])
        for part in ("block", "rescue", "always"):
            keys |= _set_stats_keys(t.get(part))
    return keys


def test_docs_awx_lists_the_set_stats_keys_the_runbooks_publish():
    text = (ROOT / "docs" / "awx.md").read_text()
    section = text[text.index("## 6. Results"):]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+\.yml)` \|[^|]*\|(.*)\|$", section, re.M)}
    published = {}
    for playbook in runbooks():
        keys = set()
        for play in yaml.safe_load((ROOT / playbook).read_text()):
            keys |= _set_stats_keys(play.get("tasks"))
        if keys:
            published[Path(playbook).name] = keys
    assert sorted(rows) == sorted(published), "docs/awx.md section 6 has one row per runbook that publishes"
    for name, keys in published.items():
        # the top-level keys are the backticked names outside parentheses (those list a key's fields)
        documented = set(re.findall(r"`(continuity_\w+)`", re.sub(r"\([^()]*(\([^()]*\)[^()]*)*\)", "", rows[name])))
        assert documented == keys, f"{name}: docs/awx.md says {sorted(documented)}, the playbook {sorted(keys)}"
