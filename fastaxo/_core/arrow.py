"""Zero-copy views of pyarrow arrays for the C kernels.

Two shapes leave this module:

* flat views ``(values, offsets)`` of string/binary and list<fixed-width> arrays, with
  the slice applied to the offsets (a sliced array's ``.values`` ignores the slice,
  apache/arrow#37733, so the offsets stay absolute into the whole values buffer);
* column descriptors for the canonical table-row encoding (see ``csrc/fx_rows.c``):
  nested tuples ``(kind, width, offset, length, validity_addr, offsets_addr, data_addr,
  data_len, children)`` pointing into live Arrow buffers. The caller keeps the arrays
  alive (the ``keep`` list) until the kernel returns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo.errors import InvalidInputError, InvalidTypeError, NullValueError


def has_type(name: str, t: pa.DataType) -> bool:
    """pa.types.<name>(t) where this pyarrow has it (view and REE types are newer)."""
    fn = getattr(pa.types, name, None)
    return bool(fn(t)) if fn is not None else False

# Mirrors the FX_COL_* enum of csrc/fx_rows.h (the pure-Python path needs them too; the
# extension's COL_KINDS is checked against them by tests/test_constants.py).
COL_NULL, COL_FIXED, COL_BOOL, COL_BINARY32, COL_BINARY64 = 0, 1, 2, 3, 4
COL_LIST32, COL_LIST64, COL_FIXED_LIST, COL_STRUCT, COL_DICT = 5, 6, 7, 8, 9

_EMPTY_U8 = np.zeros(0, dtype=np.uint8)


def is_binary_like(t: pa.DataType) -> bool:
    return (
        pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_string(t)
        or pa.types.is_large_binary(t)
    )


def is_raw_value_type(t: pa.DataType) -> bool:
    """Byte-aligned fixed-width numbers whose little-endian bytes are the row bytes."""
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def is_raw_list(t: pa.DataType) -> bool:
    return (pa.types.is_list(t) or pa.types.is_large_list(t)) and is_raw_value_type(t.value_type)


def numpy_dtype(t: pa.DataType) -> np.dtype:
    """Little-endian NumPy dtype of a fixed-width number type (pyarrow's own
    ``to_pandas_dtype`` would import pandas)."""
    if pa.types.is_integer(t):
        kind = "i" if pa.types.is_signed_integer(t) else "u"
    elif pa.types.is_floating(t):
        kind = "f"
    else:
        raise InvalidTypeError(f"{t} is not a fixed-width number type")
    return np.dtype(f"<{kind}{t.bit_width // 8}")


def fixed_as_list(arr: pa.Array) -> pa.Array:
    """A fixed_size_list array (HF datasets' ``Sequence(..., length=N)``: rows grouped into
    blocks) as a list array of the same rows and nulls (large_list past 2^31 values)."""
    size = arr.type.list_size
    offs = np.arange(len(arr) + 1, dtype=np.int64) * size
    values = arr.values.slice(arr.offset * size, len(arr) * size)  # (null rows' slots too)
    mask = arr.is_null() if arr.null_count else None
    if offs[-1] >= 2**31:
        return pa.LargeListArray.from_arrays(from_numpy(offs), values, mask=mask)
    return pa.ListArray.from_arrays(from_numpy(offs.astype(np.int32)), values, mask=mask)


def plain_strings(arr: pa.Array) -> pa.Array:
    """A text array held another way as string / large_string: a categorical one (a
    dictionary of strings: pandas', a stored schema's) decoded, a string_view one (Polars',
    DuckDB's) cast to large_string; any other array as it is."""
    t = arr.type
    if pa.types.is_dictionary(t) and (pa.types.is_string(t.value_type) or
                                      pa.types.is_large_string(t.value_type) or
                                      has_type("is_string_view", t.value_type)):
        arr = arr.dictionary_decode()
        t = arr.type
    return arr.cast(pa.large_string()) if has_type("is_string_view", t) else arr


def from_numpy(a: np.ndarray) -> pa.Array:
    """A 1-D numeric NumPy array as a pyarrow Array without a copy (contiguous) and without
    ``pa.array``, whose first call on an ndarray imports pandas when it is installed (~0.4 s,
    and a Ctrl-C landing in that import surfaced as an AttributeError instead of an interrupt)."""
    a = np.ascontiguousarray(a)
    return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), len(a), [None, pa.py_buffer(a)])


