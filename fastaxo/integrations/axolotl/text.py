"""Axolotl's completion and pretraining tokenization on fastaxo's C encoder.

Three of Axolotl's functions tokenize raw text, each with ``tokenizer(...)`` and Python lists:

- ``CompletionPromptTokenizingStrategy.tokenize_prompt`` (``type: completion``): each text
  truncated to ``max_length`` (BOS included), EOS appended when the last id is not EOS and the
  row is shorter than ``max_length``, labels a copy, every row cut into pieces of
  ``sequence_len``; an empty text gives no row.
- ``PretrainTokenizationStrategy.tokenize_prompt`` (``type: pretrain``, ``pretraining_dataset``
  with sample packing): HF's overflowing windows of ``max_length - 1`` ids with a stride of
  ``min(256, (max_length - 1) // 2)``, each followed by EOS, and ``overflow_to_sample_mapping``.
- ``axolotl.utils.data.streaming.encode_streaming`` (``pretraining_dataset`` without sample
  packing): each text truncated to ``max_tokens - 2`` ids, then EOS + PAD, concatenated greedily
  into rows of exactly ``max_tokens`` (or left as they are with ``concatenate`` false).

Here one :meth:`fastaxo.Tokenizer.encode_batch` call (C, GIL released, threads) tokenizes a
batch, and the rows are cut and assembled in NumPy. The rows, keys, key order and values are
Axolotl's; inside ``Dataset.map`` (the batch is datasets' ``LazyBatch``) the text column is read
from Arrow and the rows go back as NumPy arrays of the types datasets' writer gives Axolotl's
lists (input_ids int32, attention_mask int8, labels int64), so no Python int is made per token.

fastaxo's encoder is used for a tokenizer only where its ids are HF's for the call Axolotl makes
(:func:`encoder_for`: fastaxo's encoder supports the tokenizer, the transformers fast
tokenizer's call path is not overridden, special tokens are not split, truncation from the
right, no token type ids, and the ids agree on a probe holding every added token). Anything
else (another tokenizer, a subclass of the strategy, a non-str text, a setting fastaxo does not
reproduce) goes to Axolotl's own function, counted, and the reason is said once in the log.
``FASTAXO_TOKENIZER=hf`` sends everything to Axolotl's code.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow
from fastaxo.integrations.axolotl.settings import count_rows, current

__all__ = ["Encoder", "encoder_for", "fallback", "make_completion_tokenize_prompt",
           "make_encode_streaming", "make_pretrain_tokenize_prompt"]

EVENT = "completion"
# A probe for the encoder check: what the added tokens are then appended to (inside words, at
# line starts), with the whitespace runs, digits, contractions and scripts the patterns split
_PROBE = ("  Héllo wörld,\tit's 2024!\n\n  数据 模型 🙂🚀 naïve x=1;  \r\n"
          "Don'T WE'LL 12345 ١٢٣ ﷺ \u00a0\u2003end   ")


@dataclass(frozen=True)
class Encoder:
    """fastaxo's encoder for one HF tokenizer as it is now: ``tok`` (a fastaxo.Tokenizer),
    ``prefix``, the ids the post-processor puts before a text (the BOS, or none), and
    ``windows``: None where the tokenizer's overflowing windows are the ones fastaxo cuts, else
    why not (transformers 5.16 returns only the first window of each text)."""

    tok: Any
    prefix: np.ndarray
    windows: str | None = None


# HF tokenizer -> (its state, Encoder or None, why not); beside the tokenizer so that a
# tokenizer changed in place (tokens added, add_bos_token) gets a new check
_encoders: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], Encoder | None, str | None]] = \
    weakref.WeakKeyDictionary()
_original: dict[str, Any] = {}
# the transformers methods between ``tokenizer(...)`` and the backend's encode_batch
_CALL_PATH = ("__call__", "_call_one", "encode_plus", "batch_encode_plus", "_encode_plus",
              "_batch_encode_plus", "_convert_encoding", "set_truncation_and_padding",
              "_get_padding_truncation_strategies", "_switch_to_input_mode")


def _state(tok: Any) -> tuple[Any, ...]:
    from fastaxo.tokenizer.select import choice

    backend = getattr(tok, "backend_tokenizer", None)
    try:
        size = len(tok)
    except Exception:  # noqa: BLE001 - not a transformers tokenizer: found by the check
        size = None
    return (choice(), type(tok), id(backend), size, getattr(tok, "split_special_tokens", None),
            getattr(tok, "truncation_side", None), tuple(getattr(tok, "model_input_names", ())),
            repr(getattr(backend, "post_processor", None)),
            repr(getattr(backend, "normalizer", None)))


def encoder_for(tokenizer: Any) -> tuple[Encoder | None, str | None]:
    """``(encoder, None)``: fastaxo's encoder for ``tokenizer`` (a transformers tokenizer)
    where its ids are provably those of ``tokenizer(texts, truncation=..., max_length=...)``,
    else ``(None, why)``. ``FASTAXO_TOKENIZER``: ``hf`` gives None, ``fastaxo`` raises where it
    would be None. Kept per tokenizer while its state (size, post-processor, flags) stays the
    same."""
    key = _state(tokenizer)
    try:
        hit = _encoders.get(tokenizer)
    except TypeError:
        hit = None
    if hit is not None and hit[0] == key:
        return hit[1], hit[2]
    enc, why = _make(tokenizer)
    try:
        _encoders[tokenizer] = (key, enc, why)
    except TypeError:
        pass
    return enc, why


def _call_problem(tok: Any) -> str | None:
    """Why ``tok(...)`` might not be the backend's encode as fastaxo reproduces it, or None."""
    try:
        from transformers import PreTrainedTokenizerFast as Fast
    except ImportError:  # pragma: no cover - Axolotl needs transformers
        return "transformers is not installed"
    if not isinstance(tok, Fast):
        return f"{type(tok).__name__} is not a transformers fast tokenizer"
    for name in _CALL_PATH:
        if getattr(type(tok), name, None) is not getattr(Fast, name, None):
            return f"{type(tok).__name__} overrides {name}"
    if tok.split_special_tokens:
        return "split_special_tokens is set (fastaxo's encoder never splits special tokens)"
    if tok.truncation_side != "right":
        return f"truncation_side {tok.truncation_side!r} (fastaxo reproduces 'right')"
    names = list(tok.model_input_names)
    if "token_type_ids" in names or "attention_mask" not in names:
        return f"model_input_names {names} (fastaxo makes input_ids and attention_mask)"
    return None


