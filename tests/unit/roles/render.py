"""Render the roles' real templates with the role defaults, Ansible's filters/tests and this collection's filters,
the way the template module does (trim_blocks, keep_trailing_newline), without a host or a broker."""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import jinja2
import jinja2.nativetypes
import yaml
from ansible.plugins.filter.core import FilterModule as CoreFilters
from ansible.plugins.filter.mathstuff import FilterModule as MathFilters
from ansible.plugins.test.core import TestModule as CoreTests

from ansible_collections.continuity.artemis.plugins.filter.artemis import FilterModule as ArtemisFilters

ROOT = Path(__file__).resolve().parents[3]
ROLES = ROOT / "roles"
VARS_DIR = Path(__file__).parent / "vars"


def schema_versions() -> list[str]:
    """The schema matrix taken from the Artemis jars (continuity_lab.schemas; `make schemas`)."""
    from continuity_lab import schemas

    return schemas.versions()


# One environment per role and kind, for the whole process: Jinja caches each template it compiled in its
# environment, and compiling (not rendering) was most of these tests' time (cProfile, 2026-11-29)
@functools.cache
def environment(role: str, native: bool = False) -> jinja2.Environment:
    cls = jinja2.nativetypes.NativeEnvironment if native else jinja2.Environment
    env = cls(
        loader=jinja2.FileSystemLoader(str(ROLES / role / "templates")),
        trim_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    for name, fn in {**CoreFilters().filters(), **MathFilters().filters()}.items():
        env.filters.setdefault(name, fn)  # jinja's own `default` copes with StrictUndefined; Ansible's does not
        env.filters["ansible.builtin." + name] = fn
    for name, fn in CoreTests().tests().items():
        env.tests[name] = fn
        env.tests["ansible.builtin." + name] = fn
    for name, fn in ArtemisFilters().filters().items():
        env.filters["continuity.artemis." + name] = fn
    return env


def role_defaults(role: str) -> dict:
    return copy.deepcopy(_load_yaml(ROLES / role / "defaults" / "main.yml"))


@functools.cache
def _load_yaml(path: Path) -> dict:
    """A role's YAML, parsed once per process (callers get a copy)."""
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


@functools.lru_cache(maxsize=4096)
def _template(env: jinja2.Environment, source: str) -> jinja2.Template:
    return env.from_string(source)


def _resolve(value, env, ctx):
    if isinstance(value, str) and "{{" in value:
        try:
            return _template(env, value).render(**ctx)
        except (jinja2.UndefinedError, TypeError):
            # needs a fact this test does not set (broker__home), or a value not resolved in this pass yet (a
            # template string where a list belongs): left as is for the next pass
            return value
    if isinstance(value, dict):
        return {k: _resolve(v, env, ctx) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, env, ctx) for v in value]
    return value


def role_vars(role: str) -> dict:
    return copy.deepcopy(_load_yaml(ROLES / role / "vars" / "main.yml"))


def context(role: str, overrides: dict, facts: dict | None = None) -> dict:
    """defaults < overrides (inventory) < role vars/main.yml < facts, resolved like Ansible's lazy templating
    (native types, so a templated list stays a list)."""
    env = environment(role, native=True)
    ctx = {"inventory_hostname": "dc1", "playbook_dir": str(ROOT / "playbooks")}
    ctx.update(role_defaults(role))
    ctx.update(copy.deepcopy(overrides))
    ctx.update(role_vars(role))
    ctx.update(facts or {})
    for _ in range(4):  # values reference each other (broker_instance_dir -> broker_name): in order, in place,
        for k in list(ctx):  # so a value sees the ones defined before it already resolved, as lazy templating would
            ctx[k] = _resolve(ctx[k], env, ctx)
    return ctx


def render(role: str, template: str, overrides: dict, facts: dict | None = None) -> str:
    env = environment(role)
    return env.get_template(template).render(**context(role, overrides, facts))


def load_vars(name: str) -> dict:
    return yaml.safe_load((VARS_DIR / name).read_text())
