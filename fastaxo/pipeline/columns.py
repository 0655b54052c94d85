"""The token columns of one batch: checked and cast to list<int32> (errors name the file and
the row), tokenized from text, measured, and compacted to the rows kept."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow
from fastaxo._core.checks import MAX_ROW_BYTES, positive_int
from fastaxo.errors import (
    ChatTemplateError,
    ExtensionUnavailableError,
    InvalidInputError,
    InvalidTypeError,
    NullValueError,
    RowTooLargeError,
)
from fastaxo.pipeline.messages import (
    arrow_turns,
    content_bytes,
    message_fields,
    pylist_without,
    rename_message_fields,
)

__all__ = ["IGNORE_INDEX", "SEQ_LENGTHS", "ChatTokenizer", "TextTokenizer", "chat_tokenize",
           "chat_tokenizer", "compact", "describe_encoder",
           "list_lengths", "load_tokenizer", "row_where", "settled_schema",
           "text_tokenizer", "token_column", "tokenize", "too_large_error"]

_I32 = pa.int32()
IGNORE_INDEX = -100  # a label no loss is taken on (transformers' and Axolotl's)
SEQ_LENGTHS = "seq_lengths"  # the standard layout's sequence lengths per row (TRL's name)
_TOKEN_COLUMNS = ("input_ids", "labels", "attention_mask")  # read as lists of integers


def row_where(path: str, row: int) -> str:
    return f"{path} row {row:,} (0-based)"


def _unknown(t: pa.DataType) -> bool:
    """Whether a type inferred from JSON/CSV says nothing of the values: null, or a list
    of null (only nulls or empty lists were seen)."""
    while (pa.types.is_list(t) or pa.types.is_large_list(t)
           or pa.types.is_fixed_size_list(t)):
        t = t.value_type
    return pa.types.is_null(t)


def settled_schema(schema: pa.Schema) -> pa.Schema | None:
    """``schema`` (a text file's, inferred from its first 16 MiB) with the token columns whose
    type it left unknown (null or list<null>: only empty rows there) made list<int64>, or None
    when no column's type is unknown. A reader opened with it, and only the columns it needs,
    reads such a file to its end (the other unknown columns it does not parse)."""
    if not any(_unknown(f.type) for f in schema):
        return None
    fields = [f.with_type(pa.list_(pa.int64()))
              if f.name in _TOKEN_COLUMNS and _unknown(f.type) else f for f in schema]
    return pa.schema(fields, metadata=schema.metadata)


def token_column(arr: pa.Array, name: str, path: str, row0: int) -> pa.Array:
    """``arr`` as list<int32> / large_list<int32>, with nulls and out-of-range values refused
    (a fixed_size_list column is taken as the list of its rows)."""
    if pa.types.is_fixed_size_list(arr.type):
        arr = arrow.fixed_as_list(arr)
    t = arr.type
    if (not (pa.types.is_list(t) or pa.types.is_large_list(t))
            or not pa.types.is_integer(t.value_type)):
        raise InvalidTypeError(
            f"{path}: column {name!r} must be a list of integer token ids, got {t}")
    if arr.null_count:
        i = int(np.flatnonzero(~np.asarray(arr.is_valid()))[0])
        raise NullValueError(
            f"{row_where(path, row0 + i)}: {name} is null; expected a list of token ids")
    values = arr.values  # respect the slice: use offsets
    # (np.asarray(pa.Array) imports pandas)
    offs = arrow.offsets_of(arr, pa.types.is_large_list(t))
    flat = values.slice(int(offs[0]), int(offs[-1] - offs[0]))
    if flat.null_count:
        k = int(np.flatnonzero(~np.asarray(flat.is_valid()))[0])
        i = int(np.searchsorted(offs, offs[0] + k, side="right")) - 1
        raise NullValueError(
            f"{row_where(path, row0 + i)}: {name} holds a null token; expected integers")
    if t.value_type == _I32:
        return arr
    v = arrow.fixed_view(flat)
    bad = np.flatnonzero((v < -(2**31)) | (v > 2**31 - 1)) if v.size else v
    if len(bad):
        k = int(bad[0])
        i = int(np.searchsorted(offs, offs[0] + k, side="right")) - 1
        raise InvalidInputError(f"{row_where(path, row0 + i)}: {name} holds {int(v[k])}; token "
                                "ids and labels must fit int32")
    target = pa.large_list(_I32) if pa.types.is_large_list(t) else pa.list_(_I32)
    return arr.cast(target)


def list_lengths(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The length of each row of a list column (int64), from its offsets."""
    if isinstance(arr, pa.ChunkedArray):
        parts = [list_lengths(c) for c in arr.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)
    offs = arrow.offsets_of(arr, pa.types.is_large_list(arr.type))
    return np.diff(offs).astype(np.int64, copy=False)


def compact(table: pa.Table, keep: np.ndarray) -> pa.Table:
    """Rows ``keep`` (sorted indices) of a table of list<int32> columns, as new contiguous
    arrays. NumPy gather over the flat values: ~3x faster than pyarrow's take on list arrays."""
    n = table.num_rows
    mask = np.zeros(n, bool)
    mask[keep] = True
    cols = {}
    for name in table.column_names:
        col = table.column(name)
        arr = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        offs = arrow.offsets_of(arr, pa.types.is_large_list(arr.type))
        flat = arrow.fixed_view(arr.values)[offs[0] : offs[-1]]
        lens = np.diff(offs)
        new = np.zeros(len(keep) + 1, np.int64)
        np.cumsum(lens[keep], out=new[1:])
        values = arrow.from_numpy(flat[np.repeat(mask, lens)])
        if pa.types.is_large_list(arr.type) or new[-1] >= 2**31:
            cols[name] = pa.LargeListArray.from_arrays(arrow.from_numpy(new), values)
        else:
            cols[name] = pa.ListArray.from_arrays(arrow.from_numpy(new.astype(np.int32)), values)
    return pa.table(cols)


class TextTokenizer:
    """A ``tokenizers.Tokenizer`` as prepare uses it: every row tokenized whole (a truncation or
    padding stored in tokenizer.json is switched off and said in the report: rows longer than
    ``max_length`` go through ``overflow``, counted), special tokens as ``add_special_tokens``
    says, and with ``append_eos`` the EOS token after each document.

    The ids come from fastaxo's C encoder (:class:`fastaxo.Tokenizer`, on the Arrow column)
    where it gives this tokenizer's ids exactly, else from HF's; ``encoder`` forces one
    ("hf" or "fastaxo": the Ray workers take the driver's choice), default
    ``FASTAXO_TOKENIZER`` (:mod:`fastaxo.tokenizer.select`). ``num_threads``: the C encoder's
    threads (default fastaxo's thread count)."""

    def __init__(self, tok: Any, file: str, *, add_special_tokens: bool = True,
                 append_eos: bool = False, eos_token: str | None = None,
                 max_row_bytes: int = MAX_ROW_BYTES, encoder: str | None = None,
                 num_threads: int | None = None, from_object: bool = False):
        append_eos = bool(append_eos) or eos_token is not None  # naming the token asks for it
        self.tok, self.file = tok, file
        self.max_row_bytes = positive_int(max_row_bytes, "max_row_bytes")
        self.add_special_tokens, self.append_eos = bool(add_special_tokens), append_eos
        self.num_threads = num_threads
        ignored = []
        if tok.truncation is not None:
            ignored.append(f"truncation (max_length {tok.truncation.get('max_length')})")
            tok.no_truncation()
        if tok.padding is not None:
            p = tok.padding
            ignored.append(f"padding ({p.get('length') or 'to the longest'}, "
                           f"pad id {p.get('pad_id')})")
            tok.no_padding()
        #: what tokenizer.json asked for that prepare does not do, for the report
        self.ignored = "; ".join(ignored) or None
        #: fastaxo's encoder (a fastaxo.Tokenizer) where it is exact, else None: HF's, and why
        # (an object has no file: its encoder is built from it as it is now)
        self.fast, self.encoder_reason = _fast_encoder(tok, file, encoder,
                                                       bool(ignored) or from_object)
        self.eos_token, self.eos_id = None, None
        if append_eos:
            name = eos_token if eos_token is not None else _config_eos(file)
            if name is None:
                raise InvalidInputError(
                    f"append_eos: {file} has no tokenizer_config.json with an eos_token beside "
                    "it; name the token (--eos-token '</s>' / eos_token='</s>')")
            eid = tok.token_to_id(name)
            if eid is None:
                raise InvalidInputError(f"eos_token: {name!r} is not in the vocabulary of {file}")
            self.eos_token, self.eos_id = name, int(eid)

    @property
    def encoder(self) -> str:
        """"fastaxo" or "hf": which encoder makes the ids."""
        return "hf" if self.fast is None else "fastaxo"

    def describe_encoder(self) -> str:
        """One line: "fastaxo (C, pattern qwen2, NFC)" or "HF tokenizers (why not fastaxo's)"."""
        return describe_encoder(self.fast, self.encoder_reason)

    def settings(self) -> dict[str, Any]:
        return {"file": self.file, "add_special_tokens": self.add_special_tokens,
                "append_eos": self.append_eos, "eos_token": self.eos_token,
                "eos_id": self.eos_id, "ignored_from_file": self.ignored,
                "max_row_bytes": self.max_row_bytes, "encoder": self.encoder,
                "encoder_detail": self.describe_encoder(),
                "encoder_reason": self.encoder_reason}


def describe_encoder(fast: Any, reason: str | None) -> str:
    """The encoder in one line: "fastaxo (C, pattern qwen2, NFC)" for a fastaxo.Tokenizer, else
    "HF tokenizers (reason)"."""
    if fast is None:
        if reason and reason.startswith("tokenizer: "):
            reason = reason[len("tokenizer: "):]
        return f"HF tokenizers ({reason})" if reason else "HF tokenizers"
    # (fastaxo.Tokenizer has no public flag for its normalizer yet: its spec says)
    nfc = bool(getattr(fast, "nfc", getattr(getattr(fast, "_spec", None), "nfc", False)))
    return f"fastaxo (C, pattern {fast.pattern}{', NFC' if nfc else ''})"


_ENCODERS = ("hf", "fastaxo")


def _fast_encoder(tok: Any, file: str, encoder: str | None, edited: bool
                  ) -> tuple[Any, str | None]:
    """(fastaxo.Tokenizer, None) when fastaxo's encoder gives ``tok``'s ids, else (None, why).
    ``encoder`` None follows FASTAXO_TOKENIZER; "hf" / "fastaxo" force one (the latter raises
    where it is not exact). ``edited``: prepare switched off a truncation or padding stored in
    the file, so the encoder is built from ``tok`` as it is now, not from the file."""
    from fastaxo.tokenizer import Tokenizer, UnsupportedTokenizerError
    from fastaxo.tokenizer.select import fast_tokenizer

    if encoder is None:
        return fast_tokenizer(tok if edited else file)
    if encoder not in _ENCODERS:
        raise InvalidInputError(f"encoder: expected one of {', '.join(_ENCODERS)} or None, got "
                                f"{encoder!r:.40}")
    if encoder == "hf":
        return None, "encoder 'hf' asked for"
    try:
        return (Tokenizer.from_hf(tok) if edited else Tokenizer.from_pretrained(file)), None
    except (UnsupportedTokenizerError, ExtensionUnavailableError) as e:
        raise InvalidInputError(f"encoder 'fastaxo' asked for: {e}") from None


def _config_eos(tokenizer_file: str) -> str | None:
    """The eos_token of the tokenizer_config.json beside ``tokenizer_file`` (a string, or an
    AddedToken dict with its ``content``), or None."""
    import json

    cfg = os.path.join(os.path.dirname(os.path.abspath(tokenizer_file)), "tokenizer_config.json")
    try:
        with open(cfg, encoding="utf-8") as fh:
            eos = json.load(fh).get("eos_token")
    except (OSError, ValueError, AttributeError):
        return None
    if isinstance(eos, dict):
        eos = eos.get("content")
    return eos if isinstance(eos, str) and eos else None


# What a tokenizer directory must hold for its vocabulary: the fast tokenizer's file, or the
# files transformers converts a slow tokenizer from.
_VOCAB_FILES = ("tokenizer.json", "vocab.json", "tokenizer.model", "vocab.txt", "spiece.model",
                "sentencepiece.bpe.model", "tiktoken.model")


def _no_vocabulary(path: str, why: str) -> InvalidInputError:
    return InvalidInputError(
        f"tokenizer: {path!r} holds no vocabulary ({why}): an interrupted download? Expected a "
        "Hugging Face tokenizer directory (tokenizer.json and tokenizer_config.json) or the "
        "tokenizer.json file itself")


def load_tokenizer(path: str, *, add_special_tokens: bool = True, append_eos: bool = False,
                   eos_token: str | None = None, max_row_bytes: int = MAX_ROW_BYTES,
                   encoder: str | None = None, num_threads: int | None = None
                   ) -> TextTokenizer:
    """A :class:`TextTokenizer` from a Hugging Face tokenizer directory or tokenizer.json, or
    from a ``tokenizers.Tokenizer`` or transformers fast tokenizer object (a copy: prepare
    switches off the truncation and padding it may carry; the caller's is left as it is)."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ImportError(
            "--tokenizer needs the 'tokenizers' library: pip install tokenizers") from None
    if is_tokenizer_object(path):
        obj: Any = path
        backend = getattr(obj, "backend_tokenizer", obj)
        if append_eos and eos_token is None:  # (no tokenizer_config.json beside an object)
            eos_token = getattr(obj, "eos_token", None)
        return TextTokenizer(Tokenizer.from_str(backend.to_str()), tokenizer_label(obj),
                             add_special_tokens=add_special_tokens, append_eos=append_eos,
                             eos_token=eos_token, max_row_bytes=max_row_bytes, encoder=encoder,
                             num_threads=num_threads, from_object=True)
    file = path if os.path.isfile(path) else os.path.join(path, "tokenizer.json")
    if not os.path.isfile(file):
        if not os.path.exists(path):
            raise InvalidInputError(f"tokenizer: {path!r} does not exist (expected a Hugging Face "
                                    "tokenizer directory or its tokenizer.json)")
        raise _no_vocabulary(path, "no tokenizer.json")
    try:
        tok = Tokenizer.from_file(file)
    except Exception as e:  # tokenizers raises its own Exception type
        raise InvalidInputError(f"tokenizer: cannot load {file}: {_first_line(e)}") from None
    if tok.get_vocab_size(with_added_tokens=False) == 0:
        raise _no_vocabulary(path, f"the model in {os.path.basename(file)} has no tokens")
    return TextTokenizer(tok, file, add_special_tokens=add_special_tokens, append_eos=append_eos,
                         eos_token=eos_token, max_row_bytes=max_row_bytes, encoder=encoder,
                         num_threads=num_threads)


def _first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return " ".join(lines)[:300] or type(e).__name__


def text_tokenizer(path: str | None, *, add_special_tokens: bool = True, append_eos: bool = False,
                   eos_token: str | None = None, max_row_bytes: int = MAX_ROW_BYTES,
                   num_threads: int | None = None) -> TextTokenizer | None:
    """prepare's tokenizer: :func:`load_tokenizer` of ``path``, or None without one (then the
    tokenizer options, which apply to raw text only, must be left at their defaults)."""
    if path is not None:
        return load_tokenizer(path, add_special_tokens=add_special_tokens,
                              append_eos=append_eos, eos_token=eos_token,
                              max_row_bytes=max_row_bytes, num_threads=num_threads)
    if append_eos or eos_token is not None or not add_special_tokens:
        raise InvalidInputError("add_special_tokens / append_eos / eos_token apply to raw text: "
                                "pass tokenizer= as well")
    return None


# Bytes of text per tokenizer call: HF's encode holds ~100x its input at once.
_ENCODE_BYTES = 8 << 20


def tokenize(tt: TextTokenizer, arr: pa.Array, column: str, path: str, row0: int,
             overflow: str = "error", on_rows: Any = None) -> tuple[pa.Array, int]:
    """The text column ``arr`` tokenized with ``tt`` (whole rows) as list<int32>, and how many
    rows were larger than ``tt.max_row_bytes``: refused
    (:class:`~fastaxo.errors.RowTooLargeError`) unless ``overflow`` is "drop", which gives them
    no tokens. fastaxo's encoder reads the Arrow column in place; HF's gets the texts as Python
    strings in calls of about 8 MiB. ``on_rows(k)``: told as rows are done (prepare's
    progress)."""
    arr = arrow.plain_strings(arr)  # (categorical or string_view text)
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        raise InvalidTypeError(
            f"{path}: text column {column!r} must be strings to tokenize, got {arr.type}")
    if arr.null_count:
        i = int(np.flatnonzero(~np.asarray(arr.is_valid()))[0])
        raise NullValueError(f"{row_where(path, row0 + i)}: {column} is null; expected text")
    sizes = np.diff(arrow.offsets_of(arr, pa.types.is_large_string(arr.type)))
    big = np.flatnonzero(sizes > tt.max_row_bytes)
    if len(big) and overflow != "drop":
        i = int(big[0])
        raise too_large_error(path, row0 + i, f"{column} is", int(sizes[i]), tt.max_row_bytes)
    _check_utf8(arr, big, column, path, row0)
    if tt.fast is not None:
        ids = _fast_ids(tt, arr, big)
        if on_rows is not None:
            on_rows(len(arr))
        return ids, len(big)
    texts = pylist_without(arr, big)
    rows: list[list[int]] = [[] for _ in texts]
    eos = [] if tt.eos_id is None else [tt.eos_id]
    for chunk in _byte_chunks(sizes, texts):
        encs = tt.tok.encode_batch([texts[i] for i in chunk],
                                   add_special_tokens=tt.add_special_tokens)
        for i, e in zip(chunk, encs, strict=True):
            rows[i] = e.ids + eos if eos else e.ids
        if on_rows is not None:
            on_rows(len(chunk))
    return _int32_lists(rows), len(big)


def _check_utf8(arr: pa.Array, skip: np.ndarray, column: str, path: str, row0: int) -> None:
    """Refuse text that is not UTF-8 (an Arrow IPC file is read unchecked), naming the row:
    HF's tokenizer cannot take it, and fastaxo's must not make ids HF would not. The rows
    ``skip`` (over max_row_bytes, dropped) are not looked at."""
    try:
        arr.validate(full=True)  # (Arrow's UTF-8 check: GB/s)
        return
    except pa.ArrowInvalid:
        pass
    got = arrow.first_not_utf8(arr, frozenset(skip.tolist()))
    if got is not None:
        i, e = got
        raise InvalidInputError(
            f"{row_where(path, row0 + i)}: {column} is not UTF-8 text (byte "
            f"0x{e.object[e.start]:02x} at offset {e.start:,}); a tokenizer takes text")
    arr.validate(full=True)  # not the text: the array itself is broken, say what Arrow says


def _check_messages_utf8(arr: pa.Array, column: str, path: str, row0: int) -> None:
    """Refuse a messages column whose text is not UTF-8 (Arrow's JSON reader and an Arrow IPC
    file leave it unchecked), naming the row, the message and the field, before any row
    becomes Python objects (pyarrow's own error there names neither). Only the messages of
    ``arr``'s rows are read (a slice's neighbours are other batches')."""
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):  # JSON text, one per row
        _check_utf8(arr, np.zeros(0, np.int64), column, path, row0)
        return
    if not ((pa.types.is_list(t) or pa.types.is_large_list(t))
            and pa.types.is_struct(t.value_type)):
        return  # (another shape is refused by the chat path, naming the row)
    flat = arr.flatten()
    for k in range(t.value_type.num_fields):
        child = flat.field(k)
        if not (pa.types.is_string(child.type) or pa.types.is_large_string(child.type)):
            continue
        with contextlib.suppress(pa.ArrowInvalid):
            child.validate(full=True)  # (Arrow's UTF-8 check of this slice: GB/s)
            continue
        got = arrow.first_not_utf8(child)
        if got is not None:
            m, e = got
            parent = np.asarray(arr.value_parent_indices())
            r = int(parent[m])
            raise InvalidInputError(
                f"{row_where(path, row0 + r)}: {column} message "
                f"{m - int(np.searchsorted(parent, r))} {t.value_type.field(k).name} is "
                f"not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start:,}); "
                "a tokenizer takes text")
        child.validate(full=True)  # not the text: the array itself is broken


