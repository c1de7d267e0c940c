#!/usr/bin/env bash
# Makes a virtualenv with aioquic for the interop test (idempotent).
# usage: setup.sh DIR   -> prints the venv's python
set -euo pipefail
dir=$1
if [ ! -x "$dir/bin/python" ] || ! "$dir/bin/python" -c "import aioquic" 2>/dev/null; then
    rm -rf "$dir"
    python3 -m venv "$dir" >&2
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "aioquic==1.7.2" >&2
fi
echo "$dir/bin/python"
