#!/usr/bin/env bash
# Install CPU torch and the real axolotl 0.21.0 into an existing virtualenv, through a wheel
# cache kept between runs. The one place this recipe lives: scripts/test.sh (the axolotl tests
# run `axolotl preprocess/train` and `import axolotl`) and bench/setup_env.sh both call it.
#
#   bash scripts/install_axolotl.sh VENV_PYTHON [PIP-REQUIREMENT-ARGS...]
#   bash scripts/install_axolotl.sh --check VENV_PYTHON
#   bash scripts/install_axolotl.sh --as-user X.Y VENV_PYTHON PIP-REQUIREMENT-ARGS...
#
# VENV_PYTHON is the virtualenv's python (a path). Extra arguments (e.g. `-r FILE`, names) are
# installed last, through the wheel cache as well. --check installs nothing: it only runs the
# final check (also run after every install): torch 2.13.0 without CUDA, `import axolotl` gives
# 0.21.0, and `pip check` reports nothing but what the recipe skips on purpose (xformers,
# axolotl's Requires-Python); it prints the versions that matter.
#
# --as-user X.Y: not the recipe below but what a user's `pip install PIP-REQUIREMENT-ARGS...`
# resolves (e.g. `fastaxo-...whl[axolotl,test]`: the Axolotl that fastaxo's extra picks for
# this Python), under constraints.txt and through the same wheel cache; the check then wants
# axolotl X.Y.*, torch 2.13.0 (the registry's build where this machine has no CPU wheel for
# the Python: then it is said, not refused) and a clean `pip check`. scripts/axolotl_leg.sh
# uses it.
#
# The recipe, steps in this order:
#   1. torch==2.13.0: the CPU wheel on this machine (/opt/wheels). Every pip call here gets
#      `-c constraints.txt`: never let pip resolve another torch, it would pull several GB of
#      CUDA wheels.
#   2. axolotl's own dependency list, less xformers (AXOLOTL_REQS below).
#   3. the axolotl 0.21.0 wheel alone, --no-deps --ignore-requires-python (it declares
#      Requires-Python >=3.12 but runs on 3.11).
#
# Environment:
#   AXOLOTL_REQS=...              axolotl's dependency list (default:
#                                 scripts/requirements-axolotl-0.21.0-no-xformers.txt: the
#                                 wheel's Requires-Dist without extras and without xformers)
#   FASTAXO_WHEELHOUSE=...        the wheel cache, shared by the tests and the benchmarks
#                                 (default: ${XDG_CACHE_HOME:-~/.cache}/fastaxo-bench/wheelhouse)
#   FASTAXO_WHEELHOUSE_OFFLINE=1  never fall back to the registry: fail if the cache lacks
#                                 something (needs one earlier online run; old name
#                                 FASTAXO_BENCH_OFFLINE)
#   FASTAXO_WHEELHOUSE_REFRESH=1  re-resolve against the registry even if the cache suffices
#                                 (newer releases of the unpinned dependencies; old name
#                                 FASTAXO_BENCH_REFRESH)
#
# Cache: pip's own HTTP cache stores nothing here (the registry proxy sends no cache headers),
# so this keeps a wheelhouse. Each step first installs with --no-index from it; only when that
# fails does it `pip wheel` the requirements into it (files already there are not downloaded
# again; sdists are built once) and install from it again with --no-index. An empty cache only
# costs time. Runs holding the cache are serialised with flock(1). Idempotent: pip skips
# whatever the venv already has.
set -euo pipefail

AXOLOTL_VERSION=0.21.0
TORCH_VERSION=2.13.0

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONSTRAINTS="$REPO_ROOT/constraints.txt"
AXOLOTL_REQS="${AXOLOTL_REQS:-$REPO_ROOT/scripts/requirements-axolotl-${AXOLOTL_VERSION}-no-xformers.txt}"
WHEELHOUSE="${FASTAXO_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/fastaxo-bench/wheelhouse}"
OFFLINE="${FASTAXO_WHEELHOUSE_OFFLINE:-${FASTAXO_BENCH_OFFLINE:-0}}"
REFRESH="${FASTAXO_WHEELHOUSE_REFRESH:-${FASTAXO_BENCH_REFRESH:-0}}"

