"""``fastaxo prepare``: tokenized rows in, packed Parquet out, in bounded memory.

Pipeline (one pass, never the whole dataset in memory)::

    files -> iter_batches (per file, read-ahead thread) -> [tokenize] -> checks (named by file
    and row) -> exact dedupe (one Seen across all files) -> windows of pack_window kept rows
    -> pack_bins + materialise (iter_pack, chunks of bins) -> Parquet row groups -> rename

Output rows are bins: ``input_ids`` (and ``labels`` when the input has them) with the bin's
sequences back to back and no padding (a row holds at most ``seq_len`` tokens; the collator
pads), ``position_ids`` restarting at 0 for every sequence, and ``attention_mask`` as segment
ids 1..k (``"segments"``), all ones (``"ones"``) or left out (``"none"``). Every token of every
kept row is in exactly one output row, in order; the only exceptions are the explicit
``overflow`` modes, counted in the report. Rows with no tokens carry nothing to pack: they are
counted (``empty_rows``) and left out.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow
from fastaxo._core.checks import choice, positive_int
from fastaxo.errors import (
    ColumnNotFoundError,
    FileFormatError,
    InvalidInputError,
    InvalidTypeError,
    NullValueError,
    SchemaMismatchError,
    SequenceTooLongError,
)

__all__ = ["prepare", "PrepareReport", "ATTENTION_LAYOUTS", "DEFAULT_PACK_WINDOW"]

ATTENTION_LAYOUTS = ("segments", "ones", "none")
OVERFLOW = ("error", "truncate", "split", "drop")
DEFAULT_PACK_WINDOW = 100_000  # Axolotl's pack_parallel group size
_ROW_GROUP_TOKENS = 1 << 22  # bins per output row group: ~4M tokens (16 MiB per int32 column)
_I32 = pa.int32()


@dataclass
class _Counts:
    """The options and counts every prepare report has (the single-machine one and the Ray
    one); see :class:`PrepareReport` for what they mean."""

    inputs: list[str]
    output: str
    seq_len: int
    strategy: str
    overflow: str
    attention: str
    pack_window: int
    dedupe: bool
    dedupe_columns: list[str] | None
    labels: bool
    tokenizer: str | None = None
    rows_in: int = 0
    tokens_in: int = 0
    empty_rows: int = 0
    duplicates: int = 0
    rows_packed: int = 0
    overlong: int = 0
    truncated: int = 0
    truncated_tokens: int = 0
    split: int = 0
    split_pieces: int = 0
    dropped: int = 0
    dropped_tokens: int = 0
    sequences_out: int = 0
    tokens_out: int = 0
    bins: int = 0
    lower_bound: int = 0
    efficiency: float = 0.0
    windows: int = 0
    row_groups: int = 0
    output_bytes: int = 0
    seconds: float = 0.0
    rows_per_s: float = 0.0
    tokens_per_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, path: str) -> None:
        with open(path, "w") as fh:
            json.dump(self.as_dict(), fh, indent=2)
            fh.write("\n")

    def add_pack_stats(self, st: Any) -> None:
        """Count one packed window (its PackStats)."""
        self.windows += 1
        self.bins += st.bins
        self.tokens_out += st.tokens
        self.sequences_out += st.entries
        self.rows_packed += st.sequences
        for k in ("overlong", "truncated", "truncated_tokens", "split", "split_pieces", "dropped", "dropped_tokens"):
            setattr(self, k, getattr(self, k) + getattr(st, k))

    def finish(self, seconds: float) -> None:
        """Wall time, rates, the lower bound and the efficiency, from the counts."""
        self.seconds = seconds
        self.lower_bound = -(-self.tokens_out // self.seq_len)
        self.efficiency = self.tokens_out / (self.bins * self.seq_len) if self.bins else 0.0
        self.rows_per_s = self.rows_in / seconds if seconds > 0 else 0.0
        self.tokens_per_s = self.tokens_in / seconds if seconds > 0 else 0.0


@dataclass
class PrepareReport(_Counts):
    """What :func:`prepare` did. Rows count input rows; ``duplicates`` are rows equal to an
    earlier row on the dedupe columns (dropped); ``overlong`` rows are longer than ``seq_len``
    (kept rows only) and were truncated / split / dropped as ``overflow`` says. ``efficiency``
    = tokens_out / (bins x seq_len); no packing can use fewer than ``lower_bound`` =
    ceil(tokens_out / seq_len) bins. ``reader_wait_seconds`` is the time the pipeline waited for
    the reader's next batch (the rest runs in the caller's thread: tokenize, dedupe, pack,
    write); ``bytes_read`` what the process read through read calls while
    reading (``/proc/self/io`` rchar), ``bytes_decoded`` the Arrow size of the batches."""

    files: int = 0
    reader_wait_seconds: float = 0.0
    tokenize_seconds: float = 0.0
    dedupe_seconds: float = 0.0
    pack_seconds: float = 0.0
    write_seconds: float = 0.0
    bytes_read: int | None = None
    bytes_decoded: int = 0
    peak_rss_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


    def __str__(self) -> str:
        mib = lambda v: "n/a" if v is None else f"{v / 2**20:,.0f} MiB"  # noqa: E731
        pct = lambda a, b: f"{100 * a / b:.2f}%" if b else "0%"  # noqa: E731
        over = f"{self.overlong:,} longer than {self.seq_len:,}"
        if self.overlong:
            what = {"truncate": f"truncated (-{self.truncated_tokens:,} tokens)",
                    "split": f"split into {self.split_pieces:,} pieces",
                    "drop": f"dropped (-{self.dropped_tokens:,} tokens)"}.get(self.overflow, self.overflow)
            over += f": {what}"
        extra_bins = self.bins - self.lower_bound
        lines = [
            f"fastaxo prepare: {self.files} file(s) -> {self.output}",
            f"  rows in            {self.rows_in:,} ({self.tokens_in:,} tokens)",
            f"  duplicates dropped {self.duplicates:,} ({pct(self.duplicates, self.rows_in)})"
            + ("" if self.dedupe else " [dedupe off]")
            + (f"; empty rows left out {self.empty_rows:,}" if self.empty_rows else ""),
            f"  over-long rows     {over}",
            f"  packed             {self.rows_packed:,} rows ({self.sequences_out:,} sequences, {self.tokens_out:,} tokens)"
            f" -> {self.bins:,} bins of {self.seq_len:,} ({self.strategy}, windows of {self.pack_window:,} rows)",
            f"  efficiency         {self.efficiency:.4%} of the bins' tokens used; lower bound "
            f"{self.lower_bound:,} bins (+{extra_bins:,}, {pct(extra_bins, self.lower_bound)})",
            f"  time               {self.seconds:.2f} s: {self.rows_per_s:,.0f} rows/s, {self.tokens_per_s:,.0f} tokens/s",
            f"  stages             waited on the reader {self.reader_wait_seconds:.2f} s, "
            + (f"tokenize {self.tokenize_seconds:.2f} s, " if self.tokenizer else "")
            + f"dedupe {self.dedupe_seconds:.2f} s, pack {self.pack_seconds:.2f} s, write {self.write_seconds:.2f} s",
            f"  memory and I/O     peak RSS {mib(self.peak_rss_bytes)}; read {mib(self.bytes_read)} "
            f"(decoded {mib(self.bytes_decoded)}); wrote {mib(self.output_bytes)} in {self.row_groups:,} row groups",
        ]
        return "\n".join(lines)


# ---------------------------------------------------------------- checks, named by file and row
def _where(path: str, row: int) -> str:
    return f"{path} row {row:,} (0-based)"


def _token_column(arr: pa.Array, name: str, path: str, row0: int) -> pa.Array:
    """``arr`` as list<int32> / large_list<int32>, with nulls and out-of-range values refused."""
    t = arr.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)) or not pa.types.is_integer(t.value_type):
        raise InvalidTypeError(f"{path}: column {name!r} must be a list of integer token ids, got {t}")
    if arr.null_count:
        i = int(np.flatnonzero(~np.asarray(arr.is_valid()))[0])
        raise NullValueError(f"{_where(path, row0 + i)}: {name} is null; expected a list of token ids")
    values = arr.values  # respect the slice: use offsets
    offs = arrow.offsets_of(arr, pa.types.is_large_list(t))  # (np.asarray(pa.Array) imports pandas)
    flat = values.slice(int(offs[0]), int(offs[-1] - offs[0]))
    if flat.null_count:
        k = int(np.flatnonzero(~np.asarray(flat.is_valid()))[0])
        i = int(np.searchsorted(offs, offs[0] + k, side="right")) - 1
        raise NullValueError(f"{_where(path, row0 + i)}: {name} holds a null token; expected integers")
    if t.value_type == _I32:
        return arr
    v = arrow.fixed_view(flat)
    bad = np.flatnonzero((v < -(2**31)) | (v > 2**31 - 1)) if v.size else v
    if len(bad):
        k = int(bad[0])
        i = int(np.searchsorted(offs, offs[0] + k, side="right")) - 1
        raise InvalidInputError(f"{_where(path, row0 + i)}: {name} holds {int(v[k])}; token ids and labels "
                                "must fit int32")
    target = pa.large_list(_I32) if pa.types.is_large_list(t) else pa.list_(_I32)
    return arr.cast(target)


def _lengths(arr: pa.Array) -> np.ndarray:
    return np.diff(arrow.offsets_of(arr, pa.types.is_large_list(arr.type))).astype(np.int64, copy=False)


def _compact(table: pa.Table, keep: np.ndarray) -> pa.Table:
    """Rows ``keep`` (sorted indices) of a table of list<int32> columns, as new contiguous arrays.
    NumPy gather over the flat values: ~3x faster than pyarrow's take on list arrays."""
    n = table.num_rows
    mask = np.zeros(n, bool)
    mask[keep] = True
    cols = {}
    for name in table.column_names:
        arr = table.column(name).chunk(0) if table.column(name).num_chunks == 1 else table.column(name).combine_chunks()
        offs = arrow.offsets_of(arr, pa.types.is_large_list(arr.type))
        flat = arrow.fixed_view(arr.values)[offs[0] : offs[-1]]
        lens = np.diff(offs)
        new = np.zeros(len(keep) + 1, np.int64)
        np.cumsum(lens[keep], out=new[1:])
        values = flat[np.repeat(mask, lens)]
        if pa.types.is_large_list(arr.type) or new[-1] >= 2**31:
            cols[name] = pa.LargeListArray.from_arrays(arrow.from_numpy(new), arrow.from_numpy(values))
        else:
            cols[name] = pa.ListArray.from_arrays(arrow.from_numpy(new.astype(np.int32)), arrow.from_numpy(values))
    return pa.table(cols)