def _make(tok: Any) -> tuple[Encoder | None, str | None]:
    from fastaxo.errors import InvalidInputError
    from fastaxo.tokenizer.select import ENV, choice, fast_tokenizer

    mode = choice()

    def refuse(why: str) -> tuple[Encoder | None, str | None]:
        if mode == "fastaxo":
            raise InvalidInputError(f"{ENV}=fastaxo: {why}")
        return None, why

    if mode == "hf":
        return None, f"{ENV}=hf"
    problem = _call_problem(tok)
    if problem is not None:
        return refuse(problem)
    # the backend as it is, without the truncation and padding a previous call left on it
    # (every tok(...) call sets both for itself)
    from tokenizers import Tokenizer as HFTokenizer

    backend = HFTokenizer.from_str(tok.backend_tokenizer.to_str())
    backend.no_truncation()
    backend.no_padding()
    fast, why = fast_tokenizer(backend)
    if fast is None:
        return None, why
    added = {t.content: i for i, t in backend.get_added_tokens_decoder().items()}
    prefix = fast.encode("", add_special_tokens=True)
    probe = _PROBE + "".join(f"a{t}b {t}\n" for t in sorted(added))
    for text in (probe, ""):
        want = tok(text)["input_ids"]
        got = prefix.tolist() + fast.encode(text, add_special_tokens=False).tolist()
        if got != want:
            return refuse("fastaxo's ids differ from HF's on a probe text")
    return Encoder(fast, prefix, _windows_problem(tok, fast, prefix)), None


