"""The text decoders: JSON Lines, CSV/TSV and plain text, read in blocks of whole lines."""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import backend
from fastaxo._reference import text as reference
from fastaxo.errors import FileFormatError, InvalidInputError, SchemaMismatchError
from fastaxo.readers.options import Options, file_error, project
from fastaxo.readers.prefetch import Prefetch
from fastaxo.readers.sources import changed, format_hint, stamp

__all__ = ["INFER_BYTES", "MAX_JSON_DEPTH", "TextDecoder", "json_too_deep"]

INFER_BYTES = 16 << 20  # JSON Lines / CSV column types come from the first 16 MiB of the first file
# The deepest JSON Lines row handed to pyarrow. Its parser recurses per level: measured on
# pyarrow 26 (x86-64), ~330-650 stack bytes a level, so a row ~13,000-25,000 deep overflows an
# 8 MiB thread stack (SIGSEGV; a 1 MiB stack at ~2,000); and a block's type inference grows
# with the cube of the depth (a row 512 deep: 0.4 s per block, 1,000: 7 s, 2,000: 58 s).
# At 128 (serde_json's default) a block costs milliseconds; real rows nest < 20 deep.
MAX_JSON_DEPTH = 128


# what to do about column types fixed by the first 16 MiB (the CLI has no schema option)
SCHEMA_HINT = ("; pass schema= to set them (iter_batches(schema=...), prepare(reader_options="
               "{'schema': ...})); `fastaxo prepare` reads the types from the first 16 MiB: put "
               "rows that hold every column's type there")


def json_too_deep(block: memoryview | bytes, limit: int) -> int:
    """The 0-based index of the first line of ``block`` nested deeper than ``limit`` (outside
    strings, escapes honoured; csrc/fx_json.h), or -1: the compiled scan (~1.5-4 GB/s, a few
    percent of pyarrow's JSON decode), or its NumPy twin without the extension."""
    if backend.pack_ext is not None:
        return int(backend.pack_ext.json_too_deep(block, limit))
    return reference.json_too_deep(block, limit)


def _lone_surrogate(obj: Any) -> str | None:
    """The first lone surrogate in a parsed JSON value's strings (keys too), or None."""
    todo = [obj]
    while todo:
        x = todo.pop()
        if isinstance(x, str):
            try:
                x.encode("utf-8")
            except UnicodeEncodeError as u:
                return x[u.start]
        elif isinstance(x, dict):
            todo.extend(x.keys())
            todo.extend(x.values())
        elif isinstance(x, list):
            todo.extend(x)
    return None


