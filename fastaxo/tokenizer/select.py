"""Which encoder a fastaxo path uses for an HF tokenizer: fastaxo's C encoder where it is
exact, else HF's (counted and said once by the caller).

``FASTAXO_TOKENIZER``: ``auto`` (default: fastaxo's where supported), ``hf`` (always HF, for
comparison), ``fastaxo`` (fastaxo's, and an error naming the reason where it is not
supported)."""

from __future__ import annotations

import os
import weakref
from typing import Any

from fastaxo.errors import ExtensionUnavailableError, InvalidInputError

__all__ = ["ENV", "choice", "fast_tokenizer"]

ENV = "FASTAXO_TOKENIZER"
_CHOICES = ("auto", "hf", "fastaxo")

# per HF object: (its state, its fastaxo Tokenizer or the reason there is none). The state is
# what a user changes in place (added tokens, the pipeline's parts, the vocabulary's size): a
# tokenizer with a token added after the first call gets a new encoder, never stale ids.
_by_object: weakref.WeakKeyDictionary[Any, tuple[Any, tuple[Any, str | None]]] = (
    weakref.WeakKeyDictionary())


def _state(source: Any) -> Any:
    """A cheap fingerprint of what the HF object's ids depend on and can change in place
    (well under a millisecond; the whole tokenizer.json takes seconds to serialize), or None
    when it cannot be read (then nothing is cached)."""
    backend = getattr(source, "backend_tokenizer", source)
    try:
        parts = tuple(None if p is None else p.__getstate__() for p in (
            backend.normalizer, backend.pre_tokenizer, backend.post_processor))
        added = tuple((i, repr(t)) for i, t in sorted(backend.get_added_tokens_decoder().items()))
        return backend.get_vocab_size(with_added_tokens=True), added, parts
    except Exception:  # not a tokenizers object: no cache
        return None


def choice() -> str:
    """``FASTAXO_TOKENIZER``, checked."""
    return checked_choice(os.environ.get(ENV, ""), f"environment variable {ENV}")


def checked_choice(value: str, name: str) -> str:
    """``value`` as an encoder choice ("auto", "fastaxo", "hf"; empty: "auto"), or
    InvalidInputError naming ``name``."""
    raw = str(value).strip().lower() or "auto"
    if raw not in _CHOICES:
        raise InvalidInputError(f"{name}={raw!r}: expected one of {', '.join(_CHOICES)}")
    return raw


def fast_tokenizer(source: Any, mode: str | None = None) -> tuple[Any, str | None]:
    """``(Tokenizer, None)`` when fastaxo's encoder gives ``source``'s ids (``source``: a
    tokenizers.Tokenizer, a transformers fast tokenizer, or a path to a directory or
    tokenizer.json), else ``(None, why)``. ``mode`` (None: ``FASTAXO_TOKENIZER``) "hf" gives
    ``(None, ...)``; "fastaxo" raises where it is not supported."""
    from fastaxo.tokenizer import Tokenizer, UnsupportedTokenizerError

    said = f"{ENV}={{}}" if mode is None else "encoder '{}' asked for"
    mode = mode or choice()
    if mode == "hf":
        return None, said.format("hf")
    is_path = isinstance(source, (str, os.PathLike))
    state = None if is_path else _state(source)
    if state is not None:
        try:
            cached = _by_object.get(source)
        except TypeError:
            cached = None
        if cached is not None and cached[0] == state:
            hit = cached[1]
            if hit[0] is None and mode == "fastaxo":
                raise InvalidInputError(f"{said.format('fastaxo')}: {hit[1]}")
            return hit
    try:
        tok = Tokenizer.from_pretrained(source) if is_path else Tokenizer.from_hf(source)
        got: tuple[Any, str | None] = (tok, None)
    except (UnsupportedTokenizerError, ExtensionUnavailableError) as e:
        got = (None, str(e))
    if state is not None:
        try:
            _by_object[source] = (state, got)
        except TypeError:
            pass
    if got[0] is None and mode == "fastaxo":
        raise InvalidInputError(f"{said.format('fastaxo')}: {got[1]}")
    return got
