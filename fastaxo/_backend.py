"""Loads the compiled extensions (_hash, _pack) once, both or neither, honouring
FASTAXO_PURE_PYTHON, FASTAXO_REQUIRE_EXTENSION and FASTAXO_SHA256 (the SHA-256 path to force: auto, portable, sha-ni, armv8-crypto)."""

from __future__ import annotations

import os
import warnings
from types import ModuleType

from fastaxo.errors import ExtensionUnavailableError, InvalidInputError


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


PURE_PYTHON_FORCED = _flag("FASTAXO_PURE_PYTHON")
ext: ModuleType | None = None  # fastaxo._hash
pack_ext: ModuleType | None = None  # fastaxo._pack
import_error: BaseException | None = None

if not PURE_PYTHON_FORCED:
    try:
        from fastaxo import _hash as _h, _pack as _p

        ext, pack_ext = _h, _p
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
        raise InvalidInputError(f"environment variable FASTAXO_SHA256={SHA256_REQUESTED!r}: {exc}") from None