class TextDecoder:
    """JSON Lines, CSV/TSV and plain text, read in blocks of whole lines.

    A block is ``block_bytes`` from its start, cut after the last newline (extended to the
    next newline for longer lines): a pure function of the start, so units are block start
    positions in the (decompressed) stream. Uncompressed files seek; compressed ones
    decompress from the beginning. The first 16 MiB of the first file fix the schema
    (pyarrow's streaming-reader rule, over at least INFER_BYTES); ``schema=`` fixes it up front.
    """

    def __init__(self, path: str, kind: str, comp: str | None, opts: Options,
                 schema: pa.Schema | None, infer_at: int = -1,
                 expect: tuple[int, int] | None = None):
        self.path, self.kind, self.comp, self.opts = path, kind, comp, opts
        # (size, mtime_ns) the file must still have when its end is read: a file that grows
        # during the read (still being written) would give its half-written last line as a row
        try:
            self.expect = expect if expect is not None else stamp(path)
        except OSError as e:
            raise file_error(path, "start", e, "cannot open: ") from None
        self.num_rows = None
        # a JSON Lines file with nothing but whitespace: no rows, so no columns (set by _infer)
        self.no_rows = False
        self.fh: Any = None
        self._spares: list[bytearray] = []  # block buffers no parsed array points into
        # the inference parse (start, end, table, the block generator after it): the first
        # pieces() from that start yields this table instead of parsing the block again
        self._first: tuple[int, int, pa.Table, Generator[Any, None, None]] | None = None
        # where the inference block starts (this handle's, or given: the first file reopened
        # with its inferred schema): a block from here is INFER_BYTES long, kept or not
        self.infer_at = infer_at
        self.header: list[str] | None = None
        self.header_end = 0
        self._explicit = schema
        hint = format_hint(path, kind) if comp is None else ""
        if hint:  # a Parquet or Arrow file (or a compressed one) read as text: say so now
            raise FileFormatError(f"{path}: cannot read as {kind}{hint}", path, "start")
        try:
            self._open(0)
            if kind in ("csv", "tsv"):
                self._read_header()
        except (pa.ArrowException, OSError) as e:
            raise file_error(path, "start", e, "cannot open: ") from None
        if schema is None:
            schema = self._infer()
        elif self.header is not None and self.header != schema.names:
            raise SchemaMismatchError(
                f"{path}: the header names columns {self.header}, the source's schema has "
                f"{schema.names}")
        self.full_schema = schema
        self.schema = project(schema, opts.columns, path)

    # -- byte level
    def _open(self, pos: int) -> None:
        if self.fh is not None:
            self.fh.close()
        raw = pa.OSFile(self.path)
        self.fh = pa.CompressedInputStream(raw, self.comp) if self.comp else raw
        self.pos = 0
        if pos:
            # a position from a resume state: it must be a line start (or the end) of the file
            if self.comp:
                left, last = pos, b""
                while left:  # a compressed stream only reads forwards
                    chunk = self.fh.read(min(left, 1 << 24))
                    if not chunk:
                        raise self._unit_error(pos, f"is past the end of the decompressed file "
                                                    f"({pos - left:,} bytes)")
                    left -= len(chunk)
                    last = chunk[-1:]
                at_line = last == b"\n" or pos == self.header_end or not self.fh.read(1)
            else:
                size = self.fh.size()
                if pos > size:
                    raise self._unit_error(pos, f"is past the end of the file ({size:,} bytes)")
                at_line = pos in (size, self.header_end) or self.fh.read_at(1, pos - 1) == b"\n"
                self.fh.seek(pos)
            if not at_line:
                raise self._unit_error(pos, "is not the start of a line")
            self.pos = pos

    def _unit_error(self, pos: int, what: str) -> InvalidInputError:
        return InvalidInputError(f"state: position unit {pos:,} {what} of {self.path}; the state "
                                 "was damaged or edited, or saved for another file")

    def _check_unchanged(self) -> None:
        """At the end of the file: it must be as it was when the reader was made."""
        try:
            now = stamp(self.path)
        except OSError as e:
            raise file_error(self.path, None, e, "cannot read it any more: ") from None
        if now != self.expect:
            raise FileFormatError(
                f"{self.path} changed while it was read: {changed(self.path, self.expect, now)}; "
                "it is still being written (its last line may be half written), or was "
                "replaced: read it once it is complete", self.path)

    def _blocks(self, start: int,
                first: int | None = None) -> Generator[tuple[int, memoryview], None, None]:
        """(start position, whole lines) from ``start`` to the end of the file. A block is a
        pure function of its start and size: up to the last newline within ``block_bytes``
        (``first`` bytes for the first block), or to the first newline after (a longer line), or
        to the end of the file. Each block is a view of its own bytearray (read in place with
        readinto; the parsed arrays may keep it)."""
        if self.pos != start:
            self._open(start)
        size = first or self.opts.block_bytes
        carry = b""
        pos = start
        eof = False
        while True:
            if pos != start:
                size = self.opts.block_bytes
            need = len(carry) + size
            try:
                spare = self._spares.pop()
            except IndexError:
                spare = None
            buf = spare if spare is not None and len(spare) >= need else bytearray(need)
            mv = memoryview(buf)[:need]
            mv[: len(carry)] = carry
            have = len(carry)
            while have < need and not eof:
                k = self._io(pos + have, self.fh.readinto, mv[have:])
                if not k:
                    eof = True
                    self._check_unchanged()  # before the last lines go anywhere
                have += k
            if not have:
                break
            cut = buf.rfind(b"\n", 0, min(size, have)) + 1
            seen = min(size, have)  # no newline before this
            while cut == 0:  # a line longer than the block: read on to its end
                i = buf.find(b"\n", seen, have)
                if i >= 0:
                    cut = i + 1
                elif eof:
                    cut = have
                else:
                    seen = have
                    more = self._io(pos + have, self.fh.read, size)
                    if not more:
                        eof = True
                        self._check_unchanged()
                    mv.release()
                    buf = buf[:have] + more
                    mv = memoryview(buf)
                    have = len(buf)
            carry = bytes(mv[cut:have])
            self.pos = pos + have
            yield pos, mv[:cut]
            pos += cut
        self.pos = -1

    def _io(self, at: int, read: Any, *args: Any) -> Any:
        """``read(*args)`` at byte ``at``; a failure (a truncated .gz/.bz2/.zst stream, corrupt
        data, an I/O error) is a FileFormatError that names the file and where."""
        try:
            return read(*args)
        except (pa.ArrowException, OSError, EOFError) as e:
            what = f"corrupt or truncated {self.comp} data: " if self.comp else "read failed: "
            where = None if self.comp else f"byte {at:,}"
            raise file_error(self.path, where, e, what) from None

    def count_lines(self, pos: int) -> int:
        """Newlines in the first ``pos`` bytes (for error messages; reads on its own handle)."""
        raw = pa.OSFile(self.path)
        fh = pa.CompressedInputStream(raw, self.comp) if self.comp else raw
        n, left = 0, pos
        try:
            while left:
                chunk = fh.read(min(left, 1 << 24))
                if not chunk:
                    break
                n += chunk.count(b"\n")
                left -= len(chunk)
        finally:
            fh.close()
        return n

    def _read_header(self) -> None:
        first = b""
        while b"\n" not in first:
            more = self.fh.read(1 << 16)
            if not more:
                break
            first += more
        line = first.split(b"\n", 1)[0]
        self.header_end = len(line) + 1 if b"\n" in first else len(first)
        import pyarrow.csv as pcsv

        delim = "\t" if self.kind == "tsv" else ","
        if not line.strip():
            self.header = []
            return
        t = pcsv.read_csv(pa.py_buffer(line + b"\n"),
                          parse_options=pcsv.ParseOptions(delimiter=delim),
                          read_options=pcsv.ReadOptions(autogenerate_column_names=False))
        self.header = t.column_names
        self._open(0)

    def start_unit(self) -> int:
        return self.header_end

    # -- parsing
    def _parse(self, block: memoryview, schema: pa.Schema | None, pos: int) -> pa.Table:
        """The rows of ``block`` (which starts at byte ``pos``; only error messages use it)."""
        if self.kind == "jsonl":
            self._check_depth(block, pos)
        try:
            return self._parse_blocks(block, schema, pos, 1 << 20)
        except FileFormatError as e:
            if "straddl" not in str(e):
                raise
        # a line longer than pyarrow's 1 MiB parse block (the block holds whole lines): parse
        # the block as one piece
        return self._parse_blocks(block, schema, pos, len(block) + 1)

    def _parse_blocks(self, block: memoryview, schema: pa.Schema | None, pos: int,
                      block_size: int) -> pa.Table:
        k = self.kind
        try:
            if k == "text":
                return pa.table({self.opts.text_column: self._lines(block)})
            if k == "jsonl":
                import pyarrow.json as pjson


                # with columns chosen, fields outside them are inferred per block and dropped
                # ("ignore" would also drop a new field inside a chosen column, silently)
                unexpected = ("infer" if schema is None or self.opts.columns is not None
                              else "error")
                po = pjson.ParseOptions(explicit_schema=schema,
                                        unexpected_field_behavior=unexpected,
                                        newlines_in_values=False)
                jro = pjson.ReadOptions(use_threads=self.opts.use_threads, block_size=block_size)
                return pjson.read_json(pa.py_buffer(block), parse_options=po,
                                       memory_pool=self.opts.pool, read_options=jro)
            import pyarrow.csv as pcsv

            ro = pcsv.ReadOptions(column_names=self.header, use_threads=self.opts.use_threads,
                                  block_size=block_size)
            if schema is None:
                co = pcsv.ConvertOptions()
            elif self.opts.columns is not None:
                co = pcsv.ConvertOptions(column_types=schema, include_columns=schema.names)
            else:
                co = pcsv.ConvertOptions(column_types=schema)
            po_csv = pcsv.ParseOptions(delimiter="\t" if k == "tsv" else ",")
            return pcsv.read_csv(pa.py_buffer(block), read_options=ro, convert_options=co,
                                 memory_pool=self.opts.pool, parse_options=po_csv)
        except (pa.ArrowException, UnicodeDecodeError) as e:
            raise self._block_error(block, self.count_lines(pos), e) from None

    def _check_depth(self, block: memoryview, pos: int) -> None:
        """Refuse a JSON row nested deeper than MAX_JSON_DEPTH before pyarrow parses it (a
        deep enough row kills the process, a less deep one stalls it)."""
        line = json_too_deep(block, MAX_JSON_DEPTH)
        if line >= 0:
            where = f"line {self.count_lines(pos) + line + 1}"
            raise FileFormatError(
                f"{self.path} ({where}): a JSON value nested more than {MAX_JSON_DEPTH} levels "
                f"deep; pyarrow's JSON parser recurses per level (a row 20,000 deep crashes it, "
                f"one 1,000 deep takes seconds): flatten the row or leave it out", self.path,
                where)

    def _recycle(self, block: memoryview, t: pa.Table) -> None:
        """Reuse the block's buffer for the next block unless the parsed columns point into it
        (fresh buffers cost page faults: 0.3-2 GB/s on these VMs)."""
        raw = block.obj
        if not isinstance(raw, bytearray):
            return
        lo = np.frombuffer(raw, dtype=np.uint8).ctypes.data
        hi = lo + len(raw)
        for col in t.columns:
            for chunk in col.chunks:
                for b in chunk.buffers():
                    if b is not None and b.address < hi and b.address + b.size > lo:
                        return
        if len(self._spares) < 3:
            self._spares.append(raw)

    def _lines(self, block: memoryview) -> pa.Array:
        """Text lines: pyarrow's CSV tokenizer as a one-column reader (no quoting, NUL as the
        block-absent \\x1f as the delimiter; several times the NumPy split) where it splits exactly
        like the reference: the block has no CR (CSV also ends lines at a lone CR) and no \\x1f."""
        raw: Any = block.obj  # the block's own bytearray, from offset 0
        if raw.find(b"\r", 0, block.nbytes) < 0 and raw.find(b"\x1f", 0, block.nbytes) < 0:
            import pyarrow.csv as pcsv

            col = self.opts.text_column
            try:
                t = pcsv.read_csv(
                    pa.py_buffer(block),
                    read_options=pcsv.ReadOptions(column_names=[col],
                                                  use_threads=self.opts.use_threads,
                                                  block_size=1 << 20),
                    parse_options=pcsv.ParseOptions(delimiter="\x1f", quote_char=False,
                                                    double_quote=False, escape_char=False,
                                                    newlines_in_values=False,
                                                    ignore_empty_lines=False),
                    convert_options=pcsv.ConvertOptions(column_types={col: pa.string()},
                                                        strings_can_be_null=False,
                                                        quoted_strings_can_be_null=False),
                    memory_pool=self.opts.pool)
                return t.column(0)
            except pa.ArrowInvalid:
                pass  # invalid UTF-8: the NumPy path names the line
        return _text_lines(block)

    def _block_error(self, block, line0: int, e: BaseException) -> FileFormatError:
        block = bytes(block)
        n_lines = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
        where = f"lines {line0 + 1}-{line0 + n_lines}"
        if self.kind == "jsonl":
            for i, line in enumerate(block.split(b"\n")):
                if not line.strip():
                    continue
                try:
                    bad = _lone_surrogate(json.loads(line))
                except ValueError as je:
                    where = f"line {line0 + i + 1}"
                    e = je
                    break
                if bad is not None:  # valid JSON to Python, not to Arrow: strings are UTF-8
                    where = f"line {line0 + i + 1}"
                    e = ValueError(
                        f"a string holds a lone surrogate (the escape \\u{ord(bad):04x} without "
                        "its pair), which is not Unicode text; Arrow strings (and HF datasets') "
                        "must be valid UTF-8: fix or drop that line")
                    break
        hint = ("" if self.kind == "text" or where.startswith("line ") else
                "; the first 16 MiB of the first file fixed the column types" + SCHEMA_HINT)
        return FileFormatError(f"{self.path} ({where}): {e}{hint}", self.path, where)

    def _infer(self) -> pa.Schema:
        """The schema of the first non-blank INFER_BYTES (at least one block). The parsed table
        and the block generator after it are kept for the first pieces() (one parse, not two:
        it halved the time to read a 6 MB file)."""
        pos = self.start_unit()
        while True:
            blocks = self._blocks(pos, max(self.opts.block_bytes, INFER_BYTES))
            got = next(blocks, None)
            if got is None:
                break
            p, block = got
            if not bytes(block).strip():
                blocks.close()
                pos = p + len(block)
                continue
            t = self._parse(block, None, p)
            self._first = (p, p + len(block), t, blocks)
            self.infer_at = p
            return t.schema
        # an empty file: text has its one column; others name the header's columns, untyped
        self.no_rows = self.kind == "jsonl"
        if self.kind == "text":
            return pa.schema([(self.opts.text_column, pa.string())])
        return pa.schema([(n, pa.null()) for n in (self.header or [])])

    def pieces(self, unit: int | None, offset: int) -> Iterator[tuple[pa.RecordBatch, int, int]]:
        """Batches from byte ``unit`` (a line start; None: the first), skipping its first
        ``offset`` rows (across blocks: a position is (line start, rows after it), whatever the
        block sizes), each with the position after it."""
        start = self.start_unit() if unit is None else unit
        cols = list(self.opts.columns) if self.opts.columns is not None else None
        first, self._first = self._first, None
        if first is not None and first[0] != start:
            first[3].close()
            first = None
        feed = None
        # the blocks are the same whether the inference parse is still kept or not (shuffle
        # windows are made of whole blocks: a resumed reader must see the same ones)
        blocks: Any = first[3] if first is not None else self._blocks(
            start, max(self.opts.block_bytes, INFER_BYTES) if start == self.infer_at else None)
        if self.opts.use_threads:  # read (and decompress) the next block while this one parses
            feed = Prefetch(blocks, 1, 1 << 62, lambda item: 0)
            blocks = iter(feed.get, None)
        skip = offset
        try:
            for pos, end, t in self._parsed(first, blocks):
                if skip:
                    if skip >= t.num_rows:
                        skip -= t.num_rows
                        continue
                    t = t.slice(skip)
                    base = skip
                    skip = 0
                else:
                    base = 0
                if cols is not None:
                    t = t.select(cols)
                batches = t.to_batches()
                done = base
                for i, b in enumerate(batches):
                    done += b.num_rows
                    last = i == len(batches) - 1
                    if b.num_rows or last:
                        yield b, *((end, 0) if last else (pos, done))
            if skip:
                raise InvalidInputError(
                    f"state: position offset {offset:,} is past the rows after byte {start:,} of "
                    f"{self.path} ({offset - skip:,}); the state was damaged or edited")
        except (pa.ArrowException, OSError) as e:
            raise file_error(self.path, f"byte {self.pos}", e) from None
        finally:
            if feed is not None:
                feed.close()

    def _parsed(self, first, blocks: Iterator) -> Iterator[tuple[int, int, pa.Table]]:
        """(start, end, table) of each block: the kept inference parse first, if any."""
        if first is not None:
            yield first[0], first[1], first[2]
        # with columns chosen, only they must keep the schema's types: the other fields may
        # change type, or appear, after the lines that fixed it (a field null in the first 16
        # MiB and a string later) without refusing the file for a column nobody reads
        chosen = self.opts.columns is not None
        want = self.schema if chosen else self.full_schema
        for pos, block in blocks:
            t = self._parse(block, want, pos)
            self._recycle(block, t)
            if chosen and t.schema.names != want.names:
                t = t.select(want.names)  # (the other fields, inferred per block)
            if t.schema != want:
                t = self._conform(t, pos, want, chosen)
            yield pos, pos + len(block), t

    def _conform(self, t: pa.Table, pos: int, want: pa.Schema, chosen: bool) -> pa.Table:
        # a chosen column parsed with its type differs only by a field inside it that the
        # first 16 MiB did not have (a message's "tool_calls"): a cast would drop it silently
        if t.schema.names == want.names and not chosen:
            try:
                return t.cast(want)
            except (pa.ArrowException, ValueError):
                pass
        diff = [f"{a.name!r} holds {a.type}, the source's schema {b.type}"
                for a, b in zip(t.schema, want) if a.name == b.name and a.type != b.type]
        raise SchemaMismatchError(
            f"{self.path} (block at byte {pos}): "
            + (f"column {'; '.join(diff)}" if chosen and diff else
               f"columns {t.schema} differ from the source's {want}")
            + SCHEMA_HINT)

    def close(self) -> None:
        if self._first is not None:
            self._first[3].close()
            self._first = None
        if self.fh is not None:
            self.fh.close()


