#!/usr/bin/env bash
# Create (or update) the benchmark virtualenv: CPU torch, axolotl 0.21.0 with its own
# dependency list, the peer fast-axolotl and the other baselines, and this repo.
#
# Usage: bash bench/setup_env.sh [VENV_DIR]        (default: <repo>/.venv-bench)
#
# Environment:
#   FASTAXO_SKIP_SELF=1  do not `pip install <repo>` (e.g. while the package does not build yet)
#   PYTHON=...           interpreter for the venv (default: python3; needs >= 3.11)
#   AXOLOTL_REQS=...     axolotl's dependency list
#                        (default: <repo>/../shared/axolotl/requirements-axolotl-0.21.0-no-xformers.txt)
#   FASTAXO_WHEELHOUSE=  where every wheel is kept between runs
#                        (default: ${XDG_CACHE_HOME:-~/.cache}/fastaxo-bench/wheelhouse)
#   FASTAXO_BENCH_OFFLINE=1  never fall back to the registry: fail if the wheelhouse lacks
#                        something (needs one earlier online run)
#   FASTAXO_BENCH_REFRESH=1  re-resolve against the registry even if the wheelhouse suffices
#                        (picks up newer releases of the unpinned dependencies)
#
# Cache: pip's own HTTP cache stores nothing here (the registry proxy sends no cache headers),
# so the script keeps a wheelhouse. Each step first installs with --no-index from it; only when
# that fails does it `pip wheel` the requirements into the wheelhouse (files already there are
# not downloaded again; sdists are built once) and install from it again with --no-index.
# Idempotent: re-running reuses the venv; pip skips whatever is already satisfied.
# Every `pip install` gets `-c constraints.txt` (torch==2.13.0, the CPU wheel in /opt/wheels):
# never let pip resolve another torch, it would pull several GB of CUDA wheels.
set -euo pipefail

AXOLOTL_VERSION=0.21.0
TORCH_VERSION=2.13.0

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$REPO_ROOT/.venv-bench}"
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac
PYTHON="${PYTHON:-python3}"
CONSTRAINTS="$REPO_ROOT/constraints.txt"
BENCH_REQS="$REPO_ROOT/bench/requirements-bench.txt"
AXOLOTL_REQS="${AXOLOTL_REQS:-$REPO_ROOT/../shared/axolotl/requirements-axolotl-${AXOLOTL_VERSION}-no-xformers.txt}"

for f in "$CONSTRAINTS" "$BENCH_REQS" "$AXOLOTL_REQS"; do
    if [[ ! -f "$f" ]]; then
        echo "setup_env: missing $f" >&2
        exit 1
    fi
done
if ! grep -Eq "^torch==${TORCH_VERSION}([[:space:]]|$)" "$CONSTRAINTS"; then
    echo "setup_env: $CONSTRAINTS must pin torch==${TORCH_VERSION}" >&2
    exit 1
fi

now() { date +%s.%N; }
SCRIPT_T0="$(now)"
TIMINGS=()
STEP_NAME=""
STEP_T0=""
step_begin() {
    STEP_NAME="$1"
    STEP_T0="$(now)"
    echo
    echo "==> [$(date +%H:%M:%S)] $STEP_NAME"
}
step_end() {
    local dt
    dt="$(awk -v a="$STEP_T0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')"
    TIMINGS+=("$(printf '%8ss  %s' "$dt" "$STEP_NAME")")
    echo "<== $STEP_NAME: ${dt}s"
}

WHEELHOUSE="${FASTAXO_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/fastaxo-bench/wheelhouse}"
OFFLINE="${FASTAXO_BENCH_OFFLINE:-0}"
REFRESH="${FASTAXO_BENCH_REFRESH:-0}"
mkdir -p "$WHEELHOUSE"

TMPDIR_AXO="$(mktemp -d "${TMPDIR:-/tmp}/fastaxo-bench.XXXXXX")"
trap 'rm -rf "$TMPDIR_AXO"' EXIT
# Run pip from a neutral directory: `python -m pip` puts the cwd on sys.path, and a
# fastaxo.egg-info left in the repo root would then look like an installed fastaxo.
cd "$TMPDIR_AXO"

echo "repo:        $REPO_ROOT"
echo "venv:        $VENV"
echo "constraints: $CONSTRAINTS"
echo "axolotl req: $AXOLOTL_REQS"
echo "wheelhouse:  $WHEELHOUSE (offline=$OFFLINE refresh=$REFRESH)"

# ---------------------------------------------------------------------------
step_begin "create venv"
if [[ -x "$VENV/bin/python" ]]; then
    echo "venv exists, reusing it"
else
    "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "need Python >= 3.11, got " + sys.version)'
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip)
"$PY" --version
step_end

