#!/usr/bin/env bash
# Standalone tests for the packing kernel (csrc/fx_pack.c).
#
#   bash csrc/test/run_pack.sh [--no-san] [--no-bench] [--quick]
#
# 1. builds fx_pack.c + test_pack.c with gcc -O2 -std=c11 -Wall -Wextra -Werror and runs
#    it: error codes, hand-made cases, random cases (n 0..3000, capacities 1..3e6, all
#    four strategies, max_items 1/2/3/200/huge/random, over-long on and off) compared
#    exactly with the naive reference inside test_pack.c, mid-size chat-like cases vs the
#    reference, threads, every allocation failing in turn (FX_PACK_ENOMEM, no leak),
#    invariants on n = 1e6 inputs and (unless --no-bench) the timing lines;
# 2. checks fx_pack.c also compiles as C99 with -pedantic (also with the portable
#    bit-scan fallback, -DFXP_PORTABLE_BITS);
# 3. runs the suite (fewer cases) with the portable bit-scan fallback, with no GNU builtins
#    at all (-DFX_PORTABLE, csrc/fx_compat.h), and with FF/FFD's
#    int64 window (-DFXP_NO_SSE2) instead of the SSE2 int32 one;
# 4. builds and runs the same with clang, if clang is installed;
# 5. runs the suite (fewer cases) under ASan + UBSan, with gcc and, if installed, clang
#    (unless --no-san), and under ThreadSanitizer (the index suite feeds fx_pack_ff_index from
#    a producer thread through csrc/fx_sync.h).
# --quick: fewer cases everywhere.
#
# Build products go to a temporary directory; nothing is written in the repo.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$(cd "$here/.." && pwd)"

san=1 bench=1 quick=0
for a in "$@"; do
    case "$a" in
        --no-san) san=0 ;;
        --no-bench) bench=0 ;;
        --quick) quick=1 ;;
        *) echo "unknown option: $a" >&2; exit 2 ;;
    esac
done

build="$(mktemp -d "${TMPDIR:-/tmp}/fx_pack_test.XXXXXX")"
trap 'rm -rf "$build"' EXIT

CFLAGS_STRICT=(-O2 -std=c11 -Wall -Wextra -Werror)
total_pass=0
total_fail=0
suites_failed=0

note() { printf '\n=== %s\n' "$*"; }

# Runs a test binary (command given as arguments), shows its output, adds its
# "N passed, M failed" line to the totals.
run_suite() {
    local name="$1"; shift
    local log="$build/$name.log" rc=0
    "$@" >"$log" 2>&1 || rc=$?
    cat "$log"
    local line
    line="$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1 || true)"
    if [[ -n "$line" ]]; then
        total_pass=$((total_pass + $(echo "$line" | awk '{print $1}')))
        total_fail=$((total_fail + $(echo "$line" | awk '{print $3}')))
    fi
    if [[ $rc -ne 0 || -z "$line" ]]; then
        echo "*** $name FAILED (exit $rc)"
        suites_failed=$((suites_failed + 1))
        [[ -z "$line" ]] && total_fail=$((total_fail + 1))
    fi
    return 0
}

if [[ $quick -eq 1 ]]; then
    full_args=(--cases 600 --mid 5000 --threads 2)
    small_args=(--cases 200 --mid 0 --big 100000 --threads 2 --no-bench)
    san_args=(--cases 150 --mid 0 --big 50000 --threads 2 --no-bench)
else
    full_args=(--cases 2500 --mid 20000 --threads 4)
    small_args=(--cases 600 --mid 3000 --big 200000 --threads 2 --no-bench)
    san_args=(--cases 400 --mid 3000 --big 200000 --threads 2 --no-bench)
fi
bench_args=()
[[ $bench -eq 0 ]] && bench_args=(--no-bench)

# ---------------------------------------------------------------- gcc
note "gcc ${CFLAGS_STRICT[*]} ($(uname -m))"
gcc "${CFLAGS_STRICT[@]}" -pthread -I"$src" "$here/test_pack.c" "$src/fx_pack.c" -o "$build/test_gcc" -lm
run_suite gcc "$build/test_gcc" "${full_args[@]}" "${bench_args[@]}"

