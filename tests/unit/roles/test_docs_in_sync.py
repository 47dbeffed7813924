"""docs/roles.md and the role READMEs carry the variable tables generated from meta/argument_specs.yml.
Refresh with: .venv/bin/python tests/unit/roles/specdoc.py --write"""

from __future__ import annotations

import pytest
import yaml

from .specdoc import ROOT, files, replace_block


@pytest.mark.parametrize("path", sorted(files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_generated_variable_tables_match_the_specs(path):
    text = path.read_text()
    for role in files()[path]:
        assert replace_block(text, role) == text, f"{path} is out of date: run tests/unit/roles/specdoc.py --write"


@pytest.mark.parametrize("role", ["broker", "mirror"])
def test_every_default_has_a_spec_and_every_spec_is_documented(role):
    spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"]
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())
    assert sorted(set(defaults) - set(options)) == [], "defaults without an argument spec"
    for name, o in options.items():
        assert o.get("description"), f"{name} has no description"
        assert o.get("type"), f"{name} has no type"
