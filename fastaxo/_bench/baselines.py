"""The plain-Python, NumPy and torch baselines of packing and padding that the matrix's cells
and the bench/ scripts measure fastaxo against (one copy, so both measure the same code)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fastaxo._bench.spec import LABEL_PAD_ID, PAD_ID

__all__ = ["numpy_pad", "py_pack_build", "py_pad", "py_pad_lists", "torch_pad"]


def py_pack_build(
    ids: list[list[int]],
    labels: list[list[int]],
    bins: list[list[int]],
    capacity: int,
    pad_id: int = PAD_ID,
    label_pad_id: int = LABEL_PAD_ID,
) -> dict[str, np.ndarray]:
    """Plain Python: list concatenation per bin, then np.array (int64; cu_seqlens int32)."""
    out_ids, out_lab, out_pos, out_seg = [], [], [], []
    cu = [0]
    end = 0
    for b in bins:
        row: list[int] = []
        lab: list[int] = []
        pos: list[int] = []
        seg: list[int] = []
        for k, i in enumerate(b, 1):
            r = ids[i]
            n = len(r)
            row += r
            lab += labels[i]
            pos += range(n)
            seg += [k] * n
            end += n
            cu.append(end)
        t = capacity - len(row)
        if t > 0:
            row += [pad_id] * t
            lab += [label_pad_id] * t
            pos += range(t)
            seg += [0] * t
            end += t
            cu.append(end)
        out_ids.append(row)
        out_lab.append(lab)
        out_pos.append(pos)
        out_seg.append(seg)
    return {"input_ids": np.array(out_ids, dtype=np.int64).reshape(-1, capacity),
            "labels": np.array(out_lab, dtype=np.int64).reshape(-1, capacity),
            "position_ids": np.array(out_pos, dtype=np.int64).reshape(-1, capacity),
            "attention_mask": np.array(out_seg, dtype=np.int64).reshape(-1, capacity),
            "cu_seqlens": np.array(cu, dtype=np.int32)}


def py_pad(
    ids: list[list[int]],
    labels: list[list[int]],
    pad_to: int | None = None,
    pad_id: int = PAD_ID,
    label_pad_id: int = LABEL_PAD_ID,
) -> dict[str, np.ndarray]:
    """Plain Python right padding: list concatenation, then np.array (int64)."""
    width = pad_to if pad_to is not None else max(map(len, ids), default=0)
    out_ids = [r + [pad_id] * (width - len(r)) for r in ids]
    mask = [[1] * len(r) + [0] * (width - len(r)) for r in ids]
    out_lab = [r + [label_pad_id] * (width - len(r)) for r in labels]
    n = len(ids)
    return {"input_ids": np.array(out_ids, dtype=np.int64).reshape(n, width),
            "attention_mask": np.array(mask, dtype=np.int64).reshape(n, width),
            "labels": np.array(out_lab, dtype=np.int64).reshape(n, width)}


def py_pad_lists(
    ids: list[list[int]],
    labels: list[list[int]],
    pad_to: int | None = None,
    pad_id: int = PAD_ID,
    label_pad_id: int = LABEL_PAD_ID,
) -> dict[str, list[list[int]]]:
    """The same padding with list output (what fast-axolotl returns): no conversion to NumPy."""
    width = pad_to if pad_to is not None else max(map(len, ids), default=0)
    return {"input_ids": [r + [pad_id] * (width - len(r)) for r in ids],
            "attention_mask": [[1] * len(r) + [0] * (width - len(r)) for r in ids],
            "labels": [r + [label_pad_id] * (width - len(r)) for r in labels]}


def numpy_pad(
    ids: list[np.ndarray],
    labels: list[np.ndarray],
    pad_to: int | None = None,
    pad_id: int = PAD_ID,
    label_pad_id: int = LABEL_PAD_ID,
) -> dict[str, np.ndarray]:
    """NumPy per-row copies into preallocated int64 arrays; the mask from the lengths."""
    lens = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    width = pad_to if pad_to is not None else int(lens.max(initial=0))
    out_ids = np.full((len(ids), width), pad_id, dtype=np.int64)
    out_lab = np.full((len(ids), width), label_pad_id, dtype=np.int64)
    for i, (a, b) in enumerate(zip(ids, labels)):
        out_ids[i, : len(a)] = a
        out_lab[i, : len(b)] = b
    mask = (np.arange(width) < lens[:, None]).astype(np.int64)
    return {"input_ids": out_ids, "attention_mask": mask, "labels": out_lab}


def torch_pad(
    ids, labels, pad_id: int = PAD_ID, label_pad_id: int = LABEL_PAD_ID
) -> dict[str, Any]:
    """torch.nn.utils.rnn.pad_sequence (batch_first) over lists of tensors; the mask from the
    lengths."""
    import torch
    from torch.nn.utils.rnn import pad_sequence

    out_ids = pad_sequence(ids, batch_first=True, padding_value=pad_id)
    out_lab = pad_sequence(labels, batch_first=True, padding_value=label_pad_id)
    lens = torch.tensor([len(t) for t in ids])
    mask = (torch.arange(out_ids.shape[1]) < lens[:, None]).long()
    return {"input_ids": out_ids, "attention_mask": mask, "labels": out_lab}
