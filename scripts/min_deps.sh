#!/usr/bin/env bash
# A Python leg of .ci/run: fastaxo built from its sdist on one Python and the compatibility
# suite (FASTAXO_SUITE=compat, tests/conftest.py: the tests whose code paths differ between
# Python, numpy and pyarrow versions; the main leg runs everything) against the installed
# wheel. FASTAXO_SUITE=quick (or smoke) in the environment runs that suite instead.
#
#   bash scripts/min_deps.sh [PYTHON] [--latest] [--axolotl X.Y] [--sdist FILE]
#                            [--prepare DIR | --prepared DIR] [PYTEST-ARGS...]
#
# Default (the minimum-dependencies leg, issue 18): the oldest declared Python (pyenv's
# CPython 3.10.13) with exactly the declared minimum numpy and pyarrow (read from
# pyproject.toml), so that the floors users see are true; the test extra's other packages come
# at versions that accept those floors. --latest: the newest numpy and pyarrow that pip picks
# for that Python instead (the 3.12 and 3.13 legs). --axolotl X.Y: afterwards, the same wheel
# with the `axolotl` extra in a fresh venv and the plugin's tests (scripts/axolotl_leg.sh
# --no-chat; X.Y: the Axolotl minor pip must resolve for that Python; not in .ci/run, where
# 3.12's Axolotl 0.21 would pull torch's CUDA build). --sdist FILE: build the wheel from that
# sdist (the main leg's) instead of making one. --prepare DIR: only make the venv, the wheel and
# the install, in DIR (kept); --prepared DIR: only the tests, in what --prepare left in DIR
# (removed after). .ci/run prepares the legs in the background while the sanitizer and Axolotl
# 0.19 legs test.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=$HOME/.pyenv/versions/3.10.13/bin/python
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then PY=$1; shift; fi
LATEST=0 AXOLOTL="" SDIST="" MODE=all WORK=""
while [ $# -gt 0 ]; do
    case "$1" in
        --latest) LATEST=1; shift ;;
        --axolotl) AXOLOTL=${2:?--axolotl needs X.Y}; shift 2 ;;
        --sdist) SDIST=$(cd "$(dirname "${2:?--sdist needs a file}")" && pwd)/$(basename "$2"); shift 2 ;;
        --prepare) MODE=prepare; WORK=${2:?--prepare needs a directory}; shift 2 ;;
        --prepared) MODE=prepared; WORK=${2:?--prepared needs a directory}; shift 2 ;;
        *) break ;;
    esac
done
PY=$(command -v "$PY" || echo "$PY")  # a name on PATH (python3.12) or a path
[ -x "$PY" ] || { echo "min_deps.sh: no Python at $PY (pass one)" >&2; exit 1; }
case $MODE in
    all) WORK=$(mktemp -d "${TMPDIR:-/tmp}/fastaxo-min.XXXXXX"); trap 'rm -rf "$WORK"' EXIT ;;
    prepare) rm -rf "$WORK"; mkdir -p "$WORK"; WORK=$(cd "$WORK" && pwd) ;;
    prepared) [ -f "$WORK/ready" ] || { echo "min_deps.sh: $WORK was not prepared (--prepare)" >&2; exit 1; }
              trap 'rm -rf "$WORK"' EXIT ;;
esac
export PIP_DISABLE_PIP_VERSION_CHECK=1
if [ $MODE != prepared ]; then

# the floors, from the declared requirements (numpy>=X, pyarrow>=Y -> ==X, ==Y)
python3 - "$ROOT/pyproject.toml" > "$WORK/floors.txt" <<'PYEOF'
import re, sys, tomllib
deps = tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]
for d in deps:
    m = re.fullmatch(r"\s*(numpy|pyarrow)\s*>=\s*([0-9.]+)\s*", d)
    if m:
        print(f"{m.group(1)}=={m.group(2)}")
PYEOF
[ "$(wc -l < "$WORK/floors.txt")" = 2 ] || { echo "min_deps.sh: floors not found" >&2; exit 1; }
[ $LATEST = 1 ] && : > "$WORK/floors.txt"  # no pins: what pip picks for this Python
echo "==> $("$PY" --version), $( [ $LATEST = 1 ] && echo "latest numpy and pyarrow" || tr '\n' ' ' < "$WORK/floors.txt")"

"$PY" -m venv "$WORK/venv"
VPY=$WORK/venv/bin/python
"$VPY" -m pip install -q -U pip 2>&1 | grep -v "^WARNING: Location" || true
echo "==> sdist -> wheel (OpenMP required) ($SECONDS s)"
if [ -n "$SDIST" ]; then
    mkdir -p "$WORK/dist" && cp "$SDIST" "$WORK/dist/"
else
    "$VPY" -m pip install -q build 2>&1 | grep -v "^WARNING: Location" || true
    "$VPY" -m build --sdist --outdir "$WORK/dist" "$ROOT" > "$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log"; exit 1; }
fi
FASTAXO_OPENMP=1 "$VPY" -m pip wheel -q --no-deps -w "$WORK/dist" "$WORK"/dist/*.tar.gz \
    > "$WORK/wheel.log" 2>&1 || { tail -30 "$WORK/wheel.log"; exit 1; }
WHEEL=$(ls "$WORK"/dist/*.whl)
echo "==> install $(basename "$WHEEL")[test] with $(tr '\n' ' ' < "$WORK/floors.txt")" "($SECONDS s)"
# Cython and setuptools: tests/test_build.py builds the extension itself
"$VPY" -m pip install -q -c "$WORK/floors.txt" -c "$ROOT/constraints.txt" "$WHEEL[test]" \
    "Cython>=3.1" "setuptools>=77" 2>&1 | grep -v "^WARNING: Location" || true
"$VPY" - "$WORK/floors.txt" <<'PYEOF'
import sys
import numpy, pyarrow
want = dict(line.strip().split("==") for line in open(sys.argv[1]) if line.strip())
from packaging.version import Version
got = {"numpy": numpy.__version__, "pyarrow": pyarrow.__version__}
print("  installed:", got)
assert all(Version(got[k]) == Version(v) for k, v in want.items()), f"expected {want}, got {got}"
PYEOF
fi  # MODE != prepared
if [ $MODE = prepare ]; then
    touch "$WORK/ready"
    echo "==> prepared in $WORK ($SECONDS s)"
    exit 0
fi
WHEEL=$(ls "$WORK"/dist/*.whl)
SUITE=${FASTAXO_SUITE:-compat}
echo "==> pytest, the $SUITE suite (FASTAXO_SUITE=$SUITE: the main leg runs everything) ($SECONDS s)"
cd "$ROOT"
env -u CI FASTAXO_HYPOTHESIS=compat FASTAXO_HYPOTHESIS_EXAMPLES=60 FASTAXO_REQUIRE_EXTENSION=1 FASTAXO_EXPECT_OPENMP=1 \
    FASTAXO_SOURCE_TREE="$ROOT" FASTAXO_EXPECT_AXOLOTL=0 \
    FASTAXO_SUITE=$SUITE "$WORK/venv/bin/pytest" -p no:cacheprovider -q tests \
    -n "$(n=$(nproc 2>/dev/null || echo 1); echo $((n < 4 ? n : 4)))" --dist loadfile --durations=15 \
    "$@"
if [ -n "$AXOLOTL" ]; then
    echo "==> the same wheel with the axolotl extra: scripts/axolotl_leg.sh (Axolotl $AXOLOTL)"
    bash "$ROOT/scripts/axolotl_leg.sh" "$PY" "$WHEEL" "$AXOLOTL" --no-chat
fi