def list_array(values: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """``values`` cut into rows of ``lengths``: list<T>, or large_list<T> when the offsets do
    not fit int32. No copy of the values."""
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] < 2**31:
        return pa.ListArray.from_arrays(from_numpy(offsets.astype(np.int32)), from_numpy(values))
    return pa.LargeListArray.from_arrays(from_numpy(offsets), from_numpy(values))


def _u8(buf: pa.Buffer | None) -> np.ndarray:
    return _EMPTY_U8 if buf is None else np.frombuffer(buf, dtype=np.uint8)


def _first_null(arr: pa.Array) -> int:
    return int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])


def offsets_of(arr: pa.Array, large: bool) -> np.ndarray:
    """The len(arr)+1 offsets of a binary/list array, slice applied, straight from the buffer
    (``Array.to_numpy`` would import pandas)."""
    odt = np.int64 if large else np.int32
    return np.frombuffer(arr.buffers()[1], dtype=odt, count=arr.offset + len(arr) + 1)[arr.offset :]


def first_not_utf8(arr: pa.Array, skip: frozenset[int] = frozenset()
                   ) -> tuple[int, UnicodeDecodeError] | None:
    """The first string of ``arr`` (string / large_string; a null reads as empty) that is not
    UTF-8, read from its buffers, and Python's error for it (``start``: the offset of the
    bad byte in that string); None where every one is. The indices ``skip`` are not read."""
    offs = offsets_of(arr, pa.types.is_large_string(arr.type))
    buf = arr.buffers()[2]
    data = memoryview(buf) if buf is not None else memoryview(b"")
    for i in range(len(arr)):
        if i in skip:
            continue
        try:
            bytes(data[int(offs[i]):int(offs[i + 1])]).decode("utf-8")
        except UnicodeDecodeError as e:
            return i, e
    return None


def fixed_view(arr: pa.Array) -> np.ndarray:
    """The values of a fixed-width number array without nulls, slice applied, no copy."""
    dtype = numpy_dtype(arr.type)
    buf = arr.buffers()[1]
    if buf is None:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=arr.offset + len(arr))[arr.offset :]


def spanned_values(col: pa.Array | pa.ChunkedArray) -> list[np.ndarray]:
    """The values a list<number> column's rows span (the slice its offsets cover, not the
    whole child array), one NumPy view per chunk; a column known to hold no null."""
    out = []
    for c in col.chunks if isinstance(col, pa.ChunkedArray) else [col]:
        if not len(c):
            continue
        offs = offsets_of(c, pa.types.is_large_list(c.type))
        out.append(fixed_view(c.values)[int(offs[0]):int(offs[-1])])
    return out


def require_no_nulls(arr: pa.Array, what: str, base: int) -> None:
    """Raw-bytes digests have no representation for a null row: refuse it, naming the row
    (``base`` is the global index of the array's first row, for chunked data)."""
    if arr.null_count:
        raise NullValueError(
            f"{what} row {base + _first_null(arr)} is null; a null has no bytes to hash. Fill "
            "nulls "
            f"first, or pass a Table/RecordBatch, whose row encoding represents nulls"
        )


def number_view(arr: pa.Array, what: str, base: int) -> np.ndarray:
    """The values of a fixed-width number array (no nulls allowed), slice applied, no copy."""
    require_no_nulls(arr, what, base)
    return fixed_view(arr)