def _load_tokenizer(path: str):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ImportError("--tokenizer needs the 'tokenizers' library: pip install tokenizers") from None
    file = path if os.path.isfile(path) else os.path.join(path, "tokenizer.json")
    if not os.path.isfile(file):
        raise InvalidInputError(f"tokenizer: {path!r} holds no tokenizer.json (expected a Hugging Face tokenizer "
                                "directory or the tokenizer.json file itself)")
    try:
        return Tokenizer.from_file(file)
    except Exception as e:  # tokenizers raises its own Exception type
        raise InvalidInputError(f"tokenizer: cannot load {file}: {e}") from None


def _tokenize(tok: Any, arr: pa.Array, column: str, path: str, row0: int) -> pa.Array:
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        raise InvalidTypeError(f"{path}: text column {column!r} must be strings to tokenize, got {arr.type}")
    if arr.null_count:
        i = int(np.flatnonzero(~np.asarray(arr.is_valid()))[0])
        raise NullValueError(f"{_where(path, row0 + i)}: {column} is null; expected text")
    encs = tok.encode_batch(arr.to_pylist())
    lens = np.fromiter((len(e.ids) for e in encs), np.int64, count=len(encs))
    offsets = np.zeros(len(encs) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    values = np.fromiter(itertools.chain.from_iterable(e.ids for e in encs), np.int32, count=int(offsets[-1]))
    if offsets[-1] < 2**31:
        return pa.ListArray.from_arrays(arrow.from_numpy(offsets.astype(np.int32)), arrow.from_numpy(values))
    return pa.LargeListArray.from_arrays(arrow.from_numpy(offsets), arrow.from_numpy(values))


# ---------------------------------------------------------------- one batch, one window (shared with the Ray path)
ATTENTION_MODES = {"segments": "segments", "ones": "binary", "none": None}


def output_schema(has_labels: bool, attention: str, options: dict[str, Any]) -> pa.Schema:
    """The packed output's columns (list<int32>: input_ids, labels if the input has them,
    position_ids, attention_mask unless attention is "none") and the options in its metadata."""
    fields = [pa.field("input_ids", pa.list_(_I32))]
    if has_labels:
        fields.append(pa.field("labels", pa.list_(_I32)))
    fields.append(pa.field("position_ids", pa.list_(_I32)))
    if ATTENTION_MODES[attention] is not None:
        fields.append(pa.field("attention_mask", pa.list_(_I32)))
    return pa.schema(fields, metadata={"fastaxo.prepare": json.dumps(options)})


def _check_options(seq_len: Any, strategy: Any, overflow: Any, attention: Any, pack_window: Any,
                   dedupe_columns: Any) -> tuple[int, str, str, str, int, list[str] | None]:
    """The options prepare and its Ray form share, checked (errors name the argument)."""
    from fastaxo.packing import STRATEGIES

    if dedupe_columns is not None:
        if isinstance(dedupe_columns, str) or not dedupe_columns or not all(isinstance(c, str) for c in dedupe_columns):
            raise InvalidInputError(f"dedupe_columns must be a non-empty list of column names, got {dedupe_columns!r}")
        dedupe_columns = list(dedupe_columns)
    return (positive_int(seq_len, "seq_len"), choice(strategy, "strategy", STRATEGIES),
            choice(overflow, "overflow", OVERFLOW), choice(attention, "attention", ATTENTION_LAYOUTS),
            positive_int(pack_window, "pack_window"), dedupe_columns)


def _first_columns(schema: pa.Schema, where: str, tokenizing: bool, text_column: str,
                   dedupe_columns: list[str] | None) -> tuple[bool, list[str]]:
    """(labels used, dedupe columns) from the first input's schema, which fixes the columns."""
    if tokenizing:
        if text_column not in schema.names:
            raise ColumnNotFoundError(f"{where}: no text column {text_column!r} to tokenize "
                                      f"(columns: {schema.names}); pass --text-column")
        has_labels = False
    else:
        if "input_ids" not in schema.names:
            raise ColumnNotFoundError(f"{where}: no column 'input_ids' (columns: {schema.names}); "
                                      "for raw text pass a tokenizer (--tokenizer DIR)")
        has_labels = "labels" in schema.names
    return has_labels, dedupe_columns or (["input_ids", "labels"] if has_labels else ["input_ids"])


def _input_columns(schema: pa.Schema, where: str, first: str, *, tokenizing: bool, text_column: str,
                   has_labels: bool, dedupe: bool, key_cols: list[str]) -> list[str]:
    """The columns to read from an input (errors when it does not have what the first input
    has); every input goes through this, the first one too."""
    need = [text_column] if tokenizing else ["input_ids"] + (["labels"] if has_labels else [])
    if not tokenizing:
        missing = [c for c in need if c not in schema.names]
        if missing:
            raise SchemaMismatchError(f"{where}: no column {missing[0]!r} (columns: {schema.names}); "
                                      f"{first} has it, so every input must")
        if "labels" in schema.names and not has_labels:
            raise SchemaMismatchError(f"{where} has a 'labels' column and {first} has none; inputs must agree")
    elif text_column not in schema.names:
        raise ColumnNotFoundError(f"{where}: no text column {text_column!r} (columns: {schema.names})")
    if dedupe:
        produced = {"input_ids", "labels"} if not tokenizing else {"input_ids"}
        missing = [c for c in key_cols if c not in produced and c not in schema.names]
        if missing:
            raise ColumnNotFoundError(f"{where}: dedupe column {missing[0]!r} not in the data "
                                      f"(columns: {schema.names})")
    return list(dict.fromkeys(need + ([c for c in key_cols if c in schema.names] if dedupe else [])))


def _schema_options(seq_len: int, strategy: str, overflow: str, attention: str, dedupe: bool,
                    key_cols: list[str], pack_window: int) -> dict[str, Any]:
    """The options recorded in the output's metadata."""
    return {"seq_len": seq_len, "strategy": strategy, "overflow": overflow, "attention": attention, "dedupe": dedupe,
            "dedupe_columns": key_cols if dedupe else None, "pack_window": pack_window,
            "layout": "flat (unpadded bins)"}


def _check_batch(batch: Any, path: str, row0: int, *, tok: Any, text_column: str, has_labels: bool,
                 seq_len: int, overflow: str) -> tuple[dict[str, pa.Array], np.ndarray, float]:
    """The token columns of a batch whose first row is row ``row0`` of ``path``, checked (errors
    name the file and row) and as list<int32>: ``({"input_ids", ["labels"]}, lengths, seconds
    spent tokenizing)``. With ``tok``, ``text_column`` is tokenized instead."""
    tsec = 0.0
    if tok is not None:
        tt = time.perf_counter()
        work = {"input_ids": _tokenize(tok, batch.column(text_column), text_column, path, row0)}
        tsec = time.perf_counter() - tt
    else:
        work = {"input_ids": _token_column(batch.column("input_ids"), "input_ids", path, row0)}
        if has_labels:
            lab = _token_column(batch.column("labels"), "labels", path, row0)
            bad = np.flatnonzero(_lengths(lab) != _lengths(work["input_ids"]))
            if len(bad):
                i = int(bad[0])
                raise InvalidInputError(
                    f"{_where(path, row0 + i)}: labels has {int(_lengths(lab)[i])} values and "
                    f"input_ids {int(_lengths(work['input_ids'])[i])}; they must be aligned")
            work["labels"] = lab
    lens = _lengths(work["input_ids"])
    if overflow == "error":
        over = np.flatnonzero(lens > seq_len)
        if len(over):
            i = int(over[0])
            raise SequenceTooLongError(
                f"{_where(path, row0 + i)}: input_ids has {int(lens[i]):,} tokens; --seq-len is "
                f"{seq_len:,}. Pass --overflow truncate, split or drop to handle such rows "
                "(each is counted in the report), or filter them out first",
                row0 + i, int(lens[i]), seq_len)
    return work, lens, tsec


def _pack_window(table: pa.Table, writer: Any, fields: list[pa.Field], *, seq_len: int, strategy: str,
                 overflow: str, att_mode: str | None, has_labels: bool, num_threads: int) -> Any:
    """Pack one window (a table of kept rows: input_ids [+ labels]) and write its bins to
    ``writer`` as row groups of about _ROW_GROUP_TOKENS tokens; returns its PackStats."""
    from fastaxo import iter_pack

    it = iter_pack(table, seq_len, chunk_bins=max(1, _ROW_GROUP_TOKENS // seq_len), layout="flat",
                   attention=att_mode, dtype=np.int32, strategy=strategy, overflow=overflow,
                   labels=None if has_labels else False, reuse_buffers=True, num_threads=num_threads)
    for chunk in it:  # reuse_buffers: each chunk is written before the next one is filled
        offs = arrow.from_numpy(chunk["bin_offsets"].astype(np.int32))  # a chunk holds <= max(2**22, seq_len) tokens
        writer.write([pa.ListArray.from_arrays(offs, arrow.from_numpy(chunk[f.name])) for f in fields])
    return it.stats


# ---------------------------------------------------------------- the writer
class _Writer:
    """Parquet row groups into a temporary file next to ``output``; ``commit`` renames it to
    ``output``, ``abort`` removes it. Synchronous: a writer thread was measured slower on 2 cores
    (it competes with the reader thread, and needs fresh output buffers per row group, whose
    first touch costs more than the copy into them)."""

    def __init__(self, output: str, schema: pa.Schema):
        import pyarrow.parquet as pq

        out_dir = os.path.dirname(os.path.abspath(output)) or "."
        if not os.path.isdir(out_dir):
            raise InvalidInputError(f"output: directory {out_dir!r} does not exist")
        if os.path.isdir(output):
            raise InvalidInputError(f"output: {output!r} is a directory; expected a file name")
        self.output = output
        self.tmp = os.path.join(out_dir, f".{os.path.basename(output)}.fastaxo-tmp-{os.getpid()}")
        self.schema = schema
        # Token columns are high-entropy ints: dictionary encoding and statistics cost time and
        # gain nothing. zstd level 1: as fast as snappy here, ~40% smaller.
        self._w = pq.ParquetWriter(self.tmp, schema, compression="zstd", compression_level=1,
                                   use_dictionary=False, write_statistics=False)
        self.row_groups = 0
        self.seconds = 0.0

    def write(self, arrays: list[pa.Array]) -> None:
        t = time.perf_counter()
        self._w.write_table(pa.Table.from_arrays(arrays, schema=self.schema), row_group_size=max(len(arrays[0]), 1))
        self.row_groups += 1
        self.seconds += time.perf_counter() - t

    def commit(self) -> int:
        t = time.perf_counter()
        self._w.close()
        os.replace(self.tmp, self.output)
        self.seconds += time.perf_counter() - t
        return os.path.getsize(self.output)

    def abort(self) -> None:
        try:
            self._w.close()
        except BaseException:
            pass
        try:
            os.unlink(self.tmp)
        except OSError:
            pass


# ---------------------------------------------------------------- prepare
def _schema_of(path: str, fmt: str, comp: str | None, batch_rows: int, reader_options: dict[str, Any]):
    """(reader factory, the file's schema, rows from the metadata or None)."""
    from fastaxo.readers import iter_batches

    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            md = pq.read_metadata(path)
            schema = md.schema.to_arrow_schema()
        except (pa.ArrowInvalid, OSError) as e:
            raise FileFormatError(f"{path}: not a readable Parquet file: {e}", path) from None
        return (lambda cols: iter_batches(path, format=fmt, columns=cols, batch_rows=batch_rows,
                                          **reader_options)), schema, md.num_rows
    reader = iter_batches(path, format=fmt, compression=comp, batch_rows=batch_rows, **reader_options)
    return (lambda cols: reader), reader.schema, None


def prepare(inputs: Any, output: str, seq_len: int, *, strategy: str = "bfd", overflow: str = "error",
            attention: str = "segments", dedupe: bool = True, dedupe_columns: Sequence[str] | None = None,
            pack_window: int = DEFAULT_PACK_WINDOW, tokenizer: str | None = None, text_column: str = "text",
            batch_rows: int = 8192, format: str | None = None, progress: bool = False,
            num_threads: int | None = None, reader_options: dict[str, Any] | None = None,
            cancel: Any = None) -> PrepareReport:
    """Dedupe and pack tokenized rows from files into a packed Parquet file, in bounded memory.

    Parameters
    ----------
    inputs : path, directory, glob, or a list of them
        Any source :func:`fastaxo.iter_batches` reads (Parquet, Arrow, JSON Lines, CSV, ...),
        with a list column ``input_ids`` (and ``labels``, used when present), or, with
        ``tokenizer``, a text column. Files are read in order, one after another.
    output : str
        The Parquet file to write. It is written under a temporary name in the same directory
        and renamed at the end: an error or Ctrl-C leaves no file at ``output``.
    seq_len : int
        Tokens per packed row (the bin capacity).
    strategy : {"bfd", "ffd", "ff", "nf"}
        Bin assignment (see :func:`fastaxo.pack_bins`), per window.
    overflow : {"error", "truncate", "split", "drop"}
        Rows longer than ``seq_len``: raise naming the file and row (default), keep the first
        ``seq_len`` tokens, cut into pieces of at most ``seq_len``, or leave out. Counted.
    attention : {"segments", "ones", "none"}
        ``attention_mask`` as segment ids 1..k per row, all ones, or no column.
    dedupe : bool
        Drop rows equal to an earlier row (any file) on ``dedupe_columns``; exact (SHA-256 of
        the canonical row encoding, one :class:`fastaxo.Seen`: 32 bytes per distinct row).
    dedupe_columns : list of str, optional
        Columns that define a duplicate (default: ``input_ids`` and ``labels`` when present).
    pack_window : int
        Kept rows packed together (default 100,000, Axolotl's group size): the memory bound.
    tokenizer : str, optional
        A Hugging Face tokenizer directory (``tokenizer.json``) or file: tokenize
        ``text_column`` with the ``tokenizers`` library (batched, local, no network) first.
    batch_rows, format, reader_options
        Passed to :func:`fastaxo.iter_batches` (``format`` for names it cannot detect).
    progress : bool
        Show a tqdm progress bar on stderr (if tqdm is installed).
    cancel : threading.Event, optional
        Checked before every batch: once set, prepare stops as on KeyboardInterrupt (the
        temporary file is removed, nothing is written to ``output``). ``fastaxo prepare`` sets
        it on Ctrl-C, so that an interrupt swallowed by library code (pyarrow's lazy imports
        catch what lands in them) still stops the run.

    Returns
    -------
    PrepareReport
    """
    from fastaxo import Seen
    from fastaxo import dedupe as _dedupe
    from fastaxo._core.proc import io_counters, status_kib
    from fastaxo._core.threads import resolve_num_threads
    from fastaxo.readers import resolve_source

    seq_len, strategy, overflow, attention, pack_window, dedupe_columns = _check_options(
        seq_len, strategy, overflow, attention, pack_window, dedupe_columns)
    batch_rows = positive_int(batch_rows, "batch_rows")
    nt = resolve_num_threads(num_threads)
    if not isinstance(output, (str, os.PathLike)):
        raise InvalidTypeError(f"output must be a path, got {type(output).__name__}")
    output = os.fspath(output)
    files = resolve_source(inputs, format)
    out_abs = os.path.abspath(output)
    for p, _, _ in files:
        if os.path.abspath(p) == out_abs:
            raise InvalidInputError(f"output: {output!r} is also an input")
    tok = _load_tokenizer(tokenizer) if tokenizer is not None else None
    # Read-ahead: 64 MiB is plenty to keep the packer fed and keeps the peak down.
    ropts = {"prefetch_bytes": 64 << 20, **(reader_options or {})}

    # The first file fixes the columns; every other file must agree.
    t_start = time.perf_counter()
    io0 = io_counters()
    opened = [None] * len(files)
    opened[0] = _schema_of(*files[0], batch_rows, ropts)
    has_labels, key_cols = _first_columns(opened[0][1], files[0][0], tok is not None, text_column, dedupe_columns)

    att_mode = ATTENTION_MODES[attention]
    out_schema = output_schema(has_labels, attention, _schema_options(seq_len, strategy, overflow, attention, dedupe,
                                                                      key_cols, pack_window))
    fields = list(out_schema)

    rep = PrepareReport(inputs=[p for p, _, _ in files], output=output, seq_len=seq_len, strategy=strategy,
                        overflow=overflow, attention=attention, pack_window=pack_window, dedupe=bool(dedupe),
                        dedupe_columns=key_cols if dedupe else None, labels=has_labels, tokenizer=tokenizer,
                        files=len(files))
    seen = Seen() if dedupe else None
    window: list[pa.Table] = []
    window_rows = 0
    bar = None
    if progress:
        try:
            from tqdm import tqdm
        except ImportError:
            tqdm = None
        if tqdm is not None:
            total = None
            if all(f == "parquet" for _, f, _ in files):
                import pyarrow.parquet as pq

                total = sum(pq.read_metadata(p).num_rows for p, _, _ in files)
            bar = tqdm(total=total, unit=" rows", unit_scale=True, file=sys.stderr, dynamic_ncols=True,
                       desc="fastaxo prepare", mininterval=0.5)

    writer = _Writer(output, out_schema)

    def flush(tables: list[pa.Table]) -> None:
        t0 = time.perf_counter()
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        w0 = writer.seconds
        st = _pack_window(table, writer, fields, seq_len=seq_len, strategy=strategy, overflow=overflow,
                          att_mode=att_mode, has_labels=has_labels, num_threads=nt)
        rep.pack_seconds += time.perf_counter() - t0 - (writer.seconds - w0)
        rep.add_pack_stats(st)
        if bar is not None:
            bar.set_postfix_str(f"{rep.bins:,} bins", refresh=False)

    try:
        for fi, (path, fmt, comp) in enumerate(files):
            if opened[fi] is None:
                opened[fi] = _schema_of(path, fmt, comp, batch_rows, ropts)
            make_reader, schema, _ = opened[fi]
            opened[fi] = None
            cols = _input_columns(schema, path, files[0][0], tokenizing=tok is not None, text_column=text_column,
                                  has_labels=has_labels, dedupe=dedupe, key_cols=key_cols)
            reader = make_reader(cols)
            row0 = 0
            try:
                for batch in reader:
                    if cancel is not None and cancel.is_set():
                        raise KeyboardInterrupt
                    n = batch.num_rows
                    if n == 0:
                        continue
                    work, lens, tsec = _check_batch(batch, path, row0, tok=tok, text_column=text_column,
                                                    has_labels=has_labels, seq_len=seq_len, overflow=overflow)
                    rep.tokenize_seconds += tsec
                    rep.rows_in += n
                    rep.tokens_in += int(lens.sum())
                    table = pa.table(work)
                    keep = None
                    nonempty = lens > 0
                    if not nonempty.all():
                        rep.empty_rows += int(n - np.count_nonzero(nonempty))
                        keep = np.flatnonzero(nonempty)
                    if dedupe:
                        td = time.perf_counter()
                        key = pa.table({c: (work[c] if c in work else batch.column(c)) for c in key_cols})
                        if keep is not None:
                            key = key.take(arrow.from_numpy(keep))
                        res = _dedupe(key, seen=seen, num_threads=nt)
                        rep.duplicates += res.n_duplicates
                        if res.n_duplicates:
                            keep = res.keep if keep is None else keep[res.keep]
                        rep.dedupe_seconds += time.perf_counter() - td
                    if keep is not None:
                        table = _compact(table, keep)
                    row0 += n
                    if bar is not None:
                        bar.update(n)
                    if table.num_rows:
                        window.append(table)
                        window_rows += table.num_rows
                    while window_rows >= pack_window:
                        whole = pa.concat_tables(window) if len(window) > 1 else window[0]
                        flush([whole.slice(0, pack_window)])
                        rest = whole.slice(pack_window)
                        del whole  # or the packed window stays alive until the next one
                        window = [rest] if rest.num_rows else []
                        window_rows = rest.num_rows
            finally:
                st = reader.stats
                rep.reader_wait_seconds += st.stall_seconds
                rep.bytes_decoded += st.bytes
                reader.close()
        if window_rows:
            flush(window)
            window, window_rows = [], 0
        rep.output_bytes = writer.commit()
        rep.write_seconds = writer.seconds
    except BaseException:
        writer.abort()
        raise
    finally:
        if bar is not None:
            bar.close()
    rep.finish(time.perf_counter() - t_start)
    rep.row_groups = writer.row_groups
    io1 = io_counters()
    if io0 and io1:
        rep.bytes_read = io1.get("rchar", 0) - io0.get("rchar", 0)
    hwm = status_kib("VmHWM")
    rep.peak_rss_bytes = None if hwm is None else hwm * 1024
    return rep

