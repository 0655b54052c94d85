"""``fastaxo prepare``: tokenized rows in, packed Parquet out, in bounded memory.

Pipeline (one pass, never the whole dataset in memory)::

    files -> iter_batches (per file, read-ahead thread) -> [tokenize] -> checks (named by file
    and row) -> exact dedupe (one Seen across all files) -> windows of pack_window kept rows
    -> pack_bins + materialise (iter_pack, chunks of bins) -> Parquet row groups -> rename

Output rows are bins: ``input_ids`` and ``labels`` with the bin's sequences back to back and
no padding (a row holds at most ``max_length`` tokens; the collator pads), ``position_ids``
restarting at 0 for every sequence and ``seq_lengths``, in the narrowest integer types (the
standard layout); or Axolotl's layout, with ``attention_mask`` as segment ids 1..k
(``"segments"``), all ones (``"ones"``) or left out (``"none"``). Every token of every
kept row is in exactly one output row, in order; the only exceptions are the explicit
``overflow`` modes, counted in the report. Rows with no tokens carry nothing to pack: they are
counted (``empty_rows``) and left out.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow
from fastaxo._core.checks import MAX_ROW_BYTES
from fastaxo._core.files import check_not_an_input, check_output
from fastaxo._core.proc import io_counters, reset_peak, status_kib
from fastaxo._core.progress import interactive
from fastaxo._core.threads import resolve_num_threads
from fastaxo.errors import InvalidInputError, InvalidTypeError
from fastaxo.hashing import Seen
from fastaxo.hashing import dedupe as dedupe_rows
from fastaxo.pipeline.columns import settled_schema, tokenizer_label
from fastaxo.pipeline.memory import memory_source
from fastaxo.pipeline.meter import Meter
from fastaxo.pipeline.options import DEFAULT_PACK_WINDOW, PrepareOptions, options_of_call
from fastaxo.pipeline.provenance import provenance
from fastaxo.pipeline.report import PrepareReport
from fastaxo.pipeline.stages import (
    ATTENTION_MODES,
    Bounds,
    Kept,
    add_bounds,
    check_batch,
    first_columns,
    input_columns,
    output_schema,
    output_types,
    retyped,
    split_kept,
    window_data,
    write_packed_window,
)
from fastaxo.pipeline.unpad import MASK
from fastaxo.pipeline.writer import Writer
from fastaxo.readers import iter_batches, resolve_source
from fastaxo.readers.parquet import read_footer
from fastaxo.readers.sources import TEXT_FORMATS

__all__ = ["prepare"]


def _open_first(files: list[tuple[str, str, str | None]], mem: Any, batch_rows: int,
                ropts: dict[str, Any]) -> tuple[list[Any], int]:
    """The inputs opened so far (None: not yet) and k0, the first input with rows, which fixes
    the columns: an input with no rows (a JSON Lines file of only whitespace: an empty shard)
    has none, and those before k0 are skipped (closed; the report counts them)."""
    opened: list[Any] = [None] * len(files)
    opened[0] = ((mem.reader, mem.schema, mem.rows) if mem
                 else _schema_of(*files[0], batch_rows, ropts))
    k0 = 0
    while _no_rows(opened[k0], files[k0][1]):
        _close(opened[k0])
        opened[k0] = None
        if k0 + 1 == len(files):
            raise InvalidInputError(
                (f"{files[0][0]}: no rows" if len(files) == 1 else
                 f"no input has rows ({len(files)} files)")
                + " (JSON Lines of nothing but whitespace): nothing to prepare")
        k0 += 1
        opened[k0] = _schema_of(*files[k0], batch_rows, ropts)
    return opened, k0


def _no_rows(opened: Any, fmt: str) -> bool:
    """Whether an input opened by :func:`_schema_of` is known to hold no rows (a JSON Lines
    file of only whitespace: BatchReader.no_rows)."""
    return fmt == "jsonl" and opened[0](None).no_rows


def _close(opened: Any) -> None:
    """Close the reader of an input :func:`_no_rows` found empty (a text file's reader is
    open from :func:`_schema_of` on)."""
    opened[0](None).close()


class _AsOpened:
    """The reader factory of a text input read as :func:`_schema_of` opened it (every column:
    its reader is already open), whose read-ahead may start before the pass
    (:func:`_read_ahead`)."""

    def __init__(self, reader: Any):
        self.reader = reader

    def __call__(self, cols: list[str] | None) -> Any:
        return self.reader


def _read_ahead(opened: Any) -> None:
    """Start the read-ahead of an input opened as it will be read: its reads and JSON parse
    (GIL released) overlap the tokenizer's load, which holds the GIL for most of it."""
    if isinstance(opened[0], _AsOpened):
        opened[0].reader.start()


