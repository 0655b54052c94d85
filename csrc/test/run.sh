#!/usr/bin/env bash
# Standalone tests for the SHA-256 C kernel (csrc/fx_sha256*.c).
#
#   bash csrc/test/run.sh [--bench] [--no-big] [--no-arm] [--no-apt] [--no-san]
#
# 1. gets the NIST CAVP vectors (SHA256ShortMsg/LongMsg/Monte.rsp) from the
#    PyPI package cryptography-vectors (pip download, cached), unless
#    FX_SHA256_VECTORS points at a directory that already holds them;
# 2. builds fx_sha256*.c + test_sha256.c with gcc -O2 -std=c11 -Wall -Wextra
#    -Werror (no -march flags) and runs it: every compiled+supported path
#    against NIST, random lengths vs portable, streaming vs oneshot, guard
#    pages, threads, fx_sha256_many_* (random batches of segmented messages
#    on every impl, guard pages, threads) and (unless --no-big) a 4 GiB + 77
#    byte message;
# 3. checks fx_sha256*.c also compile as C99 with -pedantic;
# 4. builds and runs the same with clang, if clang is installed;
# 5. runs the suite (fewer random cases) under ASan + UBSan, with gcc and, if
#    installed, clang (unless --no-san);
# 6. cross-compiles for aarch64 and runs the ARMv8-crypto path under
#    qemu-aarch64 -cpu max (installs gcc-aarch64-linux-gnu and qemu-user with
#    apt-get when missing and running as root, unless --no-apt); on an aarch64
#    host it runs natively instead.  Set FX_REQUIRE_ARM=1 to make a missing
#    toolchain an error rather than a skip;
# 7. with --bench, builds and runs bench_sha256 (with an OpenSSL baseline if
#    the OpenSSL headers are installed), `openssl speed` for reference,
#    bench_interleave (SHA-NI with 1..4 messages interleaved) and bench_many
#    (fx_sha256_many_* vs one message at a time).
#
# Build products go to a temporary directory; nothing is written in the repo.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$(cd "$here/.." && pwd)"
sha=("$src"/fx_sha256*.c) # the kernel's files (fx_sha256_int.h)

bench=0 big=1 arm=1 apt=1 san=1
for a in "$@"; do
    case "$a" in
        --bench) bench=1 ;;
        --no-big) big=0 ;;
        --no-arm) arm=0 ;;
        --no-apt) apt=0 ;;
        --no-san) san=0 ;;
        *) echo "unknown option: $a" >&2; exit 2 ;;
    esac
done

build="$(mktemp -d "${TMPDIR:-/tmp}/fx_sha256_test.XXXXXX")"
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

# ---------------------------------------------------------------- vectors
vec="${FX_SHA256_VECTORS:-}"
if [[ -z "$vec" ]]; then
    cache="${XDG_CACHE_HOME:-$HOME/.cache}/fastaxo/cryptography_vectors_sha2"
    if [[ ! -f "$cache/SHA256Monte.rsp" ]]; then
        note "fetching NIST CAVP vectors (pip download cryptography-vectors)"
        mkdir -p "$cache"
        dl="$build/cv"
        python3 -m pip download --quiet cryptography-vectors --no-deps -d "$dl"
        python3 - "$dl" "$cache" <<'EOF'
import glob, os, sys, zipfile
dl, cache = sys.argv[1], sys.argv[2]
whl = glob.glob(os.path.join(dl, "cryptography_vectors-*.whl"))[0]
with zipfile.ZipFile(whl) as z:
    for name in ("SHA256ShortMsg.rsp", "SHA256LongMsg.rsp", "SHA256Monte.rsp"):
        data = z.read("cryptography_vectors/hashes/SHA2/" + name)
        with open(os.path.join(cache, name), "wb") as f:
            f.write(data)
EOF
    fi
    vec="$cache"
fi
for f in SHA256ShortMsg.rsp SHA256LongMsg.rsp SHA256Monte.rsp; do
    [[ -f "$vec/$f" ]] || { echo "missing $vec/$f" >&2; exit 1; }
done

host="$(uname -m)"
case "$host" in
    x86_64|amd64) native_require=(--require sha-ni) ;;
    aarch64|arm64) native_require=(--require armv8-crypto) ;;
    *) native_require=() ;;
esac
# Only insist on the accelerated path if this CPU has it.
if [[ "$host" =~ ^(x86_64|amd64)$ ]] && ! grep -qw sha_ni /proc/cpuinfo 2>/dev/null; then native_require=(); fi
if [[ "$host" =~ ^(aarch64|arm64)$ ]] && ! grep -qw sha2 /proc/cpuinfo 2>/dev/null; then native_require=(); fi
big_flag=()
[[ $big -eq 1 ]] && big_flag=(--big)

# ---------------------------------------------------------------- gcc native
note "gcc ${CFLAGS_STRICT[*]} ($host)"
gcc "${CFLAGS_STRICT[@]}" -pthread "$here/test_sha256.c" "${sha[@]}" -o "$build/test_gcc"
run_suite gcc "$build/test_gcc" "${native_require[@]}" "${big_flag[@]}" "$vec"

