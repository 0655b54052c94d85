"""Hypothesis strategies for ragged inputs: empty rows, empty batches, huge rows, nulls, slices."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import strategies as st

INT_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]


def _int_range(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    if pa.types.is_signed_integer(t):
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1


@st.composite
def ragged_lengths(draw, max_rows: int = 40, huge: bool = True) -> list[int]:
    """Row lengths with empty rows, empty batches and now and then a huge row."""
    base = st.integers(0, 80)
    if huge:
        base = st.one_of(base, st.integers(0, 80), st.integers(4000, 300_000))
    return draw(st.lists(base, max_size=max_rows))


@st.composite
def token_list_arrays(draw, large: bool | None = None) -> pa.Array:
    """list/large_list<int*> token rows built from (values, offsets), maybe sliced."""
    t = draw(st.sampled_from(INT_TYPES))
    lengths = draw(ragged_lengths())
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    lo, hi = _int_range(t)
    total = int(sum(lengths))
    dtype = np.dtype(t.to_pandas_dtype())
    values = rng.integers(lo, hi, total, dtype=dtype, endpoint=True)
    large = draw(st.booleans()) if large is None else large
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64 if large else np.int32)
    np.cumsum(lengths, out=offsets[1:])
    cls = pa.LargeListArray if large else pa.ListArray
    arr = cls.from_arrays(pa.array(offsets), pa.array(values, type=t))
    return _maybe_slice(draw, arr)


def _maybe_slice(draw, arr: pa.Array) -> pa.Array:
    if len(arr) and draw(st.booleans()):
        a = draw(st.integers(0, len(arr)))
        b = draw(st.integers(a, len(arr)))
        return arr.slice(a, b - a)
    return arr


@st.composite
def binary_arrays(draw) -> pa.Array:
    t = draw(st.sampled_from([pa.string(), pa.large_string(), pa.binary(), pa.large_binary()]))
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        rows = draw(st.lists(st.text(max_size=40), max_size=40))
    else:
        lengths = draw(ragged_lengths())
        rng = np.random.default_rng(len(lengths))
        rows = [rng.bytes(n) for n in lengths]
    return _maybe_slice(draw, pa.array(rows, type=t))


def _column(draw, t: pa.DataType, n: int) -> pa.Array:
    nullable = draw(st.booleans())

    def maybe_none(strategy):
        return st.one_of(st.none(), strategy) if nullable else strategy

    if pa.types.is_integer(t):
        lo, hi = _int_range(t)
        vals = draw(st.lists(maybe_none(st.integers(lo, hi)), min_size=n, max_size=n))
    elif pa.types.is_floating(t):
        vals = draw(st.lists(maybe_none(st.floats(width=t.bit_width, allow_nan=False)), min_size=n, max_size=n))
    elif pa.types.is_boolean(t):
        vals = draw(st.lists(maybe_none(st.booleans()), min_size=n, max_size=n))
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        vals = draw(st.lists(maybe_none(st.text(max_size=12)), min_size=n, max_size=n))
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        vals = draw(st.lists(maybe_none(st.binary(max_size=12)), min_size=n, max_size=n))
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        vt = t.value_type
        lo, hi = _int_range(vt) if pa.types.is_integer(vt) else (0, 0)
        elem = st.one_of(st.none(), st.integers(lo, hi)) if draw(st.booleans()) else st.integers(lo, hi)
        if pa.types.is_string(vt):
            elem = st.text(max_size=5)
        vals = draw(st.lists(maybe_none(st.lists(elem, max_size=6)), min_size=n, max_size=n))
    elif pa.types.is_struct(t):
        vals = draw(st.lists(maybe_none(st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "assistant"]), "content": st.one_of(st.none(), st.text(max_size=8))})),
            min_size=n, max_size=n))
    elif pa.types.is_timestamp(t):
        vals = draw(st.lists(maybe_none(st.integers(0, 2**40)), min_size=n, max_size=n))
        return pa.array(vals, type=pa.int64()).cast(t)
    else:
        raise AssertionError(t)
    return pa.array(vals, type=t)


TABLE_TYPES = [
    pa.int64(), pa.int8(), pa.uint32(), pa.float32(), pa.float64(), pa.bool_(), pa.string(), pa.large_string(),
    pa.binary(), pa.list_(pa.int32()), pa.large_list(pa.int64()), pa.list_(pa.string()),
    pa.struct([("role", pa.string()), ("content", pa.string())]), pa.timestamp("ms"),
]


@st.composite
def tables(draw, min_rows: int = 0, max_rows: int = 25) -> pa.Table:
    """Tables of mixed, nullable column types, possibly chunked differently per column, maybe sliced."""
    n = draw(st.integers(min_rows, max_rows))
    types = draw(st.lists(st.sampled_from(TABLE_TYPES), min_size=1, max_size=4))
    cols = {}
    for k, t in enumerate(types):
        arr = _column(draw, t, n)
        if draw(st.booleans()) and n > 1:
            cut = draw(st.integers(1, n - 1))
            arr = pa.chunked_array([arr.slice(0, cut), arr.slice(cut)], type=t)
        if draw(st.booleans()) and pa.types.is_string(t):
            arr = arr.dictionary_encode() if isinstance(arr, pa.Array) else pa.chunked_array(
                [c.dictionary_encode() for c in arr.chunks])
        cols[f"c{k}"] = arr
    table = pa.table(cols)
    return _maybe_slice(draw, table) if n else table
