"""Plain-Python reference implementations: the oracle of the tests, and the fallback
when the compiled extension is missing (FASTAXO_PURE_PYTHON=1 forces it).

Written independently of the kernels: rows are read as Python values (``as_py``) and
encoded with :mod:`struct`, digests come from :mod:`hashlib`. Slow by design.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

import numpy as np
import pyarrow as pa


def _maybe(name: str, t: pa.DataType) -> bool:
    """pa.types.<name>(t) where this pyarrow has it (view and REE types are newer)."""
    fn = getattr(pa.types, name, None)
    return bool(fn(t)) if fn is not None else False

__all__ = ["hash_rows", "dedupe_indices", "encode_value", "PySeenSet"]


def _digest(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def _fixed_bytes(t: pa.DataType, scalar: pa.Scalar) -> bytes:
    if pa.types.is_integer(t):
        return int(scalar.as_py()).to_bytes(
            t.bit_width // 8, "little", signed=pa.types.is_signed_integer(t)
        )
    if pa.types.is_floating(t):
        fmt = {16: "<e", 32: "<f", 64: "<d"}[t.bit_width]
        return struct.pack(fmt, scalar.as_py())
    if (
        pa.types.is_temporal(t)
        or pa.types.is_interval(t)
        or pa.types.is_decimal(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        # No exact Python value for every unit: take the value's bytes from a 1-row array.
        arr = pa.array([scalar], type=t)
        width = t.bit_width // 8
        return arr.buffers()[1].to_pybytes()[arr.offset * width : (arr.offset + 1) * width]
    raise TypeError(f"reference: no fixed-width encoding for {t}")


def encode_value(t: pa.DataType, scalar: pa.Scalar) -> bytes:
    """The canonical encoding of one value (see csrc/fx_rows.c), built from Python values."""
    if isinstance(t, pa.BaseExtensionType):
        return encode_value(
            t.storage_type, scalar.value if scalar.is_valid else pa.scalar(None, t.storage_type)
        )
    if pa.types.is_dictionary(t):
        if not scalar.is_valid:
            return b"\x00"
        return encode_value(t.value_type, scalar.value)
    if not scalar.is_valid or pa.types.is_null(t):
        return b"\x00"
    if pa.types.is_boolean(t):
        return b"\x01" + (b"\x01" if scalar.as_py() else b"\x00")
    if pa.types.is_string(t) or pa.types.is_large_string(t) or _maybe('is_string_view', t):
        raw = scalar.as_py().encode("utf-8")
        return b"\x01" + struct.pack("<Q", len(raw)) + raw
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or _maybe('is_binary_view', t):
        raw = scalar.as_py()
        return b"\x01" + struct.pack("<Q", len(raw)) + raw
    if (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or _maybe('is_list_view', t)
        or _maybe('is_large_list_view', t)
        or pa.types.is_map(t)
    ):
        vt = t.value_type if not pa.types.is_map(t) else pa.struct([t.key_field, t.item_field])
        elems = scalar.values
        out = [b"\x01", struct.pack("<Q", len(elems))]
        fixed_number = not pa.types.is_boolean(vt) and _is_fixed(vt)
        if fixed_number and elems.null_count == 0:
            out.append(b"\x00")
            out.extend(_fixed_bytes(vt, elems[j]) for j in range(len(elems)))
        else:
            out.append(b"\x01")
            out.extend(encode_value(vt, elems[j]) for j in range(len(elems)))
        return b"".join(out)
    if pa.types.is_struct(t):
        parts = [b"\x01"]
        for k in range(t.num_fields):
            parts.append(encode_value(t.field(k).type, scalar[k]))
        return b"".join(parts)
    if _is_fixed(t):
        return b"\x01" + _fixed_bytes(t, scalar)
    raise TypeError(f"reference: no encoding for {t}")


def _is_fixed(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t) or isinstance(t, pa.BaseExtensionType):
        return False
    try:
        return t.bit_width % 8 == 0
    except ValueError:
        return False


def _row_bytes_of_array(arr: pa.Array, i: int) -> bytes:
    t = arr.type
    v = arr[i]
    if not v.is_valid:
        raise ValueError(f"row {i} is null")
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return v.as_py().encode("utf-8")
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return v.as_py()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        vt = t.value_type
        return b"".join(_fixed_bytes(vt, v.values[j]) for j in range(len(v.values)))
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return _fixed_bytes(t, v)
    raise TypeError(f"reference: raw rows of {t}")


def _is_raw_array_type(t: pa.DataType) -> bool:
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    ):
        return True
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.types.is_integer(t.value_type) or pa.types.is_floating(t.value_type)
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def row_messages(data: Any, columns: list[str] | None = None) -> list[bytes]:
    """The exact byte string that is hashed for each row (the specification, executable)."""
    if isinstance(data, pa.ChunkedArray):
        return [m for chunk in data.chunks for m in row_messages(chunk)]
    if isinstance(data, pa.Array):
        if pa.types.is_dictionary(data.type) and _is_raw_array_type(data.type.value_type):
            data = data.dictionary_decode()
        if _is_raw_array_type(data.type):
            return [_row_bytes_of_array(data, i) for i in range(len(data))]
        data = pa.table({"_": data})
    if type(data).__module__.startswith("datasets"):
        data = data.with_format("arrow")[:]
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        names = list(data.column_names) if columns is None else list(columns)
        cols = [data.column(c) for c in names]
        types = [c.type for c in cols]
        msgs = []
        for i in range(data.num_rows):
            msgs.append(b"".join(encode_value(t, c[i]) for t, c in zip(types, cols)))
        return msgs
    if isinstance(data, np.ndarray):
        if data.dtype.kind in "USO":
            return row_messages(data.tolist())
        a = data.astype(data.dtype.newbyteorder("<"), copy=False)
        if a.ndim == 1:
            return [a[i : i + 1].tobytes() for i in range(len(a))]
        return [a[i].tobytes() for i in range(len(a))]
    return [r.encode("utf-8") if isinstance(r, str) else bytes(r) for r in data]


def hash_rows(data: Any, columns: list[str] | None = None) -> np.ndarray:
    """uint8[n, 32] digests of each row, by hashlib."""
    msgs = row_messages(data, columns)
    out = np.zeros((len(msgs), 32), dtype=np.uint8)
    for i, m in enumerate(msgs):
        out[i] = np.frombuffer(_digest(m), dtype=np.uint8)
    return out


def dedupe_indices(
    digests: np.ndarray, seen: set[bytes] | None = None
) -> tuple[np.ndarray, set[bytes]]:
    """First-occurrence indices of distinct digests, and the updated set."""
    seen = set() if seen is None else seen
    keep = []
    for i in range(len(digests)):
        d = digests[i].tobytes()
        if d not in seen:
            seen.add(d)
            keep.append(i)
    return np.asarray(keep, dtype=np.int64), seen


class PySeenSet:
    """Same interface as fastaxo._hash.SeenSet, on a Python dict (the pure fallback)."""

    def __init__(self) -> None:
        self._d: dict[bytes, None] = {}

    def __len__(self) -> int:
        return len(self._d)

    @property
    def nbytes(self) -> int:
        return len(self._d) * 120  # a bytes object and a dict slot, roughly

    def insert(self, digests: np.ndarray, is_new: np.ndarray) -> int:
        added = 0
        for i in range(len(digests)):
            d = digests[i].tobytes()
            if d in self._d:
                is_new[i] = 0
            else:
                self._d[d] = None
                is_new[i] = 1
                added += 1
        return added

    def contains(self, digests: np.ndarray, found: np.ndarray) -> None:
        for i in range(len(digests)):
            found[i] = digests[i].tobytes() in self._d

    def export(self, out: np.ndarray) -> None:
        for i, d in enumerate(self._d):
            out[i] = np.frombuffer(d, dtype=np.uint8)
