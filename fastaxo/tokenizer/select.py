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

# per HF object: its fastaxo Tokenizer or the reason there is none (objects are not hashable
# by content; a changed tokenizer is a new object in every caller that matters)
_by_object: weakref.WeakKeyDictionary[Any, tuple[Any, str | None]] = weakref.WeakKeyDictionary()


def choice() -> str:
    """``FASTAXO_TOKENIZER``, checked."""
    raw = os.environ.get(ENV, "").strip().lower() or "auto"
    if raw not in _CHOICES:
        raise InvalidInputError(f"environment variable {ENV}={raw!r}: expected one of "
                                f"{', '.join(_CHOICES)}")
    return raw


def fast_tokenizer(source: Any) -> tuple[Any, str | None]:
    """``(Tokenizer, None)`` when fastaxo's encoder gives ``source``'s ids (``source``: a
    tokenizers.Tokenizer, a transformers fast tokenizer, or a path to a directory or
    tokenizer.json), else ``(None, why)``. ``FASTAXO_TOKENIZER=hf`` gives ``(None, ...)``;
    ``=fastaxo`` raises where it is not supported."""
    from fastaxo.tokenizer import Tokenizer, UnsupportedTokenizerError

    mode = choice()
    if mode == "hf":
        return None, f"{ENV}=hf"
    is_path = isinstance(source, (str, os.PathLike))
    if not is_path:
        try:
            hit = _by_object.get(source)
        except TypeError:
            hit = None
        if hit is not None:
            if hit[0] is None and mode == "fastaxo":
                raise InvalidInputError(f"{ENV}=fastaxo: {hit[1]}")
            return hit
    try:
        tok = Tokenizer.from_pretrained(source) if is_path else Tokenizer.from_hf(source)
        got: tuple[Any, str | None] = (tok, None)
    except (UnsupportedTokenizerError, ExtensionUnavailableError) as e:
        got = (None, str(e))
    if not is_path:
        try:
            _by_object[source] = got
        except TypeError:
            pass
    if got[0] is None and mode == "fastaxo":
        raise InvalidInputError(f"{ENV}=fastaxo: {got[1]}")
    return got