def _windows(ntok: np.ndarray, width: int, stride: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HF's overflowing windows (tokenizers' Encoding::truncate, from the right) of texts of
    ``ntok`` ids: ``width`` ids, a new one every ``width - stride`` ids, until one ends at the
    end of its text; per window its text, its first id within the text and its length."""
    step = width - stride
    count = 1 + np.where(ntok > width, -(-(ntok - width) // step), 0)
    which = np.repeat(np.arange(len(ntok)), count)
    j = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    return which, j * step, np.minimum(width, ntok[which] - j * step)


def _windows_problem(tok: Any, fast: Any, prefix: np.ndarray) -> str | None:
    """Why ``tok``'s overflowing windows (the call Axolotl's pretrain strategy makes) are not
    :func:`_windows` of fastaxo's ids, or None: checked on probe texts, since the windows are
    the transformers version's (5.16 returns each text's first window only)."""
    limit, stride = 8 + len(prefix), 3
    texts = [_PROBE, "", "a b"]
    try:
        want = tok(texts, truncation=True, max_length=limit, add_special_tokens=True,
                   return_overflowing_tokens=True, stride=stride)
        want = (list(want["input_ids"]), list(want["overflow_to_sample_mapping"]))
    except Exception as e:  # noqa: BLE001 - any failure: Axolotl's code decides
        return f"the tokenizer's overflowing windows fail on a probe ({type(e).__name__})"
    vals, offs = _encode(Encoder(fast, prefix), texts)
    which, start, length = _windows(np.diff(offs), limit - len(prefix), stride)
    got = [prefix.tolist() + vals[a:a + n].tolist()
           for a, n in zip((offs[:-1][which] + start).tolist(), length.tolist(), strict=True)]
    if (got, which.tolist()) != want:
        return "the tokenizer's overflowing windows are not HF's (all windows of each text)"
    return None


# ---------------------------------------------------------------------------------------------
# the batch: its texts, encoded

def _texts(batch: Any, column: str, none_is_empty: bool) -> Any:
    """The ``column`` of ``batch`` as a pyarrow string array (from a LazyBatch's Arrow table
    without making a str per row) or a list of str; None when a value is not a str (None is
    "" where ``none_is_empty``) or the column is missing: Axolotl's own code decides what such
    a batch means."""
    if column not in batch:
        return None
    if _is_map_batch(batch) and column in batch.keys_to_format:
        col = batch.pa_table.column(column)
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            return None
        if col.null_count:
            if not none_is_empty:
                return None
            col = col.fill_null("")
        return col
    values = batch[column]
    if not isinstance(values, (list, tuple)):
        return None
    out = []
    for v in values:
        if isinstance(v, str):
            out.append(v)
        elif v is None and none_is_empty:
            out.append("")
        else:
            return None
    return out


def _encode(enc: Encoder, texts: Any) -> tuple[np.ndarray, np.ndarray]:
    """Content ids (no BOS) of ``texts``: flat int32 values and int64 offsets from 0."""
    arr = enc.tok.encode_batch(texts, add_special_tokens=False, num_threads=current().threads)
    offs = arrow.offsets_of(arr, pa.types.is_large_list(arr.type)).astype(np.int64)
    vals = arrow.fixed_view(arr.values)[offs[0]:offs[-1]]
    return vals, offs - offs[0]


def _assemble(vals: np.ndarray, start: np.ndarray, length: np.ndarray, prefix: np.ndarray,
              tail: int, add_tail: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``prefix + vals[start:start + length] (+ [tail] where add_tail)`` as flat int64
    values and int64 lengths."""
    n, p = len(start), len(prefix)
    lens = p + length + (add_tail if add_tail is not None else 0)
    ends = np.cumsum(lens)
    out = np.empty(int(ends[-1]) if n else 0, np.int64)
    begins = ends - lens
    if p:
        out[(begins[:, None] + np.arange(p)).ravel()] = np.tile(prefix, n)
    total = int(length.sum())
    if total:
        within = np.arange(total) - np.repeat(np.cumsum(length) - length, length)
        out[np.repeat(begins + p, length) + within] = vals[np.repeat(start, length) + within]
    if add_tail is not None and add_tail.any():
        out[ends[add_tail.astype(bool)] - 1] = tail
    return out, lens.astype(np.int64)