def _schema_of(path: str, fmt: str, comp: str | None, batch_rows: int,
               reader_options: dict[str, Any]) -> tuple[Any, pa.Schema, int | None]:
    """(reader factory, the file's schema, rows from the metadata or None)."""
    if fmt == "parquet":
        schema, rg_rows = read_footer(path)
        return (lambda cols: iter_batches(path, format=fmt, columns=cols, batch_rows=batch_rows,
                                          **reader_options)), schema, sum(rg_rows)
    reader = iter_batches(path, format=fmt, compression=comp, batch_rows=batch_rows,
                          **reader_options)
    fixed = (settled_schema(reader.schema)
             if fmt in TEXT_FORMATS and "schema" not in reader_options else None)
    if fixed is None:
        return _AsOpened(reader), reader.schema, None

    # a column's type is unknown from the first 16 MiB (only nulls or empty lists there): the
    # file is read again with the types settled and only the columns the pass needs, so a
    # later value there (a token id, a string in a column the pass does not read) is no error
    def reopen(cols: list[str] | None) -> Any:
        if cols is None:
            return reader
        reader.close()
        return iter_batches(path, format=fmt, compression=comp, columns=cols, schema=fixed,
                            batch_rows=batch_rows, **reader_options)
    return reopen, fixed, None


