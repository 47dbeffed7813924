"""The layers of docs/architecture.md ("Who may import whom"), checked from the sources: a new import that
crosses a layer fails here until the rule table and the doc are changed on purpose (issue 19)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
CORE = "ansible_collections.continuity.artemis.plugins.module_utils"
PLUGINS = "ansible_collections.continuity.artemis.plugins"

# layer -> (folder, what it may import besides the standard library). "core" = plugins/module_utils.
LAYERS: dict[str, tuple[str, tuple[str, ...]]] = {
    # the core: standard library only, plus optional libraries it imports where a feature needs them; never
    # ansible-core, so the agent, the traffic tool and the pipeline run without it
    "core": ("plugins/module_utils", (CORE, "jsonschema", "lxml", "proton")),
    "modules": ("plugins/modules", (CORE, "ansible.module_utils", "lxml")),
    "filters": ("plugins/filter", (CORE, "ansible.errors", "cryptography")),
    "action plugins": ("plugins/action", (f"{PLUGINS}.modules", f"{PLUGINS}.plugin_utils")),
    "plugin_utils": ("plugins/plugin_utils", ("ansible.errors", "ansible.module_utils", "ansible.plugins.action")),
    "agent": ("agent/continuity_agent", (CORE, "continuity_agent", "prometheus_client", "yaml")),
    "traffic": ("traffic/continuity_traffic", (CORE, "continuity_traffic", "proton")),
    "pipeline": ("pipeline/continuity_pipeline", (CORE, "continuity_pipeline", "pyspark", "pyarrow", "numpy")),
    "lab": ("lab/continuity_lab", (CORE, "continuity_lab", "proton")),
}


def imported_names(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def violations(source: str, allowed: tuple[str, ...]) -> list[str]:
    bad = []
    for name in sorted(imported_names(source)):
        top = name.split(".")[0]
        if top in sys.stdlib_module_names or top == "__future__":
            continue
        if not any(name == a or name.startswith(a + ".") for a in allowed):
            bad.append(name)
    return bad


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_each_layer_imports_only_what_its_rule_allows(layer: str):
    folder, allowed = LAYERS[layer]
    files = sorted((ROOT / folder).glob("*.py"))
    assert files, folder
    found = {str(f.relative_to(ROOT)): violations(f.read_text(), allowed) for f in files}
    assert not {k: v for k, v in found.items() if v}, (
        f"{layer} ({folder}) may import only {allowed} besides the standard library "
        f"(docs/architecture.md, 'Who may import whom')")


def test_the_check_catches_a_crossing_import():
    """Shown once: the core importing a tool, or ansible-core, is reported."""
    _folder, allowed = LAYERS["core"]
    assert violations("from continuity_agent import model\nimport json\n", allowed) == ["continuity_agent"]
    assert violations("from ansible.module_utils.basic import AnsibleModule\n", allowed) == [
        "ansible.module_utils.basic"]
    assert violations(f"from {CORE} import lag\n", allowed) == []


def _documented_fragments(module: Path) -> list[str]:
    source = module.read_text()
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "DOCUMENTATION":
            return yaml.safe_load(node.value.value).get("extends_documentation_fragment", [])
    raise AssertionError(f"{module} has no DOCUMENTATION")


def test_the_jolokia_action_group_is_the_modules_that_document_it():
    runtime = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())
    group = sorted(runtime["action_groups"]["jolokia"])
    documented = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py")
                        if "continuity.artemis.attributes.actiongroup_jolokia" in _documented_fragments(p))
    assert group == documented


def test_every_module_util_says_it_is_private():
    """The core is the collection's own code, not an API for other collections (issue 19)."""
    marker = "Private to continuity.artemis"
    missing = [p.name for p in sorted((ROOT / "plugins" / "module_utils").glob("*.py"))
               if p.name != "__init__.py" and marker not in "".join(p.read_text().splitlines(keepends=True)[:6])]
    assert not missing, f"module_utils without the '{marker}' line in their header: {missing}"


def test_docs_architecture_names_every_module_util():
    """docs/architecture.md's component table stays true to the core (issue 19: it once omitted four of them)."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    missing = [p.name for p in sorted((ROOT / "plugins" / "module_utils").glob("*.py"))
               if p.name != "__init__.py" and f"`{p.name}`" not in doc]
    assert not missing, f"docs/architecture.md does not name {missing}"
