#!/usr/bin/env bash
# Install this checkout as the collection continuity.artemis into a Python environment, editable: a link at
# <site-packages>/ansible_collections/continuity/artemis, where the tools (agent, traffic, pipeline, lab) import
# the core from and where ansible-core finds collections on sys.path. A release is installed the same way with
# `ansible-galaxy collection install <tarball> -p <site-packages>` (docs/architecture.md).
# usage: link-collection.sh <python of the environment>
set -euo pipefail
py=${1:?usage: link-collection.sh <python>}
root=$(cd "$(dirname "$0")/.." && pwd)
purelib=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# Earlier checkouts put the collection on the path with .pth files: remove them, one way in only.
rm -f "$purelib/continuity-artemis-collection.pth" "$purelib/continuity-artemis-tools.pth"
mkdir -p "$purelib/ansible_collections/continuity"
target="$purelib/ansible_collections/continuity/artemis"
if [ -e "$target" ] && [ ! -L "$target" ]; then
  echo "$target is an installed copy of the collection, not a link to this checkout: remove it first" >&2
  exit 1
fi
ln -sfn "$root" "$target"