def prepare(inputs: Any, output: str, max_length: int, *, strategy: str = "bfd",
            overflow: str = "error", layout: str = "standard", attention: str | None = "auto",
            dedupe: bool = True,
            dedupe_columns: Sequence[str] | None = None, pack_window: int = DEFAULT_PACK_WINDOW,
            tokenizer: Any = None, text_column: str = "text", batch_rows: int = 8192,
            format: str | None = None, progress: bool | None = None,
            num_threads: int | None = None,
            reader_options: dict[str, Any] | None = None, cancel: Any = None,
            add_special_tokens: bool = True, append_eos: bool = False,
            eos_token: str | None = None, messages_column: str | None = None,
            chat: Mapping[str, Any] | None = None,
            max_row_bytes: int = MAX_ROW_BYTES,
            pad_token_id: int | None = None) -> PrepareReport:
    """Dedupe and pack tokenized rows from files into a packed Parquet file, in bounded memory.

    Parameters
    ----------
    inputs : path, directory, glob, a list of them, or data in memory
        Any source :func:`fastaxo.iter_batches` reads (Parquet, Arrow, JSON Lines, CSV, ...),
        or a pyarrow Table, RecordBatch or RecordBatchReader, or a ``datasets.Dataset`` or
        ``IterableDataset`` (read ``batch_rows`` rows at a time, the needed columns only),
        with a list column ``input_ids`` (and ``labels``, used when present), or, with
        ``tokenizer``, a text column. Files are read in order, one after another. An
        ``attention_mask`` column marks padding (a run of 0s at a row's start or end, as
        ``padding="max_length"`` leaves): those tokens are dropped, counted
        (``pad_tokens_dropped``); a 0 between 1s is an error naming the row. Without a
        mask, ``pad_token_id`` names the padding.
    output : str
        The Parquet file to write. It is written under a temporary name in the same directory,
        flushed to disk (fsync) and renamed at the end: an error or Ctrl-C leaves no file at
        ``output``, a power cut the old file or the new one. An existing ``output`` must be a
        regular file (a device, FIFO, socket or directory is refused before any work); a
        symbolic link is written through (the file it points to is replaced).
    max_length : int
        Tokens per packed row (the bin capacity).
    strategy : {"bfd", "ffd", "ff", "nf", "wrapped"}
        Bin assignment (see :func:`fastaxo.pack_bins`), per window; or ``"wrapped"`` (TRL's,
        for pretraining text): a window's rows back to back, cut every ``max_length`` tokens,
        a document running on into the next row as a new segment (every row full but a
        window's last; the documents cut counted as ``split``; ``overflow`` does not apply).
    overflow : {"error", "truncate", "split", "drop"}
        Rows longer than ``max_length``: raise naming the file and row (default), keep the
        first ``max_length`` tokens, cut into pieces of at most ``max_length``, or leave out.
        Counted. With ``tokenizer``, "drop" also drops the rows over ``max_row_bytes``.
    max_row_bytes : int
        With ``tokenizer``: the largest text (or rendered conversation) handed to the
        tokenizer, in UTF-8 bytes (default 16 MiB; HF's tokenizer needs ~100x a text's size in
        memory). A larger row raises :class:`~fastaxo.errors.RowTooLargeError` naming the file
        and row, or with ``overflow="drop"`` is left out, counted (``rows_too_large``).
    pad_token_id : int, optional
        Tokenized input padded with this id (``padding="max_length"`` without an
        attention_mask): the run of it that ends a row is dropped before anything else,
        counted (``pad_tokens_dropped``, ``padded_rows``). Where the input has labels, only
        positions labelled -100 are padding, so a pad id that is also the EOS keeps an EOS
        the row trains on; without labels such an EOS at a row's end cannot be told from
        padding and is dropped with it (give the attention_mask instead).
    layout : {"standard", "axolotl"}
        The output's columns. ``"standard"`` (default): ``input_ids``; ``labels`` (the
        input's, or its input_ids), -100 on each sequence's first token, as transformers'
        ``DataCollatorWithFlattening`` does; ``position_ids`` restarting at 0 for every
        sequence; ``seq_lengths`` (TRL's name: the lengths of the row's sequences); each in
        the narrowest of int8/int16/int32 that holds its values. A stock transformers model
        trains on these rows with no custom collator and ``use_cache=False`` (it tells the
        sequences apart by the restarting position ids), or through
        :class:`fastaxo.integrations.transformers.PackedCollator`. ``"axolotl"``: Axolotl's
        layout, int32: ``input_ids``, ``labels`` when the input has them, ``position_ids``
        and ``attention_mask`` as ``attention`` says.
    attention : {"auto", "segments", "ones", None}
        With ``layout="axolotl"``: ``attention_mask`` as segment ids 1..k per row ("auto",
        the default), all ones, or no column (None or ``"none"``). The standard layout has no
        attention_mask (a stock model reads one as "attend across the row"), so only "auto"
        or None go with it.
    dedupe : bool
        Drop rows equal to an earlier row (any file) on ``dedupe_columns``; exact (SHA-256 of
        the canonical row encoding, one :class:`fastaxo.Seen`: 32 bytes per distinct row).
    dedupe_columns : list of str, optional
        Columns that define a duplicate. Default: the columns the output is made of
        (``input_ids``, and ``labels`` when present), the rule of :func:`fastaxo.dedupe`,
        whose output holds every column and whose default key is every column.
    pack_window : int
        Kept rows packed together (default 100,000, Axolotl's group size): the memory bound.
    tokenizer : str, tokenizers.Tokenizer or transformers tokenizer, optional
        A Hugging Face tokenizer directory (``tokenizer.json``) or file, or a tokenizer object
        (a ``tokenizers.Tokenizer``, or a transformers fast tokenizer, which chat data needs;
        used as a copy): tokenize
        ``text_column`` with the ``tokenizers`` library (batched, local, no network) first.
        Rows are tokenized whole: a truncation or padding stored in tokenizer.json is not
        applied (the report says so); over-long rows go through ``overflow``, counted.
    add_special_tokens : bool
        With ``tokenizer``: add the tokenizer's special tokens (its post-processor: BOS, ...).
    append_eos, eos_token : bool, str
        With ``tokenizer``: append the EOS token to every document (``eos_token``, default the
        ``eos_token`` of the tokenizer_config.json beside tokenizer.json); counted in the report.
    messages_column, chat : str, dict
        Chat data (OpenAI ``messages``: lists of ``{"role", "content"}``): with ``tokenizer``
        (a directory with tokenizer_config.json), rows of ``messages_column`` (default
        ``messages``, used when the input has no ``text_column`` but has ``messages``) become
        Axolotl's ``input_ids`` and role-masked ``labels`` (``type: chat_template``, see
        :func:`fastaxo.chat.tokenize_chat`). ``chat`` holds Axolotl's options:
        ``chat_template`` (a Jinja file or string, or an Axolotl template name), ``roles_to_train``
        (default ``["assistant"]``), ``train_on_inputs``, ``train_on_eos`` (default ``"turn"``),
        ``train_on_eot``, ``eot_tokens``, ``template_kwargs``. Rows the one-pass path cannot
        prove are made by Axolotl's own algorithm, counted in the report's tokenizer settings.
    batch_rows, format, reader_options
        Passed to :func:`fastaxo.iter_batches` (``format`` for names it cannot detect).
    progress : bool, optional
        Show progress on stderr: a bar on a terminal (tqdm's, when installed), else a line
        every few seconds. Default: on in interactive sessions (a terminal, the REPL, Jupyter).
    cancel : threading.Event, optional
        Checked before every batch: once set, prepare stops as on KeyboardInterrupt (the
        temporary file is removed, nothing is written to ``output``). ``fastaxo prepare`` sets
        it on Ctrl-C, so that an interrupt swallowed by library code (pyarrow's lazy imports
        catch what lands in them) still stops the run.

    Returns
    -------
    PrepareReport

    Examples
    --------
    >>> import os, tempfile, pyarrow as pa, pyarrow.parquet as pq
    >>> tmp = tempfile.TemporaryDirectory()
    >>> d = tmp.name
    >>> rows = pa.table({"input_ids": [[1, 2, 3], [4, 5], [1, 2, 3], [6]]})
    >>> pq.write_table(rows, os.path.join(d, "in.parquet"))
    >>> rep = fastaxo.prepare(os.path.join(d, "in.parquet"), os.path.join(d, "out.parquet"),
    ...                       max_length=4, progress=False)
    >>> rep.rows_in, rep.duplicates, rep.bins
    (4, 1, 2)
    >>> pq.read_table(os.path.join(d, "out.parquet")).column("input_ids").to_pylist()
    [[1, 2, 3, 6], [4, 5]]
    >>> tmp.cleanup()
    """
    o = options_of_call(locals())  # (first: locals() holds only the arguments)
    nt = resolve_num_threads(num_threads)
    if not isinstance(output, (str, os.PathLike)):
        raise InvalidTypeError(f"output must be a path, got {type(output).__name__}")
    output = os.fspath(output)
    check_output(output)  # before any work: a bad path fails now, not after the run
    mem = memory_source(inputs, o.batch_rows)  # (a Table, a Dataset, ...: one input)
    files: list[tuple[str, str, str | None]] = (
        [(mem.name, "memory", None)] if mem else resolve_source(inputs, format))
    if mem is None:
        check_not_an_input(output, [p for p, _, _ in files])
    # Read-ahead: 64 MiB is plenty to keep the packer fed and keeps the peak down.
    ropts = {"prefetch_bytes": 64 << 20, **(reader_options or {})}

    # stage 1, the inputs: the first with rows fixes the columns (and says whether it is chat)
    t_start = time.perf_counter()
    io0 = io_counters()
    reset_peak()  # (the report's peak is this call's, not the process's so far)
    opened, k0 = _open_first(files, mem, o.batch_rows, ropts)
    first_name = files[k0][0]
    schema0 = opened[k0][1]
    chat_mode = o.chat_mode(schema0)
    column = o.column(chat_mode)
    # stage 2, the tokenizer (None: the input is tokenized), the first input read meanwhile
    if o.tokenizer is not None:
        _read_ahead(opened[k0])
    try:
        tok = o.make_tokenizer(chat_mode, num_threads=nt)
        has_labels, key_cols = first_columns(schema0, first_name, tok is not None, column,
                                             o.dedupe_columns, chat=chat_mode)
        has_mask = tok is None and MASK in schema0.names  # (its padding is dropped, counted)
        del schema0

        # stage 3, the output and the report
        options = o.schema_options(key_cols)
        prov = provenance([p for p, _, _ in files], tok, options)
        out_schema = output_schema(o.layout, has_labels, o.attention, options, prov)
        rep = _new_report(o, [p for p, _, _ in files], output, key_cols, has_labels, k0, tok,
                          prov)
    except BaseException:  # the read-ahead started above stops with the call
        for got in opened:
            if got is not None and isinstance(got[0], _AsOpened):
                got[0].reader.close()
        raise
    bar = _progress(files, opened, o.batch_rows, ropts, progress)
    # stage 4, the pass: read, tokenize, check, dedupe, pack windows, write. The writer is
    # made inside the try: a Ctrl-C just after its file appears must remove the file too.
    writer: Writer | None = None
    try:
        writer = Writer(output, out_schema, num_threads=nt)
        run = _Pass(rep=rep, writer=writer, fields=list(out_schema), tok=tok,
                    text_column=column, has_labels=has_labels,
                    key_cols=key_cols if o.dedupe else None, max_length=o.max_length,
                    strategy=o.strategy, overflow=o.overflow,
                    att_mode=ATTENTION_MODES[o.attention], pack_window=o.pack_window, nt=nt,
                    bar=bar, cancel=cancel, has_mask=has_mask, pad_id=o.pad_token_id,
                    layout=o.layout, schema=out_schema,
                    bounds={} if o.layout == "standard" else None)
        for fi, (path, fmt, comp) in enumerate(files):
            if fi < k0:
                continue
            got = opened[fi] or _schema_of(path, fmt, comp, o.batch_rows, ropts)
            opened[fi] = None
            if fi > k0 and _no_rows(got, fmt):
                _close(got)
                rep.empty_files += 1
                continue
            make_reader, schema, _ = got
            cols = input_columns(schema, path, first_name, tokenizing=tok is not None,
                                 text_column=column, has_labels=has_labels, dedupe=o.dedupe,
                                 key_cols=key_cols, chat=chat_mode, has_mask=has_mask)
            run.read_file(make_reader(cols), path, fi)
        run.finish()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    finally:
        if bar is not None:
            bar.close()

    # stage 5, the report
    _finish_report(rep, run.writer, tok, t_start, io0)
    return rep