def _fast_ids(tt: TextTokenizer, arr: pa.Array, skip: np.ndarray) -> pa.Array:
    """The ids of ``arr`` from fastaxo's encoder (the Arrow column in place, no Python object a
    token), the rows ``skip`` given none, and with ``tt.eos_id`` the EOS after every other row:
    the list<int32> column HF's path makes."""
    n = len(arr)
    lens = np.zeros(n, np.int64)
    parts = []
    # the runs of rows between the skipped ones (zero-copy slices: a skipped row can be
    # hundreds of MB and never reaches the encoder)
    edges = [-1, *skip.tolist(), n]
    for a, b in itertools.pairwise(edges):
        a += 1
        if a == b:
            continue
        got = tt.fast.encode_batch(arr.slice(a, b - a), add_special_tokens=tt.add_special_tokens,
                                   num_threads=tt.num_threads)
        offs = arrow.offsets_of(got, pa.types.is_large_list(got.type))
        lens[a:b] = np.diff(offs)
        parts.append(arrow.fixed_view(got.values)[offs[0]:offs[-1]])
    values = (parts[0] if len(parts) == 1 else np.concatenate(parts) if parts
              else np.zeros(0, np.int32))
    if tt.eos_id is not None:
        has = np.ones(n, bool)
        has[skip] = False
        ends = np.cumsum(lens)[has]  # each row's end in values: the EOS goes there
        values = np.insert(values, ends, np.int32(tt.eos_id))
        lens += has
    return arrow.list_array(values.astype(np.int32, copy=False), lens)