note "gcc -std=c99 -pedantic compile check of fx_sha256*.c"
for f in "${sha[@]}"; do gcc -O2 -std=c99 -pedantic -Wall -Wextra -Werror -c "$f" -o "$build/c99.o"; done
echo "ok"

# ---------------------------------------------------------------- clang
if command -v clang >/dev/null 2>&1; then
    note "clang ${CFLAGS_STRICT[*]} ($(clang --version | head -n 1))"
    clang "${CFLAGS_STRICT[@]}" -pthread "$here/test_sha256.c" "${sha[@]}" -o "$build/test_clang"
    run_suite clang "$build/test_clang" "${native_require[@]}" "$vec"
    for f in "${sha[@]}"; do clang -O2 -std=c99 -pedantic -Wall -Wextra -Werror -c "$f" -o "$build/c99_clang.o"; done
else
    note "clang not installed: skipped"
fi

# ---------------------------------------------------------------- sanitizers
if [[ $san -eq 1 ]]; then
    SAN_FLAGS=(-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all)
    for cc in gcc clang; do
        command -v "$cc" >/dev/null 2>&1 || continue
        note "$cc ASan + UBSan"
        if "$cc" "${SAN_FLAGS[@]}" -std=c11 -Wall -Wextra -Werror -pthread \
            "$here/test_sha256.c" "${sha[@]}" -o "$build/test_san_$cc" 2>"$build/san_$cc.log"; then
            ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
                run_suite "san_$cc" "$build/test_san_$cc" --random 1000 --many 60 "$vec"
        else
            # e.g. the sanitizer runtime is not installed for this compiler
            echo "SKIPPED: $cc could not build with -fsanitize=address,undefined:"
            tail -n 3 "$build/san_$cc.log"
        fi
    done
fi

# ---------------------------------------------------------------- aarch64
if [[ $arm -eq 1 && ! "$host" =~ ^(aarch64|arm64)$ ]]; then
    note "aarch64 cross build + qemu"
    qemu=""
    for q in qemu-aarch64 qemu-aarch64-static; do
        command -v "$q" >/dev/null 2>&1 && { qemu="$q"; break; }
    done
    if { ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || [[ -z "$qemu" ]]; } \
        && [[ $apt -eq 1 && $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "installing gcc-aarch64-linux-gnu and qemu-user with apt-get ..."
        export DEBIAN_FRONTEND=noninteractive
        (apt-get update -qq && apt-get install -y -qq gcc-aarch64-linux-gnu qemu-user) >"$build/apt.log" 2>&1 \
            || (apt-get install -y -qq gcc-aarch64-linux-gnu qemu-user-static) >>"$build/apt.log" 2>&1 \
            || { echo "apt-get failed:"; tail -n 5 "$build/apt.log"; }
        for q in qemu-aarch64 qemu-aarch64-static; do
            command -v "$q" >/dev/null 2>&1 && { qemu="$q"; break; }
        done
    fi
    if command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && [[ -n "$qemu" ]]; then
        aarch64-linux-gnu-gcc "${CFLAGS_STRICT[@]}" -pthread -static \
            "$here/test_sha256.c" "${sha[@]}" -o "$build/test_arm64"
        echo "(running under $qemu -cpu max)"
        run_suite arm64 "$qemu" -cpu max "$build/test_arm64" --require armv8-crypto --random 1500 --many 25 "$vec"
    elif [[ "${FX_REQUIRE_ARM:-0}" == 1 ]]; then
        echo "*** aarch64 toolchain or qemu missing and FX_REQUIRE_ARM=1"
        suites_failed=$((suites_failed + 1))
        total_fail=$((total_fail + 1))
    else
        echo "SKIPPED: aarch64-linux-gnu-gcc or qemu-aarch64 not available"
    fi
fi

# ---------------------------------------------------------------- bench
if [[ $bench -eq 1 ]]; then
    note "bench (single thread, best of 5)"
    extra=()
    if [[ -f /usr/include/openssl/evp.h ]]; then extra=(-DFX_BENCH_OPENSSL -lcrypto); fi
    gcc -O2 -std=c11 -Wall -Wextra -Werror "$here/bench_sha256.c" "${sha[@]}" "${extra[@]}" -o "$build/bench"
    "$build/bench" 0.5
    if command -v openssl >/dev/null 2>&1; then
        for n in 16384 64; do
            openssl speed -evp sha256 -bytes "$n" -seconds 2 2>/dev/null | tail -n 1 | sed "s/^/openssl speed -evp sha256 -bytes $n: /"
        done
    fi
    note "bench_interleave (SHA-NI, 1..4 messages interleaved; median of 9)"
    gcc -O2 -std=c11 -Wall -Wextra -Werror "$here/bench_interleave.c" -o "$build/bench_interleave"
    "$build/bench_interleave" 9 0.2
    note "bench_many (fx_sha256_many_* vs one at a time; median of 9)"
    gcc -O2 -std=c11 -Wall -Wextra -Werror "$here/bench_many.c" "${sha[@]}" -o "$build/bench_many"
    "$build/bench_many" 9 0.1
fi

echo
if [[ $suites_failed -ne 0 ]]; then
    echo "sha256: $total_pass passed, $total_fail failed"
    exit 1
fi
echo "sha256: $total_pass passed, $total_fail failed"
