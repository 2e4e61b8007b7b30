#!/usr/bin/env bash
# mypy over the one namespace the package installs: scorekeeper/ with tasks/ and flows/ mounted as
# scorekeeper.tasks and scorekeeper.flows (setuptools' package-dir, which mypy cannot read from an
# editable install), through a tree of symlinks in build/typecheck. Settings: pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tree=build/typecheck
rm -rf "$tree/scorekeeper"
mkdir -p "$tree/scorekeeper"
for f in scorekeeper/*.py scorekeeper/*/; do
    ln -s "$root/${f%/}" "$tree/scorekeeper/"
done
ln -s "$root/tasks" "$tree/scorekeeper/tasks"
ln -s "$root/flows" "$tree/scorekeeper/flows"
cd "$tree"
exec "$root/.venv/bin/mypy" --config-file "$root/pyproject.toml" --cache-dir "$root/build/typecheck/.mypy_cache" scorekeeper
