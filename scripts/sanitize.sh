#!/usr/bin/env bash
# The sanitizer leg (.ci/run; issue 18): fastaxo's extensions built with AddressSanitizer +
# UndefinedBehaviorSanitizer (gcc, OpenMP on) in a copy of the sources, then the kernel tests
# and the Hypothesis fuzz of every public kernel (tests/test_fuzz.py) run under them with
# libasan preloaded (the python binary is not instrumented). Any sanitizer report fails the leg:
# the runtimes stop the process at the first one (halt_on_error), and the log is searched too.
#
#   bash scripts/sanitize.sh PYTHON      # a python with numpy, pyarrow, pytest, hypothesis,
#                                        # Cython and setuptools (.ci/run passes its venv's)
#   FASTAXO_HYPOTHESIS=thorough bash scripts/sanitize.sh PYTHON   # 3000 examples a test
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VPY=${1:-python3}
CC=${CC:-gcc}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fastaxo-asan.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# a copy of the tracked sources: the build must not leave instrumented modules in the tree
if [ -d "$ROOT/.git" ]; then
    git -C "$ROOT" ls-files -z --cached --others --exclude-standard -- setup.py pyproject.toml \
        fastaxo csrc tests scripts/gen_unicode.py | (cd "$ROOT" && xargs -0 cp --parents -t "$WORK")
else
    cp -r "$ROOT/setup.py" "$ROOT/pyproject.toml" "$ROOT/fastaxo" "$ROOT/csrc" "$ROOT/tests" "$WORK"
    mkdir -p "$WORK/scripts" && cp "$ROOT/scripts/gen_unicode.py" "$WORK/scripts/"
fi
# (the Unicode tables' freshness test runs scripts/gen_unicode.py --check)
rm -f "$WORK"/fastaxo/*.so "$WORK"/fastaxo/_hash.c "$WORK"/fastaxo/_pack.c "$WORK"/fastaxo/_tok.c \
    "$WORK"/fastaxo/_build_info.py

echo "==> build with -fsanitize=address,undefined ($CC)"
(cd "$WORK" && CC=$CC FASTAXO_OPENMP=1 FASTAXO_SANITIZE=1 "$VPY" setup.py -q build_ext --inplace -j 2 \
    > build.log 2>&1) || { tail -40 "$WORK/build.log"; exit 1; }
grep -q "SANITIZE = True" "$WORK/fastaxo/_build_info.py"

LIBASAN=$("$CC" -print-file-name=libasan.so)
[ -e "$LIBASAN" ] || { echo "sanitize.sh: no libasan.so for $CC ($LIBASAN)" >&2; exit 1; }
# detect_leaks=0: CPython itself keeps memory to exit; allocator_may_return_null: a size the
# fuzz asks for on purpose (terabytes) is a MemoryError, as it is without ASan. Reports go to
# files (pytest captures fd 2, and a process the sanitizer stops takes its capture with it),
# one per process: the tests' child processes are checked as well.
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:halt_on_error=1:abort_on_error=0:exitcode=86:detect_stack_use_after_return=0:log_path=$WORK/report-asan
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=87:log_path=$WORK/report-ubsan
TESTS=(tests/test_fuzz.py tests/test_safety.py tests/test_pack.py tests/test_pad.py
       tests/test_hash_rows.py tests/test_dedupe.py tests/test_rowset.py tests/test_sha256.py
       tests/test_perm.py tests/test_chat_kernels.py tests/test_chat_utf8rows.py
       tests/test_hostile_files.py::test_the_depth_scan_and_its_twin_follow_the_rules
       tests/test_hostile_files.py::test_the_depth_scan_on_long_lines_and_the_block_edges
       tests/test_unicode_tables.py tests/test_tokenizer.py tests/test_tokenizer_added.py
       tests/test_parquet_writer.py)
# the tokenizer's tests on less text, and without the all-code-point sweep (minutes under ASan;
# the main leg runs it); Llama 3.2's tokenizer.json as scripts/test.sh extracted it
export FASTAXO_TOKENIZER_TEST_MB=0.3 FASTAXO_HYPOTHESIS_EXAMPLES=100
export FASTAXO_TEST_LLAMA3=${FASTAXO_TEST_LLAMA3:-$ROOT/build/test-data/llama3.2}
# one worker per core (at most 4), each worker process checked the same way; tests spread one
# by one (--dist load: test_tokenizer.py alone is half the leg, its fixtures are cheap)
WORKERS=$(n=$(nproc 2>/dev/null || echo 1); echo $((n < 4 ? n : 4)))
echo "==> pytest under ASan + UBSan ($WORKERS workers): ${TESTS[*]}"
set +e
# (the torch-first wait-policy test is about the wheel's renamed libgomp: the main leg runs it)
(cd "$WORK" && LD_PRELOAD=$LIBASAN PYTHONPATH=$WORK FASTAXO_REQUIRE_EXTENSION=1 \
    "$VPY" -m pytest -p no:cacheprovider -q "${TESTS[@]}" -n "$WORKERS" --dist load \
    --deselect tests/test_safety.py::test_with_torch_loaded_first_fastaxo_still_waits_passively \
    -k "not every_code_point" --durations=15 \
    > pytest.log 2>&1)
rc=$?
set -e
sed -n '/slowest 15 durations/,$p' "$WORK/pytest.log" | grep -v "^$" | tail -22
reports=$(ls "$WORK"/report-* 2>/dev/null || true)
if [ -n "$reports" ] || grep -qE "ERROR: AddressSanitizer|runtime error:" "$WORK/pytest.log"; then
    echo "sanitize.sh: a sanitizer reported an error (exit $rc):" >&2
    for f in $reports; do head -40 "$f" >&2; done
    grep -nE -A30 "ERROR: AddressSanitizer|runtime error:" "$WORK/pytest.log" | head -60 >&2
    exit 1
fi
if [ "$rc" -ne 0 ]; then
    echo "sanitize.sh: pytest failed under the sanitizers (exit $rc)" >&2
    tail -80 "$WORK/pytest.log" >&2
    exit 1
fi
# the modules the tests imported were the instrumented ones
(cd "$WORK" && LD_PRELOAD=$LIBASAN PYTHONPATH=$WORK "$VPY" -c \
    "import fastaxo._hash as h, fastaxo._build_info as b; assert b.SANITIZE and h.__file__.startswith('$WORK'), h.__file__")
echo "sanitize.sh: clean (no sanitizer report)"
