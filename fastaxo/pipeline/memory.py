"""Inputs a user already holds in memory, for :func:`fastaxo.prepare`: a pyarrow Table,
RecordBatch or RecordBatchReader, a ``datasets.Dataset`` or ``IterableDataset``. Each is read
as one input, ``batch_rows`` rows at a time, only the columns prepare needs; errors name it as
they name a file ("pyarrow.Table row 12 (0-based)")."""

from __future__ import annotations

import itertools
import types
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pyarrow as pa

__all__ = ["MemorySource", "memory_source"]


class MemorySource(NamedTuple):
    """One in-memory input: its name in messages, its schema, its rows when known, and a
    reader factory (the columns to read -> an iterable of record batches with ``stats`` and
    ``close``, as prepare's file readers)."""

    name: str
    schema: pa.Schema
    rows: int | None
    reader: Callable[[list[str]], Any]


class _Reader:
    """Record batches of an in-memory input, counted as a file reader counts them."""

    def __init__(self, batches: Iterator[pa.RecordBatch]):
        self._batches = batches
        self.stats = types.SimpleNamespace(stall_seconds=0.0, bytes=0)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for b in self._batches:
            self.stats.bytes += b.nbytes
            yield b

    def close(self) -> None:
        self._batches = iter(())


def _of_tables(tables: Iterator[pa.Table | pa.RecordBatch], cols: list[str],
               batch_rows: int) -> Iterator[pa.RecordBatch]:
    for t in tables:
        t = t.select(cols)
        if isinstance(t, pa.RecordBatch):
            t = pa.Table.from_batches([t])
        yield from t.combine_chunks().to_batches(max_chunksize=batch_rows)


def _is_datasets(obj: Any, cls: str) -> bool:
    # (no import of datasets unless the object is one of its classes)
    return type(obj).__module__.startswith("datasets") and any(
        c.__name__ == cls for c in type(obj).__mro__)


def memory_source(inputs: Any, batch_rows: int) -> MemorySource | None:
    """The in-memory input ``inputs``, or None when it is not one (paths and globs)."""
    if isinstance(inputs, (pa.Table, pa.RecordBatch)):
        t = inputs
        name = f"pyarrow.{type(t).__name__}"
        return MemorySource(name, t.schema, t.num_rows,
                            lambda cols: _Reader(_of_tables(iter([t]), cols, batch_rows)))
    if isinstance(inputs, pa.RecordBatchReader):
        r = inputs
        return MemorySource("pyarrow.RecordBatchReader", r.schema, None,
                            lambda cols: _Reader(_of_tables(iter(r), cols, batch_rows)))
    if _is_datasets(inputs, "IterableDataset"):
        it = _iterable_batches(inputs, batch_rows)
        first = next(it, None)
        if first is None:
            raise _empty("datasets.IterableDataset")
        return MemorySource("datasets.IterableDataset", first.schema, None,
                            lambda cols: _Reader(_of_tables(itertools.chain([first], it), cols,
                                                            batch_rows)))
    if _is_datasets(inputs, "Dataset"):
        ds = inputs
        return MemorySource("datasets.Dataset", ds.data.schema, len(ds), lambda cols: _Reader(
            _of_tables(ds.select_columns(cols).with_format("arrow").iter(batch_size=batch_rows),
                       cols, batch_rows)))
    return None


def _iterable_batches(ds: Any, batch_rows: int) -> Iterator[pa.Table]:
    """An IterableDataset's rows as Arrow tables: its "arrow" format where this datasets has
    it for iterable datasets, else its batches of Python lists."""
    try:
        return iter(ds.with_format("arrow").iter(batch_size=batch_rows))
    except (ValueError, NotImplementedError, AttributeError, TypeError):
        return (pa.Table.from_pydict(b) for b in ds.iter(batch_size=batch_rows))


def _empty(name: str) -> Exception:
    from fastaxo.errors import InvalidInputError

    return InvalidInputError(f"inputs: the {name} has no rows")