def _new_report(o: PrepareOptions, inputs: list[str], output: str, key_cols: list[str],
                has_labels: bool, empty_files: int, tok: Any, prov: dict[str, Any]
                ) -> PrepareReport:
    """The report as the pass starts: the options, the inputs, the tokenizer's settings."""
    return PrepareReport(inputs=inputs, output=output, max_length=o.max_length,
                         strategy=o.strategy, overflow=o.overflow, attention=o.attention,
                         layout=o.layout, pad_token_id=o.pad_token_id,
                         pack_window=o.pack_window, dedupe=o.dedupe,
                         dedupe_columns=key_cols if o.dedupe else None, labels=has_labels,
                         tokenizer=tokenizer_label(o.tokenizer), files=len(inputs),
                         empty_files=empty_files,
                         tokenizer_settings=None if tok is None else tok.settings(),
                         provenance=prov)


def _progress(files: list[tuple[str, str, str | None]], opened: list[Any], batch_rows: int,
              ropts: dict[str, Any], progress: bool | None) -> Meter | None:
    """The progress display (None: off), with a total for every input (:class:`Meter`): the
    Parquet footers are read here, once, and kept in ``opened``."""
    if not (interactive() if progress is None else progress):
        return None
    rows: list[int | None] = []
    for fi, (path, fmt, comp) in enumerate(files):
        if fmt == "parquet" and opened[fi] is None:
            opened[fi] = _schema_of(path, fmt, comp, batch_rows, ropts)
        rows.append(opened[fi][2] if fmt in ("parquet", "memory") else None)
    return Meter(files, rows)


