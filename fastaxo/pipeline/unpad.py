"""Padding in the input, dropped before packing: rows tokenized with ``padding="max_length"``
carry pad tokens that packing would otherwise pack as data. The input's ``attention_mask``
says where they are: zeros at the start of a row (left padding) or at its end (right
padding). A zero between ones is not padding but a hole, and refused naming the row. Without
a mask, ``pad_token_id`` names the padding: the run of it that ends a row (right padding),
where the labels, when the input has them, are -100 (a pad id that is also the EOS keeps a
trained EOS). Nothing is dropped silently: the report counts the tokens and the rows."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow
from fastaxo.errors import InvalidInputError, InvalidTypeError, NullValueError
from fastaxo.pipeline.columns import IGNORE_INDEX, list_lengths, row_where

__all__ = ["MASK", "Unpadded", "strip_pad_run", "strip_padding"]

MASK = "attention_mask"


class Unpadded(NamedTuple):
    """The token columns without their padding, the pad tokens dropped, and which rows had
    any (a bool per row; None: none had)."""

    work: dict[str, pa.Array]
    pad_tokens: int
    rows: np.ndarray | None

    @property
    def padded_rows(self) -> int:
        """The count of rows that lost padding."""
        return 0 if self.rows is None else int(np.count_nonzero(self.rows))

    def then(self, later: Unpadded) -> Unpadded:
        """This stripping followed by ``later`` (on this one's work): later's columns, the pad
        tokens of both, and a row counted once when both took padding from it."""
        if self.rows is None or later.rows is None:
            rows = later.rows if self.rows is None else self.rows
        else:
            rows = self.rows | later.rows
        return Unpadded(later.work, self.pad_tokens + later.pad_tokens, rows)


def _mask_values(mask: pa.Array, path: str, row0: int) -> tuple[np.ndarray, np.ndarray]:
    """(offsets from 0, values) of an attention_mask column: a list of integers or booleans
    without nulls (errors name the row)."""
    t = mask.type
    if (not (pa.types.is_list(t) or pa.types.is_large_list(t))
            or not (pa.types.is_integer(t.value_type) or pa.types.is_boolean(t.value_type))):
        raise InvalidTypeError(f"{path}: column {MASK!r} must be a list of 0/1 integers or "
                               f"booleans, got {t}")
    if mask.null_count:
        i = int(np.flatnonzero(~np.asarray(mask.is_valid()))[0])
        raise NullValueError(f"{row_where(path, row0 + i)}: {MASK} is null")
    offs = arrow.offsets_of(mask, pa.types.is_large_list(t)).astype(np.int64)
    flat = mask.values.slice(int(offs[0]), int(offs[-1] - offs[0]))
    if flat.null_count:
        k = int(np.flatnonzero(~np.asarray(flat.is_valid()))[0])
        i = int(np.searchsorted(offs - offs[0], k, side="right")) - 1
        raise NullValueError(f"{row_where(path, row0 + i)}: {MASK} holds a null")
    if pa.types.is_boolean(t.value_type):
        flat = flat.cast(pa.int8())
    return offs - offs[0], arrow.fixed_view(flat)


def strip_padding(work: dict[str, pa.Array], mask: pa.Array, path: str, row0: int) -> Unpadded:
    """``work``'s token columns (list<int32>, row for row with ``mask``) without the positions
    ``mask`` marks as padding: 0 at the start or the end of a row. A row whose mask differs in
    length from its input_ids, or has a 0 between nonzero values, is an error naming it (a
    row of zeros only is all padding: it becomes empty)."""
    offs, mv = _mask_values(mask, path, row0)
    lens = list_lengths(work["input_ids"])
    bad = np.flatnonzero(np.diff(offs) != lens)
    if len(bad):
        i = int(bad[0])
        raise InvalidInputError(
            f"{row_where(path, row0 + i)}: {MASK} has {int(offs[i + 1] - offs[i])} values and "
            f"input_ids {int(lens[i])}; they must be aligned")
    keep = mv != 0
    if keep.all():
        return Unpadded(work, 0, None)
    ck = np.zeros(len(keep) + 1, np.int64)
    np.cumsum(keep, out=ck[1:])
    kept = ck[offs[1:]] - ck[offs[:-1]]
    at = np.flatnonzero(keep)
    rows = np.flatnonzero(kept)
    first, last = at[ck[offs[:-1]][rows]], at[ck[offs[1:]][rows] - 1]
    holes = np.flatnonzero(last - first + 1 != kept[rows])
    if len(holes):
        i = int(rows[holes[0]])
        hole = int(np.flatnonzero(~keep[first[holes[0]]:last[holes[0]]])[0]
                   + first[holes[0]] - offs[i])
        raise InvalidInputError(
            f"{row_where(path, row0 + i)}: {MASK} is 0 at position {hole} between positions "
            "it marks as tokens; padding is a run of 0s at the start or the end of a row, and "
            "a mask with holes is not padding (drop the column to pack every token)")
    new_offs = np.zeros(len(kept) + 1, np.int64)
    np.cumsum(kept, out=new_offs[1:])
    out = {name: _strip(col, keep, new_offs) for name, col in work.items()}
    return Unpadded(out, int(len(keep) - at.size), kept != lens)


def _strip(col: Any, keep: np.ndarray, new_offs: np.ndarray) -> pa.Array:
    """The list<int32> column ``col`` with the values where ``keep`` is False taken out
    (``keep`` spans its values from its first row's start; ``new_offs`` from 0)."""
    large = pa.types.is_large_list(col.type)
    offs = arrow.offsets_of(col, large)
    values = arrow.fixed_view(col.values.slice(int(offs[0]), int(offs[-1] - offs[0])))
    kept = arrow.from_numpy(values[keep])
    if large:
        return pa.LargeListArray.from_arrays(arrow.from_numpy(new_offs), kept)
    return pa.ListArray.from_arrays(arrow.from_numpy(new_offs.astype(np.int32)), kept)


def strip_pad_run(work: dict[str, pa.Array], pad_id: int) -> Unpadded:
    """``work``'s token columns (list<int32>) without the run of ``pad_id`` that ends each
    row's input_ids: the longest suffix of ``pad_id`` whose labels (when ``work`` has them)
    are all -100. A row of padding only becomes empty."""
    ids = work["input_ids"]
    large = pa.types.is_large_list(ids.type)
    offs = arrow.offsets_of(ids, large).astype(np.int64)
    offs = offs - offs[0]
    (v,) = arrow.spanned_values(ids) or [np.zeros(0, np.int32)]
    pad = v == pad_id
    if "labels" in work:
        (lab,) = arrow.spanned_values(work["labels"]) or [np.zeros(0, np.int32)]
        pad &= lab == IGNORE_INDEX
    if not pad.any():
        return Unpadded(work, 0, None)
    lens = np.diff(offs)
    # the last position that is not padding at or before each position (-1: none)
    last_real = np.maximum.accumulate(np.where(pad, -1, np.arange(len(v))))
    ends = offs[1:] - 1
    nonempty = lens > 0
    tail = np.zeros(len(lens), np.int64)
    lr = np.maximum(last_real[ends[nonempty]], offs[:-1][nonempty] - 1)
    tail[nonempty] = ends[nonempty] - lr
    if not tail.any():
        return Unpadded(work, 0, None)
    kept = lens - tail
    keep = (np.arange(len(v)) - np.repeat(offs[:-1], lens)) < np.repeat(kept, lens)
    new_offs = np.zeros(len(kept) + 1, np.int64)
    np.cumsum(kept, out=new_offs[1:])
    out = {name: _strip(col, keep, new_offs) for name, col in work.items()}
    return Unpadded(out, int(tail.sum()), tail > 0)
