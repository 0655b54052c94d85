"""Padding of ragged rows to rectangular arrays: one micro-batch (:func:`pad`) or a whole
epoch of micro-batches in one call (:func:`pad_batches`), each to its own width.

The same input forms as :func:`fastaxo.pack`; every output token is written once by C code
with the GIL released (rows in parallel for big inputs). Truncation happens only with
``truncate=True`` (the head is kept when padding right, the tail when padding left) and is
counted; otherwise a row longer than ``max_length`` raises
:class:`~fastaxo.errors.SequenceTooLongError` naming the row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from fastaxo._core import backend
from fastaxo._core.checks import choice, int_arg, positive_int
from fastaxo._core.outputs import ArrayMap, check_fits, check_output_bytes, out_dtype
from fastaxo._core.ragged import (
    Rows,
    as_ragged,
    check_aligned,
    column_names,
    get_column,
    is_table_like,
)
from fastaxo._core.threads import resolve_num_threads
from fastaxo._reference import packing as reference
from fastaxo.errors import (
    InvalidInputError,
    InvalidTypeError,
    SequenceTooLongError,
)

__all__ = ["pad", "pad_batches", "Padded", "PaddedBatches"]


class Padded(ArrayMap):
    """Padded rows: a mapping of ``[rows, width]`` NumPy arrays (``input_ids``,
    ``attention_mask``, and ``labels`` / ``position_ids`` when given), plus ``width``,
    ``truncated`` (rows cut) and ``truncated_tokens``."""

    def __init__(
        self,
        arrays: dict[str, np.ndarray],
        width: int,
        truncated: int = 0,
        truncated_tokens: int = 0,
    ):
        self._arrays = arrays
        self.width = width
        self.truncated = truncated
        self.truncated_tokens = truncated_tokens

    def __repr__(self) -> str:
        return f"<fastaxo.Padded {self.shapes()}>"


class PaddedBatches(Sequence):
    """Micro-batches padded in one call: ``batches[b]`` is a :class:`Padded` of views into one
    buffer per column (``buffers``), batch ``b`` being ``[rows_b, widths[b]]``."""

    def __init__(
        self,
        buffers: dict[str, np.ndarray],
        batch_offsets: np.ndarray,
        widths: np.ndarray,
        bases: np.ndarray,
        truncated: int,
        truncated_tokens: int,
    ):
        self.buffers = buffers
        self.batch_offsets = batch_offsets
        self.widths = widths
        self.bases = bases
        self.truncated = truncated
        self.truncated_tokens = truncated_tokens
        # batches are cut with copies of their own (n_batches + 1 numbers each): the attributes
        # above are the caller's to read, and to change, without moving a batch
        self._cut = (batch_offsets.copy(), widths.copy(), bases.copy())

    def __len__(self) -> int:
        return len(self._cut[1])

    def __getitem__(self, b: Any) -> Any:
        if isinstance(b, slice):
            return [self[i] for i in range(*b.indices(len(self)))]
        b = int(b)
        if b < 0:
            b += len(self)
        if not 0 <= b < len(self):
            raise IndexError(f"batch {b} out of range for {len(self)} batches")
        bo, widths, bases = self._cut
        rows = int(bo[b + 1] - bo[b])
        w = int(widths[b])
        lo = int(bases[b])
        arrays = {k: v[lo : lo + rows * w].reshape(rows, w) for k, v in self.buffers.items()}
        return Padded(arrays, w)

    def __repr__(self) -> str:
        return f"<fastaxo.PaddedBatches: {len(self):,} batches, columns {list(self.buffers)}>"


_FAST_DTYPES: dict[Any, np.dtype] = {}
for _t in (np.int32, np.int64):
    _FAST_DTYPES[_t] = _FAST_DTYPES[np.dtype(_t)] = np.dtype(_t)
_FITS = {np.dtype(np.int32): (-(2**31), 2**31 - 1), np.dtype(np.int64): (-(2**63), 2**63 - 1)}


def _columns(
    data: Any, labels: Any, position_ids: Any
) -> tuple[Rows, Rows | None, Rows | Literal[True] | None]:
    if is_table_like(data):
        ids = get_column(data, "input_ids", "data")
        names = column_names(data)
        if labels is None and "labels" in names:
            labels = get_column(data, "labels", "data")
        if position_ids is None and "position_ids" in names:
            position_ids = get_column(data, "position_ids", "data")
    else:
        ids = as_ragged(data, "input_ids")
    lab = None
    if labels is not None and labels is not False:
        lab = as_ragged(labels, "labels")
        check_aligned(ids, lab)
    pos: Rows | Literal[True] | None = None
    if position_ids is True:
        pos = True
    elif position_ids is not None and position_ids is not False:
        pos = as_ragged(position_ids, "position_ids")
        check_aligned(ids, pos)
    return ids, lab, pos


def _batch_offsets(batch_offsets: Any, n: int) -> np.ndarray:
    try:
        bo = np.asarray(batch_offsets)
    except Exception:
        raise InvalidTypeError(
            f"batch_offsets: expected a 1-D integer array, got {type(batch_offsets).__name__}"
        ) from None
    if bo.ndim != 1 or bo.dtype.kind not in "iu" or len(bo) < 1:
        raise InvalidInputError(
            "batch_offsets: expected a 1-D integer array of n_batches + 1 boundaries, got shape "
            f"{bo.shape} "
            f"dtype {bo.dtype}"
        )
    bo = bo.astype(np.int64)
    if bo[0] != 0 or bo[-1] != n:
        raise InvalidInputError(
            f"batch_offsets must start at 0 and end at the number of rows ({n}); "
            f"got {int(bo[0])} ... {int(bo[-1])}"
        )
    # consecutive values compared, never subtracted (a difference can wrap)
    dec = np.flatnonzero(bo[1:] < bo[:-1])
    if len(dec):
        i = int(dec[0])
        raise InvalidInputError(
            f"batch_offsets must not decrease; batch {i} ends at {int(bo[i + 1])} before "
            f"it starts at {int(bo[i])}"
        )
    return bo


@dataclass(frozen=True)
class _PadOptions:
    """pad's and pad_batches' options, checked once (:func:`_pad_options`)."""

    max_length: int | None
    mult: int | None
    pad_id: int
    label_pad_id: int
    pos_pad: int | None
    left: bool
    truncate: bool
    attention_mask: bool
    dt: np.dtype
    nt: int


def _pad_options(*, max_length: Any, pad_to_multiple_of: Any, pad_id: Any, label_pad_id: Any,
                 position_pad_id: Any, side: str, truncate: bool, attention_mask: bool,
                 dtype: Any, num_threads: Any) -> _PadOptions:
    return _PadOptions(
        max_length=positive_int(max_length, "max_length", allow_none=True),
        mult=positive_int(pad_to_multiple_of, "pad_to_multiple_of", allow_none=True),
        left=choice(side, "side", ("right", "left")) == "left",
        dt=out_dtype(dtype),
        pad_id=int_arg(pad_id, "pad_id"),
        label_pad_id=int_arg(label_pad_id, "label_pad_id"),
        pos_pad=None if position_pad_id is None else int_arg(position_pad_id, "position_pad_id"),
        nt=resolve_num_threads(num_threads),
        truncate=bool(truncate), attention_mask=bool(attention_mask))


def _widths(lengths: np.ndarray, bo: np.ndarray, o: _PadOptions) -> np.ndarray:
    """Each batch's width: max_length, else its longest row; rounded up to the multiple. The
    output's size is checked first, in Python ints."""
    n, nbatch = len(lengths), len(bo) - 1
    if o.max_length is not None:
        widths = np.full(nbatch, o.max_length, np.int64)
    elif nbatch == 1:
        widths = np.array([int(lengths.max()) if n else 0], np.int64)
    else:
        widths = np.zeros(nbatch, np.int64)
        nonempty = bo[1:] > bo[:-1]
        if n:
            widths[nonempty] = np.maximum.reduceat(lengths, bo[:-1][nonempty])
    widest = int(widths.max()) if nbatch else 0
    if o.mult is not None:
        widest = -(-widest // o.mult) * o.mult  # Python ints: no wrap
    # every size below is computed in int64: check in Python ints first that none can wrap
    # (a huge max_length once made a small buffer that the kernel then overran)
    check_output_bytes(widest * max(n, 1) * o.dt.itemsize,
                       f"the padded output ({n:,} rows x {widest:,} wide x {o.dt.itemsize} "
                       "bytes)")
    if o.mult is not None:
        widths = -(-widths // o.mult) * o.mult
    return widths


def _truncated(lengths: np.ndarray, bo: np.ndarray, widths: np.ndarray, o: _PadOptions
               ) -> tuple[int, int]:
    """(rows cut, tokens cut) under max_length; a row over it without truncate is an error."""
    n, nbatch = len(lengths), len(bo) - 1
    if o.max_length is None or not n:
        return 0, 0
    limit = widths[np.searchsorted(bo, np.arange(n), side="right") - 1] if nbatch > 1 \
        else widths[0]
    over = lengths > limit
    if not over.any():
        return 0, 0
    i = int(np.flatnonzero(over)[0])
    if not o.truncate:
        lim = int(limit if np.ndim(limit) == 0 else limit[i])
        raise SequenceTooLongError.of(
            f"input_ids row {i}", i, int(lengths[i]), lim, longer=int(np.count_nonzero(over)),
            fix=f"Pass truncate=True to keep the {'tail' if o.left else 'head'} of long rows "
                "(counted), or a larger max_length")
    return int(np.count_nonzero(over)), int((lengths - limit)[over].sum())


def _pad(data: Any, batch_offsets: Any, labels: Any, position_ids: Any, o: _PadOptions):
    ids, lab, pos = _columns(data, labels, position_ids)
    check_fits(ids, o.dt, o.pad_id, "pad_id")
    if lab is not None:
        check_fits(lab, o.dt, o.label_pad_id, "label_pad_id")
    if pos is not None and pos is not True:
        check_fits(pos, o.dt, 0 if o.pos_pad is None else o.pos_pad, "position_pad_id")
    n = len(ids)
    lengths = ids.lengths
    bo = np.array([0, n], np.int64) if batch_offsets is None else _batch_offsets(batch_offsets, n)
    nbatch = len(bo) - 1
    widths = _widths(lengths, bo, o)
    truncated, truncated_tokens = _truncated(lengths, bo, widths, o)
    if nbatch == 1:
        bases = np.array([0, n * int(widths[0])], np.int64)
    else:
        bases = np.zeros(nbatch + 1, np.int64)
        np.cumsum((bo[1:] - bo[:-1]) * widths, out=bases[1:])
    specs: list[tuple[str, Rows | None, str, Any, bool]] = [
        ("input_ids", ids, "copy", o.pad_id, False)
    ]
    if o.attention_mask:
        specs.append(("attention_mask", None, "ones", 0, False))
    if lab is not None:
        specs.append(("labels", lab, "copy", o.label_pad_id, False))
    if pos is True:
        specs.append(("position_ids", None, "iota", o.pos_pad or 0, o.pos_pad is None))
    elif pos is not None:
        specs.append(("position_ids", pos, "copy", o.pos_pad or 0, o.pos_pad is None))
    buffers = {name: _fill(ids if col is None else col, col is not None, kind, padv, rng,
                           (lengths, bo, widths, bases), o)
               for name, col, kind, padv, rng in specs}
    return buffers, bo, widths, bases, truncated, truncated_tokens


def _fill(col: Rows, copy: bool, kind: str, padv: Any, rng: bool,
          layout: tuple[np.ndarray, ...], o: _PadOptions) -> np.ndarray:
    """One padded column: ``col``'s rows copied (``copy``), or per row ones / positions over
    the row's length (input_ids'), each batch padded with ``padv`` (``rng``: positions
    continue into the padding) to its width. ``layout``: (lengths, bo, widths, bases)."""
    lengths, bo, widths, bases = layout
    buf = np.empty(int(bases[-1]), o.dt)
    ext = backend.pack_ext
    if ext is None:
        for b in range(len(bo) - 1):
            rows = [col.row(i) for i in range(int(bo[b]), int(bo[b + 1]))]
            block = reference.pad_rows(rows, int(widths[b]), o.left, padv, rng, o.dt, kind)
            buf[int(bases[b]) : int(bases[b + 1])] = block.reshape(-1)
        return buf
    kinds = {"copy": ext.KIND_COPY, "ones": ext.KIND_ONE, "iota": ext.KIND_POS}
    code = ext.TYPE_CODES[o.dt]
    src = col.entry_ptrs(None, None, lengths, o.nt) if copy else None
    ext.pad_fill(buf.view(np.uint8), code, bo, bases, widths, src, lengths,
                 ext.TYPE_CODES[col.dtype] if copy else code, kinds[kind], o.left,
                 np.array(padv, o.dt).tobytes(), rng, o.nt)
    return buf


def pad(
    data: Any,
    *,
    labels: Any = None,
    position_ids: Any = None,
    max_length: int | None = None,
    pad_to_multiple_of: int | None = None,
    pad_id: int = 0,
    label_pad_id: int = -100,
    position_pad_id: int | None = None,
    side: str = "right",
    truncate: bool = False,
    attention_mask: bool = True,
    dtype: Any = np.int64,
    num_threads: int | None = None,
) -> Padded:
    """Pad ragged rows to one rectangular batch.

    Parameters
    ----------
    data : ragged rows or a table
        ``input_ids`` in any form :func:`fastaxo.pack` accepts (Arrow and NumPy are the fast
        paths), or a table / mapping with ``input_ids`` (and ``labels`` / ``position_ids``,
        used when present).
    labels, position_ids : ragged rows, optional
        Per-token columns aligned with ``input_ids``. ``position_ids=True`` generates
        0..len-1 per row.
    max_length : int, optional
        Width of the output (default: the longest row), rounded up to ``pad_to_multiple_of``.
    pad_id, label_pad_id : int
        Fill for ``input_ids`` / ``labels``.
    position_pad_id : int, optional
        Fill for ``position_ids``; None (default) continues 0, 1, 2, ... over the padding,
        as Axolotl's collator does.
    side : {"right", "left"}
    truncate : bool
        Cut rows longer than ``max_length`` (head kept for right padding, tail for left) instead of
        raising; counted in ``truncated`` / ``truncated_tokens``.
    attention_mask : bool
        Emit ``attention_mask`` (1 for tokens, 0 for padding).
    dtype : np.int32 or np.int64
    num_threads : int, optional

    Returns
    -------
    Padded
        ``input_ids``, ``attention_mask`` (and ``labels``, ``position_ids``) as ``[rows, width]``.

    Examples
    --------
    >>> p = fastaxo.pad([[1, 2, 3], [4]])
    >>> p["input_ids"].tolist(), p["attention_mask"].tolist()
    ([[1, 2, 3], [4, 0, 0]], [[1, 1, 1], [1, 0, 0]])
    """
    ext = backend.pack_ext
    if (
        ext is not None
        and type(data) is list
        and position_ids is None
        and max_length is None
        and (labels is None or type(labels) is list)
        and (side == "right" or side == "left")
    ):
        # the collator fast path: a list of NumPy rows, read in place, one kernel call (its
        # integer arguments checked as every other path checks them)
        mult = positive_int(pad_to_multiple_of, "pad_to_multiple_of", allow_none=True)
        pad_id = int_arg(pad_id, "pad_id")
        label_pad_id = int_arg(label_pad_id, "label_pad_id")
        dt = _FAST_DTYPES.get(dtype) if not isinstance(dtype, str) else None
        if (
            dt is not None
            and _FITS[dt][0] <= pad_id <= _FITS[dt][1]
            and _FITS[dt][0] <= label_pad_id <= _FITS[dt][1]
        ):
            if mult is not None:  # the output is at least rows x multiple wide: refused now
                check_output_bytes(len(data) * mult * dt.itemsize,
                                   f"the padded output ({len(data):,} rows x at least "
                                   f"{mult:,} wide x {dt.itemsize} bytes)")
            try:
                got = pad_rows(data, labels, dt, pad_id, label_pad_id, mult or 0,
                               side == "left", bool(attention_mask))
            except ValueError as exc:
                raise InvalidInputError(str(exc)) from None
            if got is not None:
                ids_out, mask_out, lab_out = got
                arrays = {"input_ids": ids_out}
                if mask_out is not None:
                    arrays["attention_mask"] = mask_out
                if lab_out is not None:
                    arrays["labels"] = lab_out
                return Padded(arrays, ids_out.shape[1])
    o = _pad_options(max_length=max_length, pad_to_multiple_of=pad_to_multiple_of,
                     pad_id=pad_id, label_pad_id=label_pad_id, position_pad_id=position_pad_id,
                     side=side, truncate=truncate, attention_mask=attention_mask, dtype=dtype,
                     num_threads=num_threads)
    buffers, bo, widths, _bases, tr, trt = _pad(data, None, labels, position_ids, o)
    n, w = int(bo[-1]), int(widths[0])
    return Padded({k: v.reshape(n, w) for k, v in buffers.items()}, w, tr, trt)


def pad_batches(data: Any, batch_offsets: Any, *, labels: Any = None, position_ids: Any = None,
                max_length: int | None = None, pad_to_multiple_of: int | None = None,
                pad_id: int = 0,
                label_pad_id: int = -100, position_pad_id: int | None = None, side: str = "right",
                truncate: bool = False, attention_mask: bool = True, dtype: Any = np.int64,
                num_threads: int | None = None) -> PaddedBatches:
    """Pad many micro-batches in one call, each to its own width.

    ``batch_offsets`` (``n_batches + 1`` non-decreasing row boundaries from 0 to the number of
    rows) splits the rows into batches; batch ``b`` is padded to its longest row (or
    ``max_length``), rounded up to ``pad_to_multiple_of``. Other arguments as in :func:`pad`.
    Returns a sequence of :class:`Padded` views into one buffer per column.

    Examples
    --------
    >>> batches = fastaxo.pad_batches([[1, 2, 3], [4], [5, 6]], [0, 2, 3])
    >>> [b["input_ids"].tolist() for b in batches]
    [[[1, 2, 3], [4, 0, 0]], [[5, 6]]]
    """
    if batch_offsets is None:
        raise InvalidInputError(
            "batch_offsets: expected n_batches + 1 row boundaries, got None (use pad())"
        )
    o = _pad_options(max_length=max_length, pad_to_multiple_of=pad_to_multiple_of,
                     pad_id=pad_id, label_pad_id=label_pad_id, position_pad_id=position_pad_id,
                     side=side, truncate=truncate, attention_mask=attention_mask, dtype=dtype,
                     num_threads=num_threads)
    buffers, bo, widths, bases, tr, trt = _pad(data, batch_offsets, labels, position_ids, o)
    return PaddedBatches(buffers, bo, widths, bases, tr, trt)


# ---------------------------------------------------------------- package-internal entry points
# The list kernel behind pad's fast path, also used by the Axolotl integration's collator, so
# that no integration calls the extension directly.

def pad_rows(rows: list[np.ndarray], labels: list[np.ndarray] | None, dtype: np.dtype,
             pad_id: int, label_pad_id: int, pad_to_multiple_of: int, left: bool,
             mask: bool) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None] | None:
    """Pad a list of 1-D native NumPy rows (and their labels) in one kernel call, read in
    place: ``(input_ids, attention_mask or None, labels or None)`` of width the longest row
    rounded up to ``pad_to_multiple_of`` (0: none), or None when the extension is missing or a
    row is not such a row (the caller then takes its general path). ValueError for labels whose
    lengths differ from their rows'."""
    ext = backend.pack_ext
    if ext is None:
        return None
    return ext.pad_list(rows, labels, dtype, pad_id, label_pad_id, pad_to_multiple_of, left, mask)
