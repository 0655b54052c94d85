"""Exact dedupe by value: :class:`RowSet` keeps references to the rows it holds (their Arrow
buffers) and compares candidates byte for byte, without a digest of every byte."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow
from fastaxo._core.backend import ext
from fastaxo._core.ragged import is_hf_dataset
from fastaxo._core.threads import resolve_num_threads
from fastaxo._reference import hashing as reference
from fastaxo.errors import InvalidInputError, InvalidTypeError
from fastaxo.hashing.rows import ROW_ENCODING_VERSION, corrupt_row, select_columns

__all__ = ["RowSet"]


class RowSet:
    """An exact, insertion-ordered set of table rows, compared by value, for :func:`dedupe`.

    Where :class:`Seen` keeps a SHA-256 digest of every row (so it needs every byte of every
    row hashed, and can be pickled and carried across processes), a RowSet keeps *references*
    to the rows: each row gets a cheap key (the length of its canonical encoding and 8 sampled
    16-byte windows of it), and only a row whose key was seen before is compared, byte for
    byte, with the earlier row(s) of that key. Unique rows cost a few cache lines each, a
    duplicate one comparison; the result is exact (no digest collisions are possible) and
    equal to :class:`Seen`'s. Keys shared by many distinct rows (templated data) switch to
    a digest table, so no input makes it quadratic.

    The rows stay where they are: a RowSet holds the Arrow data of every table added to it
    (a memory-mapped datasets table costs address space, not RAM) and about 50 bytes per
    distinct row. Accepts what :func:`hash_rows` accepts as tables: pyarrow Table,
    RecordBatch, Array, ChunkedArray, or a ``datasets.Dataset`` (its indices mapping is
    followed, nothing is gathered). Not picklable; use :class:`Seen` to carry a set across
    processes or to bound memory on a stream. Safe to share between threads.
    """

    def __init__(self) -> None:
        self._core = ext.RowSetCore() if ext is not None else None
        self._py: dict[bytes, None] = {}
        self.encoding: str | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._core) if self._core is not None else len(self._py)

    def __repr__(self) -> str:
        return f"<fastaxo.RowSet: {len(self)} distinct rows, encoding={self.encoding!r}>"

    @property
    def nbytes(self) -> int:
        """Bytes held by the set itself (entries and tables; not the rows it points into)."""
        return int(self._core.nbytes) if self._core is not None else len(self._py) * 120

    @property
    def stats(self) -> dict[str, int]:
        """Row comparisons made beyond the first per duplicate, hot keys, sources held."""
        return dict(self._core.stats) if self._core is not None else {"compares": 0, "hot_keys": 0,
                                                                      "sources": 0}

    def _bind(self, encoding: str) -> None:
        if self.encoding is None:
            self.encoding = encoding
        elif self.encoding != encoding:
            raise InvalidInputError(
                f"this RowSet holds rows encoded as {self.encoding!r}, but these rows are encoded "
                "as "
                f"{encoding!r}; they can never be equal. Use the same columns and types, or a new "
                "RowSet"
            )

    def add(self, data: Any, *, columns: Sequence[str] | str | None = None,
            num_threads: int | None = None) -> np.ndarray:
        """Insert the rows of ``data`` in order; returns a bool mask of the rows that were new
        (not equal to an earlier row of this call or of an earlier call)."""
        nt = resolve_num_threads(num_threads)
        table, rows, encoding = _rowset_source(data, columns)
        n = len(rows) if rows is not None else table.num_rows
        with self._lock:
            if n:
                self._bind(encoding)
            is_new = np.zeros(n, dtype=np.uint8)
            if n == 0:
                return is_new.view(bool)
            if self._core is None:
                msgs = reference.row_messages(table if rows is None else table.take(pa.array(rows)))
                for i, m in enumerate(msgs):
                    if m not in self._py:
                        self._py[m] = None
                        is_new[i] = 1
                return is_new.view(bool)
            assert ext is not None  # a RowSet has a core only with the extension
            keep: list[Any] = [table]
            tab = (
                ext.TabDesc.from_arrow(table, keep)
                if hasattr(table, "__arrow_c_stream__")
                else None
            )
            if tab is None:  # a type the C path leaves to column_spec (strings, dictionaries, ...)
                batches = [b for b in table.to_batches() if b.num_rows]
                specs = [
                    [
                        arrow.column_spec(b.column(j), keep, name)
                        for j, name in enumerate(table.column_names)
                    ]
                    for b in batches
                ]
                tab = ext.TabDesc(specs, [b.num_rows for b in batches], table.num_columns, keep)
            src = self._core.add_source(tab)
            bad = self._core.insert(src, rows, 0, is_new, nt)
            if bad is not None:
                row, status = bad
                raise corrupt_row(row, status)
        return is_new.view(bool)


def _rowset_source(data: Any, columns: Any) -> tuple[pa.Table, np.ndarray | None, str]:
    """(table of the selected columns, physical row order or None for all rows, encoding)."""
    if isinstance(data, (pa.Array, pa.ChunkedArray)):
        if columns is not None:
            raise InvalidInputError(
                "columns applies to tables (Table, RecordBatch, Dataset); data is an Arrow array"
            )
        table = pa.table({"_": data})
    elif isinstance(data, (pa.Table, pa.RecordBatch)):
        names = select_columns(data.column_names, columns)
        table = data.select(names)
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
    elif is_hf_dataset(data):
        names = select_columns(data.column_names, columns)
        full = data.data.table if hasattr(data.data, "table") else data.data
        table = full.select(names)
        if data._indices is not None:
            idx = data._indices.column(0)
            rows = np.ascontiguousarray(
                arrow.fixed_view(idx.combine_chunks())
                if idx.num_chunks != 1
                else arrow.fixed_view(idx.chunk(0))
            )
            # uint64 indices as int64 without a copy (a fresh 8 bytes a row faults in): a value
            # >= 2**63 reads negative, which insert refuses as out of range
            rows = (
                rows.view(np.int64)
                if rows.dtype == np.uint64
                else rows.astype(np.int64, copy=False)
            )
            return (
                table,
                rows,
                f"table:v{ROW_ENCODING_VERSION}:{arrow.type_signature(table.schema.types)}",
            )
    else:
        raise InvalidTypeError(
            f"data is {type(data).__module__}.{type(data).__qualname__}; a RowSet takes a pyarrow "
            "Table, "
            "RecordBatch, Array or ChunkedArray, or a datasets.Dataset"
        )
    return table, None, f"table:v{ROW_ENCODING_VERSION}:{arrow.type_signature(table.schema.types)}"
