"""Loads the compiled extensions (_hash, _pack, _tok) once, all or none, honouring
FASTAXO_PURE_PYTHON, FASTAXO_REQUIRE_EXTENSION and FASTAXO_SHA256 (the SHA-256 path to force:
auto, portable, sha-ni, armv8-crypto)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from types import ModuleType

from fastaxo.errors import ExtensionUnavailableError, InvalidInputError


def _flag(name: str, env: Mapping[str, str] = os.environ) -> bool:
    return env.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


PURE_PYTHON_FORCED = _flag("FASTAXO_PURE_PYTHON")
ext: ModuleType | None = None  # fastaxo._hash
pack_ext: ModuleType | None = None  # fastaxo._pack
tok_ext: ModuleType | None = None  # fastaxo._tok
import_error: BaseException | None = None

# GNU OpenMP reads its wait policy once, when the library loads. Its default spins at every
# barrier: on a host whose cores are busy (torch, tokenizer threads, DataLoader workers) a thread
# that waits burns the time slice the thread it waits for needs, and a 2-thread kernel ran up to
# 6x slower than on one thread (bench/bench_contention.py). The extensions' own libgomp (a
# private copy in the wheel) therefore loads with OMP_WAIT_POLICY=PASSIVE unless the user chose a
# policy; the variable is put back afterwards, so a libgomp loaded later (torch's) sees the
# user's environment.
WAIT_POLICY_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
WAIT_POLICY = next((f"{v}={os.environ[v]}" for v in WAIT_POLICY_VARS if v in os.environ),
                   "OMP_WAIT_POLICY=PASSIVE (fastaxo's default)")


def _import_extensions() -> tuple[ModuleType, ModuleType, ModuleType]:
    chosen = any(v in os.environ for v in WAIT_POLICY_VARS)
    if not chosen:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        from fastaxo import _hash as h
        from fastaxo import _pack as p
        from fastaxo import _tok as t
    finally:
        if not chosen:
            del os.environ["OMP_WAIT_POLICY"]
    return h, p, t


if not PURE_PYTHON_FORCED:
    try:
        ext, pack_ext, tok_ext = _import_extensions()
    except ImportError as exc:  # pragma: no cover - exercised by the pure-Python CI leg
        import_error = exc

if ext is None and _flag("FASTAXO_REQUIRE_EXTENSION"):
    raise ExtensionUnavailableError(
        "FASTAXO_REQUIRE_EXTENSION is set but fastaxo's compiled extension is not in use: "
        + ("FASTAXO_PURE_PYTHON is set" if PURE_PYTHON_FORCED else f"{import_error!r}")
    )

if ext is None and not PURE_PYTHON_FORCED:  # pragma: no cover
    warnings.warn(
        f"fastaxo's compiled extension did not load ({import_error!r}); using the pure-Python "
        "reference implementation, which is correct but much slower. Reinstall fastaxo with a "
        "C compiler available.",
        RuntimeWarning,
        stacklevel=2,
    )

SHA256_REQUESTED = os.environ.get("FASTAXO_SHA256", "auto").strip() or "auto"
if ext is not None:
    try:
        ext.sha256_select(SHA256_REQUESTED)
    except (ValueError, RuntimeError) as exc:
        raise InvalidInputError(
            f"environment variable FASTAXO_SHA256={SHA256_REQUESTED!r}: {exc}"
        ) from None


def child_argv(module: str, *args: str) -> list[str]:
    """``python -m module args`` for a child process that imports this same fastaxo.

    ``python -m`` puts the working directory first on ``sys.path``: run from a source checkout
    (the README's ``.venv/bin/fastaxo demo``) the child imported the uncompiled tree and ran the
    pure-Python fallback. The child instead puts the directory this fastaxo was imported from
    first, then runs the module as ``__main__``.
    """
    import sys

    # this file is ROOT/fastaxo/_core/backend.py
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = (f"import runpy, sys; sys.path[0] = {root!r}; "
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
    return [sys.executable, "-c", code, *args]


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for such a child: when this process has the compiled extension, the child
    must too (FASTAXO_REQUIRE_EXTENSION=1: a child on the fallback fails instead of running
    slow)."""
    out = dict(os.environ if env is None else env)
    if ext is not None and not _flag("FASTAXO_PURE_PYTHON", out):
        out["FASTAXO_REQUIRE_EXTENSION"] = "1"
    return out
