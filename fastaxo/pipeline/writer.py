"""The output file: Parquet row groups into a temporary file beside it, renamed at the end."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pyarrow as pa

from fastaxo._core import backend
from fastaxo._core.files import TempOutput
from fastaxo.pipeline.parquet import ListTableWriter

__all__ = ["Writer"]


def _pyarrow_writer(path: str, schema: pa.Schema) -> Any:
    """pyarrow's ParquetWriter with the settings of fastaxo's own writer: token columns are
    high-entropy ints, so dictionary encoding and statistics cost time and gain nothing;
    zstd level 1 is as fast as snappy here, ~40% smaller."""
    import pyarrow.parquet as pq

    return pq.ParquetWriter(path, schema, compression="zstd", compression_level=1,
                            use_dictionary=False, write_statistics=False)


class _Syncer:
    """fsync of the file being written, on a thread of its own after each row group, while
    the pass goes on: the data reaches the disk as it is written, and the fsync of the commit
    (durability before the rename) finds little left to flush (~0.1 s for 220 MB here). At
    most one runs at a time; none in a process forked after it started (its thread is gone)."""

    def __init__(self, path: str):
        self._fd = os.open(path, os.O_RDONLY)  # (fsync flushes the file, whichever fd)
        self._pid = os.getpid()
        self._busy = threading.Lock()
        self._thread: threading.Thread | None = None

    def _sync(self) -> None:
        try:
            os.fsync(self._fd)
        except OSError:
            pass  # (the commit's own fsync reports a failing disk)
        finally:
            self._busy.release()

    def kick(self) -> None:
        if os.getpid() != self._pid or not self._busy.acquire(blocking=False):
            return
        self._thread = threading.Thread(target=self._sync, name="fastaxo-fsync", daemon=True)
        self._thread.start()

    def close(self) -> None:
        try:
            if self._thread is not None and os.getpid() == self._pid:
                self._thread.join()
        finally:
            os.close(self._fd)


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
        self._syncer: _Syncer | None = None
        self.row_groups = 0
        self.seconds = 0.0
        try:
            if backend.pack_ext is not None and ListTableWriter.takes(schema):
                self._lists = ListTableWriter(self.tmp, schema, num_threads=num_threads)
            else:
                self._w = _pyarrow_writer(self.tmp, schema)
            if os.name == "posix":
                self._syncer = _Syncer(self.tmp)
        except BaseException:
            # a Ctrl-C here, once the file exists, would leave it: no caller holds the writer
            self.abort()
            raise

    def write(self, arrays: list[pa.Array | pa.ChunkedArray]) -> None:
        t = time.perf_counter()
        if self._lists is not None:
            self._lists.write(arrays)
        else:
            self._w.write_table(pa.Table.from_arrays(arrays, schema=self.schema),
                                row_group_size=max(len(arrays[0]), 1))
        self.row_groups += 1
        if self._syncer is not None:
            self._syncer.kick()
        self.seconds += time.perf_counter() - t

    def _stop_syncing(self) -> None:
        if self._syncer is not None:
            self._syncer.close()
            self._syncer = None

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
        self._stop_syncing()
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
            w = _pyarrow_writer(again.path, schema)
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
        """Closes and removes the temporary; safe to call at any point, also twice. The
        removal is in a finally: a second Ctrl-C while the fsync thread is joined, or a
        close that fails, must not leave the file behind."""
        try:
            self._stop_syncing()
        finally:
            try:
                if self._lists is not None:
                    self._lists.abort()
                elif self._w is not None:
                    self._w.close()
            except BaseException:
                pass
            finally:
                self._tmp.abort()
