#!/usr/bin/env bash
# An Axolotl pairing leg of .ci/run: fastaxo's wheel installed with its `axolotl` extra the way
# a user would (`pip install "fastaxo[axolotl]"`: the Axolotl that pip resolves for this Python,
# pyproject.toml's markers) into a fresh virtualenv, then the plugin's tests against that Axolotl.
#
#   bash scripts/axolotl_leg.sh PYTHON WHEEL X.Y [--no-chat] [PYTEST-ARGS...]
#
# PYTHON: an interpreter (a path or a name on PATH). WHEEL: a fastaxo wheel for it (the main
# leg's for 3.11; scripts/min_deps.sh --axolotl passes the one it built). X.Y: the Axolotl minor
# the extra must resolve to on that Python (checked). The install goes through
# scripts/install_axolotl.sh --as-user: constraints.txt pins torch 2.13.0 (the local CPU wheel
# where there is one, else the registry's build), and the wheel cache makes a rerun
# offline-fast. (The main leg's Axolotl 0.21 forced onto 3.11 is not what pip resolves.)
#
# The tests: every in-process comparison with the installed Axolotl (patches, packer, sampler
# draws, collator, dedupe, the version check), the chat-template rows against the real strategy
# (tests/test_chat_axolotl.py; --no-chat leaves them out where transformers and tokenizers are
# the main leg's versions: the 0.21 leg), and one real `axolotl preprocess` + `axolotl train`
# (6 CPU steps) without and with the plugin, rows and losses compared. The rest of the Axolotl
# tests (streaming, DataLoader workers, the CLI chat preprocess, the recipes) run in the main
# leg.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 3 ]; then
    echo "usage: bash scripts/axolotl_leg.sh PYTHON WHEEL X.Y [--no-chat] [PYTEST-ARGS...]" >&2
    exit 2
fi
PY=$(command -v "$1" || echo "$1") WHEEL=$2 WANT=$3
shift 3
CHAT=tests/test_chat_axolotl.py
if [ "${1:-}" = --no-chat ]; then CHAT=""; shift; fi
[ -x "$PY" ] || { echo "axolotl_leg.sh: no Python at $PY" >&2; exit 1; }
[ -f "$WHEEL" ] || { echo "axolotl_leg.sh: no wheel at $WHEEL" >&2; exit 1; }
T0=$SECONDS
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fastaxo-axolotl-leg.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1
VENV=$WORK/venv
"$PY" -m venv "$VENV"
VPY=$VENV/bin/python

echo "==> $("$VPY" --version): pip install '$(basename "$WHEEL")[axolotl,test]' as a user would (Axolotl $WANT expected)"
bash "$ROOT/scripts/install_axolotl.sh" --as-user "$WANT" "$VPY" "$WHEEL[axolotl,test]"

WORKERS=$(n=$(nproc 2>/dev/null || echo 1); echo $((n < 4 ? n : 4)))  # as the main leg
echo "==> the plugin's tests against Axolotl $WANT, $WORKERS workers ($((SECONDS - T0)) s)"
cd "$ROOT"
# the venv's bin first: the tests run its `axolotl` (which execs accelerate); CUDA hidden: a
# CUDA build of torch (the registry's, where no CPU wheel fits this Python) runs on CPU
env PATH="$VENV/bin:$PATH" CUDA_VISIBLE_DEVICES="" FASTAXO_HYPOTHESIS=ci \
    FASTAXO_REQUIRE_EXTENSION=1 FASTAXO_SOURCE_TREE="$ROOT" FASTAXO_EXPECT_AXOLOTL=1 \
    "$VENV/bin/pytest" -p no:cacheprovider -q -n "$WORKERS" --dist loadfile \
    tests/test_axolotl_inprocess.py tests/test_axolotl_text.py $CHAT \
    tests/test_axolotl.py::test_baseline_preprocess_and_train \
    tests/test_axolotl.py::test_plugin_preprocess_same_rows \
    tests/test_axolotl.py::test_plugin_train \
    -k "not test_axolotl_preprocess_with_plugin_identical" "$@"
echo "==> Axolotl $WANT leg done in $((SECONDS - T0)) s"
