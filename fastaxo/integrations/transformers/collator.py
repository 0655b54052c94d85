"""PackedCollator: packed rows to the inputs a transformers model needs to keep every packed
sequence to itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fastaxo._core.checks import choice, int_arg, positive_int
from fastaxo._core.outputs import check_output_bytes
from fastaxo._core.proc import mem_available_bytes
from fastaxo._core.ragged import lists_to_values
from fastaxo.errors import CapacityError, InvalidInputError, InvalidTypeError

__all__ = ["MASK_IMPLEMENTATIONS", "PackedCollator", "layout_for"]

#: Implementations that take an explicit 4-D mask: eager adds it (a float mask), sdpa hands it
#: to torch (a boolean one).
MASK_IMPLEMENTATIONS = ("eager", "sdpa")


def layout_for(attn_implementation: str) -> str:
    """``"varlen"`` (flash attention: sequences flattened, boundaries in ``cu_seq_lens``) or
    ``"mask"`` (eager / sdpa: a block-diagonal causal 4-D mask) for an implementation name."""
    if not isinstance(attn_implementation, str):
        raise InvalidTypeError("attn_implementation must be a str such as 'sdpa', 'eager' or "
                               f"'flash_attention_2', got {type(attn_implementation).__name__}")
    name = attn_implementation.rsplit("|", 1)[-1]  # "paged|flash_attention_2"
    if "flash" in name:
        return "varlen"
    if name in MASK_IMPLEMENTATIONS:
        return "mask"
    raise InvalidInputError(
        f"attn_implementation: {attn_implementation!r} is not one PackedCollator keeps packed "
        "sequences apart for; expected 'eager', 'sdpa' or a flash-attention implementation "
        "(flash_attention_2, flash_attention_3, kernels-community/flash-attn...). Load the model "
        "with attn_implementation='sdpa' to train on packed rows with it")


def _model_attn(model: Any) -> str:
    cfg = getattr(model, "config", None)
    impl = getattr(cfg, "_attn_implementation", None) or getattr(cfg, "attn_implementation", None)
    if not isinstance(impl, str):
        raise InvalidInputError(
            f"model: {type(model).__name__} has no config._attn_implementation; pass "
            "attn_implementation= to PackedCollator")
    return impl


_COLUMNS = ("input_ids", "labels", "position_ids", "attention_mask", "seq_lengths")
_I64_MIN, _I64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)
_I32_MAX = int(np.iinfo(np.int32).max)
#: The mask layout's default bound on its 4-D mask (``PackedCollator(max_mask_bytes=)``).
DEFAULT_MAX_MASK_BYTES = 1 << 30
_CHECK_AVAILABLE_FROM = 64 << 20


def _column(rows: Sequence[Any], key: str) -> tuple[np.ndarray, np.ndarray] | None:
    """``key`` of every row as one int64 array and its per-row lengths, or None when no row
    has it. Lists of Python ints go through one C pass; arrays and tensors are concatenated."""
    vals = [r.get(key) if isinstance(r, Mapping) else None for r in rows]
    missing = [i for i, v in enumerate(vals) if v is None]
    if len(missing) == len(vals):
        return None
    if missing:
        has = next(i for i, v in enumerate(vals) if v is not None)
        raise InvalidInputError(f"features[{missing[0]}] has no {key!r}; features[{has}] has it")
    if type(vals[0]) is list and all(type(v) is list for v in vals):
        try:
            got = lists_to_values(vals)
        except OverflowError:  # an int beyond int64: the row-by-row path below names it
            got = None
        if got is not None and len(got) == 2:
            return got[0], got[1]
    arrays = [_row_values(v, i, key) for i, v in enumerate(vals)]
    lengths = np.fromiter((len(a) for a in arrays), np.int64, len(arrays))
    return np.concatenate(arrays) if arrays else np.zeros(0, np.int64), lengths


def _row_values(v: Any, i: int, key: str) -> np.ndarray:
    """One row's ``key`` as int64, or a one-line error naming the row, the value and why: an
    integer must fit int64 (NumPy's cast would wrap a uint64 id past 2**63 to a negative, and
    it reads ``[1, 2**63]`` as floats)."""
    where = f"features[{i}][{key!r}]"
    if isinstance(v, (list, tuple)):
        _check_items(v, where, type(v).__name__)
        return np.array(v, dtype=np.int64) if len(v) else np.zeros(0, np.int64)
    expected = f"{where} must be a 1-D sequence of integers"
    if hasattr(v, "detach"):  # a torch tensor; .numpy() refuses bfloat16: check the dtype first
        t = v.detach()
        if t.is_floating_point() or t.is_complex():
            if t.ndim == 1 and not t.numel():  # torch.tensor([]) is float32: no value is wrong
                return np.zeros(0, np.int64)
            raise InvalidInputError(f"{expected}, got a {t.dtype} tensor")
        v = t.cpu().numpy()
    try:
        a = np.asarray(v)
    except (ValueError, TypeError):  # nested rows of unequal lengths
        raise InvalidInputError(f"{expected}, got a ragged nested {type(v).__name__}") from None
    if a.ndim != 1:
        raise InvalidInputError(f"{expected}, got shape {a.shape}")
    kind = a.dtype.kind
    if not a.size or kind in "ib" or (kind == "u" and (a.dtype.itemsize < 8
                                                       or int(a.max()) <= _I64_MAX)):
        return a.astype(np.int64, copy=False)
    _check_items(a.tolist(), where, str(a.dtype))
    return a.astype(np.int64)  # an object array of Python ints, each in range


def _check_items(items: Sequence[Any], where: str, what: str) -> None:
    """Raise for the first item that is not an integer fitting int64."""
    for j, x in enumerate(items):
        if not isinstance(x, (int, np.integer)):
            raise InvalidInputError(f"{where} must be a 1-D sequence of integers, got {what} "
                                    f"({type(x).__name__} {x!r:.30} at position {j})")
        if not _I64_MIN <= int(x) <= _I64_MAX:
            raise InvalidInputError(f"{where} holds {int(x)} at position {j}; expected integers "
                                    f"that fit int64 (-2**63 to 2**63-1), the collator's dtype")


def _batch(rows: Sequence[Any]) -> dict[str, Any]:
    """The batch as flat columns: values, ``row_lengths`` and ``row_starts`` (of input_ids);
    every per-token column checked to have the lengths of input_ids, row by row."""
    cols = {k: _column(rows, k) for k in _COLUMNS}
    if cols["input_ids"] is None:
        raise InvalidInputError("features[0] has no 'input_ids'")
    ids, lengths = cols["input_ids"]
    out: dict[str, Any] = {"input_ids": ids, "row_lengths": lengths}
    for k in _COLUMNS[1:]:
        got = cols[k]
        if got is None:
            out[k] = None
            continue
        vals, lens = got
        if k != "seq_lengths" and not np.array_equal(lens, lengths):
            i = int(np.flatnonzero(lens != lengths)[0])
            raise InvalidInputError(f"features[{i}][{k!r}] has {int(lens[i]):,} values; its "
                                    f"input_ids have {int(lengths[i]):,}")
        out[k] = vals if k != "seq_lengths" else (vals, lens)
    starts = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=starts[1:])
    out["row_starts"] = starts
    return out


def _segments(b: dict[str, Any]) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Per token of the flat batch: where a sequence starts, whether it is padding (None: no
    token is), and whether it is the first token of its sequence that is not padding.

    A row starts a sequence. Inside a row a new one starts where its ``seq_lengths`` say, else
    wherever the attention mask's value changes (segment ids, or 1/0) or the position ids do
    not continue by one."""
    n = len(b["input_ids"])
    lengths, starts = b["row_lengths"], b["row_starts"]
    start = np.zeros(n, bool)
    start[starts[:-1][lengths > 0]] = True
    mask = b["attention_mask"]
    pad = np.zeros(n, bool) if mask is None else mask == 0
    if b["seq_lengths"] is not None:
        vals, counts = b["seq_lengths"]
        at = 0
        for r, c in enumerate(counts.tolist()):
            sl = vals[at:at + c]
            at += c
            base, n_r = int(starts[r]), int(lengths[r])
            ends = np.cumsum(sl)
            total = _check_seq_lengths(sl, ends, r, n_r, pad[base:base + n_r])
            start[base + ends[ends < total]] = True  # zero lengths repeat a cut
            if total < n_r:  # the padding after the declared sequences: one more
                start[base + total] = True
        any_pad = mask is not None and bool(pad.any())
        # attention_mask 0 inside a declared sequence: its first kept token may come later
        first = _first_kept(start, pad) if any_pad else start
    else:
        inner = np.ones(n, bool)
        inner[starts[:-1][lengths > 0]] = False  # compare only within a row
        if mask is not None and n > 1:
            start[1:] |= (mask[1:] != mask[:-1]) & inner[1:]
        pos = b["position_ids"]
        if pos is not None and n > 1:
            step = pos[1:] != pos[:-1] + 1
            if pos.max() == _I64_MAX:  # 2**63-1 + 1 wraps to -2**63: that is no continuation
                step |= pos[:-1] == _I64_MAX
            start[1:] |= step & inner[1:]
        any_pad = mask is not None and bool(pad.any())
        # the mask's value is constant within a sequence: a sequence is padding or none of it
        first = start & ~pad if any_pad else start
    return start, pad if any_pad else None, first


