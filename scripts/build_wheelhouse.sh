#!/usr/bin/env bash
# Build an offline wheelhouse: the sparkhc wheel and every runtime dependency as wheels, for
# `pip install --no-index --find-links DIR sparkhc` on machines (or in image builds) without a
# package index. Wheels already in DIR are reused; pyspark is published as a source archive only,
# so its wheel is built here once (a few minutes, about 460 MB).
#
#   scripts/build_wheelhouse.sh [DIR]        # default dist/wheelhouse
#
# The wheels match this machine's Python (version, OS, architecture): build it with the Python
# the target runs (Debian bookworm and the Docker image: CPython 3.11, x86_64 glibc).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$(mkdir -p "${1:-$ROOT/dist/wheelhouse}" && cd "${1:-$ROOT/dist/wheelhouse}" && pwd)
PYTHON=${PYTHON:-python3}

# Build from a copy of the sources so that no build/ or *.egg-info is left in the work tree.
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
cp -r "$ROOT/pyproject.toml" "$ROOT/README.md" "$SRC/"
(cd "$ROOT" && tar --exclude='__pycache__' -cf - sparkhc) | tar -xf - -C "$SRC"

rm -f "$OUT"/sparkhc-*.whl
# fixed timestamps inside the wheel: the same sources give the same sparkhc wheel
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-315532800}
"$PYTHON" -m pip wheel --quiet --wheel-dir "$OUT" --find-links "$OUT" "$SRC"
echo "wheelhouse: $OUT"
ls -1 "$OUT"
