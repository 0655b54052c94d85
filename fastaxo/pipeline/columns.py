"""The token columns of one batch: checked and cast to list<int32> (errors name the file and
the row), tokenized from text, measured, and compacted to the rows kept."""

from __future__ import annotations

import itertools
import os
from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow
from fastaxo.errors import InvalidInputError, InvalidTypeError, NullValueError

__all__ = ["ChatTokenizer", "TextTokenizer", "chat_tokenize", "compact", "list_lengths",
           "load_tokenizer", "row_where",
           "text_tokenizer", "token_column", "tokenize"]

_I32 = pa.int32()


def row_where(path: str, row: int) -> str:
    return f"{path} row {row:,} (0-based)"


def token_column(arr: pa.Array, name: str, path: str, row0: int) -> pa.Array:
    """``arr`` as list<int32> / large_list<int32>, with nulls and out-of-range values refused."""
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


def list_lengths(arr: pa.Array) -> np.ndarray:
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
    ``seq_len`` go through ``overflow``, counted), special tokens as ``add_special_tokens``
    says, and with ``append_eos`` the EOS token after each document."""

    def __init__(self, tok: Any, file: str, *, add_special_tokens: bool = True,
                 append_eos: bool = False, eos_token: str | None = None):
        append_eos = bool(append_eos) or eos_token is not None  # naming the token asks for it
        self.tok, self.file = tok, file
        self.add_special_tokens, self.append_eos = bool(add_special_tokens), append_eos
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

    def settings(self) -> dict[str, Any]:
        return {"file": self.file, "add_special_tokens": self.add_special_tokens,
                "append_eos": self.append_eos, "eos_token": self.eos_token,
                "eos_id": self.eos_id, "ignored_from_file": self.ignored}


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


def load_tokenizer(path: str, *, add_special_tokens: bool = True, append_eos: bool = False,
                   eos_token: str | None = None) -> TextTokenizer:
    """A :class:`TextTokenizer` from a Hugging Face tokenizer directory or tokenizer.json."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ImportError(
            "--tokenizer needs the 'tokenizers' library: pip install tokenizers") from None
    file = path if os.path.isfile(path) else os.path.join(path, "tokenizer.json")
    if not os.path.isfile(file):
        raise InvalidInputError(f"tokenizer: {path!r} holds no tokenizer.json (expected a Hugging "
                                "Face tokenizer directory or the tokenizer.json file itself)")
    try:
        tok = Tokenizer.from_file(file)
    except Exception as e:  # tokenizers raises its own Exception type
        raise InvalidInputError(f"tokenizer: cannot load {file}: {e}") from None
    return TextTokenizer(tok, file, add_special_tokens=add_special_tokens, append_eos=append_eos,
                         eos_token=eos_token)


def text_tokenizer(path: str | None, *, add_special_tokens: bool = True, append_eos: bool = False,
                   eos_token: str | None = None) -> TextTokenizer | None:
    """prepare's tokenizer: :func:`load_tokenizer` of ``path``, or None without one (then the
    tokenizer options, which apply to raw text only, must be left at their defaults)."""
    if path is not None:
        return load_tokenizer(path, add_special_tokens=add_special_tokens,
                              append_eos=append_eos, eos_token=eos_token)
    if append_eos or eos_token is not None or not add_special_tokens:
        raise InvalidInputError("add_special_tokens / append_eos / eos_token apply to raw text: "
                                "pass tokenizer= as well")
    return None


def tokenize(tt: TextTokenizer, arr: pa.Array, column: str, path: str, row0: int) -> pa.Array:
    """The text column ``arr`` tokenized with ``tt`` (batched, whole rows) as list<int32>."""
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        raise InvalidTypeError(
            f"{path}: text column {column!r} must be strings to tokenize, got {arr.type}")
    if arr.null_count:
        i = int(np.flatnonzero(~np.asarray(arr.is_valid()))[0])
        raise NullValueError(f"{row_where(path, row0 + i)}: {column} is null; expected text")
    encs = tt.tok.encode_batch(arr.to_pylist(), add_special_tokens=tt.add_special_tokens)
    rows = [e.ids for e in encs]
    if tt.eos_id is not None:
        eos = [tt.eos_id]
        rows = [ids + eos for ids in rows]
    return _int32_lists(rows)


class ChatTokenizer:
    """prepare's chat path: a ``messages`` column (lists of ``{"role", "content"}``, or their
    JSON text) to Axolotl's ``input_ids`` and role-masked ``labels`` (:mod:`fastaxo.chat`) with
    a transformers tokenizer and its chat template (or ``chat_template``: a Jinja file, a
    template string, or a name of Axolotl's built-in templates when Axolotl is installed)."""

    def __init__(self, path: str, *, chat_template: str | None = None,
                 **options: Any):
        from fastaxo.chat import ChatSpec

        try:
            from transformers import AutoTokenizer
        except ImportError:
            raise ImportError("a messages column needs the 'transformers' library (chat "
                              "templates): pip install transformers") from None
        if not os.path.isdir(path):
            raise InvalidInputError(f"tokenizer: {path!r} is not a directory; chat data needs a "
                                    "Hugging Face tokenizer directory (tokenizer.json and "
                                    "tokenizer_config.json)")
        try:
            tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        except Exception as e:  # noqa: BLE001 - transformers raises many types
            raise InvalidInputError(f"tokenizer: cannot load {path}: {e}") from None
        self.path, self.template_source = path, "tokenizer_config.json"
        template = None
        if chat_template is not None:
            template, self.template_source = _template_text(chat_template)
        self.spec = ChatSpec.create(tok, template, **options)
        self.options = {k: (list(v) if isinstance(v, (tuple, set, frozenset)) else v)
                        for k, v in options.items()}
        self.fallbacks: dict[str, int] = {}
        self.eos_id = None  # the template writes the end-of-turn tokens

    def settings(self) -> dict[str, Any]:
        return {"file": self.path, "chat_template": self.template_source, **self.options,
                "one_pass": self.spec.problem() is None,
                "fallback_rows": dict(self.fallbacks)}


def _template_text(value: str) -> tuple[str, str]:
    if os.path.isfile(value):
        with open(value, encoding="utf-8") as fh:
            return fh.read(), value
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


def chat_tokenize(ct: ChatTokenizer, arr: pa.Array, column: str, path: str, row0: int
                  ) -> tuple[pa.Array, pa.Array]:
    """The ``messages`` column ``arr`` as ``(input_ids, labels)`` list<int32> columns."""
    from fastaxo.chat import tokenize_chat
    from fastaxo.errors import FastaxoError

    if arr.null_count:
        i = int(np.flatnonzero(~np.asarray(arr.is_valid()))[0])
        raise NullValueError(f"{row_where(path, row0 + i)}: {column} is null; expected a list "
                             "of messages")
    try:
        res = tokenize_chat(arr.to_pylist(), spec=ct.spec)
    except FastaxoError as e:
        # the message names the row within the batch: say the file and where the batch starts
        raise type(e)(f"{path} (the batch from row {row0:,}, 0-based): {e}") from None
    for reason, n in res.fallbacks.items():
        ct.fallbacks[reason] = ct.fallbacks.get(reason, 0) + n
    return _int32_lists(res.input_ids), _int32_lists(res.labels)


def _int32_lists(rows: list[list[int]]) -> pa.Array:
    """Rows of token ids as list<int32> (flattened in one C pass)."""
    from fastaxo._core.ragged import lists_to_values

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
