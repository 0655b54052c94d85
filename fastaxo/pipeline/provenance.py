"""Where a packed file came from, recorded in its Parquet metadata (``fastaxo.provenance``) and
in prepare's report: the fastaxo version and build that wrote it (a pure-Python fallback or a
build without OpenMP said), the tokenizer file's and chat template's SHA-256, the options, and
each input's path, size and modification time. Nothing of the run itself (no clock, no host),
so the same inputs give the same bytes."""

from __future__ import annotations

import hashlib
import os
from datetime import datetime, timezone
from typing import Any

from fastaxo._version import __version__

__all__ = ["KEY", "build_info", "describe_build", "provenance"]

KEY = "fastaxo.provenance"


def build_info() -> dict[str, Any]:
    """fastaxo's version and how it runs here: the compiled extension or the pure-Python
    fallback (``FASTAXO_PURE_PYTHON`` or a failed import, ~13x slower), OpenMP, the SHA-256
    path, and the versions of what it runs on."""
    import platform

    import numpy
    import pyarrow

    from fastaxo._core import backend

    ext = backend.ext
    return {"fastaxo": __version__, "extension": ext is not None,
            "openmp": bool(ext.openmp_enabled()) if ext is not None else False,
            "sha256": ext.sha256_current() if ext is not None else "hashlib",
            "python": platform.python_version(), "numpy": numpy.__version__,
            "pyarrow": pyarrow.__version__}


def describe_build(b: dict[str, Any]) -> str:
    """The build in words, for the report: what is slower than it could be is said."""
    if not b.get("extension"):
        return (f"fastaxo {b.get('fastaxo')}, PURE PYTHON fallback (no compiled extension: "
                "about 13x slower; `fastaxo info` says why)")
    threads = "OpenMP" if b.get("openmp") else "SERIAL build (no OpenMP: one thread a kernel)"
    return f"fastaxo {b.get('fastaxo')}, compiled extension, {threads}, SHA-256 {b.get('sha256')}"


def _sha256_file(path: str) -> str | None:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def _input(path: str) -> dict[str, Any]:
    """An input file's path, size and modification time (UTC, ISO 8601)."""
    try:
        st = os.stat(path)
    except OSError:
        return {"path": os.path.abspath(path)}
    return {"path": os.path.abspath(path), "bytes": st.st_size,
            "modified": datetime.fromtimestamp(st.st_mtime, timezone.utc).isoformat()}


def _tokenizer(tok: Any) -> dict[str, Any] | None:
    """The tokenizer a run used: its tokenizer.json's path and SHA-256, and for chat data the
    chat template's SHA-256 (the text used, wherever it came from)."""
    if tok is None:
        return None
    path = getattr(tok, "file", None) or getattr(tok, "path", None)
    file = os.path.join(path, "tokenizer.json") if path and os.path.isdir(path) else path
    spec = getattr(tok, "spec", None)
    fast = getattr(tok, "fast", None)  # fastaxo's encoder, which hashed the file it read
    if (file is not None and fast is not None and isinstance(getattr(fast, "sha256", None), str)
            and os.path.abspath(str(getattr(fast, "source", ""))) == os.path.abspath(file)):
        out: dict[str, Any] = {"file": os.path.abspath(file), "sha256": fast.sha256}
    elif file is not None and os.path.isfile(file):
        out = {"file": os.path.abspath(file), "sha256": _sha256_file(file)}
    else:  # an object the caller gave: the digest of its tokenizer.json as it serializes
        hf: Any = getattr(tok, "tok", None) or getattr(spec, "tokenizer", None)
        hf = getattr(hf, "backend_tokenizer", hf)
        text = hf.to_str() if hasattr(hf, "to_str") else None
        out = {"file": None, "object": path,
               "sha256": None if text is None else hashlib.sha256(text.encode()).hexdigest()}
    template = getattr(spec, "chat_template", None)
    if isinstance(template, str):
        out["chat_template_sha256"] = hashlib.sha256(template.encode()).hexdigest()
    return out


def provenance(inputs: list[str], tok: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The provenance of a prepare run over the input files ``inputs`` (a name that is not a
    file, a Ray Dataset's, is kept as it is) with the tokenizer ``tok`` (None: the input was
    tokenized) and the output's recorded ``options``."""
    return {"build": build_info(), "options": options, "tokenizer": _tokenizer(tok),
            "inputs": [_input(p) if os.path.exists(p) else {"name": p} for p in inputs]}
