"""fastaxo's own byte-level BPE encoder: HF's ids for GPT-2, Llama 3 and Qwen2/3 tokenizers,
from C, straight into Arrow buffers.

:class:`Tokenizer` loads a ``tokenizer.json`` the C encoder reproduces exactly (see
:meth:`Tokenizer.supported` for what that is) and encodes whole batches with the GIL released,
over threads. Anything it cannot prove exact is refused with the reason, and callers use HF.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow
from fastaxo._core.threads import resolve_num_threads
from fastaxo.errors import ExtensionUnavailableError, InvalidInputError, InvalidTypeError
from fastaxo.tokenizer import _store
from fastaxo.tokenizer._spec import PATTERN_NAMES, Spec, Unsupported, build

__all__ = ["Tokenizer", "UnsupportedTokenizerError"]


class UnsupportedTokenizerError(InvalidInputError):
    """A tokenizer the C encoder cannot reproduce exactly (the message says why)."""


def _json_path(path: str | os.PathLike[str]) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidTypeError(f"path: expected a directory or tokenizer.json path, got "
                               f"{type(path).__name__}")
    p = Path(path)
    if p.is_dir():
        p = p / "tokenizer.json"
    if not p.is_file():
        raise UnsupportedTokenizerError(f"tokenizer: {str(path)!r} holds no tokenizer.json")
    return p


@functools.lru_cache(maxsize=8)
def _spec_of(text: bytes, sha256: str) -> Spec:
    """The arrays of one tokenizer.json (by content: new Tokenizer objects of the same file
    build only the C model, not the arrays), from the on-disk cache where it holds them
    (:mod:`fastaxo.tokenizer._store`), else built and stored."""
    spec = _store.load(sha256)
    if spec is None:
        spec = _build(text)
        _store.save(sha256, spec)
    return spec


def _build(text: bytes) -> Spec:
    # UTF-8 without a byte-order mark, as HF's loader reads it (json.loads of bytes would also
    # take UTF-16 and UTF-32, and a mark is refused by HF)
    if text.startswith(b"\xef\xbb\xbf"):
        raise UnsupportedTokenizerError("tokenizer.json starts with a byte-order mark (HF's "
                                        "loader refuses it)")
    try:
        doc = json.loads(text.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise UnsupportedTokenizerError(
            f"tokenizer.json is not UTF-8 (byte 0x{text[e.start]:02x} at offset {e.start}; HF's "
            "loader refuses it)") from None
    except ValueError as e:
        raise UnsupportedTokenizerError(f"tokenizer.json is not JSON ({e})") from None
    except RecursionError:
        raise UnsupportedTokenizerError("tokenizer.json nests too deep to read") from None
    try:
        return build(doc)
    except Unsupported as e:
        raise UnsupportedTokenizerError(f"tokenizer: {e}") from None
    except RecursionError:
        raise UnsupportedTokenizerError("tokenizer.json nests too deep to read") from None
    except (AttributeError, TypeError, ValueError, KeyError, IndexError) as e:
        # a field of an unexpected type that no check above names: still one line, never a
        # traceback from inside the reader of the file
        raise UnsupportedTokenizerError(
            f"tokenizer: tokenizer.json has an unexpected structure ({type(e).__name__}: {e})"
        ) from None


def _hf_json(obj: Any) -> bytes:
    """tokenizer.json text of a ``tokenizers.Tokenizer`` or a transformers fast tokenizer."""
    backend = getattr(obj, "backend_tokenizer", obj)
    # a chat tokenizer snapshot's replayed backend (fastaxo.chat.recorded.BackendReplay) has
    # the text's UTF-8 as its record holds it (looked up on the class: no other backend's
    # attribute lookup runs)
    raw = getattr(type(backend), "to_str_utf8", None)
    got = raw(backend) if callable(raw) else None
    if got is not None:
        return got
    to_str = getattr(backend, "to_str", None)
    if not callable(to_str):
        raise InvalidTypeError(
            f"tokenizer: expected a tokenizers.Tokenizer or a transformers fast tokenizer, got "
            f"{type(obj).__name__}")
    return to_str().encode("utf-8")


def _ext() -> Any:
    from fastaxo._core.backend import tok_ext

    if tok_ext is None:
        raise ExtensionUnavailableError(
            "fastaxo.Tokenizer needs fastaxo's compiled extension (not loaded here); use HF's "
            "tokenizer instead")
    return tok_ext


def _model(spec: Spec) -> Any:
    return _ext().BPEModel(spec.tok_bytes, spec.tok_off, spec.merges, spec.added_bytes,
                            spec.added_off, spec.added_ids, spec.added_flags, spec.pretok,
                            spec.ignore_merges, spec.nfc, spec.bos_id)


class Tokenizer:
    """An exact byte-level BPE encoder (HF ``tokenizers``' ids), in C.

    Build one with :meth:`from_pretrained` (a directory holding ``tokenizer.json``, or the file)
    or :meth:`from_hf`. Objects are safe to share between threads; each keeps a word cache per
    thread between calls (5 MB, growing once to 20 MB when the text's words do not fit).

    Examples
    --------
    >>> tok = Tokenizer.from_pretrained(path)  # doctest: +SKIP
    >>> tok.encode_batch(["Hello world", "Hi"]).to_pylist()  # doctest: +SKIP
    [[9707, 1879], [13048]]
    """

    def __init__(self, spec: Spec, source: str, sha256: str) -> None:
        self._spec = spec
        self._model = _model(spec)
        self.source = source
        self.sha256 = sha256

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, path: str | os.PathLike[str]) -> Tokenizer:
        """The tokenizer of ``path``: a directory with ``tokenizer.json``, or that file.
        Raises :class:`UnsupportedTokenizerError` (naming the feature) for one the C encoder
        does not reproduce exactly."""
        p = _json_path(path)
        text = p.read_bytes()
        sha = hashlib.sha256(text).hexdigest()
        return cls(_spec_of(text, sha), str(p), sha)

    @classmethod
    def from_hf(cls, obj: Any) -> Tokenizer:
        """The same encoder as ``obj``, a ``tokenizers.Tokenizer`` or a transformers fast
        tokenizer (its current state: post-processor, added tokens)."""
        text = _hf_json(obj)
        sha = hashlib.sha256(text).hexdigest()
        return cls(_spec_of(text, sha), type(obj).__name__, sha)

    @staticmethod
    def supported(path_or_obj: Any) -> str | None:
        """None when :class:`Tokenizer` reproduces this tokenizer's ids exactly, else why not
        (one line)."""
        try:
            text = (_json_path(path_or_obj).read_bytes()
                    if isinstance(path_or_obj, (str, os.PathLike)) else _hf_json(path_or_obj))
            _spec_of(text, hashlib.sha256(text).hexdigest())
        except (UnsupportedTokenizerError, InvalidTypeError) as e:
            return str(e)
        return None

    # -- what it is -----------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        """Ids this tokenizer can give (vocabulary and added tokens)."""
        return self._spec.vocab_size

    @property
    def pattern(self) -> str:
        """The pre-tokenizer: "llama3", "qwen2" or "gpt2"."""
        return PATTERN_NAMES[self._spec.pretok]

    @property
    def nfc(self) -> bool:
        """True when the tokenizer NFC-normalizes text first (Qwen2/3)."""
        return self._spec.nfc

    @property
    def added_tokens(self) -> dict[str, int]:
        """The added tokens (special or not): content -> id."""
        return dict(self._spec.added)

    def token_to_id(self, token: str) -> int | None:
        """The id of an added token, or of a vocabulary entry given in its byte-level form
        (``"Ġthe"``), as HF's ``token_to_id``; None when there is none."""
        hit = self._spec.added.get(token)
        return hit if hit is not None else self._spec.vocab.get(token)

    def __repr__(self) -> str:
        return (f"Tokenizer({self.source!r}, pattern={self.pattern!r}, "
                f"vocab_size={self.vocab_size}, nfc={self._spec.nfc})")

    def clear_cache(self) -> None:
        """Forget the word caches (the next call runs cold) and release the scratch memory a
        call keeps for the next (about the size of the largest call's ids)."""
        self._model.clear_cache()

    # -- encoding -------------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = True) -> np.ndarray:
        """The ids of one text, as int32: HF's ``encode(text, add_special_tokens).ids``."""
        if not isinstance(text, str):
            raise InvalidTypeError(f"text: expected str, got {type(text).__name__}")
        vals, _, _ = self._run([_utf8(text, 0)], add_special_tokens, 1, _modes()[None])
        return vals

    def encode_offsets(self, text: str, add_special_tokens: bool = True, unit: str = "bytes"
                       ) -> tuple[np.ndarray, np.ndarray]:
        """The ids of one text and, per id, its span ``[start, end)`` (an (n, 2) int64 array;
        the BOS spans 0 0).

        ``unit="bytes"``: byte spans in the text's UTF-8, which tile it (a token that is part
        of a character spans the bytes of it that it holds; where NFC changed the text the
        spans run between the source positions of the normalized bytes).
        ``unit="chars"``: HF's character offsets, ``Encoding.offsets`` exactly (code points of
        ``text``; a token holding part of a character covers all of it; a character NFC
        composed or reordered maps back as HF's alignments do). See
        :meth:`encode_batch_offsets`."""
        if not isinstance(text, str):
            raise InvalidTypeError(f"text: expected str, got {type(text).__name__}")
        vals, _, spans = self._run([_utf8(text, 0)], add_special_tokens, 1, _unit(unit))
        return vals, spans

    def encode_batch_offsets(self, texts: Iterable[str] | pa.Array | pa.ChunkedArray,
                             add_special_tokens: bool = True, num_threads: int | None = None,
                             unit: str = "chars") -> tuple[pa.Array, pa.Array]:
        """The ids of each text (as :meth:`encode_batch`) and, per id, its span: a
        ``pyarrow.ListArray`` of ``fixed_size_list<int64>[2]`` ``(start, end)`` with the same
        list offsets as the ids, made in C like them.

        ``unit="chars"`` (the default): HF's ``Encoding.offsets`` for the same call (character
        offsets in the text, by HF's rules: a token holding part of a character covers all of
        it; under NFC a token covers the characters HF's alignments map its first and last
        characters to, so a composed character maps to its first source, and marks that
        canonical reordering moved map to positions, as HF's). ``unit="bytes"``: byte spans in
        each text's UTF-8, as :meth:`encode_offsets` gives.

        Examples
        --------
        >>> ids, offsets = tok.encode_batch_offsets(["h\u00e9llo"])  # doctest: +SKIP
        >>> offsets.to_pylist()  # doctest: +SKIP
        [[[0, 5]]]
        """
        vals, counts, spans = self._batch(texts, add_special_tokens, num_threads, _unit(unit))
        ids = _list_array(vals, counts)
        pairs = pa.FixedSizeListArray.from_arrays(arrow.from_numpy(spans.reshape(-1)), 2)
        return ids, type(ids).from_arrays(ids.offsets, pairs)

    def encode_batch(self, texts: Iterable[str] | pa.Array | pa.ChunkedArray,
                     add_special_tokens: bool = True, num_threads: int | None = None, *,
                     validate: bool = True) -> pa.Array:
        """The ids of each text, as a ``pyarrow.ListArray`` of int32 (a ``LargeListArray`` past
        2^31 - 1 ids), made in C with no Python object per token.

        ``texts``: a list (or any iterable) of str, or a pyarrow string array (string,
        large_string, string_view or a dictionary of strings; nulls refused).
        The texts are spread over ``num_threads`` threads (default: fastaxo's thread count);
        the result does not depend on it. Arrow text is checked to be UTF-8 first (an
        InvalidInputError names the first text that is not); ``validate=False`` skips that
        pass for text known to be UTF-8 (made by ``str.encode``, say): bytes that are not
        UTF-8 would then each be taken as one punctuation character, with no error."""
        vals, counts, _ = self._batch(texts, add_special_tokens, num_threads, _modes()[None],
                                      validate)
        return _list_array(vals, counts)

    def _batch(self, texts: Any, specials: bool, num_threads: int | None, mode: int,
               validate: bool = True) -> tuple[np.ndarray, np.ndarray, Any]:
        specials = _flag(specials)
        if not isinstance(texts, (pa.Array, pa.ChunkedArray, str)):
            # str objects straight to C: their UTF-8 made on the encoding threads. None: an
            # item that is not a str, or a lone surrogate: the path below says which
            if not isinstance(texts, (list, tuple)):
                if not isinstance(texts, Iterable):
                    raise InvalidTypeError(
                        "texts: expected a list of str or a pyarrow string array, got "
                        f"{type(texts).__name__}")
                try:
                    texts = list(texts)
                except TypeError as e:  # a 0-d NumPy array, an iterator that fails
                    raise InvalidTypeError(f"texts: expected a list of str or a pyarrow "
                                           f"string array, got {type(texts).__name__} ({e})"
                                           ) from None
            got = self._model.encode_strs(texts, specials,
                                          resolve_num_threads(num_threads), mode)
            if got is not None:
                return got
        data, offsets, arrow = _buffers(texts)
        try:
            return self._model.encode_many(data, offsets, specials,
                                           resolve_num_threads(num_threads), mode,
                                           arrow and bool(validate))
        except ValueError as e:  # only Arrow text can be other than UTF-8
            raise InvalidInputError(str(e)) from None

    def _run(self, items: Sequence[bytes], specials: bool, threads: int, mode: int
             ) -> tuple[np.ndarray, np.ndarray, Any]:
        data, offsets = _join(items)
        return self._model.encode_many(data, offsets, _flag(specials), threads, mode, False)


@functools.cache
def _modes() -> dict[str | None, int]:
    """encode_many's span modes, the extension's own constants (None: no spans)."""
    ext = _ext()
    return {None: ext.OFFSETS_NONE, "bytes": ext.OFFSETS_BYTES, "chars": ext.OFFSETS_CHARS}


def _unit(unit: object) -> int:
    """The span mode of a caller's ``unit`` ("bytes" or "chars")."""
    modes = _modes()
    if not isinstance(unit, str) or unit not in modes:
        raise InvalidInputError(f"unit: expected 'bytes' or 'chars', got {unit!r:.40}")
    return modes[unit]


def _flag(value: object) -> bool:
    """``add_special_tokens`` as HF takes it: a bool (a string "False" is no answer)."""
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidTypeError(f"add_special_tokens: expected a bool, got "
                               f"{type(value).__name__} {value!r:.40}")
    return bool(value)


def _utf8(text: str, i: int) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        # HF's tokenizers raise TypeError on such a str
        raise InvalidTypeError(
            f"texts: text {i} holds a lone surrogate U+{ord(text[e.start]):04X} at character "
            f"{e.start:,}, which is not valid Unicode text (HF's tokenizers refuse it too)"
        ) from None


def _join(items: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(items) + 1, np.int64)
    np.cumsum([len(b) for b in items], out=offsets[1:])
    return np.frombuffer(b"".join(items), np.uint8), offsets


def _buffers(texts: Any) -> tuple[np.ndarray, np.ndarray, bool]:
    """UTF-8 bytes and int64 offsets of a batch of texts (Arrow arrays without copying the
    text), and whether they came from Arrow (then the bytes are not known to be UTF-8)."""
    if isinstance(texts, pa.ChunkedArray):
        chunks = [arrow.plain_strings(c) for c in texts.chunks]
        texts = (chunks[0] if len(chunks) == 1 else pa.array([], pa.string()) if not chunks
                 else pa.chunked_array(chunks).combine_chunks())
    if isinstance(texts, pa.Array):
        texts = arrow.plain_strings(texts)
        if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
            raise InvalidTypeError(f"texts: expected a string array, got {texts.type}")
        if texts.null_count:
            i = int(np.flatnonzero(~np.asarray(texts.is_valid()))[0])
            raise InvalidInputError(f"texts: text {i} is null")
        large = pa.types.is_large_string(texts.type)
        off = np.frombuffer(texts.buffers()[1], np.int64 if large else np.int32,
                            count=len(texts) + 1, offset=texts.offset * (8 if large else 4))
        buf = texts.buffers()[2]
        data = np.frombuffer(buf, np.uint8) if buf is not None else np.zeros(0, np.uint8)
        data = data[int(off[0]):int(off[-1])]
        return data, off.astype(np.int64) if not large else off, True
    if isinstance(texts, str):
        raise InvalidTypeError("texts: expected a list of str, got one str (use encode())")
    items = []
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InvalidTypeError(f"texts: text {i} is {type(t).__name__}, expected str")
        items.append(_utf8(t, i))
    return (*_join(items), False)


def _list_array(vals: np.ndarray, counts: np.ndarray) -> pa.Array:
    # (arrow.list_array: pa.array on an ndarray imports pandas, 0.5 s)
    return arrow.list_array(vals, counts)
