"""The plain-Python twin of :class:`fastaxo.integrations.transformers.PackedCollator`: row by
row, token by token, the same batch (tests compare the two exactly)."""

from __future__ import annotations

from typing import Any

__all__ = ["packed_collate"]


def _ints(values: Any) -> Any:
    """A column as Python ints (exact: NumPy and torch scalars would wrap at int64's end)."""
    return None if values is None else [int(x) for x in values]


def _row_segments(row: dict[str, Any]) -> tuple[list[int], list[bool]]:
    """Per token: its sequence number within the row, and whether it is padding."""
    ids = _ints(row["input_ids"])
    n = len(ids)
    mask = _ints(row.get("attention_mask"))
    pos = _ints(row.get("position_ids"))
    seg, pad = [0] * n, [False] * n
    lengths = _ints(row.get("seq_lengths"))
    if lengths is not None:
        at, k = 0, 0
        for length in lengths:
            for i in range(at, at + length):
                seg[i] = k
            if length:
                k += 1
            at += length
        for i in range(at, n):
            seg[i], pad[i] = k, True
        if mask is not None:
            pad = [p or m == 0 for p, m in zip(pad, mask)]
        return seg, pad
    k = 0
    for i in range(n):
        if i and ((mask is not None and mask[i] != mask[i - 1])
                  or (pos is not None and pos[i] != pos[i - 1] + 1)):
            k += 1
        seg[i] = k
        pad[i] = mask is not None and mask[i] == 0
    return seg, pad


def packed_collate(rows: list[dict[str, Any]], layout: str, *, pad_token_id: int = 0,
                   label_pad_token_id: int = -100, separator_id: int | None = -100,
                   pad_to_multiple_of: int | None = None) -> dict[str, Any]:
    """``layout`` "mask": lists ``input_ids``, ``labels``, ``position_ids`` ([rows][width]) and
    ``attention_mask`` ([rows][width][width] booleans: may token i see token j). "varlen":
    flat lists ``input_ids``, ``labels``, ``position_ids`` and ``cu_seq_lens``."""
    def rounded(n: int) -> int:
        m = pad_to_multiple_of
        return n if m is None else -(-n // m) * m

    parsed = []
    for row in rows:
        ids = _ints(row["input_ids"])
        seg, pad = _row_segments(row)
        lab = _ints(row["labels"]) if row.get("labels") is not None else list(ids)
        seen = None  # the sequence of the last token that is not padding
        for i in range(len(ids)):
            if pad[i]:
                lab[i] = label_pad_token_id
                continue
            if separator_id is not None and seg[i] != seen:  # its first token not padding
                lab[i] = separator_id
            seen = seg[i]
        parsed.append((ids, lab, seg, pad))
    if layout == "varlen":
        out_ids, out_lab, lens = [], [], []
        for ids, lab, seg, pad in parsed:
            prev = None  # a row starts a sequence; dropped padding does not end one
            for i in range(len(ids)):
                if pad[i]:
                    continue
                if seg[i] != prev:
                    lens.append(0)
                    prev = seg[i]
                lens[-1] += 1
                out_ids.append(ids[i])
                out_lab.append(lab[i])
        total = len(out_ids)
        width = rounded(total)
        if width > total:
            out_ids += [pad_token_id] * (width - total)
            out_lab += [label_pad_token_id] * (width - total)
            lens.append(width - total)
        cu, pos = [0], []
        for length in lens:
            cu.append(cu[-1] + length)
            pos += list(range(length))
        return {"input_ids": out_ids, "labels": out_lab, "position_ids": pos, "cu_seq_lens": cu}
    width = rounded(max((len(p[0]) for p in parsed), default=0))
    out: dict[str, list] = {"input_ids": [], "labels": [], "position_ids": [],
                            "attention_mask": []}
    for ids, lab, seg, _pad in parsed:
        n = len(ids)
        tail = width - n
        seg = seg + [(seg[-1] + 1 if n else 0)] * tail
        # positions restart where the segment changes
        pos, start = [], 0
        for i in range(width):
            if i and seg[i] != seg[i - 1]:
                start = i
            pos.append(i - start)
        out["input_ids"].append(ids + [pad_token_id] * tail)
        out["labels"].append(lab + [label_pad_token_id] * tail)
        out["position_ids"].append(pos)
        out["attention_mask"].append([[seg[i] == seg[j] and j <= i for j in range(width)]
                                      for i in range(width)])
    return out
