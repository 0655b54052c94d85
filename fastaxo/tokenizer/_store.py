"""The C encoder's arrays of a tokenizer.json kept on disk, keyed by the file's SHA-256, so a
new process gets them without parsing the JSON and building them again (0.8 s for Qwen3's).

A record is one ``.npz`` file (NumPy arrays only: loading it runs no code) under
``FASTAXO_CACHE_DIR``'s ``encoders/`` directory. It names the tokenizer.json's SHA-256,
fastaxo's version, the SHA-256 of the code that builds the arrays (``_spec.py``, this file)
and the SHA-256 of its own arrays; a record whose names differ, whose arrays do not hash to
what it says or that cannot be read is a miss, rebuilt and written again: a damaged cache can
cost time, never change ids. The vocabulary (``Spec.vocab``, for ``token_to_id``) comes back
as a mapping that decodes its strings on first use.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from fastaxo._core import cache
from fastaxo._version import __version__
from fastaxo.tokenizer._spec import Spec

__all__ = ["load", "save"]

LOG = logging.getLogger("fastaxo")
FORMAT = 1
_KEEP_RECORDS = 16
_MAX_CACHE = 512 << 20
_ARRAYS = ("tok_bytes", "tok_off", "merges", "added_bytes", "added_off", "added_ids",
           "added_flags", "vocab_bytes", "vocab_off")
_DTYPES = {"tok_bytes": np.uint8, "tok_off": np.int64, "merges": np.int32,
           "added_bytes": np.uint8, "added_off": np.int64, "added_ids": np.int32,
           "added_flags": np.uint8, "vocab_bytes": np.uint8, "vocab_off": np.int64}


@functools.lru_cache(maxsize=1)
def _code_digest() -> str | None:
    """SHA-256 of the code whose output a record holds; None (no records) where the sources
    cannot be read."""
    from fastaxo.tokenizer import _spec

    h = hashlib.sha256()
    try:
        for path in (_spec.__file__, __file__):
            with open(path, "rb") as fh:
                h.update(fh.read())
    except (OSError, TypeError):
        return None
    return h.hexdigest()


def _file(sha256: str) -> str | None:
    root = cache.cache_root()
    if root is None or _code_digest() is None:
        return None
    return os.path.join(root, "encoders", f"{sha256}.npz")


def _header(sha256: str) -> dict[str, Any]:
    return {"format": FORMAT, "fastaxo": __version__, "code": _code_digest(),
            "tokenizer_json_sha256": sha256}


def _arrays_digest(arrays: Mapping[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in _ARRAYS:
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}:{a.dtype.str}:{a.size};".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def save(sha256: str, spec: Spec) -> None:
    """``spec`` as the record of the tokenizer.json whose SHA-256 is ``sha256`` (logged, never
    raised, when it cannot be written)."""
    file = _file(sha256)
    if file is None:
        return
    tokens = [""] * spec.vocab_size
    for tok, i in spec.vocab.items():
        tokens[i] = tok
    raw = [t.encode("utf-8", "surrogatepass") for t in tokens]
    vocab_off = np.zeros(len(raw) + 1, np.int64)
    np.cumsum([len(b) for b in raw], out=vocab_off[1:])
    arrays = {name: getattr(spec, name) for name in _ARRAYS[:7]}
    arrays["vocab_bytes"] = np.frombuffer(b"".join(raw), np.uint8)
    arrays["vocab_off"] = vocab_off
    meta = {**_header(sha256), "pretok": spec.pretok, "ignore_merges": spec.ignore_merges,
            "nfc": spec.nfc, "bos_id": spec.bos_id, "vocab_size": spec.vocab_size,
            "vocab_len": len(spec.vocab), "added": spec.added,
            "arrays_sha256": _arrays_digest(arrays)}
    buf = io.BytesIO()
    try:
        text = json.dumps(meta, ensure_ascii=True).encode("ascii")
        np.savez(buf, meta=np.frombuffer(text, np.uint8), **arrays)
    except (ValueError, TypeError) as e:
        LOG.debug("encoder arrays: not stored: %s", e)
        return
    if cache.write_atomic(file, buf.getvalue(), "encoder arrays"):
        cache.prune(os.path.dirname(file), file, ".npz", _KEEP_RECORDS, _MAX_CACHE)


def load(sha256: str) -> Spec | None:
    """The record of the tokenizer.json whose SHA-256 is ``sha256``, or None (none, or one
    that does not verify)."""
    file = _file(sha256)
    if file is None or not os.path.isfile(file):
        return None
    try:
        with np.load(file, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode("ascii"))
            if not isinstance(meta, dict) or any(meta.get(k) != v
                                                 for k, v in _header(sha256).items()):
                return None
            arrays = {name: z[name] for name in _ARRAYS}
        spec = _spec(meta, arrays)
    except Exception as e:  # noqa: BLE001 - any damage is a miss: the arrays are rebuilt
        LOG.debug("encoder arrays: %s ignored: %s", file, e)
        return None
    if spec is not None:
        cache.touch(file)  # its last use, for the cache's bound
    return spec


def _spec(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> Spec | None:
    if any(arrays[n].dtype != _DTYPES[n] or arrays[n].ndim != 1 for n in _ARRAYS):
        return None
    if meta.get("arrays_sha256") != _arrays_digest(arrays):
        return None
    added = meta["added"]
    if not isinstance(added, dict) or not all(
            isinstance(k, str) and type(v) is int for k, v in added.items()):
        return None
    scalars = (meta["pretok"], meta["bos_id"], meta["vocab_size"], meta["vocab_len"])
    if not all(type(v) is int for v in scalars) or not all(
            type(meta[k]) is bool for k in ("ignore_merges", "nfc")):
        return None
    if len(arrays["vocab_off"]) != meta["vocab_size"] + 1:
        return None
    return Spec(tok_bytes=arrays["tok_bytes"], tok_off=arrays["tok_off"],
                merges=arrays["merges"], added_bytes=arrays["added_bytes"],
                added_off=arrays["added_off"], added_ids=arrays["added_ids"],
                added_flags=arrays["added_flags"], pretok=meta["pretok"],
                ignore_merges=meta["ignore_merges"], nfc=meta["nfc"], bos_id=meta["bos_id"],
                added=added, vocab=_Vocab(arrays["vocab_bytes"], arrays["vocab_off"],
                                          meta["vocab_len"]),
                vocab_size=meta["vocab_size"])


class _Vocab(Mapping[str, int]):
    """The model's vocabulary (token -> id), decoded from its stored strings on first use."""

    def __init__(self, data: np.ndarray, off: np.ndarray, n: int) -> None:
        self._data, self._off, self._n = data, off, n
        self._dict: dict[str, int] | None = None

    def _d(self) -> dict[str, int]:
        if self._dict is None:
            raw, off = self._data.tobytes(), self._off.tolist()
            self._dict = {raw[off[i]:off[i + 1]].decode("utf-8", "surrogatepass"): i
                          for i in range(self._n)}
        return self._dict

    def __getitem__(self, key: str) -> int:
        return self._d()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d())

    def __len__(self) -> int:
        return self._n