def too_large_error(path: str, row: int, what: str, size: int, limit: int) -> RowTooLargeError:
    """The one line for a row over max_row_bytes, naming the file, the row and the options."""
    return RowTooLargeError(
        f"{row_where(path, row)}: {what} {size:,} bytes of text, more than max_row_bytes "
        f"({limit:,}); such a row is refused before the tokenizer, whose memory grows to ~100x "
        "the text. Pass --overflow drop to drop such rows (counted), raise --max-row-bytes, or "
        "split the document first", row, size, limit)


def _byte_chunks(sizes: np.ndarray, texts: list[Any]) -> list[list[int]]:
    """Row indices (of the rows with text) in groups of about ``_ENCODE_BYTES``."""
    chunks: list[list[int]] = []
    size = 0
    for i, n in enumerate(sizes.tolist()):
        if texts[i] is None:
            continue
        # (the first text opens the first chunk even when it is empty)
        if not chunks or (size + n > _ENCODE_BYTES and chunks[-1]):
            chunks.append([])
            size = 0
        chunks[-1].append(i)
        size += n
    return chunks


class ChatTokenizer:
    """prepare's chat path: a ``messages`` column (lists of ``{"role", "content"}``, or their
    JSON text) to Axolotl's ``input_ids`` and role-masked ``labels`` (:mod:`fastaxo.chat`) with
    a transformers tokenizer and its chat template (or ``chat_template``: a Jinja file, a
    template string, or a name of Axolotl's built-in templates when Axolotl is installed)."""

    def __init__(self, path: str, *, chat_template: str | None = None,
                 **options: Any):
        import importlib.util

        from fastaxo.chat import snapshot

        #: {the data's field: "role" / "content"} (ShareGPT's from / value), or None
        self.fields = message_fields(options)
        if importlib.util.find_spec("transformers") is None:
            raise ImportError("a messages column needs the 'transformers' library (chat "
                              "templates): pip install transformers")
        if is_tokenizer_object(path):  # a transformers tokenizer the caller holds
            self._init_spec(path, {"state": "off", "why": "a tokenizer object was given"},
                             tokenizer_label(path), chat_template, options)
            return
        if not os.path.isdir(path):
            raise InvalidInputError(f"tokenizer: {path!r} is not a directory; chat data needs a "
                                    "Hugging Face tokenizer directory (tokenizer.json and "
                                    "tokenizer_config.json)")
        try:
            names = os.listdir(path)
        except OSError as e:
            raise InvalidInputError(f"tokenizer: cannot list {path!r}: {e.strerror}") from None
        if not any(n in _VOCAB_FILES or n.endswith(".tiktoken") for n in names):
            raise _no_vocabulary(path, "no tokenizer.json, vocab.json or tokenizer.model")
        # a snapshot of what this path asks the tokenizer (fastaxo.chat.snapshot): on a
        # repeated run, the answers without importing transformers
        tok, info = snapshot.open_tokenizer(path, _load_transformers_tokenizer)
        self._init_spec(tok, info, path, chat_template, options)

    def _init_spec(self, tok: Any, info: dict[str, Any], path: str,
                    chat_template: str | None, options: dict[str, Any]) -> None:
        """The rest of the construction, from the tokenizer ``tok`` (``path``: where it came
        from, or a label for an object; ``info``: what its snapshot did)."""
        from fastaxo.chat import ChatSpec, snapshot

        self.snapshot = info
        backend = getattr(tok, "backend_tokenizer", None)
        if backend is not None and backend.get_vocab_size(with_added_tokens=False) == 0:
            raise _no_vocabulary(path, "its model has no tokens")
        self.path, self.template_source = path, "tokenizer_config.json"
        template = None
        if chat_template is not None:
            template, self.template_source = _template_text(chat_template)
        self.spec = ChatSpec.create(tok, template, **options)
        _ask_now(self.spec)
        snapshot.seal(tok)
        self.options = {k: (list(v) if isinstance(v, (tuple, set, frozenset)) else v)
                        for k, v in options.items()}
        if self.fields:  # (kept in the options: the report says it, Ray's workers get it)
            self.options["message_property_mappings"] = {v: k for k, v in self.fields.items()}
        self.fallbacks: dict[str, int] = {}
        self.turn_fallbacks: dict[str, int] = {}
        self.eos_id = None  # the template writes the end-of-turn tokens

    def settings(self) -> dict[str, Any]:
        from fastaxo.chat import snapshot

        one_pass = self.spec.problem() is None
        # the encoder of the one-pass path's ids (rows that need HF's character offsets, and
        # every row when the path cannot run, are HF's)
        fast, why = ((self.spec.fastaxo_tokenizer, self.spec.encoder_reason) if one_pass
                     else (None, "the configuration takes Axolotl's algorithm"))
        return {"file": self.path, "chat_template": self.template_source, **self.options,
                "one_pass": one_pass,
                "fallback_rows": dict(self.fallbacks),
                "fallback_turns": dict(self.turn_fallbacks),
                "encoder": "hf" if fast is None else "fastaxo",
                "encoder_detail": describe_encoder(fast, why), "encoder_reason": why,
                **_snapshot_settings(snapshot.status(self.spec.tokenizer) or self.snapshot)}


