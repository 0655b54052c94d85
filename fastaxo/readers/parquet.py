"""The Parquet decoder: units are row groups, streamed page by page (no pre-buffering),
columns split between two decoding threads where that pays."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from fastaxo.errors import FileFormatError
from fastaxo.readers.options import OPEN_ERRORS, Options, file_error, project
from fastaxo.readers.prefetch import Prefetch
from fastaxo.readers.sources import format_hint

__all__ = ["ParquetDecoder", "footer_error", "read_footer"]


def _parquet_file(path: str, opts: Options, metadata: Any = None):
    """pq.ParquetFile streaming pages (no pre-buffer), decoding into ``opts.pool``. pyarrow's
    public ParquetFile takes no pool: its reader is swapped for one made with the pool (the
    same call ParquetFile makes); if this pyarrow's private API differs, the default pool."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=opts.buffer_bytes, memory_map=False,
                        metadata=metadata,
                        page_checksum_verification=True)  # where the writer stored CRCs
    if opts.pool is not None and opts.pool is not pa.default_memory_pool():
        try:
            from pyarrow._parquet import ParquetReader

            reader = ParquetReader(memory_pool=opts.pool)
            reader.open(path, use_memory_map=False, buffer_size=opts.buffer_bytes, pre_buffer=False,
                        metadata=pf.metadata, arrow_extensions_enabled=True,
                        page_checksum_verification=True)
            old, pf.reader = pf.reader, reader
            old.close()
        except (ImportError, TypeError, AttributeError):
            pass
    return pf


def footer_error(path: str, err: BaseException) -> FileFormatError:
    """The FileFormatError for a Parquet footer that cannot be read (one line, naming the
    file)."""
    hint = format_hint(path, "parquet")  # not Parquet at all: what it is, and what to pass
    if hint and not isinstance(err, UnicodeDecodeError):
        return FileFormatError(f"{path}: cannot open as Parquet{hint}", path, "footer")
    return file_error(path, "footer", err, "cannot open as Parquet: ")


def _footer_facts(md: Any, path: str) -> tuple[pa.Schema, list[int]]:
    """(Arrow schema, rows per row group) of a footer. Only accessors that raise Python
    exceptions: never a row group's ``column()`` or ``statistics`` (see
    ParquetDecoder._column_sizes)."""
    try:
        schema = md.schema.to_arrow_schema()
        rows = [int(md.row_group(i).num_rows) for i in range(md.num_row_groups)]
    except OPEN_ERRORS as e:
        raise footer_error(path, e) from None
    bad = next((i for i, n in enumerate(rows) if n < 0), None)
    if bad is not None:
        raise FileFormatError(f"{path} (footer): row group {bad} has {rows[bad]} rows: the file is "
                              "corrupt", path, "footer")
    return schema, rows


def read_footer(path: str) -> tuple[pa.Schema, list[int]]:
    """(Arrow schema, rows per row group) of the Parquet file ``path``, from its footer; a
    damaged or non-Parquet file is a FileFormatError naming it. What every fastaxo footer read
    goes through (the reader, prepare)."""
    import pyarrow.parquet as pq

    try:
        md = pq.read_metadata(path)
    except OPEN_ERRORS as e:
        raise footer_error(path, e) from None
    return _footer_facts(md, path)