def _check_seq_lengths(sl: np.ndarray, ends: np.ndarray, r: int, n_r: int,
                       row_pad: np.ndarray) -> int:
    """The sum of row ``r``'s ``seq_lengths`` (``ends``: their int64 running sums), checked:
    each >= 0, the sum exactly the row's length (or less where the rest is padding by its
    attention_mask); a sum that wrapped int64 shows as a negative running sum."""
    where = f"features[{r}]['seq_lengths']"
    if not len(sl):
        total = 0
    else:
        if sl.min() < 0:
            j = int(np.argmax(sl < 0))
            raise InvalidInputError(f"{where}[{j}] is {int(sl[j])}; sequence lengths must be "
                                    ">= 0")
        total = int(ends[-1])
        if total > n_r or ends.min() < 0:
            raise InvalidInputError(f"{where} add up to {sum(sl.tolist()):,}; the row has "
                                    f"{n_r:,} tokens")
    if total < n_r and not row_pad[total:].all():
        raise InvalidInputError(
            f"{where} add up to {total:,}; the row has {n_r:,} tokens: they must add up to the "
            "row's length (tokens after them are taken as padding only where the row's "
            "attention_mask is 0)")
    return total


def _first_kept(start: np.ndarray, pad: np.ndarray) -> np.ndarray:
    """Per token: whether it is the first token of its sequence that is not padding (the
    start of that sequence in the varlen layout, where padding is dropped)."""
    kept = np.flatnonzero(~pad)
    seq = np.cumsum(start)[kept]  # sequence numbers: every row starts one
    new = np.ones(len(kept), bool)
    new[1:] = seq[1:] != seq[:-1]
    first = np.zeros(len(start), bool)
    first[kept[new]] = True
    return first


