"""PackedCollator: packed rows to the inputs a transformers model needs to keep every packed
sequence to itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fastaxo._core.checks import choice, int_arg, positive_int
from fastaxo.errors import InvalidInputError, InvalidTypeError

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


def _row(feature: Any, key: str, i: int, n: int | None) -> np.ndarray | None:
    v = feature.get(key) if isinstance(feature, Mapping) else None
    if v is None:
        return None
    if hasattr(v, "detach"):  # a torch tensor
        v = v.detach().cpu().numpy()
    a = np.asarray(v)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iub"):
        raise InvalidInputError(
            f"features[{i}][{key!r}] must be a 1-D sequence of integers, got "
            f"{'shape ' + str(a.shape) if a.ndim != 1 else a.dtype}")
    if n is not None and len(a) != n and key != "seq_lengths":
        raise InvalidInputError(
            f"features[{i}][{key!r}] has {len(a):,} values; its input_ids have {n:,}")
    return a.astype(np.int64, copy=False)


def _segments(ids: np.ndarray, pos: np.ndarray | None, mask: np.ndarray | None,
              seq_lengths: np.ndarray | None, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Per token: the segment number (0, 1, ... in order) and whether it is padding.

    A new segment starts where ``seq_lengths`` say, else wherever the attention mask's value
    changes (segment ids, or 1/0) or the position ids do not continue by one."""
    n = len(ids)
    start = np.zeros(n, bool)
    if n:
        start[0] = True
    pad = np.zeros(n, bool) if mask is None else mask == 0
    if seq_lengths is not None:
        if (seq_lengths < 0).any() or int(seq_lengths.sum()) > n:
            raise InvalidInputError(
                f"features[{i}]['seq_lengths'] add up to {int(seq_lengths.sum()):,}; the row has "
                f"{n:,} tokens")
        cuts = np.cumsum(seq_lengths)[:-1]
        start[cuts[cuts < n]] = True
        rest = int(seq_lengths.sum())
        if rest < n:  # tokens after the declared sequences: a pad tail
            start[rest] = True
            pad[rest:] = True
    else:
        if mask is not None and n > 1:
            start[1:] |= mask[1:] != mask[:-1]
        if pos is not None and n > 1:
            start[1:] |= pos[1:] != pos[:-1] + 1
    return np.cumsum(start) - 1, pad


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
    token of every sequence, as ``DataCollatorWithFlattening`` does: the shifted loss never
    predicts one sequence's first token from the one before it.

    Sequence boundaries are read from ``seq_lengths`` (TRL) when a row has them, else from the
    ``attention_mask`` (fastaxo's segment ids, or 1/0 with 0 for padding) and
    ``position_ids`` (a new sequence wherever they do not continue by one).

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
    mask_dtype : torch dtype, optional
        The eager mask's float dtype (default: the model's dtype, else float32).
    """

    def __init__(self, model: Any = None, *, attn_implementation: str | None = None,
                 pad_token_id: int | None = None, label_pad_token_id: int = -100,
                 separator_id: int | None = -100, pad_to_multiple_of: int | None = None,
                 return_tensors: str = "pt", mask_dtype: Any = None):
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
        if mask_dtype is None and model is not None:
            mask_dtype = getattr(model, "dtype", None)
        self.mask_dtype = mask_dtype

    def __repr__(self) -> str:
        return (f"PackedCollator(attn_implementation={self.attn_implementation!r}, "
                f"layout={self.layout!r})")

    def __call__(self, features: Any, return_tensors: str | None = None) -> dict[str, Any]:
        rows = _feature_rows(features)
        tensors = choice(return_tensors or self.return_tensors, "return_tensors", ("pt", "np"))
        parsed = []
        for i, f in enumerate(rows):
            ids = _row(f, "input_ids", i, None)
            if ids is None:
                raise InvalidInputError(f"features[{i}] has no 'input_ids'")
            n = len(ids)
            labels = _row(f, "labels", i, n)
            seg, pad = _segments(ids, _row(f, "position_ids", i, n),
                                 _row(f, "attention_mask", i, n), _row(f, "seq_lengths", i, n),
                                 i)
            lab = ids.copy() if labels is None else labels.copy()
            lab[pad] = self.label_pad_token_id
            if self.separator_id is not None and n:
                first = np.ones(n, bool)
                first[1:] = seg[1:] != seg[:-1]
                lab[first & ~pad] = self.separator_id
            parsed.append((ids, lab, seg, pad))
        out = self._varlen(parsed) if self.layout == "varlen" else self._mask(parsed)
        return _to_tensors(out, tensors, self.layout, self._float_dtype())

    def _float_dtype(self) -> Any:
        return None if self.attn_implementation.rsplit("|", 1)[-1] == "sdpa" else (
            self.mask_dtype or "float32")

    def _round(self, n: int) -> int:
        m = self.pad_to_multiple_of
        return n if m is None else -(-n // m) * m

    def _varlen(self, parsed: list) -> dict[str, Any]:
        ids, lab, lens = [], [], []
        for row_ids, row_lab, seg, pad in parsed:
            keep = ~pad
            ids.append(row_ids[keep])
            lab.append(row_lab[keep])
            s = seg[keep]
            if len(s):
                lens.append(_run_lengths(s))
        seq_lens = np.concatenate(lens) if lens else np.zeros(0, np.int64)
        total = int(seq_lens.sum())
        width = self._round(total)
        if width > total:
            ids.append(np.full(width - total, self.pad_token_id, np.int64))
            lab.append(np.full(width - total, self.label_pad_token_id, np.int64))
            seq_lens = np.append(seq_lens, width - total)
        cu = np.zeros(len(seq_lens) + 1, np.int64)
        np.cumsum(seq_lens, out=cu[1:])
        pos = np.arange(width, dtype=np.int64) - np.repeat(cu[:-1], seq_lens)
        longest = int(seq_lens.max()) if len(seq_lens) else 0
        return {"input_ids": _cat(ids)[None], "labels": _cat(lab)[None], "position_ids": pos[None],
                "cu_seq_lens_q": cu.astype(np.int32), "cu_seq_lens_k": cu.astype(np.int32),
                "max_length_q": longest, "max_length_k": longest}

    def _mask(self, parsed: list) -> dict[str, Any]:
        width = self._round(max((len(p[0]) for p in parsed), default=0))
        b = len(parsed)
        ids = np.full((b, width), self.pad_token_id, np.int64)
        lab = np.full((b, width), self.label_pad_token_id, np.int64)
        seg = np.empty((b, width), np.int64)
        for r, (row_ids, row_lab, row_seg, _pad) in enumerate(parsed):
            n = len(row_ids)
            ids[r, :n] = row_ids
            lab[r, :n] = row_lab
            seg[r, :n] = row_seg
            seg[r, n:] = (int(row_seg[-1]) + 1) if n else 0  # the added tail: one segment
        starts = np.ones((b, width), bool)
        starts[:, 1:] = seg[:, 1:] != seg[:, :-1]
        idx = np.arange(width, dtype=np.int64)
        first = np.maximum.accumulate(np.where(starts, idx, 0), axis=1)
        same = seg[:, :, None] == seg[:, None, :]
        allowed = same & (idx[None, :] <= idx[:, None])[None]
        return {"input_ids": ids, "labels": lab, "position_ids": idx[None] - first,
                "attention_mask": allowed[:, None]}


def _run_lengths(s: np.ndarray) -> np.ndarray:
    change = np.flatnonzero(s[1:] != s[:-1]) + 1
    bounds = np.concatenate(([0], change, [len(s)]))
    return np.diff(bounds).astype(np.int64)


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


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
        cols = {k: v for k, v in features.items()
                if k in ("input_ids", "labels", "position_ids", "attention_mask", "seq_lengths")}
        n = len(cols["input_ids"])
        return [{k: v[r] for k, v in cols.items()} for r in range(n)]
    if isinstance(features, (str, bytes)) or not isinstance(features, Sequence):
        raise InvalidTypeError(
            "features must be a list of rows (mappings with 'input_ids') or a mapping of "
            f"columns, got {type(features).__name__}")
    if not len(features):
        raise InvalidInputError("features is empty: a batch needs at least one row")
    return features


def _to_tensors(out: dict[str, Any], tensors: str, layout: str, float_dtype: Any) -> dict:
    if tensors == "np":
        if layout == "mask" and float_dtype is not None:
            keep = out["attention_mask"]
            m = np.zeros(keep.shape, np.float32)
            m[~keep] = np.finfo(np.float32).min
            out["attention_mask"] = m
        return out
    import torch

    res: dict[str, Any] = {}
    for k, v in out.items():
        if isinstance(v, np.ndarray):
            res[k] = torch.from_numpy(np.ascontiguousarray(v))
        else:
            res[k] = v
    if layout == "mask" and float_dtype is not None:
        dt = getattr(torch, float_dtype) if isinstance(float_dtype, str) else float_dtype
        keep = res["attention_mask"]
        m = torch.zeros(keep.shape, dtype=dt)
        m.masked_fill_(~keep, torch.finfo(dt).min)
        res["attention_mask"] = m
    return res
