"""Plain Python/NumPy packing and padding: the test oracle, and the fallback when the compiled
extension is missing (correct, but slow: FFD/FF here scan every bin per sequence).

The tie rules are the contract of csrc/fx_pack.h: decreasing strategies sort by length
descending, ties by index ascending; BFD takes the open bin with the least remaining space
that fits, ties to the bin that most recently reached that space (LIFO); FFD/FF the earliest
bin that fits; NF only the newest bin. A bin is open while remaining >= 0 and it has fewer
than ``max_items`` items; an over-long item (only with ``allow_overlong``) opens a bin whose
remaining space is negative, so nothing joins it.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping
from typing import Any

import numpy as np


def assign(lengths: Any, capacity: int, max_items: int, strategy: str,
           allow_overlong: bool) -> tuple[list[int], list[int]]:
    """(order, bin_offsets) for one group, indices local to it."""
    L = [int(x) for x in lengths]
    for i, s in enumerate(L):
        if s < 0:
            raise ValueError(f"length {i} is negative")
        if s > capacity and not allow_overlong:
            raise ValueError(f"length {i} exceeds the capacity")
    n = len(L)
    seq = sorted(range(n), key=lambda i: (-L[i], i)) if strategy in ("bfd", "ffd") else range(n)
    items: list[list[int]] = []
    remaining: list[int] = []

    def is_open(b: int) -> bool:
        return remaining[b] >= 0 and len(items[b]) < max_items

    def new_bin(i: int) -> int:
        items.append([i])
        remaining.append(capacity - L[i])
        return len(items) - 1

    if strategy == "bfd":
        stacks: dict[int, list[int]] = {}
        keys: list[int] = []  # remaining values with a non-empty stack, sorted
        for i in seq:
            s = L[i]
            k = bisect_left(keys, s)
            if k < len(keys):
                v = keys[k]
                b = stacks[v].pop()
                if not stacks[v]:
                    del stacks[v]
                    keys.pop(k)
                items[b].append(i)
                remaining[b] -= s
            else:
                b = new_bin(i)
            if is_open(b):
                if remaining[b] not in stacks:
                    stacks[remaining[b]] = []
                    insort(keys, remaining[b])
                stacks[remaining[b]].append(b)
    elif strategy in ("ffd", "ff"):
        for i in seq:
            s = L[i]
            for b in range(len(items)):
                if is_open(b) and remaining[b] >= s:
                    items[b].append(i)
                    remaining[b] -= s
                    break
            else:
                new_bin(i)
    elif strategy == "nf":
        for i in seq:
            s = L[i]
            if items and is_open(len(items) - 1) and remaining[-1] >= s:
                items[-1].append(i)
                remaining[-1] -= s
            else:
                new_bin(i)
    else:
        raise ValueError(f"unknown strategy {strategy!r}")
    order = [i for members in items for i in members]
    offsets = [0]
    for members in items:
        offsets.append(offsets[-1] + len(members))
    return order, offsets


def assign_groups(item_len: np.ndarray, capacity: int, max_items: int, strategy: str,
                  allow_overlong: bool, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each group of items independently; global indices; bins concatenated in group order."""
    order: list[int] = []
    offsets = [0]
    for g in range(len(groups) - 1):
        s, e = int(groups[g]), int(groups[g + 1])
        o, off = assign(item_len[s:e], capacity, max_items, strategy, allow_overlong)
        order.extend(i + s for i in o)
        offsets.extend(x + s for x in off[1:])
    return np.array(order, np.int64), np.array(offsets, np.int64)


def _entry_tokens(col: Any, row: int, start: int, length: int) -> np.ndarray:
    return col.row(row)[start : start + length]