CHECK_ONLY=0
AS_USER=""
if [[ "${1:-}" == "--check" ]]; then
    CHECK_ONLY=1
    shift
elif [[ "${1:-}" == "--as-user" ]]; then
    AS_USER="${2:-}"
    shift 2 || true
    if [[ ! "$AS_USER" =~ ^[0-9]+\.[0-9]+$ || $# -lt 2 ]]; then
        echo "usage: bash scripts/install_axolotl.sh --as-user X.Y VENV_PYTHON PIP-REQUIREMENT-ARGS..." >&2
        exit 2
    fi
fi
if [[ $# -lt 1 || ( $CHECK_ONLY == 1 && $# -gt 1 ) ]]; then
    echo "usage: bash scripts/install_axolotl.sh [--check] VENV_PYTHON [PIP-REQUIREMENT-ARGS...]" >&2
    exit 2
fi
PY="$1"
shift
if [[ ! -x "$PY" || "$PY" != */* ]]; then
    echo "install_axolotl: VENV_PYTHON must be the path of a virtualenv's python, got '$PY'" >&2
    exit 2
fi
# -I: pip must not see the current directory (a fastaxo.egg-info left in the repo root would
# look like an installed fastaxo), nor PYTHONPATH.
PIP=("$PY" -I -m pip)

T_START=$SECONDS
STEP=""
T_STEP=$SECONDS
# step NAME: ends the step before (printing its time) and starts NAME; `step ""` only ends.
step() {
    [[ -z "$STEP" ]] || printf -- '<-- %s: %ss\n' "$STEP" "$((SECONDS - T_STEP))"
    STEP="$1"
    T_STEP=$SECONDS
    [[ -z "$STEP" ]] || printf -- '\n--> [%s] %s\n' "$(date +%H:%M:%S)" "$STEP"
}

# final_check: what every install ends with, and all that --check does.
final_check() {
    step "check torch / axolotl / pip check"
    "$PY" -I - "$TORCH_VERSION" "${AS_USER:-$AXOLOTL_VERSION}" "${AS_USER:+user}" <<'EOF'
import importlib.metadata as m, sys
torch_want, axolotl_want, as_user = sys.argv[1:4]
for name in ("torch", "axolotl", "transformers", "accelerate", "peft", "trl", "datasets",
             "tokenizers", "pyarrow", "numpy", "pydantic"):
    try:
        print(f"  {name:13s} {m.version(name)}")
    except m.PackageNotFoundError:
        print(f"  {name:13s} (not installed)")
import torch
assert torch.__version__.split("+")[0] == torch_want, f"torch {torch.__version__}, want {torch_want}"
if torch.version.cuda is not None and as_user:
    # no CPU wheel for this Python on this machine: the registry's (CUDA) build runs on CPU
    print(f"  note: torch is the registry's CUDA {torch.version.cuda} build (no local CPU wheel "
          "for this Python)")
else:
    assert torch.version.cuda is None, f"a CUDA build of torch got installed (CUDA {torch.version.cuda})"
import axolotl
if as_user:
    assert axolotl.__version__.startswith(axolotl_want + "."), \
        f"axolotl {axolotl.__version__}, want {axolotl_want}.*"
else:
    assert axolotl.__version__ == axolotl_want, f"axolotl {axolotl.__version__}, want {axolotl_want}"
print(f"  torch {torch.__version__} (cuda: {torch.version.cuda}), axolotl {axolotl.__version__}"
      f" from {axolotl.__file__}")
EOF
    # pip check names what the recipe leaves out on purpose; anything else is a real conflict.
    local out unexpected
    out="$("${PIP[@]}" check 2>&1 || true)"
    if [[ -n "$AS_USER" ]]; then
        unexpected="$(grep -vE "^No broken requirements found" <<<"$out" || true)"
    else
        unexpected="$(grep -vE "^(axolotl ${AXOLOTL_VERSION//./\\.} requires xformers|axolotl ${AXOLOTL_VERSION//./\\.} is not supported by this Python|No broken requirements found)" <<<"$out" || true)"
    fi
    printf '  pip check: %s\n' "${out//$'\n'/$'\n'  pip check: }"
    if [[ -n "$unexpected" ]]; then
        echo "install_axolotl: pip check reports conflicts beyond the expected ones (above)" >&2
        return 1
    fi
}

if [[ "$CHECK_ONLY" == 1 ]]; then
    final_check
    step ""
    exit 0
fi

for f in "$CONSTRAINTS" "$AXOLOTL_REQS"; do
    if [[ ! -f "$f" ]]; then
        echo "install_axolotl: missing $f" >&2
        exit 1
    fi
done
if ! grep -Eq "^torch==${TORCH_VERSION}([[:space:]]|$)" "$CONSTRAINTS"; then
    echo "install_axolotl: $CONSTRAINTS must pin torch==${TORCH_VERSION}" >&2
    exit 1
fi

mkdir -p "$WHEELHOUSE"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/fastaxo-axolotl.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
exec 9>"$WHEELHOUSE/.lock"
if ! flock -n 9; then
    echo "install_axolotl: waiting for another run that holds $WHEELHOUSE/.lock"
    flock 9
fi

echo "install_axolotl: venv python $PY ($("$PY" --version 2>&1))"
echo "  constraints $CONSTRAINTS"
[[ -n "$AS_USER" ]] || echo "  axolotl req $AXOLOTL_REQS"
echo "  wheelhouse  $WHEELHOUSE ($(find "$WHEELHOUSE" -maxdepth 1 -name '*.whl' | wc -l) wheels; offline=$OFFLINE refresh=$REFRESH)"

# pip_logged LOG ARGS...: run pip with its output in LOG; print the install summary, or the
# end of the log if pip failed.
pip_logged() {
    local log="$1"
    shift
    if "${PIP[@]}" "$@" >"$log" 2>&1; then
        grep -E '^Successfully installed' "$log" || true
    else
        tail -40 "$log" >&2
        echo "install_axolotl: failed: pip $*" >&2
        return 1
    fi
}

# cached_install [--upgrade] REQUIREMENT-ARGS...: `pip install` through the wheelhouse, always
# under the constraints file. First the wheelhouse alone (no registry at all); only if it lacks
# something, `pip wheel` the requirements into it and install from it.
cached_install() {
    local upgrade=()
    if [[ "${1:-}" == "--upgrade" ]]; then
        upgrade=(--upgrade)
        shift
    fi
    local install=(install --no-index --find-links "$WHEELHOUSE" -c "$CONSTRAINTS" "${upgrade[@]}" "$@")
    if [[ "$REFRESH" != "1" ]]; then
        if "${PIP[@]}" "${install[@]}" >"$TMP/offline.log" 2>&1; then
            grep -E '^Successfully installed' "$TMP/offline.log" || true
            echo "(installed from the wheelhouse only)"
            return 0
        fi
        if [[ "$OFFLINE" == "1" ]]; then
            cat "$TMP/offline.log" >&2
            echo "install_axolotl: offline, and the wheelhouse lacks something (above)" >&2
            return 1
        fi
        echo "(wheelhouse incomplete: $(grep -m1 -E 'ERROR' "$TMP/offline.log" || echo 'see pip output'); filling it from the registry)"
    fi
    pip_logged "$TMP/wheel.log" wheel --wheel-dir "$WHEELHOUSE" --find-links "$WHEELHOUSE" -c "$CONSTRAINTS" "$@"
    echo "(wheelhouse now $(find "$WHEELHOUSE" -maxdepth 1 -name '*.whl' | wc -l) wheels, $(du -sh "$WHEELHOUSE" | cut -f1))"
    pip_logged "$TMP/install.log" "${install[@]}"
}

# ---------------------------------------------------------------------------
step "pip (from the wheelhouse)"
# `--no-index --upgrade pip` "succeeds" against an empty wheelhouse by keeping the venv's
# pip, so fetch pip into the wheelhouse first when it has none.
if [[ "$OFFLINE" != "1" ]] && { [[ "$REFRESH" == "1" ]] || ! compgen -G "$WHEELHOUSE/pip-*.whl" >/dev/null; }; then
    pip_logged "$TMP/pip-wheel.log" wheel --wheel-dir "$WHEELHOUSE" --find-links "$WHEELHOUSE" -c "$CONSTRAINTS" pip
fi
cached_install --upgrade pip
"${PIP[@]}" --version

if [[ -n "$AS_USER" ]]; then
    # what a user's `pip install ARGS` resolves, through the cache; a current pip, as above.
    # Without byte-compiling the 4-7 GB venv (the resolution is the same; what the tests import
    # compiles then): 39 s instead of 147 s for 3.11 + Axolotl 0.19 from the cache.
    # PIP_COMPILE=0 is pip's --no-compile (PIP_NO_COMPILE=1 is not).
    step "as a user would: pip install $* (constraints.txt)"
    PIP_COMPILE=0 cached_install "$@"
    # `pip wheel` of a local fastaxo wheel copies it into the cache: it is not a dependency
    rm -f "$WHEELHOUSE"/fastaxo-*.whl
    final_check
    step ""
    echo "install_axolotl: done in $((SECONDS - T_START))s; venv $(du -sh "$(dirname "$(dirname "$PY")")" | cut -f1)"
    exit 0
fi

step "torch==${TORCH_VERSION} (CPU)"
cached_install "torch==${TORCH_VERSION}"

step "axolotl ${AXOLOTL_VERSION} dependencies ($(basename "$AXOLOTL_REQS"))"
cached_install -r "$AXOLOTL_REQS"

step "axolotl==${AXOLOTL_VERSION} (the wheel alone, --no-deps --ignore-requires-python)"
installed_axo="$("$PY" -I -c 'import importlib.metadata as m
try: print(m.version("axolotl"))
except m.PackageNotFoundError: print("")')"
if [[ "$installed_axo" == "$AXOLOTL_VERSION" ]]; then
    echo "axolotl $AXOLOTL_VERSION already installed"
else
    shopt -s nullglob
    wheels=("$WHEELHOUSE"/axolotl-"${AXOLOTL_VERSION}"-*.whl)
    if [[ ${#wheels[@]} -eq 0 ]]; then
        if [[ "$OFFLINE" == "1" ]]; then
            echo "install_axolotl: offline, but no axolotl-${AXOLOTL_VERSION} wheel in $WHEELHOUSE" >&2
            exit 1
        fi
        pip_logged "$TMP/download.log" download "axolotl==${AXOLOTL_VERSION}" --no-deps \
            --ignore-requires-python -c "$CONSTRAINTS" -d "$TMP/axolotl"
        cp "$TMP"/axolotl/axolotl-"${AXOLOTL_VERSION}"-*.whl "$WHEELHOUSE"/
        wheels=("$WHEELHOUSE"/axolotl-"${AXOLOTL_VERSION}"-*.whl)
    fi
    shopt -u nullglob
    if [[ ${#wheels[@]} -ne 1 ]]; then
        echo "install_axolotl: expected one axolotl-${AXOLOTL_VERSION} wheel, found: ${wheels[*]:-none}" >&2
        exit 1
    fi
    pip_logged "$TMP/axolotl.log" install --no-deps --ignore-requires-python -c "$CONSTRAINTS" "${wheels[0]}"
fi

if [[ $# -gt 0 ]]; then
    step "also: $*"
    cached_install "$@"
fi

final_check
step ""
echo "install_axolotl: done in $((SECONDS - T_START))s; venv $(du -sh "$(dirname "$(dirname "$PY")")" | cut -f1)"