class PackedCollator:
    """Packed rows (from :func:`fastaxo.pack`, :func:`fastaxo.iter_pack`, ``fastaxo prepare``'s
    Parquet read with datasets or pyarrow, or TRL's ``pack_dataset``) to the inputs a
    transformers model needs to keep each packed sequence to itself.

    - eager and sdpa (``layout "mask"``): ``[batch, width]`` rows and a block-diagonal causal
      ``attention_mask`` of shape ``[batch, 1, width, width]`` (additive float for eager, in the
      model's dtype; boolean for sdpa);
    - flash attention (``layout "varlen"``): every sequence of the batch flattened into one
      ``[1, tokens]`` row with the keywords transformers' ``DataCollatorWithFlattening`` passes
      (``position_ids``, ``cu_seq_lens_q/k``, ``max_length_q/k``), padding dropped.

    ``position_ids`` restart at 0 for every sequence. ``labels`` come from the rows (or copy
    ``input_ids``), with ``label_pad_token_id`` on padding and ``separator_id`` on the first
    token of every sequence that is not padding, as ``DataCollatorWithFlattening`` does: the
    shifted loss never predicts one sequence's first token from the one before it (nor, in
    either layout, from padding).

    The mask layout's 4-D mask is ``rows x width x width`` cells (bytes for sdpa, the float's
    size for eager): a batch whose mask would take more than ``max_mask_bytes``, or more than
    the memory available, is refused before anything is allocated, with its size and the way
    out (flash attention's varlen layout needs no mask; or smaller batches, shorter rows).

    Sequence boundaries are read from ``seq_lengths`` (TRL) when a row has them (they must add
    up to the row's length; ``attention_mask`` 0 marks padding inside them), else from the
    ``attention_mask`` (fastaxo's segment ids, or 1/0 with 0 for padding) and
    ``position_ids`` (a new sequence wherever they do not continue by one). Every column's
    values must be integers that fit int64.

    Parameters
    ----------
    model : transformers.PreTrainedModel, optional
        Its ``config._attn_implementation`` picks the layout (and eager's mask dtype).
    attn_implementation : str, optional
        Instead of ``model``: ``"eager"``, ``"sdpa"`` or a flash-attention name.
    pad_token_id : int, optional
        Fill of ``input_ids`` padding (default: the model config's pad token, else 0).
    label_pad_token_id, separator_id : int
        ``labels`` on padding, and on the first token of each sequence (None keeps it).
    pad_to_multiple_of : int, optional
        Round the width (mask layout) or the flattened length (varlen: the tail is one more
        sequence of padding) up to a multiple of this.
    return_tensors : {"pt", "np"}
    mask_dtype : torch dtype or str, optional
        The eager mask's float dtype (float16, bfloat16, float32 or float64; default: the
        model's dtype if it is one of those, else float32). ``return_tensors="np"`` gives
        float32.
    max_mask_bytes : int, optional
        The largest 4-D mask the mask layout makes, in bytes (default 1 GiB: 16 x 8,192 for
        sdpa, 16 x 4,096 for eager in float32); None: no bound but the memory available.
    """

    def __init__(self, model: Any = None, *, attn_implementation: str | None = None,
                 pad_token_id: int | None = None, label_pad_token_id: int = -100,
                 separator_id: int | None = -100, pad_to_multiple_of: int | None = None,
                 return_tensors: str = "pt", mask_dtype: Any = None,
                 max_mask_bytes: int | None = DEFAULT_MAX_MASK_BYTES):
        if attn_implementation is None:
            if model is None:
                raise InvalidInputError(
                    "PackedCollator needs model= or attn_implementation= ('eager', 'sdpa', "
                    "'flash_attention_2', ...): the layout that keeps packed sequences apart "
                    "depends on the attention implementation")
            attn_implementation = _model_attn(model)
        self.attn_implementation = attn_implementation
        self.layout = layout_for(attn_implementation)
        if pad_token_id is None:
            pad_token_id = getattr(getattr(model, "config", None), "pad_token_id", None)
        self.pad_token_id = int_arg(0 if pad_token_id is None else pad_token_id, "pad_token_id")
        self.label_pad_token_id = int_arg(label_pad_token_id, "label_pad_token_id")
        self.separator_id = (None if separator_id is None
                             else int_arg(separator_id, "separator_id"))
        self.pad_to_multiple_of = positive_int(pad_to_multiple_of, "pad_to_multiple_of",
                                               allow_none=True)
        self.return_tensors = choice(return_tensors, "return_tensors", ("pt", "np"))
        self.max_mask_bytes = positive_int(max_mask_bytes, "max_mask_bytes", allow_none=True)
        name = _float_name(mask_dtype)
        if mask_dtype is not None and name is None:
            raise InvalidInputError(
                "mask_dtype must be a float dtype (torch.float32, torch.bfloat16, "
                f"torch.float16, torch.float64 or its name), got {mask_dtype!r:.40}")
        if mask_dtype is None and model is not None:
            # a model whose dtype is no float (quantized): eager adds a float32 mask, promoted
            mask_dtype = getattr(model, "dtype", None)
            name = _float_name(mask_dtype)
        self.mask_dtype = mask_dtype
        self._mask_float = (None if attn_implementation.rsplit("|", 1)[-1] == "sdpa"
                            else name or "float32")  # None: sdpa's boolean mask

    def __repr__(self) -> str:
        return (f"PackedCollator(attn_implementation={self.attn_implementation!r}, "
                f"layout={self.layout!r})")

    def __call__(self, features: Any, return_tensors: str | None = None) -> dict[str, Any]:
        rows = _feature_rows(features)
        tensors = choice(return_tensors or self.return_tensors, "return_tensors", ("pt", "np"))
        b = _batch(rows)
        start, pad, first = _segments(b)
        ids = b["input_ids"]
        lab = ids.copy() if b["labels"] is None else b["labels"].copy()
        if pad is not None:
            lab[pad] = self.label_pad_token_id
        if self.separator_id is not None:
            lab[first] = self.separator_id
        if self.layout == "varlen":
            out = self._varlen(ids, lab, first, pad)
        else:
            out = self._mask(b, ids, lab, start, tensors)
        return _to_tensors(out, tensors, self.layout, self._mask_float)

    def _round(self, n: int) -> int:
        m = self.pad_to_multiple_of
        return n if m is None else -(-n // m) * m

    def _varlen(self, ids: np.ndarray, lab: np.ndarray, first: np.ndarray,
                pad: np.ndarray | None) -> dict[str, Any]:
        # padding is dropped: a sequence starts at its first kept token (``first``), never at
        # a start flag on padding, which would leave its tokens to the sequence before
        if pad is None:
            ids_k, lab_k, start_k = ids, lab, first
        else:
            keep = ~pad
            ids_k, lab_k, start_k = ids[keep], lab[keep], first[keep]
        total = len(ids_k)
        width = self._round(total)
        if width > _I32_MAX:  # flash attention's cu_seq_lens are int32
            raise CapacityError(f"PackedCollator: this batch flattens to {width:,} tokens; the "
                                f"varlen layout's cu_seq_lens (int32) hold {_I32_MAX:,}: use "
                                "smaller batches")
        bounds = np.append(np.flatnonzero(start_k), total)
        if width > total:  # the rounding tail: one more sequence of padding
            ids_k = np.concatenate([ids_k, np.full(width - total, self.pad_token_id, np.int64)])
            lab_k = np.concatenate([lab_k, np.full(width - total, self.label_pad_token_id,
                                                   np.int64)])
            bounds = np.append(bounds, width)
        seq_lens = np.diff(bounds)
        pos = np.arange(width, dtype=np.int64) - np.repeat(bounds[:-1], seq_lens)
        cu = bounds.astype(np.int32)
        longest = int(seq_lens.max()) if len(seq_lens) else 0
        return {"input_ids": ids_k[None], "labels": lab_k[None], "position_ids": pos[None],
                "cu_seq_lens_q": cu, "cu_seq_lens_k": cu.copy(),
                "max_length_q": longest, "max_length_k": longest}

    def _mask(self, b: dict[str, Any], ids: np.ndarray, lab: np.ndarray, start: np.ndarray,
              tensors: str) -> dict[str, Any]:
        lengths, starts = b["row_lengths"], b["row_starts"]
        nrows = len(lengths)
        width = self._round(int(lengths.max()) if nrows else 0)
        self._check_mask_size(nrows, width, tensors)
        # every token's place in the [rows, width] output
        row_of = np.repeat(np.arange(nrows, dtype=np.int64), lengths)
        col = np.arange(len(ids), dtype=np.int64) - starts[row_of]
        dest = row_of * width + col
        out_ids = np.full(nrows * width, self.pad_token_id, np.int64)
        out_lab = np.full(nrows * width, self.label_pad_token_id, np.int64)
        out_ids[dest] = ids
        out_lab[dest] = lab
        # sequences as (row, first column, end column): each row's tail is one more, of padding
        seq_first = np.flatnonzero(start)
        seq_row = row_of[seq_first]
        seq_a = col[seq_first]
        seq_b = np.append(seq_a[1:], 0)
        last = np.ones(len(seq_row), bool)  # each row's last sequence ends at the row's end
        last[:-1] = seq_row[1:] != seq_row[:-1]
        seq_b[last] = lengths[seq_row[last]]
        tails = np.flatnonzero(lengths < width)
        seq_row = np.concatenate([seq_row, tails])
        seq_a = np.concatenate([seq_a, lengths[tails]])
        seq_b = np.concatenate([seq_b, np.full(len(tails), width, np.int64)])
        # positions restart at each sequence's first column
        pos = np.tile(np.arange(width, dtype=np.int64), nrows)
        first = np.zeros(nrows * width, np.int64)
        first[seq_row * width + seq_a] = seq_a
        np.maximum.accumulate(first.reshape(nrows, width), axis=1,
                              out=first.reshape(nrows, width))
        pos -= first
        # the block-diagonal causal mask: zeroed memory (the kernel maps it lazily) with each
        # sequence's lower triangle written, not rows x width x width comparisons
        mask = np.zeros((nrows, 1, width, width), bool)
        longest = int((seq_b - seq_a).max()) if len(seq_a) else 0
        tril = np.tri(longest, dtype=bool)
        for r, a, z in zip(seq_row.tolist(), seq_a.tolist(), seq_b.tolist()):
            mask[r, 0, a:z, a:z] = tril[:z - a, :z - a]
        return {"input_ids": out_ids.reshape(nrows, width),
                "labels": out_lab.reshape(nrows, width),
                "position_ids": pos.reshape(nrows, width), "attention_mask": mask}

    def _check_mask_size(self, nrows: int, width: int, tensors: str) -> None:
        """Refuse, before allocating it, a 4-D mask over ``max_mask_bytes`` or over the memory
        available (eager's float mask is made from a boolean one: both count)."""
        cells = nrows * width * width
        float_name = self._mask_float
        if float_name is None:
            itemsize, dtype = 1, "bool"
        elif tensors == "np":
            itemsize, dtype = 4, "float32"
        else:
            import torch

            itemsize, dtype = torch.finfo(getattr(torch, float_name)).bits // 8, float_name
        nbytes = cells * itemsize
        peak = nbytes + (cells if float_name is not None else 0)
        over = self.max_mask_bytes is not None and nbytes > self.max_mask_bytes
        # a /proc read costs ~60 us: below this size it would cost more than it can save
        avail = mem_available_bytes() if peak >= _CHECK_AVAILABLE_FROM and not over else None
        beyond = None
        if not over and (avail is None or peak <= avail):
            try:  # where /proc is missing: the machine's memory; and no size that could wrap
                check_output_bytes(peak, "")
                return
            except CapacityError as exc:
                beyond = str(exc).lstrip(": ")
        # refused: the message is made only now (formatting it costs more than the checks)
        exact = f" ({nbytes:,} bytes)" if nbytes >= 2**20 else ""
        impl = "sdpa" if float_name is None else "eager"
        what = (f"PackedCollator: this batch's {impl} attention mask ([{nrows}, 1, {width}, "
                f"{width}] {dtype}: {nrows:,} rows of {width:,} tokens) takes "
                f"{_size(nbytes)}{exact}")
        todo = ("use flash attention (attn_implementation='flash_attention_2': its varlen "
                "layout needs no mask), or smaller batches or shorter rows")
        if over:
            raise CapacityError(f"{what}, more than max_mask_bytes ({self.max_mask_bytes:,}); "
                                f"{todo}, or raise max_mask_bytes")
        also = f" ({_size(peak)} while it is made)" if peak != nbytes else ""
        if beyond is None:
            raise CapacityError(f"{what}{also}, more than the {_size(avail or 0)} of memory "
                                f"available; {todo}")
        raise CapacityError(f"{what}{also}: {beyond}; {todo}")


def _size(nbytes: int) -> str:
    if nbytes >= 2**30:
        return f"{nbytes / 2**30:,.1f} GiB"
    return f"{nbytes / 2**20:,.1f} MiB" if nbytes >= 2**20 else f"{nbytes:,} bytes"


_FLOAT_NAMES = ("float16", "bfloat16", "float32", "float64")


def _float_name(dtype: Any) -> str | None:
    """``"float32"`` for torch.float32, np.float32 or "float32" (and the other float widths);
    None for anything else."""
    if dtype is None:
        return None
    if isinstance(dtype, str):
        name = dtype
    elif type(dtype).__module__ == "torch":
        name = str(dtype).rsplit(".", 1)[-1]
    else:
        try:
            name = np.dtype(dtype).name
        except (TypeError, ValueError):
            return None
    return name if name in _FLOAT_NAMES else None


def _feature_rows(features: Any) -> Sequence[Any]:
    """A list of per-row mappings, from a list of rows or a mapping of 2-D arrays (a Packed,
    a datasets batch)."""
    if isinstance(features, Mapping):
        if "input_ids" not in features:
            raise InvalidInputError("features: a mapping of columns needs 'input_ids'")
        if "cu_seqlens" in features and "bin_offsets" in features:
            raise InvalidInputError(
                "features: a flat-layout Packed; use pack(..., layout='padded') or iterate "
                "packed.to_torch() for rows")
        cols = {k: v for k, v in features.items() if k in _COLUMNS and v is not None}
        n = _rows_in(cols["input_ids"], "input_ids")
        for k, v in cols.items():
            if _rows_in(v, k) != n:
                raise InvalidInputError(f"features[{k!r}] has {_rows_in(v, k):,} rows; "
                                        f"features['input_ids'] has {n:,}")
        features = [{k: v[r] for k, v in cols.items()} for r in range(n)]
    elif isinstance(features, (str, bytes)) or not isinstance(features, Sequence):
        raise InvalidTypeError(
            "features must be a list of rows (mappings with 'input_ids') or a mapping of "
            f"columns, got {type(features).__name__}")
    if not len(features):
        raise InvalidInputError("features is empty: a batch needs at least one row")
    return features


def _rows_in(column: Any, key: str) -> int:
    try:
        return len(column)
    except TypeError:  # a scalar, or a 0-d array
        raise InvalidInputError(f"features[{key!r}] must be a column (one row per item), got "
                                f"{type(column).__name__}") from None


def _to_tensors(out: dict[str, Any], tensors: str, layout: str, float_name: str | None) -> dict:
    if tensors == "np":
        if layout == "mask" and float_name is not None:
            out["attention_mask"] = np.where(out["attention_mask"], np.float32(0),
                                             np.finfo(np.float32).min)
        return out
    import torch

    res: dict[str, Any] = {}
    for k, v in out.items():
        if isinstance(v, np.ndarray):
            res[k] = torch.from_numpy(np.ascontiguousarray(v))
        else:
            res[k] = v
    if layout == "mask" and float_name is not None:
        # one float tensor from the boolean one (no inverted copy beside it)
        dt = getattr(torch, float_name)
        res["attention_mask"] = torch.where(res["attention_mask"], torch.zeros((), dtype=dt),
                                            torch.full((), torch.finfo(dt).min, dtype=dt))
    return res
