"""The reader's pipeline over its files (it runs in the prefetch thread): pieces with their
cursors -> shard -> shuffle windows -> exact batches, each with the state that resumes after
it. See :mod:`fastaxo.readers` for the cursor and state model."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow
from fastaxo.errors import FileFormatError, InvalidInputError, SchemaMismatchError
from fastaxo.readers.ipc import open_ipc
from fastaxo.readers.options import Options
from fastaxo.readers.parquet import ParquetDecoder
from fastaxo.readers.sources import TEXT_FORMATS, changed, stamp
from fastaxo.readers.text import TextDecoder

__all__ = ["Source"]


class Source:
    """The files and the pipeline that reads them (runs in the prefetch thread). Holds no
    reference to its BatchReader, so a reader dropped without close() is collected at once
    and its __del__ stops the threads."""

    def __init__(self, files, opts: Options, schema: pa.Schema | None, *, rank: int,
                 world_size: int, shuffle_buffer: int, seed: int, trim_bytes: int,
                 stamps: list[tuple[int, int]]):
        self.files, self.opts = files, opts
        # (size, mtime_ns) of each file when the reader was made: a file that differs later is
        # being written, or was replaced, and its rows would not be the ones counted and
        # resumed (checked when it is opened and after its last rows are decoded)
        self.stamps = stamps
        self.rank, self.world_size = rank, world_size
        self.shuffle_buffer, self.seed = shuffle_buffer, seed
        self.trim_bytes = trim_bytes
        self.epoch = 0
        self.format = files[0][1]
        self._given_schema = schema
        self._text_schema = None
        # the first text file's inference block (the same blocks on every reopening)
        self.infer_at = -1
        self.handles: dict[int, Any] = {}
        self._meta: dict[int, tuple[pa.Schema, list[int] | None]] = {}
        first = self._open_file(0)
        try:
            self.schema = first.schema
            self.file_schema = getattr(first, "full_schema", first.schema)  # all its columns
            # the first file is known to hold no rows (TextDecoder.no_rows)
            self.first_no_rows = bool(getattr(first, "no_rows", False))
            if self.format in TEXT_FORMATS:
                self._text_schema = getattr(first, "full_schema", None)
            self._meta[0] = (first.schema, getattr(first, "rg_rows", None))
        except BaseException:
            first.close()
            raise
        if self.format in TEXT_FORMATS:
            self.infer_at = first.infer_at
            self.handles[0] = first  # kept open: its inference parse is the first block's rows
        else:
            first.close()
        if self.format in ("parquet", "arrow"):  # metadata is cheap: check every file now
            for i in range(1, len(self.files)):
                self._check_schema(i, self._peek(i)[0])
        self.range = self._shard_range()
        self.start = self._initial_state()

    def close(self) -> None:
        for h in self.handles.values():
            h.close()
        self.handles = {}

    # -- files
    def _open_file(self, i: int):
        path, fmt, comp = self.files[i]
        h: Any
        if fmt == "parquet":
            h = ParquetDecoder(path, self.opts)
        elif fmt == "arrow":
            h = open_ipc(path, self.opts)
        else:
            schema = self._text_schema if self._text_schema is not None else self._given_schema
            h = TextDecoder(path, fmt, comp, self.opts, schema, self.infer_at if i == 0 else -1,
                            self.stamps[i])
        try:
            self.check_unchanged(i)
        except BaseException:
            h.close()
            raise
        return h

    def check_unchanged(self, i: int) -> None:
        """Raise if file i is no longer what it was when the reader was made."""
        path = self.files[i][0]
        try:
            now = stamp(path)
        except OSError as e:
            raise FileFormatError(f"{path}: cannot read it any more ({e.strerror or e}); it was "
                                  "removed or replaced during the read", path) from None
        if now != self.stamps[i]:
            raise FileFormatError(
                f"{path} changed while it was read: {changed(path, self.stamps[i], now)}; it is "
                "still being written, or was replaced: read it once it is complete", path)

    def _file(self, i: int):
        """The open reader of file i (the previous one is closed)."""
        h = self.handles.get(i)
        if h is None:
            for j in list(self.handles):
                self.handles.pop(j).close()
            h = self.handles[i] = self._open_file(i)
        return h

    def _peek(self, i: int) -> tuple[pa.Schema, list[int] | None]:
        """(projected schema, row counts per unit or None) of file i, from its metadata."""
        if i not in self._meta:
            h = self._open_file(i)
            try:
                self._meta[i] = (h.schema, getattr(h, "rg_rows", None))
            finally:
                h.close()
        return self._meta[i]

    def _check_schema(self, i: int, schema: pa.Schema) -> None:
        if not schema.equals(self.schema):
            a, b = self.schema, schema
            diff = next((f"column {k}: {fa.name}: {fa.type} vs {fb.name}: {fb.type}"
                         for k, (fa, fb) in enumerate(zip(a, b)) if not fa.equals(fb)),
                        f"{len(a)} vs {len(b)} columns ({a.names} vs {b.names})")
            raise SchemaMismatchError(
                f"source: {self.files[i][0]} has a different schema from {self.files[0][0]} "
                f"({diff})"
            )

    def _shard_range(self) -> tuple[int, int] | None:
        """Contiguous [lo, hi) of global rows for this rank where every file's row count is in
        its metadata (Parquet); None: rows are dealt round-robin (g % world_size == rank)."""
        if self.format != "parquet" or self.world_size == 1:
            return None
        n = sum(self.counts())
        return self.rank * n // self.world_size, (self.rank + 1) * n // self.world_size

    def counts(self) -> list[int]:
        return [sum(self._units(i)) for i in range(len(self.files))]

    def _units(self, i: int) -> list[int]:
        """Rows per unit of file i (Parquet: every footer has them)."""
        rows = self._peek(i)[1]
        assert rows is not None, "row counts come from Parquet footers"
        return rows

    def _locate(self, g: int) -> tuple[int, int | None, int, int]:
        acc = 0
        for f in range(len(self.files)):
            rg_rows = self._units(f)
            n = sum(rg_rows)
            if g < acc + n:
                off = g - acc
                for rg, k in enumerate(rg_rows):
                    if off < k:
                        return f, rg, off, g
                    off -= k
            acc += n
        return -1, None, 0, g

    def rows_before(self, row: int) -> int:
        """Rows this rank delivers before the global row ``row`` (a cursor's row)."""
        if self.range is not None:
            return max(0, row - self.range[0])
        W, r = self.world_size, self.rank
        return row if W == 1 else max(0, (row - r + W - 1) // W)

    def position_problem(self, pos: Any, rows: int) -> str | None:
        """Why ``pos`` (the ``position`` of a state_dict whose ``rows`` is given) is not a
        position in this source, or None. Every field is checked for its type and range, and
        against the others: ``rows`` (delivered this epoch) must be the rows before ``row``
        plus ``skip``; a shuffle window number cannot exceed the windows those rows fill. With
        Parquet every field is also checked against the footers. What only the file can tell
        (a text position at a line start, an Arrow batch number) the decoders check when they
        seek there."""
        keys = ("file", "unit", "offset", "row", "window", "skip", "done")
        if not isinstance(pos, dict) or sorted(pos) != sorted(keys):
            return f"position must be a dict with the fields {list(keys)}, got {pos!r:.200}"

        def count(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool) and v >= 0

        for k in ("offset", "row", "window", "skip"):
            if not count(pos[k]):
                return f"position {k} must be an integer >= 0, got {pos[k]!r:.100}"
        if not isinstance(pos["done"], bool):
            return f"position done must be True or False, got {pos['done']!r:.100}"
        f, unit, nfiles = pos["file"], pos["unit"], len(self.files)
        lowest = -1 if self.range is not None else 0  # -1: the end of this rank's Parquet rows
        if not (isinstance(f, int) and not isinstance(f, bool) and lowest <= f < nfiles):
            return (f"position file must be {'-1 (the end) or ' if lowest else ''}0..{nfiles - 1} "
                    f"(the index of a file of the source), got {f!r:.100}")
        if unit is not None and not count(unit):
            return f"position unit must be None or an integer >= 0, got {unit!r:.100}"
        # unit None is a file's start: the source's first row, or a later file's first
        if unit is None and (pos["offset"] or (f == 0 and pos["row"])):
            return (f"position unit None (the start of file {f}) does not go with offset "
                    f"{pos['offset']:,} and row {pos['row']:,}")
        if f == -1:
            end = self.range[1] if self.range is not None else 0  # (-1 passed only with a range)
            if not (pos["done"] and pos["row"] == end and unit is None and not pos["offset"]
                    and not pos["skip"]):
                return (f"position file -1 (the end of this rank's rows) needs done=True, row "
                        f"{end:,}, no unit, offset or skip; got {pos!r:.200}")
        before = self.rows_before(pos["row"])
        if rows != before + pos["skip"]:
            return (f"rows {rows:,} does not match the position: row {pos['row']:,} comes after "
                    f"{before:,} rows of this rank, and skip is {pos['skip']:,}")
        S = self.shuffle_buffer
        if S and pos["window"] > -(-before // S) + 1:
            return (f"position window {pos['window']:,} is past the windows of at least "
                    f"{S:,} rows that the {before:,} rows before it fill")
        if self.format != "parquet":
            return None
        counts = self.counts()
        total = sum(counts)
        if pos["row"] > total:
            return f"position row {pos['row']:,} is past the source's {total:,} rows"
        if self.range is not None and not self.range[0] <= pos["row"] <= self.range[1]:
            return (f"position row {pos['row']:,} is outside rank {self.rank}'s rows "
                    f"[{self.range[0]:,}, {self.range[1]:,})")
        if f == -1:
            return None
        rows_of = self._units(f)
        u = 0 if unit is None else unit
        if u > len(rows_of) or (u == len(rows_of) and pos["offset"]) or \
                (u < len(rows_of) and pos["offset"] >= rows_of[u] and pos["offset"]):
            return (f"position unit {unit}, offset {pos['offset']:,} is not in "
                    f"{self.files[f][0]} ({len(rows_of)} row groups)")
        g = sum(counts[:f]) + sum(rows_of[:u]) + pos["offset"]
        if g != pos["row"]:
            return (f"position row {pos['row']:,} does not match file {f}, unit {unit}, offset "
                    f"{pos['offset']:,} (which is row {g:,})")
        return None

    def _initial_state(self) -> dict[str, Any]:
        if self.range is not None:
            f, unit, off, g = self._locate(self.range[0])
        else:
            f, unit, off, g = 0, None, 0, 0
        return {"file": f, "unit": unit, "offset": off, "row": g, "window": 0, "skip": 0,
                "done": False}

    # -- the pipeline (runs in the prefetch thread)
    def _pieces(self, cur: tuple) -> Iterator[tuple[pa.RecordBatch, tuple, tuple]]:
        f0, unit, off, g = cur
        W, r, rng = self.world_size, self.rank, self.range
        before = cur
        trim, decoded = self.trim_bytes, 0
        pool = self.opts.pool
        for f in range(f0, len(self.files)):
            h = self._file(f)
            if f:
                self._check_schema(f, h.schema)
            for b, nu, no in h.pieces(unit if f == f0 else None, off if f == f0 else 0):
                n = b.num_rows
                if trim:
                    decoded += b.nbytes
                    if decoded >= trim:
                        # mimalloc/jemalloc keep freed pages of the decoders; without this the
                        # RSS creeps up for the first few hundred MB read (measured: +40%)
                        pool.release_unused()
                        decoded = 0
                after = (f, nu, no, g + n)
                if rng is not None:
                    lo, hi = rng
                    a, z = max(lo - g, 0), min(hi - g, n)
                    if g + n >= hi:
                        after = (-1, None, 0, hi)  # the end of this rank's range
                    if z > a:
                        yield (b if (a == 0 and z == n) else b.slice(a, z - a)), before, after
                    g += n
                    before = after
                    if g >= hi:
                        return
                    continue
                if W > 1:
                    first = (r - g) % W
                    if first < n:
                        yield b.take(np.arange(first, n, W)), before, after
                else:
                    yield b, before, after
                g += n
                before = after
            self.check_unchanged(f)
            before = (f + 1, None, 0, g)

    def _windows(self, cur: tuple, k: int) -> Iterator[tuple[pa.RecordBatch, tuple, tuple, int]]:
        pieces = self._pieces(cur)
        S = self.shuffle_buffer
        if not S:
            for b, c0, c1 in pieces:
                yield b, c0, c1, k
                k += 1
            return
        buf: list[pa.RecordBatch] = []
        rows = 0
        start = cur
        end = cur
        for b, c0, c1 in pieces:
            if not buf:
                start = c0
            buf.append(b)
            rows += b.num_rows
            end = c1
            if rows >= S:
                yield self._permute(buf, k), start, end, k
                k += 1
                buf, rows = [], 0
        if buf:
            yield self._permute(buf, k), start, end, k

    def _permute(self, bufs: list[pa.RecordBatch], k: int) -> pa.RecordBatch:
        t = arrow.concat_batches(bufs, self.opts.pool) if len(bufs) > 1 else bufs[0]
        perm = np.random.default_rng([self.seed, self.epoch, self.rank, k]).permutation(t.num_rows)
        return t.take(perm)

    def batches(self, state: dict[str, Any]
                ) -> Generator[tuple[pa.RecordBatch | None, dict[str, Any]], None, None]:
        # The cursor, not the done flag, says where the rows end: a state whose flag says done
        # before the end reads on (an empty read where it is the end).
        if state["file"] == -1:
            return
        B = self.opts.batch_rows
        cur = (state["file"], state["unit"], state["offset"], state["row"])
        pending: list[pa.RecordBatch] = []
        have = 0
        skip = state["skip"]
        last_state = None
        for win, c0, c1, k in self._windows(cur, state["window"]):
            n = win.num_rows
            if skip and skip >= n:
                raise InvalidInputError(
                    f"state: position skip {skip:,} is not below the {n:,} rows of the window it "
                    f"resumes ({self.files[c0[0]][0] if c0[0] >= 0 else 'the end'}, window "
                    f"{k}); the state was damaged or edited")
            pos = skip
            skip = 0
            while pos < n:
                take = min(B - have, n - pos)
                pending.append(win.slice(pos, take))
                have += take
                pos += take
                if have == B:
                    out = self._concat(pending)
                    yield out, (self._state_at(c1, k + 1, 0) if pos == n
                                else self._state_at(c0, k, pos))
                    pending, have = [], 0
            last_state = self._state_at(c1, k + 1, 0)
        if skip:
            raise InvalidInputError(f"state: position skip {skip:,} is past the end of the rows "
                                    "after its position; the state was damaged or edited")
        if pending:
            assert last_state is not None  # pending rows came from a window
            yield self._concat(pending), dict(last_state, done=True)
        elif last_state is not None:
            yield None, dict(last_state, done=True)

    @staticmethod
    def _state_at(c: tuple, window: int, skip: int) -> dict[str, Any]:
        return {"file": c[0], "unit": c[1], "offset": c[2], "row": c[3], "window": window,
                "skip": skip, "done": c[0] == -1}

    def _concat(self, parts: list[pa.RecordBatch]) -> pa.RecordBatch:
        return arrow.concat_batches(parts, self.opts.pool) if len(parts) > 1 else parts[0]