def binary_view(arr: pa.Array, what: str, base: int) -> tuple[np.ndarray, np.ndarray]:
    """(data uint8, offsets int32/int64 of len(arr)+1) of a string/binary array, no copy."""
    require_no_nulls(arr, what, base)
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    data = _u8(arr.buffers()[2])
    return data, _checked(offsets_of(arr, large), len(data), what, base)


def _checked(offsets: np.ndarray, n_values: int, what: str, base: int) -> np.ndarray:
    """``offsets``, after making sure every row lies inside the ``n_values`` values (Arrow
    builds arrays from raw buffers, foreign libraries and files without checking them)."""
    from fastaxo._core.checks import require_offsets

    if len(offsets) > 1:
        require_offsets(offsets, n_values, what, base)
    return offsets


def list_view(arr: pa.Array, what: str, base: int) -> tuple[np.ndarray, np.ndarray]:
    """(values typed, offsets of len(arr)+1, absolute into values) of a list<number> array."""
    require_no_nulls(arr, what, base)
    offsets = offsets_of(arr, pa.types.is_large_list(arr.type))
    child = arr.values
    values = fixed_view(child)
    offsets = _checked(offsets, len(values), what, base)
    if child.null_count and len(arr):
        lo, hi = int(offsets[0]), int(offsets[-1])
        inside = child.slice(lo, hi - lo)
        if inside.null_count:
            pos = lo + _first_null(inside)
            row = int(np.searchsorted(offsets, pos, side="right")) - 1
            raise NullValueError(
                f"{what} row {base + row} has a null token at position {pos - int(offsets[row])}; "
                f"token rows must not contain nulls (a Table/RecordBatch encodes them)"
            )
    return values, offsets


def _addr(buf: pa.Buffer | None) -> int:
    return 0 if buf is None else int(buf.address)


_SIMPLE_KINDS: dict[pa.DataType, tuple[int, int] | None] = {}


