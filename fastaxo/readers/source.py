"""The reader's pipeline over its files (it runs in the prefetch thread): pieces with their
cursors -> shard -> shuffle windows -> exact batches, each with the state that resumes after
it. See :mod:`fastaxo.readers` for the cursor and state model."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow
from fastaxo.errors import SchemaMismatchError
from fastaxo.readers.ipc import open_ipc
from fastaxo.readers.options import Options
from fastaxo.readers.parquet import ParquetDecoder
from fastaxo.readers.sources import TEXT_FORMATS
from fastaxo.readers.text import TextDecoder

__all__ = ["Source"]


class Source:
    """The files and the pipeline that reads them (runs in the prefetch thread). Holds no
    reference to its BatchReader, so a reader dropped without close() is collected at once
    and its __del__ stops the threads."""

    def __init__(self, files, opts: Options, schema: pa.Schema | None, rank: int, world_size: int,
                 shuffle_buffer: int, seed: int, trim_bytes: int):
        self.files, self.opts = files, opts
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
        if fmt == "parquet":
            return ParquetDecoder(path, self.opts)
        if fmt == "arrow":
            return open_ipc(path, self.opts)
        schema = self._text_schema if self._text_schema is not None else self._given_schema
        return TextDecoder(path, fmt, comp, self.opts, schema, self.infer_at if i == 0 else -1)

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

    def position_problem(self, pos: Any) -> str | None:
        """Why ``pos`` (the ``position`` of a state_dict) is not a position in this source, or
        None. A position is (file, unit, offset) plus the global row it stands for: with
        Parquet every field is checked against the footers and against each other."""
        keys = ("file", "unit", "offset", "row", "window", "skip", "done")
        if not isinstance(pos, dict) or sorted(pos) != sorted(keys):
            return f"position must be a dict with the fields {list(keys)}, got {pos!r:.200}"

        def count(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool) and v >= 0

        for k in ("offset", "row", "window", "skip"):
            if not count(pos[k]):
                return f"position {k} must be an integer >= 0, got {pos[k]!r}"
        if not isinstance(pos["done"], bool):
            return f"position done must be True or False, got {pos['done']!r}"
        f, unit, nfiles = pos["file"], pos["unit"], len(self.files)
        if not (isinstance(f, int) and not isinstance(f, bool) and -1 <= f <= nfiles):
            return f"position file must be -1 (the end) or 0..{nfiles}, got {f!r}"
        if unit is not None and not count(unit):
            return f"position unit must be None or an integer >= 0, got {unit!r}"
        if f == -1 and not pos["done"]:
            return "position file -1 (the end of this rank's rows) needs done=True"
        if self.format != "parquet":
            return None
        counts = self.counts()
        total = sum(counts)
        if pos["row"] > total:
            return f"position row {pos['row']:,} is past the source's {total:,} rows"
        if self.range is not None and not self.range[0] <= pos["row"] <= self.range[1]:
            return (f"position row {pos['row']:,} is outside rank {self.rank}'s rows "
                    f"[{self.range[0]:,}, {self.range[1]:,})")
        if f == -1 or f == nfiles:
            return None
        rows = self._units(f)
        u = 0 if unit is None else unit
        if u > len(rows) or (u == len(rows) and pos["offset"]) or \
                (u < len(rows) and pos["offset"] >= rows[u] and pos["offset"]):
            return (f"position unit {unit}, offset {pos['offset']:,} is not in "
                    f"{self.files[f][0]} ({len(rows)} row groups)")
        g = sum(counts[:f]) + sum(rows[:u]) + pos["offset"]
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
        if state["done"]:
            return
        B = self.opts.batch_rows
        cur = (state["file"], state["unit"], state["offset"], state["row"])
        pending: list[pa.RecordBatch] = []
        have = 0
        skip = state["skip"]
        last_state = None
        for win, c0, c1, k in self._windows(cur, state["window"]):
            n = win.num_rows
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
