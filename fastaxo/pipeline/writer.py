"""The output file: Parquet row groups into a temporary file beside it, renamed at the end."""

from __future__ import annotations

import os
import time
from typing import Any

import pyarrow as pa

from fastaxo._core import backend
from fastaxo._core.files import TempOutput
from fastaxo.pipeline.parquet import ListTableWriter

__all__ = ["Writer"]


class Writer:
    """Parquet row groups into a temporary file next to ``output``; ``commit`` renames it to
    ``output``, ``abort`` removes it. Tables of integer lists (prepare's output) go through
    :class:`ListTableWriter`, whose pages are compressed on ``num_threads`` threads; other
    schemas, and runs without the extension, through pyarrow's writer with the same settings.
    Synchronous: a writer thread beside the pipeline was measured slower on 2 cores (it
    competes with the reader thread, and needs fresh output buffers per row group, whose first
    touch costs more than the copy into them)."""

    def __init__(self, output: str, schema: pa.Schema, num_threads: int = 1):
        self.output = output
        self._tmp = TempOutput(output)  # also removes temporaries of killed runs
        self.tmp = self._tmp.path
        self.schema = schema
        self._lists: ListTableWriter | None = None
        self._w: Any = None  # pyarrow's ParquetWriter
        if backend.pack_ext is not None and ListTableWriter.takes(schema):
            self._lists = ListTableWriter(self.tmp, schema, num_threads=num_threads)
        else:
            import pyarrow.parquet as pq

            # Token columns are high-entropy ints: dictionary encoding and statistics cost
            # time and gain nothing. zstd level 1: as fast as snappy here, ~40% smaller.
            self._w = pq.ParquetWriter(self.tmp, schema, compression="zstd",
                                       compression_level=1, use_dictionary=False,
                                       write_statistics=False)
        self.row_groups = 0
        self.seconds = 0.0

    def write(self, arrays: list[pa.Array | pa.ChunkedArray]) -> None:
        t = time.perf_counter()
        if self._lists is not None:
            self._lists.write(arrays)
        else:
            self._w.write_table(pa.Table.from_arrays(arrays, schema=self.schema),
                                row_group_size=max(len(arrays[0]), 1))
        self.row_groups += 1
        self.seconds += time.perf_counter() - t

    def commit(self, schema: pa.Schema | None = None) -> int:
        """Closes the file and renames it to ``output``; its size. ``schema``: the final
        schema, when an integer column's width is decided at the end (same names; a
        narrower integer type the values fit, refused otherwise)."""
        t = time.perf_counter()
        if self._lists is not None:
            self._lists.close(schema)
        else:
            self._w.close()
            if schema is not None and not schema.equals(self.schema, check_metadata=True):
                self._rewrite(schema)
        self._tmp.commit()
        self.seconds += time.perf_counter() - t
        return os.path.getsize(self.output)

    def _rewrite(self, schema: pa.Schema) -> None:
        """pyarrow's file again under ``schema``, row group by row group (the casts are
        checked: a value the type does not hold raises). Only runs without the extension
        get here; the extension's writer narrows a type in the footer."""
        import pyarrow.parquet as pq

        src = pq.ParquetFile(self.tmp)
        again = TempOutput(self.output)
        try:
            w = pq.ParquetWriter(again.path, schema, compression="zstd", compression_level=1,
                                 use_dictionary=False, write_statistics=False)
            for i in range(src.num_row_groups):
                g = src.read_row_group(i)
                w.write_table(g.cast(schema), row_group_size=max(g.num_rows, 1))
            w.close()
        except BaseException:
            again.abort()
            raise
        finally:
            src.close()
        self._tmp.abort()
        self._tmp, self.tmp = again, again.path

    def abort(self) -> None:
        try:
            if self._lists is not None:
                self._lists.abort()
            else:
                self._w.close()
        except BaseException:
            pass
        self._tmp.abort()
