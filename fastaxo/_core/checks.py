"""Argument checks shared by the public functions: one argument order everywhere
(``value, name, ...``), messages that name the argument, what was expected and what came."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fastaxo.errors import InvalidInputError, InvalidTypeError

__all__ = ["INT64_MAX", "INT64_MIN", "MAX_ROW_BYTES", "choice", "cli_positive_float",
           "cli_positive_int", "count", "fill_value", "int_arg", "integer",
           "mistake_hint", "offsets_problem", "positive_int", "require_offsets"]

# The largest row (a text, or a rendered conversation) handed to a tokenizer, in UTF-8 bytes:
# HF's tokenizer needs ~100 bytes of memory per byte of text (a 200 MB row took 19 GB), and no
# model trains on 16 MiB (4M+ tokens) in one sequence. prepare's --max-row-bytes changes it.
MAX_ROW_BYTES = 16 << 20


def _type_name(value: Any) -> str:
    return f"{type(value).__name__} {value!r:.40}"


#: The range of every integer argument that reaches the compiled kernels (a C int64_t): past
#: it, Cython's conversion raised a bare OverflowError, or a value wrapped.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def integer(value: Any, name: str, kind: str = "an int") -> int:
    """``value`` as a Python int of any size (NumPy integers too; bools, floats and the rest
    are refused). The kernels' arguments take :func:`int_arg` & co., which bound it too."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidTypeError(f"{name} must be {kind}, got {_type_name(value)}")
    return int(value)


def _in_range(v: int, name: str, lo: int, hi: int) -> int:
    if not lo <= v <= hi:
        raise InvalidInputError(f"{name} is {v:,}; it must be between {lo:,} and {hi:,}")
    return v


def int_arg(value: Any, name: str, *, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int:
    """``value`` as a Python int in ``[lo, hi]`` (default: what an int64 holds)."""
    return _in_range(integer(value, name), name, lo, hi)


def positive_int(value: Any, name: str, *, allow_none: bool = False, hi: int = INT64_MAX) -> Any:
    """``value`` as an int in ``[1, hi]`` (or None where ``allow_none``)."""
    if value is None and allow_none:
        return None
    v = integer(value, name, "a positive int" + (" or None" if allow_none else ""))
    if v < 1:
        raise InvalidInputError(f"{name} must be >= 1, got {v}")
    return _in_range(v, name, 1, hi)


def count(value: Any, name: str, *, allow_zero: bool = False) -> int:
    """``value`` as an int > 0 (>= 0 where ``allow_zero``) that an int64 holds: sizes and
    counts."""
    v = integer(value, name)
    if v < 0 or (v == 0 and not allow_zero):
        raise InvalidInputError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {v}")
    return _in_range(v, name, 0 if allow_zero else 1, INT64_MAX)


def fill_value(value: Any, name: str, dtype: np.dtype) -> Any:
    """A pad value for a column of ``dtype``: an int the dtype holds; for a float column, an int
    or a float within its range (inf and nan are values too). Bools and non-numbers are
    refused."""
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return int_arg(value, name, lo=int(info.min), hi=int(info.max))
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise InvalidTypeError(f"{name} must be a number, got {_type_name(value)}")
    top = float(np.finfo(dt).max)
    try:
        f = float(value)
    except OverflowError:  # an int past every float
        f = math.inf
    if (math.isfinite(f) and abs(f) > top) or (math.isinf(f) and not isinstance(value, float)
                                               and not isinstance(value, np.floating)):
        raise InvalidInputError(f"{name} is {value!r:.40}; a {dt} column holds at most "
                                f"{top:g} in magnitude")
    return f


def choice(value: Any, name: str, options: Sequence[str]) -> str:
    """``value`` if it is one of ``options``."""
    if not isinstance(value, str) or value not in options:
        raise InvalidInputError(
            f"{name} must be one of {', '.join(map(repr, options))}; got {value!r:.40}"
        )
    return value


def cli_positive_int(text: str) -> int:
    """An argparse ``type=``: the text as an int >= 1, else a usage error naming what came."""
    import argparse

    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {v}")
    return v


def cli_positive_float(text: str) -> float:
    """An argparse ``type=``: the text as a finite number > 0, else a usage error."""
    import argparse
    import math

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not v > 0 or math.isinf(v):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text}")
    return v


def offsets_problem(offsets: np.ndarray, n_values: int) -> tuple[int, str] | None:
    """``(row, what is wrong)`` for the first bad row of ragged ``offsets`` (n+1 entries over
    ``n_values`` values), or None. Consecutive values are compared (never subtracted: a
    difference can wrap), the first must be >= 0 and the last <= ``n_values``, so every row
    lies inside the values whatever the offsets' width."""
    if len(offsets) == 0:
        return 0, "there are no offsets (a ragged column has n+1 of them)"
    first, last = int(offsets[0]), int(offsets[-1])
    if first < 0:
        return 0, f"the first offset is {first} (< 0)"
    if last > n_values:
        return len(offsets) - 2, f"the last offset is {last}, beyond the {n_values} values"
    down = np.flatnonzero(offsets[1:] < offsets[:-1])
    if len(down):
        i = int(down[0])
        return i, (f"offset {int(offsets[i + 1])} follows {int(offsets[i])} (offsets must not "
                   "decrease)")
    return None


def require_offsets(offsets: np.ndarray, n_values: int, what: str, base: int = 0) -> None:
    """Raise InvalidInputError naming ``what`` and the row (``base`` + its index) when
    :func:`offsets_problem` finds one; an empty offsets array is not checked."""
    bad = offsets_problem(offsets, n_values) if len(offsets) else None
    if bad is not None:
        raise InvalidInputError(f"{what}: offsets are corrupt at row {base + bad[0]}: {bad[1]}")


def mistake_hint(value: Any) -> str:
    """The fix for an input users commonly pass where fastaxo wants arrays or a table
    (appended to the TypeError that refuses it), or "". By class and module names: nothing is
    imported."""
    import os

    cls = type(value)
    mod, name = cls.__module__ or "", cls.__name__
    if mod.startswith("datasets") and name in ("DatasetDict", "IterableDatasetDict"):
        splits = list(value.keys()) if hasattr(value, "keys") else []
        pick = repr(splits[0]) if splits else "'train'"
        return f"; it is a {name} of splits {splits}: pick one, e.g. data[{pick}]"
    if mod.startswith("pandas") and name in ("DataFrame", "Series"):
        return ("; it is a pandas " + name + ": convert it, e.g. pyarrow.Table.from_pandas(df) "
                "(or df['input_ids'].tolist() for one column)")
    if mod.startswith("torch") and name == "Tensor":
        return ("; it is a torch.Tensor: pass tensor.numpy() (a 2-D tensor's rows are rows; "
                "move it to the CPU first)")
    if isinstance(value, (str, bytes, os.PathLike)):
        return ("; it is a path or a string: read the file first, e.g. "
                "pyarrow.parquet.read_table(path), or fastaxo.iter_batches(path) for big files")
    return ""