def materialise(
    ids: Any,
    lab: Any,
    extra: dict,
    bins: Any,
    *,
    width: int,
    layout: str,
    attention: str | None,
    position_ids: bool,
    pad_id: int,
    label_pad_id: int,
    pad_values: Mapping[str, Any],
    dt: np.dtype,
) -> dict:
    """The packed arrays of :func:`fastaxo.pack`, bin by bin in NumPy."""
    nb = len(bins)
    starts = bins.starts
    cols = {"input_ids": (ids, dt, pad_id)}
    if lab is not None:
        cols["labels"] = (lab, dt, label_pad_id)
    per_col: dict[str, list[np.ndarray]] = {k: [] for k in cols}
    extra_rows: dict[str, list[np.ndarray]] = {k: [] for k in extra}
    pos_rows, mask_rows, cu = [], [], [0]
    for b in range(nb):
        lo, hi = int(bins.offsets[b]), int(bins.offsets[b + 1])
        entries = [
            (int(bins.indices[e]), int(starts[e]), int(bins.lengths[e])) for e in range(lo, hi)
        ]
        used = sum(length for _, _, length in entries)
        tail = width - used if layout == "padded" else 0
        for name, (col, odt, pad) in cols.items():
            parts = [_entry_tokens(col, r, s, n).astype(odt) for r, s, n in entries]
            per_col[name].append(np.concatenate(parts + [np.full(tail, pad, odt)]))
        for name, col in extra.items():
            parts = [_entry_tokens(col, r, s, n) for r, s, n in entries]
            extra_rows[name].append(
                np.concatenate(parts + [np.full(tail, pad_values.get(name, 0), col.dtype)])
            )
        pos_rows.append(
            np.concatenate(
                [np.arange(n, dtype=dt) for _, _, n in entries] + [np.arange(tail, dtype=dt)]
            )
        )
        seg = [
            np.full(n, k + 1 if attention == "segments" else 1, dt)
            for k, (_, _, n) in enumerate(entries)
        ]
        mask_rows.append(np.concatenate(seg + [np.zeros(tail, dt)]))
        base = b * width if layout == "padded" else cu[-1]
        pos = 0
        for _, _, n in entries:
            pos += n
            cu.append(base + pos)
        if tail > 0:
            cu.append(base + width)

    def stack(rows: list[np.ndarray], odt: np.dtype) -> np.ndarray:
        if layout == "padded":
            return np.stack(rows).astype(odt, copy=False) if rows else np.zeros((0, width), odt)
        return np.concatenate(rows).astype(odt, copy=False) if rows else np.zeros(0, odt)

    out = {name: stack(per_col[name], odt) for name, (_, odt, _) in cols.items()}
    if position_ids:
        out["position_ids"] = stack(pos_rows, dt)
    if attention is not None:
        out["attention_mask"] = stack(mask_rows, dt)
    for name, col in extra.items():
        out[name] = stack(extra_rows[name], col.dtype)
    cu_arr = np.array(cu, np.int64)
    cu_dt = np.int32 if cu_arr[-1] <= np.iinfo(np.int32).max else np.int64
    out["cu_seqlens"] = cu_arr.astype(cu_dt)
    if layout == "flat":
        tokens = bins.token_counts()
        fb = np.zeros(nb + 1, np.int64)
        np.cumsum(tokens, out=fb[1:])
        out["bin_offsets"] = fb
    return out


def pad_rows(
    rows: list[np.ndarray],
    width: int,
    left: bool,
    pad: Any,
    pad_range: bool,
    dt: np.dtype,
    kind: str = "copy",
) -> np.ndarray:
    """Rows padded (or cut) to ``width``: keep the head when padding right, the tail when
    padding left. ``kind``: "copy" the tokens, "ones" (a mask), "iota" (0, 1, 2, ...). The pad
    is ``pad`` or, with ``pad_range``, 0, 1, 2, ..."""
    out = np.empty((len(rows), width), dt)
    for i, r in enumerate(rows):
        keep = min(len(r), width)
        part = r[len(r) - keep :] if left else r[:keep]
        if kind == "ones":
            part = np.ones(keep, dt)
        elif kind == "iota":
            part = np.arange(keep, dtype=dt)
        tail = np.arange(width - keep, dtype=dt) if pad_range else np.full(width - keep, pad, dt)
        out[i] = np.concatenate([tail, part.astype(dt)] if left else [part.astype(dt), tail])
    return out


def randperm_mt19937(seed: int, n: int, count: int) -> np.ndarray:
    """Reference for ``_pack.randperm_mt19937``: torch's CPU randperm (forward Fisher-Yates,
    z = next32() % (n - i)) on MT19937 seeded by init_genrand(seed & 0xffffffff), which is
    NumPy's legacy ``RandomState(int)`` seeding; ``count // n`` whole permutations from one
    stream, then the first ``count % n`` entries of one more."""
    rs = np.random.RandomState(seed & 0xFFFFFFFF)
    out: list[np.ndarray] = []
    left = count
    while left > 0:
        steps = n - 1 if left >= n else left
        raw = rs.randint(0, 2**32, size=steps, dtype=np.uint32).astype(np.int64)
        z = raw % (n - np.arange(steps, dtype=np.int64))
        p = list(range(n))
        for i in range(steps):
            j = i + int(z[i])
            p[i], p[j] = p[j], p[i]
        out.append(np.array(p[: min(n, left)], dtype=np.int64))
        left -= n
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