class ParquetDecoder:
    """Parquet: units are row groups, streamed page by page (no pre-buffering)."""

    def __init__(self, path: str, opts: Options):
        self.path, self.opts = path, opts
        try:
            self.pf = _parquet_file(path, opts)
        except OPEN_ERRORS as e:
            raise footer_error(path, e) from None
        try:
            self.full_schema, self.rg_rows = _footer_facts(self.pf.metadata, path)
        except BaseException:
            self.pf.close()
            raise
        self.num_rows = sum(self.rg_rows)
        self.schema = project(self.full_schema, opts.columns, path)

    def _groups(self, rg: int) -> list[list[str]] | None:
        """The columns split in two groups of about equal decoded size (the footer's sizes in
        row group ``rg``, where the read starts), each decoded by its own thread with no
        barrier between them; None: one decoder."""
        cols = list(self.opts.columns) if self.opts.columns is not None else self.full_schema.names
        if not self.opts.use_threads or len(cols) < 2 or any("." in c for c in cols):
            return None
        size = self._column_sizes(rg, cols)
        if size is None:
            return None
        groups: list[list[str]] = [[], []]
        load = [0, 0]
        for c in sorted(cols, key=lambda c: -size[c]):
            k = load.index(min(load))
            groups[k].append(c)
            load[k] += size[c] + 1
        return groups

    def _column_sizes(self, rg: int, cols: list[str]) -> dict[str, int] | None:
        """Uncompressed bytes of each of ``cols`` in row group ``rg``, from the footer; None if
        the row group does not exist or cannot be read (the read itself then says why).

        pyarrow's ``RowGroupMetaData.column()`` (and a chunk's ``statistics``) throw C++
        exceptions that pyarrow does not catch when the footer lies about a column chunk
        (a physical type or a level histogram that does not fit the schema): the process
        aborts. Its read path builds the same chunk metadata and turns the exception into an
        ArrowException. So a one-row read of these columns of this row group goes first, and
        only the chunks it has built are asked for their sizes."""
        if rg >= len(self.rg_rows) or not self.rg_rows[rg]:
            return None
        try:
            for _ in self.pf.iter_batches(batch_size=1, row_groups=[rg], columns=cols,
                                          use_threads=False):
                break
        except OPEN_ERRORS:
            return None
        md = self.pf.metadata
        schema, group = md.schema, md.row_group(rg)
        size = dict.fromkeys(cols, 0)
        for j in range(min(len(schema), group.num_columns)):
            top = schema.column(j).path.split(".")[0]
            if top in size:  # a leaf of a column the read above checked
                size[top] += group.column(j).total_uncompressed_size
        return size

    def _decoded(self, rg0: int, cols: list[str] | None, use_threads: bool, pf=None):
        """(row group, batch) row group after row group from rg0, each row group closed by
        (row group, None). Batches restart at every row group, so they never span two and a
        resume at a row group sees the same batches."""
        own = pf is None
        if own:
            try:
                pf = _parquet_file(self.path, self.opts, self.pf.metadata)
            except OPEN_ERRORS as e:
                raise footer_error(self.path, e) from None
        try:
            for rg in range(rg0, len(self.rg_rows)):
                try:
                    for b in pf.iter_batches(batch_size=self.opts.decode_rows, row_groups=[rg],
                                             columns=cols, use_threads=use_threads):
                        yield rg, b
                except (pa.ArrowException, OSError) as e:
                    where = f"row group {rg} of {len(self.rg_rows)}"
                    raise file_error(self.path, where, e) from None
                yield rg, None
        finally:
            if own:
                pf.close()

    def _zip(self, feeds: list[Prefetch]):
        names = self.schema.names
        while True:
            items = [f.get() for f in feeds]
            if all(x is None for x in items):
                return
            rgs = {x[0] for x in items if x is not None}
            ends = {x is None or x[1] is None for x in items}
            if None in items or len(rgs) != 1 or len(ends) != 1 or (
                    items[0][1] is not None and len({x[1].num_rows for x in items}) != 1):
                raise FileFormatError(f"{self.path}: the column decoders disagree near row group "
                                      f"{min(rgs)}", self.path, f"row group {min(rgs)}")
            rg = items[0][0]
            if items[0][1] is None:
                yield rg, None
                continue
            cols: dict[str, pa.Array] = {}
            for _, b in items:
                cols.update(zip(b.schema.names, b.columns))
            yield rg, pa.RecordBatch.from_arrays([cols[c] for c in names], schema=self.schema)

    def pieces(self, unit: int | None, offset: int) -> Iterator[tuple[pa.RecordBatch, int, int]]:
        rg0 = unit or 0
        groups = self._groups(rg0)
        feeds = None
        if groups is None:
            cols = list(self.opts.columns) if self.opts.columns is not None else None
            stream = self._decoded(rg0, cols, self.opts.use_threads, self.pf)
        else:
            size = lambda item: item[1].nbytes if item[1] is not None else 0  # noqa: E731
            feeds = [Prefetch(self._decoded(rg0, g, False), 2, 1 << 62, size) for g in groups]
            stream = self._zip(feeds)
        try:
            got = 0
            for rg, b in stream:
                want = self.rg_rows[rg]
                if b is None:
                    if got != want:
                        raise FileFormatError(f"{self.path} (row group {rg}): read {got} rows, "
                                              f"the footer says {want}", self.path,
                                              f"row group {rg}")
                    got = 0
                    continue
                start = got
                got += b.num_rows
                skip = offset if rg == rg0 else 0
                if got <= skip:
                    continue
                if start < skip:
                    b = b.slice(skip - start)
                if b.schema.names != self.schema.names:
                    b = b.select(self.schema.names)
                yield b, *((rg, got) if got < want else (rg + 1, 0))
        finally:
            if feeds is not None:
                for f in feeds:
                    f.close()

    def close(self) -> None:
        self.pf.close()