def _finish_report(rep: PrepareReport, writer: Writer, tok: Any, t_start: float,
                   io0: dict[str, int] | None) -> None:
    """The report's totals once the output is committed."""
    rep.finish(time.perf_counter() - t_start)
    if tok is not None:
        rep.tokenizer_settings = tok.settings()  # the chat path's fallback counts
    rep.row_groups = writer.row_groups
    io1 = io_counters()
    if io0 and io1:
        rep.bytes_read = io1.get("rchar", 0) - io0.get("rchar", 0)
    hwm = status_kib("VmHWM")
    rep.peak_rss_bytes = None if hwm is None else hwm * 1024


@dataclass
class _Pass:
    """One prepare pass over the inputs: each batch checked (and tokenized), deduplicated
    against every row before it (one Seen), kept rows gathered into windows of pack_window
    rows, each window packed and written. Counts go to ``rep``."""

    rep: PrepareReport
    writer: Writer
    fields: list[pa.Field]
    tok: Any
    text_column: str
    has_labels: bool
    key_cols: list[str] | None  # None: no dedupe
    max_length: int
    strategy: str
    overflow: str
    att_mode: str | None
    pack_window: int
    nt: int
    bar: Any
    cancel: Any
    has_mask: bool = False  # the input's attention_mask marks padding to drop
    pad_id: int | None = None  # a run of it ends a row: padding to drop
    layout: str = "standard"
    schema: pa.Schema | None = None  # the output's, every column int32 until commit
    bounds: Bounds | None = None  # the input's token values so far (the standard layout's)
    seen: Seen | None = None
    window: list[Kept] = field(default_factory=list)
    window_rows: int = 0

    def __post_init__(self) -> None:
        if self.key_cols is not None:
            self.seen = Seen()

    def read_file(self, reader: Any, path: str, fi: int = 0) -> None:
        """Every batch of one input file (the ``fi``-th)."""
        row0 = 0
        if self.bar is not None:
            self.bar.start_file(fi)
        try:
            for batch in reader:
                if self.cancel is not None and self.cancel.is_set():
                    raise KeyboardInterrupt
                if batch.num_rows:
                    self.take(batch, path, row0)
                    row0 += batch.num_rows
                    if self.bar is not None:
                        self.bar.batch(batch.num_rows, reader, row0)
            if self.bar is not None:
                self.bar.end_file()
        finally:
            st = reader.stats
            self.rep.reader_wait_seconds += st.stall_seconds
            self.rep.bytes_decoded += st.bytes
            reader.close()

    def take(self, batch: Any, path: str, row0: int) -> None:
        """One batch (its first row is row ``row0`` of ``path``): checked, its kept rows added
        to the window; full windows packed."""
        rep, n = self.rep, batch.num_rows
        on_rows = None
        if self.bar is not None and self.tok is not None:
            bar, done = self.bar, [0]
            bar.stage(f"tokenizing {n:,} rows")

            def on_rows(k: int) -> None:  # (rows of the batch tokenized so far)
                done[0] += k
                bar.stage(f"tokenizing {done[0]:,}/{n:,} rows of the batch")
        cb = check_batch(
            batch, path, row0, tok=self.tok, text_column=self.text_column,
            has_labels=self.has_labels, max_length=self.max_length, overflow=self.overflow,
            has_mask=self.has_mask, bounds=self.bounds is not None, num_threads=self.nt,
            on_rows=on_rows, pad_id=self.pad_id)
        if on_rows is not None:  # (the tokenizing stage is over)
            self.bar.stage("")
        work, lens, too_large = cb.work, cb.lens, cb.too_large
        if cb.bounds:
            assert self.bounds is not None
            add_bounds(self.bounds, cb.bounds)
        rep.tokenize_seconds += cb.tokenize_seconds
        rep.rows_too_large += too_large
        rep.pad_tokens_dropped += cb.pad_tokens
        rep.padded_rows += cb.padded_rows
        if self.tok is not None and self.tok.eos_id is not None:
            rep.eos_appended += n - too_large  # (a dropped row gets no EOS)
        rep.rows_in += n
        rep.tokens_in += int(lens.sum())
        table = pa.table(work)
        keep = None
        nonempty = lens > 0
        if not nonempty.all():  # (the rows too large are given no tokens)
            rep.empty_rows += int(n - np.count_nonzero(nonempty)) - too_large
            keep = np.flatnonzero(nonempty)
        if self.key_cols is not None:
            keep = self.dedupe(work, batch, keep)
        piece = Kept(table, keep)  # (no compacted copy: the packer reads the kept rows)
        if piece.rows:
            self.window.append(piece)
            self.window_rows += piece.rows
        while self.window_rows >= self.pack_window:
            full, self.window = split_kept(self.window, self.pack_window)
            self.window_rows -= self.pack_window
            self.flush(full)
            del full  # (or the packed window stays alive until the next one)

    def dedupe(self, work: dict[str, Any], batch: Any, keep: np.ndarray | None
               ) -> np.ndarray | None:
        """The rows of the batch to keep (of ``keep``, None: all) once duplicates of any
        earlier row are left out."""
        assert self.key_cols is not None
        td = time.perf_counter()
        key = pa.table({c: (work[c] if c in work else batch.column(c)) for c in self.key_cols})
        if keep is not None:
            key = key.take(arrow.from_numpy(keep))
        res = dedupe_rows(key, seen=self.seen, num_threads=self.nt)
        self.rep.duplicates += res.n_duplicates
        if res.n_duplicates:
            keep = res.keep if keep is None else keep[res.keep]
        self.rep.dedupe_seconds += time.perf_counter() - td
        return keep

    def flush(self, pieces: list[Kept]) -> None:
        """Pack one window and write its bins."""
        t0 = time.perf_counter()
        if self.bar is not None:
            self.bar.stage(f"packing and writing window {self.rep.windows + 1:,} "
                           f"({sum(p.rows for p in pieces):,} rows)")
        data = window_data(pieces, ["input_ids"] + (["labels"] if self.has_labels else []),
                           self.strategy)
        w0 = self.writer.seconds
        st = write_packed_window(data, self.writer, self.fields, max_length=self.max_length,
                                 strategy=self.strategy, overflow=self.overflow,
                                 att_mode=self.att_mode, has_labels=self.has_labels,
                                 num_threads=self.nt)
        self.rep.pack_seconds += time.perf_counter() - t0 - (self.writer.seconds - w0)
        self.rep.add_pack_stats(st)
        if self.bar is not None:
            self.bar.stage("")
            self.bar.update(0, f"{self.rep.bins:,} bins")

    def finish(self) -> None:
        """The last window packed and the file committed (renamed into place)."""
        if self.window_rows:
            self.flush(self.window)
            self.window, self.window_rows = [], 0
        if self.cancel is not None and self.cancel.is_set():  # set during the last window
            raise KeyboardInterrupt
        assert self.schema is not None
        final = retyped(self.schema, output_types(self.layout, self.max_length,
                                                  self.has_labels, self.bounds))
        self.rep.columns = {f.name: str(f.type.value_type) for f in final}
        self.rep.output_bytes = self.writer.commit(final)
        self.rep.write_seconds = self.writer.seconds
