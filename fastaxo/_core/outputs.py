"""The result side of pack and pad: the mapping base of Packed and Padded, the output dtype
argument, and the check that a column's values and pad value fit it."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from fastaxo._core.ragged import Rows
from fastaxo.errors import CapacityError, InvalidInputError, InvalidTypeError

__all__ = ["I32", "I64", "MAX_BYTES", "ArrayMap", "check_fits", "check_output_bytes", "out_dtype"]

#: The largest output fastaxo allocates for one column (256 TiB): sizes are checked against it
#: in Python ints before any int64 arithmetic, so no size computed after can wrap.
MAX_BYTES = 1 << 48


@functools.lru_cache(maxsize=1)
def _physical_memory() -> int | None:
    # once per process: every pad and pack call checks against it (a sysinfo call each)
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_output_bytes(nbytes: int, what: str) -> None:
    """Refuse, before allocating, an output column of ``nbytes`` (a Python int) that could wrap
    a size (> :data:`MAX_BYTES`) or that is bigger than this machine's memory (NumPy would
    reserve it lazily, and filling it would bring in the OOM killer instead of an error).
    ``what`` says where the size comes from."""
    if nbytes > MAX_BYTES:
        raise CapacityError(f"{what}: {nbytes:,} bytes is more than fastaxo allocates "
                            f"({MAX_BYTES:,} bytes)")
    mem = _physical_memory()
    if mem is not None and nbytes > mem:
        raise CapacityError(f"{what}: {nbytes / 2**30:,.1f} GiB per column, more than this "
                            f"machine's {mem / 2**30:,.1f} GiB of memory")

class ArrayMap(Mapping):
    """A read-only mapping of named NumPy arrays (the result type of pack and pad)."""

    _arrays: dict[str, np.ndarray]

    def __getitem__(self, key: str) -> np.ndarray:
        return self._arrays[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self._arrays.values())

    def to_torch(self) -> dict[str, Any]:
        """The arrays as torch tensors sharing memory (``torch.from_numpy``)."""
        import torch

        return {k: torch.from_numpy(v) for k, v in self._arrays.items()}

    def shapes(self) -> str:
        return ", ".join(f"{k}: {v.shape} {v.dtype}" for k, v in self._arrays.items())


I32, I64 = np.dtype(np.int32), np.dtype(np.int64)
_OUT_DTYPES = (I32, I64)


def out_dtype(dtype: Any) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise InvalidTypeError(f"dtype must be np.int32 or np.int64, got {dtype!r:.40}") from None
    if dt not in _OUT_DTYPES:
        raise InvalidInputError(f"dtype must be np.int32 or np.int64, got {dt}")
    return dt


def check_fits(col: Rows, dt: np.dtype, pad_value: int, pad_name: str) -> None:
    bits = 63 if dt == I64 else 31
    if (col.dtype == dt or (col.dtype == I32 and dt == I64)) and -(2**bits) <= pad_value < 2**bits:
        return
    info = np.iinfo(dt)
    if not info.min <= pad_value <= info.max:
        raise InvalidInputError(f"{pad_name} is {pad_value}; it does not fit the output dtype {dt}")
    if col.dtype.kind in "iu" and np.can_cast(col.dtype, dt, casting="safe"):
        return
    rng = col.value_range()
    if rng is not None and (rng[0] < info.min or rng[1] > info.max):
        raise InvalidInputError(
            f"{col.name} holds values from {rng[0]} to {rng[1]}; they do not fit the output dtype "
            f"{dt}"
        )