# cached_install [--upgrade] REQUIREMENT-ARGS...: `pip install` through the wheelhouse,
# always under the constraints file. First try the wheelhouse alone (no registry at all);
# only if it lacks something, `pip wheel` the requirements into it and install from it.
cached_install() {
    local upgrade=() log
    if [[ "${1:-}" == "--upgrade" ]]; then
        upgrade=(--upgrade)
        shift
    fi
    local install=("${PIP[@]}" install --no-index --find-links "$WHEELHOUSE" -c "$CONSTRAINTS")
    if [[ "$REFRESH" != "1" ]]; then
        log="$TMPDIR_AXO/offline-attempt.log"
        if "${install[@]}" "${upgrade[@]}" "$@" >"$log" 2>&1; then
            grep -E '^(Successfully installed|Requirement already satisfied: (pip|torch) )' "$log" || true
            echo "(installed from the wheelhouse only)"
            return 0
        fi
        if [[ "$OFFLINE" == "1" ]]; then
            cat "$log" >&2
            echo "setup_env: FASTAXO_BENCH_OFFLINE=1 and the wheelhouse lacks something (above)" >&2
            return 1
        fi
        echo "(wheelhouse incomplete: $(grep -m1 -E 'ERROR' "$log" || echo 'see pip output'); filling it)"
    fi
    "${PIP[@]}" wheel --wheel-dir "$WHEELHOUSE" --find-links "$WHEELHOUSE" -c "$CONSTRAINTS" "$@"
    "${install[@]}" "${upgrade[@]}" "$@"
}

# ---------------------------------------------------------------------------
step_begin "upgrade pip"
# `--no-index --upgrade pip` "succeeds" against an empty wheelhouse by keeping the venv's
# bundled pip, so fetch pip into the wheelhouse first when it has none.
if [[ "$OFFLINE" != "1" ]] && { [[ "$REFRESH" == "1" ]] || ! compgen -G "$WHEELHOUSE/pip-*.whl" >/dev/null; }; then
    "${PIP[@]}" wheel --wheel-dir "$WHEELHOUSE" --find-links "$WHEELHOUSE" -c "$CONSTRAINTS" pip
fi
cached_install --upgrade pip
"${PIP[@]}" --version
step_end

# ---------------------------------------------------------------------------
step_begin "torch==${TORCH_VERSION} (CPU)"
cached_install "torch==${TORCH_VERSION}"
"$PY" -I - <<EOF
import torch
v, cuda = torch.__version__, torch.version.cuda
print("torch", v, "cuda", cuda)
assert v.split("+")[0] == "${TORCH_VERSION}", v
assert cuda is None, "a CUDA build of torch got installed: %s" % cuda
EOF
step_end

# ---------------------------------------------------------------------------
step_begin "axolotl ${AXOLOTL_VERSION} dependencies ($(basename "$AXOLOTL_REQS"))"
cached_install -r "$AXOLOTL_REQS"
step_end

# ---------------------------------------------------------------------------
# axolotl 0.20+ declares Requires-Python >=3.12 but runs on 3.11: install the wheel alone.
step_begin "axolotl==${AXOLOTL_VERSION} (wheel, --no-deps --ignore-requires-python)"
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
            echo "setup_env: FASTAXO_BENCH_OFFLINE=1 but no axolotl wheel in $WHEELHOUSE" >&2
            exit 1
        fi
        "${PIP[@]}" download "axolotl==${AXOLOTL_VERSION}" --no-deps --ignore-requires-python \
            -d "$TMPDIR_AXO"
        wheels=("$TMPDIR_AXO"/axolotl-"${AXOLOTL_VERSION}"-*.whl)
        if [[ ${#wheels[@]} -eq 1 ]]; then
            cp "${wheels[0]}" "$WHEELHOUSE"/
        fi
    fi
    shopt -u nullglob
    if [[ ${#wheels[@]} -ne 1 ]]; then
        echo "setup_env: expected one axolotl-${AXOLOTL_VERSION} wheel, found: ${wheels[*]:-none}" >&2
        exit 1
    fi
    "${PIP[@]}" install --no-deps --ignore-requires-python "${wheels[0]}"
fi
step_end

# ---------------------------------------------------------------------------
step_begin "bench baselines ($(basename "$BENCH_REQS"))"
cached_install -r "$BENCH_REQS"
step_end

# ---------------------------------------------------------------------------
step_begin "this repo ($REPO_ROOT)"
if [[ "${FASTAXO_SKIP_SELF:-0}" == "1" ]]; then
    echo "FASTAXO_SKIP_SELF=1: NOT installing $REPO_ROOT into the venv (install it later with:"
    echo "    $PY -m pip install '$REPO_ROOT' -c '$CONSTRAINTS')"
else
    "${PIP[@]}" install "$REPO_ROOT" -c "$CONSTRAINTS"
fi
step_end

# ---------------------------------------------------------------------------
step_begin "check"
# pip check also reports axolotl's Requires-Python and anything it pins that was skipped on
# purpose (xformers); report, don't fail.
"${PIP[@]}" check || echo "(pip check reported the above; axolotl is installed with --no-deps on purpose)"
"$PY" -I - <<'EOF'
import importlib.metadata as m
for name in ("torch", "axolotl", "transformers", "datasets", "pyarrow", "numpy",
             "fast-axolotl", "psutil", "fastaxo"):
    try:
        print(f"  {name:14s} {m.version(name)}")
    except m.PackageNotFoundError:
        print(f"  {name:14s} (not installed)")
EOF
step_end

total="$(awk -v a="$SCRIPT_T0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')"
echo
echo "Timings:"
printf '%s\n' "${TIMINGS[@]}"
printf '%8ss  %s\n' "$total" "total"
echo
echo "Activate with: source '$VENV/bin/activate'"