def _rows(values: np.ndarray, lens: np.ndarray, dtype: Any, arrays: bool) -> list[Any]:
    """The rows as NumPy arrays of ``dtype`` (views of one array) or as lists of int."""
    bounds = np.cumsum(lens)[:-1]
    if arrays:
        return np.split(values.astype(dtype, copy=False), bounds)
    flat = values.tolist()
    starts = [0, *bounds.tolist()]
    return [flat[a:b] for a, b in zip(starts, [*bounds.tolist(), len(flat)], strict=True)]


def _is_map_batch(batch: Any) -> bool:
    """True for datasets' LazyBatch: ``Dataset.map`` writes what the function returns with its
    ArrowWriter, which types NumPy rows as it types lists of ints."""
    try:
        from datasets.formatting.formatting import LazyBatch
    except ImportError:  # pragma: no cover
        return False
    return isinstance(batch, LazyBatch)


def _plan(event: str, batch: Any, column: str, none_is_empty: bool, tokenizer: Any,
          problem: str | None) -> tuple[Encoder, Any] | None:
    """The encoder and the texts of a batch fastaxo tokenizes, or None after counting the
    batch's rows as Axolotl's, with the reason (said once): ``problem`` (the strategy's), the
    tokenizer's, or a text that is not a str."""
    why = problem
    enc = texts = None
    if why is None:
        enc, why = encoder_for(tokenizer)
    if why is None:
        texts = _texts(batch, column, none_is_empty)
        if texts is None:
            why = "no text column, or a text that is not a str"
    if why is not None or enc is None:
        fallback(event, _batch_len(batch), str(why))
        return None
    return enc, texts


def fallback(event: str, rows: int, why: str) -> None:
    """``rows`` of ``event`` go to Axolotl's own code because of ``why`` (counted, said once)."""
    count_rows(event, rows, 0, {why: rows})


def _batch_len(batch: Any) -> int:
    try:
        return len(next(iter(batch.values())))
    except Exception:  # noqa: BLE001 - no column: nothing to count
        return 0


# ---------------------------------------------------------------------------------------------
# type: completion

def make_completion_tokenize_prompt(original: Any) -> Any:
    """``CompletionPromptTokenizingStrategy.tokenize_prompt`` on fastaxo's encoder
    (``original``: Axolotl's). A module-level function: datasets hashes the mapped function for
    its fingerprints by name."""
    _original["completion"] = original
    completion_tokenize_prompt.__wrapped__ = original  # type: ignore[attr-defined]
    completion_tokenize_prompt.__doc__ = original.__doc__
    return completion_tokenize_prompt


def _completion_problem(strategy: Any) -> str | None:
    from axolotl.prompt_strategies.completion import (
        CompletionPrompter,
        CompletionPromptTokenizingStrategy,
    )

    if type(strategy) is not CompletionPromptTokenizingStrategy:
        return f"strategy {type(strategy).__name__} (fastaxo reproduces the completion strategy)"
    if type(strategy.prompter) is not CompletionPrompter:
        return f"prompter {type(strategy.prompter).__name__}"
    return _lengths_problem(strategy.tokenizer, strategy.max_length, strategy.sequence_len)


def _lengths_problem(tok: Any, max_length: Any, sequence_len: Any) -> str | None:
    for name, v in (("max_length", max_length), ("sequence_len", sequence_len)):
        if type(v) is not int or v < 1:
            return f"{name} {v!r}"
    if type(getattr(tok, "eos_token_id", None)) is not int:
        return "the tokenizer has no EOS id"
    return None


