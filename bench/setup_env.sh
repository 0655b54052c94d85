#!/usr/bin/env bash
# Create (or update) the benchmark virtualenv: CPU torch, axolotl 0.21.0 with its own
# dependency list, the peer fast-axolotl and the other baselines, and this repo.
#
# Usage: bash bench/setup_env.sh [VENV_DIR]        (default: <repo>/.venv-bench)
#
# Environment:
#   FASTAXO_SKIP_SELF=1  do not `pip install <repo>` (e.g. while the package does not build yet)
#   PYTHON=...           interpreter for the venv (default: python3; needs >= 3.11)
#   AXOLOTL_REQS, FASTAXO_WHEELHOUSE, FASTAXO_WHEELHOUSE_OFFLINE, FASTAXO_WHEELHOUSE_REFRESH:
#                        see scripts/install_axolotl.sh, which installs pip, torch (CPU), axolotl
#                        and the baselines here through its wheel cache (the same recipe and
#                        cache as the tests': scripts/test.sh calls it too)
#
# Idempotent: re-running reuses the venv; pip skips whatever is already satisfied.
# Every `pip install` gets `-c constraints.txt` (torch==2.13.0, the CPU wheel in /opt/wheels):
# never let pip resolve another torch, it would pull several GB of CUDA wheels.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$REPO_ROOT/.venv-bench}"
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac
PYTHON="${PYTHON:-python3}"
CONSTRAINTS="$REPO_ROOT/constraints.txt"
BENCH_REQS="$REPO_ROOT/bench/requirements-bench.txt"

for f in "$CONSTRAINTS" "$BENCH_REQS"; do
    if [[ ! -f "$f" ]]; then
        echo "setup_env: missing $f" >&2
        exit 1
    fi
done

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

echo "repo:        $REPO_ROOT"
echo "venv:        $VENV"
echo "constraints: $CONSTRAINTS"

# ---------------------------------------------------------------------------
step_begin "create venv"
if [[ -x "$VENV/bin/python" ]]; then
    echo "venv exists, reusing it"
else
    "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "need Python >= 3.11, got " + sys.version)'
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
# -I: pip must not see the current directory (a fastaxo.egg-info left in the repo root would
# look like an installed fastaxo).
PIP=("$PY" -I -m pip)
"$PY" --version
step_end

# ---------------------------------------------------------------------------
step_begin "pip, torch, axolotl, bench baselines (scripts/install_axolotl.sh)"
bash "$REPO_ROOT/scripts/install_axolotl.sh" "$PY" -r "$BENCH_REQS"
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
# torch without CUDA, axolotl importable, `pip check` clean but for what the recipe skips.
bash "$REPO_ROOT/scripts/install_axolotl.sh" --check "$PY"
"${PIP[@]}" list 2>/dev/null | grep -iE '^(fast-axolotl|psutil|fastaxo) ' | sed 's/^/  /'
step_end

total="$(awk -v a="$SCRIPT_T0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')"
echo
echo "Timings:"
printf '%s\n' "${TIMINGS[@]}"
printf '%8ss  %s\n' "$total" "total"
echo
echo "Activate with: source '$VENV/bin/activate'"