def _text_lines(block: memoryview | bytes) -> pa.StringArray:
    """Lines of ``block`` (split on \\n, one trailing \\r dropped) as a string array, UTF-8
    checked. Empty lines are rows (empty strings), like HF's text loader."""
    arr = np.frombuffer(block, dtype=np.uint8)
    nl = np.flatnonzero(arr == 10)
    ends = nl if (len(arr) == 0 or arr[-1] == 10) else np.append(nl, len(arr))
    n = len(ends)
    starts = np.empty(n, dtype=np.int64)
    if n:
        starts[0] = 0
        starts[1:] = nl[: n - 1] + 1
    cr = (ends > starts) & (arr[np.maximum(ends - 1, 0)] == 13) if n else np.zeros(0, bool)
    ends = ends - cr
    keep = np.ones(len(arr), dtype=bool)
    keep[nl] = False
    keep[ends[cr]] = False
    data = arr[keep] if (len(nl) or cr.any()) else arr
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(ends - starts, out=offsets[1:])
    if offsets[-1] < 2**31:
        out = pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32)),
                                          pa.py_buffer(data))
    else:
        out = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))
    try:
        out.validate(full=True)
    except pa.ArrowInvalid:
        for i in range(n):
            try:
                bytes(arr[starts[i]:ends[i]]).decode("utf-8")
            except UnicodeDecodeError as e:
                raise UnicodeDecodeError(e.encoding, e.object, e.start, e.end,
                                         f"{e.reason} in line {i + 1} of the block") from None
        raise
    return out
