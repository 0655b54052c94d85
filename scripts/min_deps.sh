#!/usr/bin/env bash
# The minimum-dependencies leg (.ci/run; issue 18): fastaxo built from its sdist on the oldest
# declared Python (3.10) and tested with exactly the declared minimum numpy and pyarrow (read
# from pyproject.toml), so that the floors users see are true. The test extra's other packages
# come at versions that accept those floors; tests that need Axolotl or Ray skip here (the main
# leg runs them).
#
#   bash scripts/min_deps.sh [PYTHON]     # default: pyenv's CPython 3.10.13
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${1:-$HOME/.pyenv/versions/3.10.13/bin/python}
[ $# -gt 0 ] && shift
[ -x "$PY" ] || { echo "min_deps.sh: no Python at $PY (pass one)" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fastaxo-min.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1

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
echo "==> $("$PY" --version), $(tr '\n' ' ' < "$WORK/floors.txt")"

"$PY" -m venv "$WORK/venv"
VPY=$WORK/venv/bin/python
"$VPY" -m pip install -q -U pip 2>&1 | grep -v "^WARNING: Location" || true
echo "==> sdist -> wheel (OpenMP required)"
"$VPY" -m pip install -q build 2>&1 | grep -v "^WARNING: Location" || true
"$VPY" -m build --sdist --outdir "$WORK/dist" "$ROOT" > "$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log"; exit 1; }
FASTAXO_OPENMP=1 "$VPY" -m pip wheel -q --no-deps -w "$WORK/dist" "$WORK"/dist/*.tar.gz \
    > "$WORK/wheel.log" 2>&1 || { tail -30 "$WORK/wheel.log"; exit 1; }
WHEEL=$(ls "$WORK"/dist/*.whl)
echo "==> install $(basename "$WHEEL")[test] with $(tr '\n' ' ' < "$WORK/floors.txt")"
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
echo "==> pytest (the Axolotl and Ray files, and the torch test, are the main leg's: not run here)"
cd "$ROOT"
env -u CI FASTAXO_HYPOTHESIS=ci FASTAXO_REQUIRE_EXTENSION=1 FASTAXO_EXPECT_OPENMP=1 \
    FASTAXO_SOURCE_TREE="$ROOT" FASTAXO_EXPECT_AXOLOTL=0 \
    "$WORK/venv/bin/pytest" -p no:cacheprovider -q tests --ignore=tests/test_axolotl.py \
    --ignore=tests/test_axolotl_inprocess.py --ignore=tests/test_chat_axolotl.py \
    --ignore=tests/test_ray.py --ignore=tests/test_transformers.py \
    --ignore=tests/test_train_recipes.py \
    --deselect tests/test_safety.py::test_with_torch_loaded_first_fastaxo_still_waits_passively \
    --deselect tests/test_mistakes.py::test_torch_tensor_names_the_fix \
    --deselect tests/test_readme.py::test_readme_examples_run_in_order \
    --deselect tests/test_build.py::test_portable_c \
    "$@"
