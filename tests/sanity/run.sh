#!/usr/bin/env bash
# ansible-test must run from .../ansible_collections/<ns>/<name>. Copy what the Galaxy build would ship
# (tracked and new, not ignored, files minus the build_ignore folders) to a clean tree and run sanity there.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# Outside this git work tree: inside it (even under the ignored build/) ansible-test asks git for the file
# list and finds nothing to test. A directory of its own per run (two checkouts never share it), removed after.
base=$(mktemp -d "${TMPDIR:-/tmp}/continuity-artemis-sanity.XXXXXX")
trap 'rm -rf "$base"' EXIT
dest="$base/ansible_collections/continuity/artemis"
mkdir -p "$dest"
cd "$root"
git ls-files --cached --others --exclude-standard -z \
  | grep -z -v -E '^(lab|benchmarks|plugin|\.ci)/' \
  | tar --null --ignore-failed-read -cf - -T - 2>/dev/null \
  | tar -xf - -C "$dest"
# ansible-test's --venv bootstraps pip by downloading get-pip.py, which this network refuses. Its own venv
# (created with pip) plus --requirements gives it the pinned sanity tools without touching .venv.
sv="$root/build/sanity-venv"
core=$(grep -i '^ansible-core==' "$root/requirements/constraints.txt")
if [ ! -f "$sv/.installed-$core" ]; then
  rm -rf "$sv"
  "$root/.venv/bin/python" -m venv "$sv"
  "$sv/bin/python" -m pip install -q --upgrade pip
  "$sv/bin/python" -m pip install -q "$core" -c "$root/requirements/constraints.txt"
  touch "$sv/.installed-$core"
fi
# ansible-test keeps its per-test venvs and its get-pip.py cache under ~/.ansible/test: give it a home inside this
# checkout's build/, so two checkouts (or another ansible-test user) never share or clobber them.
export HOME="$root/build/sanity-home"
# ansible-test bootstraps pip in each sanity test's venv with a get-pip.py it downloads (refused here);
# it uses a cached copy when one exists, so the offline stand-in goes where it looks.
pipver=$(grep -oE "pip='[0-9.]+'" "$sv"/lib/python*/site-packages/ansible_test/_internal/python_requirements.py | head -1 | grep -oE "[0-9.]+")
mkdir -p "$HOME/.ansible/test/cache"
cp "$root/tests/sanity/get_pip_offline.py" "$HOME/.ansible/test/cache/get_pip_${pipver//./_}.py"
# the shellcheck sanity test needs the program (make system-deps installs it); say so instead of skipping it
command -v shellcheck >/dev/null || { echo "shellcheck is not installed: run make system-deps" >&2; exit 1; }
cd "$dest"
pyver=$("$sv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# Scope: the Ansible content (plugins, roles, playbooks, meta, docs, changelogs). The Python packages that ship
# beside it (agent/, pipeline/, traffic/) and the pytest suites (tests/) are not Ansible plugins; ruff checks
# them against pyproject.toml in `make lint`, instead of ansible-test's plugin conventions.
PATH="$sv/bin:$PATH" "$sv/bin/ansible-test" sanity --requirements --python "$pyver" --color no \
  --exclude agent/ --exclude pipeline/ --exclude traffic/ --exclude tests/ "$@"