note "gcc -std=c99 -pedantic compile check of fx_pack.c"
gcc -O2 -std=c99 -pedantic -Wall -Wextra -Werror -c "$src/fx_pack.c" -o "$build/c99.o"
gcc -O2 -std=c99 -pedantic -Wall -Wextra -Werror -DFXP_PORTABLE_BITS -c "$src/fx_pack.c" -o "$build/c99p.o"
gcc -O2 -std=c11 -pedantic -Wall -Wextra -Werror -Wconversion -Wshadow -c "$src/fx_pack.c" -o "$build/c11w.o"
if nm "$build/c99.o" | grep -E ' [BbDdCc] ' >/dev/null; then
    echo "*** fx_pack.o has writable data (globals):"
    nm "$build/c99.o" | grep -E ' [BbDdCc] '
    suites_failed=$((suites_failed + 1))
    total_fail=$((total_fail + 1))
else
    echo "ok (no writable globals)"
fi

note "gcc, portable bit-scan fallback (-DFXP_PORTABLE_BITS)"
gcc "${CFLAGS_STRICT[@]}" -DFXP_PORTABLE_BITS -pthread -I"$src" "$here/test_pack.c" "$src/fx_pack.c" \
    -o "$build/test_portable" -lm
run_suite portable "$build/test_portable" "${small_args[@]}"

note "gcc -DFX_PORTABLE: no GNU builtins (what a compiler with neither GNU builtins nor MSVC's gets)"
gcc "${CFLAGS_STRICT[@]}" -DFX_PORTABLE -pthread -I"$src" "$here/test_pack.c" "$src/fx_pack.c" \
    -o "$build/test_gcc_fxportable" -lm
run_suite gcc-fx-portable "$build/test_gcc_fxportable" "${small_args[@]}"

note "gcc, FF/FFD on the int64 window (-DFXP_NO_SSE2: the path of capacities >= 2^31 - 1 and non-x86)"
gcc "${CFLAGS_STRICT[@]}" -DFXP_NO_SSE2 -pthread -I"$src" "$here/test_pack.c" "$src/fx_pack.c" \
    -o "$build/test_nosse2" -lm
run_suite nosse2 "$build/test_nosse2" "${small_args[@]}"

# ---------------------------------------------------------------- clang
if command -v clang >/dev/null 2>&1; then
    note "clang ${CFLAGS_STRICT[*]} ($(clang --version | head -n 1))"
    clang "${CFLAGS_STRICT[@]}" -pthread -I"$src" "$here/test_pack.c" "$src/fx_pack.c" -o "$build/test_clang" -lm
    clang_args=("${small_args[@]}")
    if [[ $bench -eq 1 ]]; then
        # keep the n = 1e6 invariants and timing lines for clang too
        clang_args=(--cases 600 --mid 3000 --threads 2 --bench-reps 3)
        [[ $quick -eq 1 ]] && clang_args=(--cases 200 --mid 0 --threads 2 --bench-reps 3)
    fi
    run_suite clang "$build/test_clang" "${clang_args[@]}"
    clang -O2 -std=c99 -pedantic -Wall -Wextra -Werror -c "$src/fx_pack.c" -o "$build/c99_clang.o"
else
    note "clang not installed: skipped"
fi

# ---------------------------------------------------------------- sanitizers
if [[ $san -eq 1 ]]; then
    SAN_FLAGS=(-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all)
    for cc in gcc clang; do
        command -v "$cc" >/dev/null 2>&1 || continue
        note "$cc ASan + UBSan"
        if "$cc" "${SAN_FLAGS[@]}" -std=c11 -Wall -Wextra -Werror -pthread -I"$src" \
            "$here/test_pack.c" "$src/fx_pack.c" -o "$build/test_san_$cc" -lm 2>"$build/san_$cc.log"; then
            ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
                run_suite "san_$cc" "$build/test_san_$cc" "${san_args[@]}"
        else
            # e.g. the sanitizer runtime is not installed for this compiler
            echo "SKIPPED: $cc could not build with -fsanitize=address,undefined:"
            tail -n 3 "$build/san_$cc.log"
        fi
    done
    note "gcc ThreadSanitizer"
    if gcc -O1 -g -fsanitize=thread -std=c11 -Wall -Wextra -Werror -pthread -I"$src" \
        "$here/test_pack.c" "$src/fx_pack.c" -o "$build/test_tsan" -lm 2>"$build/tsan.log"; then
        TSAN_OPTIONS=halt_on_error=1 run_suite tsan "$build/test_tsan" --cases 150 --mid 0 --big 0 --threads 2 --no-bench
    else
        echo "SKIPPED: gcc could not build with -fsanitize=thread:"
        tail -n 3 "$build/tsan.log"
    fi
fi

echo
if [[ $suites_failed -ne 0 ]]; then
    echo "pack: $total_pass passed, $total_fail failed"
    exit 1
fi
echo "pack: $total_pass passed, $total_fail failed"