def completion_tokenize_prompt(self: Any, prompt: Any) -> Any:
    original = _original["completion"]
    if not current().completion:
        return original(self, prompt)
    plan = _plan(EVENT, prompt, getattr(self, "field", "text"), True,
                 getattr(self, "tokenizer", None), _completion_problem(self))
    if plan is None:
        return original(self, prompt)
    enc, texts = plan
    p = len(enc.prefix)
    if self.max_length <= p:
        fallback(EVENT, len(texts), "max_length leaves no room after the BOS")
        return original(self, prompt)
    if not len(texts):
        return original(self, prompt)
    vals, offs = _encode(enc, texts)
    n, ntok = len(texts), np.diff(offs)
    kept = ntok > 0  # Axolotl: an empty text gives no row
    if not kept.all():
        from axolotl.prompt_tokenizers import LOG as AXO_LOG

        AXO_LOG.warning_once("Empty text requested for tokenization.")
    start, length = offs[:-1][kept], np.minimum(ntok[kept], self.max_length - p)
    eos = self.tokenizer.eos_token_id
    last = vals[start + length - 1].astype(np.int64)
    add_eos = (last != eos) & (p + length < self.max_length)
    values, lens = _assemble(vals, start, length, enc.prefix, eos, add_eos)
    # pieces of sequence_len, in row order (the flat values stay as they are)
    s = self.sequence_len
    pieces = -(-lens // s)
    piece_lens = np.full(int(pieces.sum()), s, np.int64)
    piece_lens[np.cumsum(pieces) - 1] = lens - (pieces - 1) * s
    count_rows(EVENT, n, n, {})
    if not len(piece_lens):
        return {}
    arrays = _is_map_batch(prompt)
    return {"input_ids": _rows(values, piece_lens, np.int32, arrays),
            "attention_mask": _rows(np.ones(len(values), np.int8), piece_lens, np.int8, arrays),
            "labels": _rows(values, piece_lens, np.int64, arrays)}


# ---------------------------------------------------------------------------------------------
# type: pretrain (pretraining_dataset with sample packing)

def make_pretrain_tokenize_prompt(original: Any) -> Any:
    """``PretrainTokenizationStrategy.tokenize_prompt`` on fastaxo's encoder (``original``:
    Axolotl's)."""
    _original["pretrain"] = original
    pretrain_tokenize_prompt.__wrapped__ = original  # type: ignore[attr-defined]
    pretrain_tokenize_prompt.__doc__ = original.__doc__
    return pretrain_tokenize_prompt


def _pretrain_problem(strategy: Any) -> str | None:
    from axolotl.prompt_strategies.pretrain import PretrainTokenizationStrategy

    if type(strategy) is not PretrainTokenizationStrategy:
        return f"strategy {type(strategy).__name__} (fastaxo reproduces the pretrain strategy)"
    return _lengths_problem(strategy.tokenizer, strategy.max_length, 1)


def pretrain_tokenize_prompt(self: Any, prompt: Any) -> Any:
    original = _original["pretrain"]
    if not current().completion:
        return original(self, prompt)
    plan = _plan("pretrain", prompt, getattr(self, "text_column", "text"), False,
                 getattr(self, "tokenizer", None), _pretrain_problem(self))
    if plan is None:
        return original(self, prompt)
    enc, texts = plan
    # windows of ``width`` content ids (the BOS is added to each after)
    width = self.max_length - 1 - len(enc.prefix)
    stride = min(256, (self.max_length - 1) // 2)
    n = len(texts)
    why = enc.windows or (f"windows of {width} ids with a stride of {stride}"
                          if width <= stride else None)
    if why is not None or not n:  # (HF refuses a stride this wide, fails on an empty batch)
        if n:
            fallback("pretrain", n, why)  # type: ignore[arg-type]
        return original(self, prompt)
    vals, offs = _encode(enc, texts)
    which, start, length = _windows(np.diff(offs), width, stride)
    eos = self.tokenizer.eos_token_id
    values, lens = _assemble(vals, offs[:-1][which] + start, length, enc.prefix, eos,
                             np.ones(len(which), np.int8))
    count_rows("pretrain", n, n, {})
    from transformers import BatchEncoding

    arrays = _is_map_batch(prompt)
    return BatchEncoding({
        "input_ids": _rows(values, lens, np.int32, arrays),
        "attention_mask": _rows(np.ones(len(values), np.int8), lens, np.int8, arrays),
        "overflow_to_sample_mapping": which.tolist()})


# ---------------------------------------------------------------------------------------------
# pretraining_dataset without sample packing

def make_encode_streaming(original: Any) -> Any:
    """``axolotl.utils.data.streaming.encode_streaming`` on fastaxo's encoder (``original``:
    Axolotl's)."""

    def encode_streaming(examples: dict[str, list], tokenizer: Any, max_tokens: int,
                         text_column: str = "text", concatenate: bool = True) -> dict[str, list]:
        got = _encode_streaming(examples, tokenizer, max_tokens, text_column, concatenate)
        if got is None:
            return original(examples, tokenizer, max_tokens, text_column, concatenate)
        return got

    encode_streaming.__wrapped__ = original  # type: ignore[attr-defined]
    encode_streaming.__doc__ = original.__doc__
    return encode_streaming


def _encode_streaming(examples: Any, tokenizer: Any, max_tokens: Any, text_column: str,
                      concatenate: bool) -> dict[str, list] | None:
    if not current().completion:
        return None
    plan = _plan("pretrain", examples, text_column, False, tokenizer, None)
    if plan is None:
        return None
    enc, texts = plan
    n, p = len(texts), len(enc.prefix)
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    room = max_tokens - 2 - p if type(max_tokens) is int else 0
    why = None
    if room < 1:
        why = f"max_tokens {max_tokens!r}"
    elif concatenate and (type(eos) is not int or type(pad) is not int):
        why = "the tokenizer has no EOS or no PAD id"
    if why is not None or not n:  # (HF fails on an empty batch)
        if n:
            fallback("pretrain", n, str(why))
        return None
    vals, offs = _encode(enc, texts)
    ntok = np.diff(offs)
    if concatenate and p == 0 and not ntok.all():
        # Axolotl's torch.tensor([]) is float32: its row comes out as floats
        fallback("pretrain", n, "an empty text without a BOS (Axolotl's row is float)")
        return None
    values, lens = _assemble(vals, offs[:-1], np.minimum(ntok, room), enc.prefix, 0, None)
    count_rows("pretrain", n, n, {})
    if not concatenate:
        return {"input_ids": _rows(values, lens, np.int64, False),
                "labels": _rows(values, lens, np.int64, False),
                "attention_mask": _rows(np.ones(len(values), np.int64), lens, np.int64, False)}
    return _concatenate(values, lens, max_tokens, eos, pad)


def _concatenate(values: np.ndarray, lens: np.ndarray, width: int, eos: int, pad: int
                 ) -> dict[str, list]:
    """encode_streaming's packing: each sequence + [EOS, PAD] (labels + [EOS, -100], mask
    + [1, 0]) into the current row while it fits, else the row padded to ``width`` and a new
    one begun; the last row padded too."""
    seq = (lens + 2).tolist()
    row_of, col_of = [], []
    r = used = 0
    for k in seq:  # greedy and order-dependent: one pass over the sequences
        if used + k > width:
            r, used = r + 1, 0
        row_of.append(r)
        col_of.append(used)
        used += k
    nrows = r + 1 if seq else 0
    ids = np.full((nrows, width), pad, np.int64)
    labels = np.full((nrows, width), -100, np.int64)
    mask = np.zeros((nrows, width), np.int64)
    base = np.asarray(row_of, np.int64) * width + np.asarray(col_of, np.int64)
    total = int(lens.sum())
    within = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
    at = np.repeat(base, lens) + within
    ids.ravel()[at] = values
    labels.ravel()[at] = values
    ends = base + lens
    ids.ravel()[ends] = eos
    labels.ravel()[ends] = eos
    mask.ravel()[at] = 1
    mask.ravel()[ends] = 1
    return {"input_ids": ids.tolist(), "labels": labels.tolist(), "attention_mask": mask.tolist()}