def _snapshot_settings(info: dict[str, Any]) -> dict[str, Any]:
    """The report's word on the tokenizer snapshot: "hit" (replayed: transformers not
    imported, unless the detail says what loaded it), "miss" (recorded now) or "off"."""
    detail = info["why"] + (f" ({info['file']})" if info.get("file") else "")
    return {"tokenizer_snapshot": info["state"], "tokenizer_snapshot_detail": detail}


def _load_transformers_tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as e:  # noqa: BLE001 - transformers raises many types
        raise InvalidInputError(f"tokenizer: cannot load {path}: {_first_line(e)}") from None


def _ask_now(spec: Any) -> None:
    """The checks that ask the tokenizer (made lazily on the first batch otherwise), made
    while its snapshot records. An error (FASTAXO_TOKENIZER=fastaxo on a tokenizer fastaxo's
    encoder does not reproduce) is raised where it was, on first use."""
    if spec.problem() is not None:
        return
    try:
        spec.build_tables()
    except InvalidInputError:
        pass


def chat_tokenizer(path: str, chat: Any, *, max_row_bytes: int = MAX_ROW_BYTES,
                   add_special_tokens: bool = True, append_eos: bool = False,
                   eos_token: str | None = None) -> ChatTokenizer:
    """prepare's chat tokenizer (one machine and Ray): :class:`ChatTokenizer` of ``path`` with
    the options ``chat`` (a mapping, or None) and ``max_row_bytes``; the options of raw text
    must be left at their defaults (the template writes the special tokens)."""
    if not (add_special_tokens and not append_eos and eos_token is None):
        raise InvalidInputError("add_special_tokens / append_eos / eos_token: chat data gets "
                                "its special tokens from the chat template; leave them unset")
    return ChatTokenizer(path, **{"max_row_bytes": max_row_bytes, **dict(chat or {})})