def _simple_kind(t: pa.DataType) -> tuple[int, int] | None:
    """(kind, width) of the types whose descriptor needs only the array's own buffers
    (fixed width, binary/string, list/large_list), memoised per type; None for the rest."""
    k = _SIMPLE_KINDS.get(t)
    if k is not None or t in _SIMPLE_KINDS:
        return k
    k = None
    if not isinstance(t, pa.BaseExtensionType):
        if pa.types.is_integer(t) or pa.types.is_floating(t):
            k = (COL_FIXED, t.bit_width // 8)
        elif pa.types.is_string(t) or pa.types.is_binary(t):
            k = (COL_BINARY32, 1)
        elif pa.types.is_large_string(t) or pa.types.is_large_binary(t):
            k = (COL_BINARY64, 1)
        elif pa.types.is_list(t):
            k = (COL_LIST32, 0)
        elif pa.types.is_large_list(t):
            k = (COL_LIST64, 0)
    _SIMPLE_KINDS[t] = k
    return k


def column_spec(arr: pa.Array, keep: list[Any], name: str) -> tuple:
    """Descriptor of one array for fx_hash_table_row; appends what must stay alive to keep."""
    t = arr.type
    keep.append(arr)
    simple = _simple_kind(t)
    if simple is not None:  # the common types, without the type tests below (datasets tables
        kind, width = simple  # come in 1,000-row chunks: this runs per chunk and column)
        bufs = arr.buffers()
        validity = _addr(bufs[0]) if arr.null_count else 0
        if kind == COL_FIXED:
            return (COL_FIXED, width, arr.offset, len(arr), validity, 0, _addr(bufs[1]), 0, ())
        if kind in (COL_BINARY32, COL_BINARY64):
            data = bufs[2]
            return (kind, 1, arr.offset, len(arr), validity, _addr(bufs[1]), _addr(data),
                    0 if data is None else data.size, ())
        return (kind, 0, arr.offset, len(arr), validity, _addr(bufs[1]), 0, 0,
                (column_spec(arr.values, keep, name),))
    if isinstance(t, pa.BaseExtensionType):
        return column_spec(arr.storage, keep, name)
    if has_type('is_string_view', t) or has_type('is_binary_view', t):
        target = pa.large_string() if has_type('is_string_view', t) else pa.large_binary()
        return column_spec(arr.cast(target), keep, name)
    if has_type('is_list_view', t) or has_type('is_large_list_view', t):
        target = (
            pa.large_list(t.value_field)
            if has_type("is_large_list_view", t)
            else pa.list_(t.value_field)
        )
        return column_spec(arr.cast(target), keep, name)
    if has_type('is_run_end_encoded', t):
        # REE has no per-row buffer; decode it (a copy of this column only).
        import pyarrow.compute as pc

        return column_spec(
            pc.run_end_decode(arr) if hasattr(pc, "run_end_decode") else arr.cast(t.value_type),
            keep,
            name,
        )
    bufs = arr.buffers()
    validity = _addr(bufs[0]) if arr.null_count else 0
    off, n = arr.offset, len(arr)
    if pa.types.is_null(t):
        return (COL_NULL, 0, off, n, 0, 0, 0, 0, ())
    if pa.types.is_boolean(t):
        return (COL_BOOL, 1, off, n, validity, 0, _addr(bufs[1]), 0, ())
    if is_binary_like(t):
        kind = (
            COL_BINARY64
            if (pa.types.is_large_string(t) or pa.types.is_large_binary(t))
            else COL_BINARY32
        )
        data = bufs[2]
        return (kind, 1, off, n, validity, _addr(bufs[1]), _addr(data),
                0 if data is None else data.size, ())
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        kind = COL_LIST64 if pa.types.is_large_list(t) else COL_LIST32
        child = column_spec(arr.values, keep, name)
        return (kind, 0, off, n, validity, _addr(bufs[1]), 0, 0, (child,))
    if pa.types.is_fixed_size_list(t):
        child = column_spec(arr.values, keep, name)
        return (COL_FIXED_LIST, t.list_size, off, n, validity, 0, 0, 0, (child,))
    if pa.types.is_struct(t):
        children = tuple(column_spec(arr.field(k), keep, name) for k in range(t.num_fields))
        return (COL_STRUCT, 0, off, n, validity, 0, 0, 0, children)
    if pa.types.is_dictionary(t):
        indices = arr.indices
        if pa.types.is_unsigned_integer(indices.type):
            # The kernel reads signed indices; widen unsigned ones (a copy of the indices only).
            signed = pa.DictionaryArray.from_arrays(indices.cast(pa.int64()), arr.dictionary)
            return column_spec(signed, keep, name)
        ibuf = indices.buffers()[1]
        child = column_spec(arr.dictionary, keep, name)
        return (COL_DICT, indices.type.bit_width // 8, indices.offset, n, validity, 0,
                _addr(ibuf), 0, (child,))
    try:
        bits = t.bit_width
    except ValueError:
        bits = 0
    if bits and bits % 8 == 0:
        return (COL_FIXED, bits // 8, off, n, validity, 0, _addr(bufs[1]), 0, ())
    raise InvalidTypeError(
        f"column {name!r} has type {t}, which the row encoding does not cover (union types); "
        f"select other columns with columns=[...]"
    )


def type_signature(types: list[pa.DataType]) -> str:
    """A stable text of column types; two inputs whose digests are comparable share it."""
    return ",".join(_canonical_type(t) for t in types)


def _canonical_type(t: pa.DataType) -> str:
    # Types that encode identically map to one name: string/large_string/string_view,
    # list/large_list/list_view, dictionary<V> and V.
    if isinstance(t, pa.BaseExtensionType):
        return _canonical_type(t.storage_type)
    if pa.types.is_dictionary(t):
        return _canonical_type(t.value_type)
    if has_type('is_run_end_encoded', t):
        return _canonical_type(t.value_type)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or has_type('is_string_view', t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or has_type('is_binary_view', t):
        return "binary"
    if (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or has_type("is_list_view", t)
        or has_type("is_large_list_view", t)
    ):
        return f"list<{_canonical_type(t.value_type)}>"
    if pa.types.is_map(t):
        return f"list<struct<{_canonical_type(t.key_type)},{_canonical_type(t.item_type)}>>"
    if pa.types.is_fixed_size_list(t):
        return f"fixed_list<{_canonical_type(t.value_type)},{t.list_size}>"
    if pa.types.is_struct(t):
        return (
            "struct<"
            + ",".join(_canonical_type(t.field(k).type) for k in range(t.num_fields))
            + ">"
        )
    return str(t)


def concat_batches(parts: list[pa.RecordBatch], pool: Any = None) -> pa.RecordBatch:
    """One record batch of ``parts`` (same schema), its buffers from ``pool``:
    ``pa.concat_batches`` (pyarrow 19+), else through a Table (pyarrow 15-18)."""
    if hasattr(pa, "concat_batches"):
        return pa.concat_batches(parts, memory_pool=pool)
    table = pa.Table.from_batches(parts).combine_chunks(memory_pool=pool)
    batches = table.to_batches()
    if len(batches) == 1:
        return batches[0]
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in table.schema],
                                      schema=table.schema)


def check_structure(arr: pa.Array, what: str) -> None:
    """Raise InvalidInputError when ``arr``'s buffers or offsets could make a reader of it
    step outside them: buffer sizes (pyarrow's O(1) validate), then, recursively, every
    list/string/binary offsets array (first >= 0, non-decreasing, last within the child or
    the data buffer) and every dictionary's indices. For data that pyarrow did not build
    itself (Arrow IPC files: their buffers are taken as they are)."""
    try:
        arr.validate()
    except pa.ArrowInvalid as e:
        raise InvalidInputError(f"{what}: {e}") from None
    _check_tree(arr, what)


def _check_tree(arr: pa.Array, what: str) -> None:
    from fastaxo._core.checks import offsets_problem

    t = arr.type
    if len(arr) == 0:
        return
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        child = arr.values
        bad = offsets_problem(offsets_of(arr, pa.types.is_large_list(t)), len(child))
        if bad is not None:
            raise InvalidInputError(f"{what}: list offsets are corrupt at row {bad[0]}: {bad[1]}")
        _check_tree(child, what)
    elif is_binary_like(t):
        data = arr.buffers()[2]
        large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
        bad = offsets_problem(offsets_of(arr, large), 0 if data is None else data.size)
        if bad is not None:
            raise InvalidInputError(
                f"{what}: string offsets are corrupt at row {bad[0]}: {bad[1]}")
    elif pa.types.is_fixed_size_list(t):
        _check_tree(arr.values, what)
    elif pa.types.is_struct(t):
        for i in range(t.num_fields):
            _check_tree(arr.field(i), what)
    elif pa.types.is_dictionary(t):
        idx = arr.indices
        n = len(arr.dictionary)
        valid = idx.drop_null() if idx.null_count else idx
        if len(valid):
            v = fixed_view(valid.combine_chunks() if hasattr(valid, "combine_chunks") else valid)
            if int(v.min()) < 0 or int(v.max()) >= n:
                raise InvalidInputError(
                    f"{what}: a dictionary index is out of range (the dictionary has {n} values)")
        _check_tree(arr.dictionary, what)
    elif (has_type("is_string_view", t) or has_type("is_binary_view", t)
          or has_type("is_list_view", t) or has_type("is_large_list_view", t)
          or has_type("is_run_end_encoded", t) or pa.types.is_union(t) or pa.types.is_map(t)):
        try:  # rarer layouts: pyarrow's full validation
            arr.validate(full=True)
        except pa.ArrowInvalid as e:
            raise InvalidInputError(f"{what}: {e}") from None