def _template_text(value: str) -> tuple[str, str]:
    if os.path.isfile(value):
        try:
            with open(value, encoding="utf-8") as fh:
                return fh.read(), value
        except UnicodeDecodeError as e:
            raise ChatTemplateError(f"chat_template: {value} is not UTF-8 text (byte "
                                    f"0x{e.object[e.start]:02x} at offset {e.start:,}); save "
                                    "the template as UTF-8") from None
        except OSError as e:
            raise InvalidInputError(f"chat_template: cannot read {value}: {e.strerror}") from None
    if "{%" in value or "{{" in value:
        return value, "the template given"
    try:
        from axolotl.utils.chat_templates import get_chat_template
    except ImportError:
        raise InvalidInputError(
            f"chat_template: {value!r} is not a file or a Jinja template; named templates are "
            "Axolotl's (pip install axolotl) or pass the template's file") from None
    try:
        return get_chat_template(value), f"axolotl:{value}"
    except Exception as e:  # noqa: BLE001
        raise InvalidInputError(f"chat_template: {value!r}: {e}") from None


def chat_tokenize(ct: ChatTokenizer, arr: pa.Array, column: str, path: str, row0: int,
                  overflow: str = "error", on_rows: Any = None
                  ) -> tuple[pa.Array | pa.ChunkedArray, pa.Array | pa.ChunkedArray, int]:
    """The ``messages`` column ``arr`` as ``(input_ids, labels)`` list<int32> columns, and how
    many conversations were larger than ``max_row_bytes``: refused
    (:class:`~fastaxo.errors.RowTooLargeError`) unless ``overflow`` is "drop", which gives them
    no tokens. ``on_rows(k)``: told as rows are done (prepare's progress)."""
    from fastaxo.chat import tokenize_chat
    from fastaxo.chat.tokenize import tokenize_turns
    from fastaxo.errors import FastaxoError

    if arr.null_count:
        i = int(np.flatnonzero(~np.asarray(arr.is_valid()))[0])
        raise NullValueError(f"{row_where(path, row0 + i)}: {column} is null; expected a list "
                             "of messages")
    if ct.fields:  # (Axolotl's message_property_mappings: ShareGPT's from / value)
        arr = rename_message_fields(arr, ct.fields, column)
    # a conversation over the bound never becomes Python objects: its size comes from the
    # Arrow buffers (tokenize_chat applies the same rule to the rest)
    limit = ct.spec.max_row_bytes
    sizes = content_bytes(arr)
    big = np.empty(0, np.int64) if sizes is None else np.flatnonzero(sizes > limit)
    if len(big) and overflow != "drop":
        i = int(big[0])
        raise too_large_error(path, row0 + i, "the conversation's messages hold",
                              int(sizes[i]), limit)  # type: ignore[index]
    # (a conversation over the bound never becomes Python objects)
    turns = arrow_turns(arr) if not len(big) else None
    if turns is None:  # (ArrowTurns names a message that is not UTF-8 as it decodes it)
        _check_messages_utf8(arr, column, path, row0)
    convs = pylist_without(arr, big) if turns is None else turns
    ids: list[Any] = [[] for _ in range(len(convs))]  # (not iterated: turns are made lazily)
    labels: list[Any] = [[] for _ in range(len(convs))]
    too_large = len(big)
    too = "skip" if overflow == "drop" else "error"
    # the runs of rows between the dropped ones, so that errors name the right row
    edges = [-1, *big.tolist(), len(convs)]
    for a, b in itertools.pairwise(edges):
        a += 1
        if a == b:
            continue
        try:
            res = (tokenize_chat(convs[a:b], spec=ct.spec, too_large=too)
                   if turns is None  # (turns: no row was too big, so a, b = 0, len)
                   else tokenize_turns(turns, ct.spec, too, arrays=True, sized=True,
                                       on_rows=on_rows))
        except RowTooLargeError as e:
            raise too_large_error(path, row0 + a + e.row, "the conversation is at least",
                                  e.length, e.max_row_bytes) from None
        except FastaxoError as e:
            raise _chat_row_error(e, column, path, row0 + a) from None
        for reason, n in res.fallbacks.items():
            ct.fallbacks[reason] = ct.fallbacks.get(reason, 0) + n
        for reason, n in res.turn_fallbacks.items():
            ct.turn_fallbacks[reason] = ct.turn_fallbacks.get(reason, 0) + n
        ids[a:b], labels[a:b] = res.input_ids, res.labels
        too_large += len(res.too_large)
    return _int32_lists(ids), _int32_lists(labels), too_large


_RUN_ROW = re.compile(r"messages: row (\d+)(?=[ :])")


def _chat_row_error(e: Exception, column: str, path: str, row0: int) -> Exception:
    """The error ``e`` of :func:`~fastaxo.chat.tokenize_chat` on the rows from row ``row0`` of
    ``path``, which names its row among them ("messages: row K ..."), naming the file's row
    instead: the message does not depend on how the file was cut into batches (one machine's
    batches are not Ray's units)."""
    m = _RUN_ROW.match(str(e))
    if m is None:
        return type(e)(f"{path} (the batch from row {row0:,}, 0-based): {e}")
    return type(e)(f"{row_where(path, row0 + int(m.group(1)))}: {column}{str(e)[m.end():]}")


def _int32_lists(rows: list[Any]) -> pa.Array | pa.ChunkedArray:
    """Rows of token ids (lists of int, or int32 arrays) as list<int32>. Consecutive rows that
    are adjacent views of one int32 buffer (the chat engine's rows: views of each part's ids
    and labels) become a chunk over that buffer, no copy; the other rows are flattened in one
    C pass, or one concatenation. One chunk: an Array; several: a ChunkedArray."""
    groups = _view_runs(rows)
    if not groups or len(groups) > max(_MAX_RUNS, len(rows) // 64):
        groups = [(rows, None)]  # (no rows; or scattered views: one copy is less)
    chunks = [arrow.list_array(values, np.fromiter(map(len, part), np.int64, count=len(part)))
              if values is not None else _copied_lists(part) for part, values in groups]
    if len(chunks) == 1:
        return chunks[0]
    if len({c.type for c in chunks}) > 1:
        chunks = [c.cast(pa.large_list(pa.int32())) for c in chunks]
    return pa.chunked_array(chunks)


# Above this many groups (and one per 64 rows), _int32_lists copies every row instead.
_MAX_RUNS = 64


def _view_runs(rows: list[Any]) -> list[tuple[list[Any], np.ndarray | None]]:
    """``rows`` cut into groups in order: (rows, values) where the rows are adjacent views of
    one int32 buffer and ``values`` is that stretch of it (no copy); (rows, None) for the
    others. An empty row joins the group before it."""
    groups: list[tuple[list[Any], np.ndarray | None]] = []
    part: list[Any] = []
    owner: Any = None  # the run's buffer, and the run's bounds in it (items)
    start = end = 0
    for r in rows:
        if part and len(r) == 0:
            part.append(r)
            continue
        base = r.base if isinstance(r, np.ndarray) else None
        if (isinstance(base, np.ndarray) and r.dtype == np.int32 and base.dtype == np.int32
                and r.ndim == 1 and base.ndim == 1 and r.flags.c_contiguous
                and base.flags.c_contiguous):
            b0 = base.__array_interface__["data"][0]
            i = (r.__array_interface__["data"][0] - b0) // 4
            if owner is base and i == end:
                part.append(r)
                end += len(r)
                continue
            if part:
                groups.append((part, owner[start:end] if owner is not None else None))
            part, owner, start, end = [r], base, i, i + len(r)
            continue
        if owner is not None or not part:
            if part:
                groups.append((part, owner[start:end]))
            part, owner = [], None
        part.append(r)
    if part:
        groups.append((part, owner[start:end] if owner is not None else None))
    return groups


def _copied_lists(rows: list[Any]) -> pa.Array:
    """Rows of token ids (lists of int, or int32 arrays) as list<int32>, flattened in one C
    pass, or one concatenation."""
    from fastaxo._core.ragged import lists_to_values

    if any(isinstance(r, np.ndarray) for r in rows):
        parts = [r if isinstance(r, np.ndarray) else np.asarray(r, np.int64) for r in rows]
        lens = np.fromiter(map(len, parts), np.int64, count=len(parts))
        values = np.concatenate(parts) if parts else np.zeros(0, np.int32)
        if values.dtype != np.int32 and values.size and (values.min() < -(2**31)
                                                          or values.max() > 2**31 - 1):
            raise InvalidInputError("tokenizer: token ids beyond int32; prepare writes int32 "
                                    "columns")
        return arrow.list_array(values.astype(np.int32, copy=False), lens)
    got = lists_to_values(rows)
    if got is None or isinstance(got[0], str):
        lens = np.fromiter(map(len, rows), np.int64, count=len(rows))
        values = np.fromiter(itertools.chain.from_iterable(rows), np.int64,
                             count=int(lens.sum()))
    else:
        values, lens = got
    if values.size and (values.min() < -(2**31) or values.max() > 2**31 - 1):
        raise InvalidInputError("tokenizer: token ids beyond int32; prepare writes int32 columns")
    return arrow.list_array(values.astype(np.int32), lens)


def tokenizer_label(x: Any) -> Any:
    """What reports call the tokenizer ``x``: its path, or ``<Class object>`` for an object."""
    return f"<{type(x).__name__} object>" if is_tokenizer_object(x) else x


def is_tokenizer_object(x: Any) -> bool:
    """Whether ``x`` is a tokenizer object prepare takes (a ``tokenizers.Tokenizer`` or a
    transformers fast tokenizer), not a path."""
    return not isinstance(x, (str, os.PathLike)) and (
        hasattr(x, "backend_tokenizer") or (hasattr(x, "to_str") and hasattr(x, "encode_batch")))
