"""prepare's stages, shared with its Ray form: the input columns checked, a batch's
token columns checked, a window packed and written, and the output schema."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow, backend
from fastaxo._core.ragged import Ragged
from fastaxo.errors import (
    ColumnNotFoundError,
    InvalidInputError,
    SchemaMismatchError,
    SequenceTooLongError,
)
from fastaxo.packing import iter_pack
from fastaxo.packing.rows import ATTENTION
from fastaxo.pipeline.columns import (
    IGNORE_INDEX,
    SEQ_LENGTHS,
    ChatTokenizer,
    chat_tokenize,
    compact,
    list_lengths,
    row_where,
    token_column,
    tokenize,
)
from fastaxo.pipeline.parquet import int_holds
from fastaxo.pipeline.provenance import KEY as PROVENANCE
from fastaxo.pipeline.unpad import MASK, strip_pad_run, strip_padding
from fastaxo.pipeline.wrapped import write_wrapped_window

__all__ = ["ATTENTION_MODES", "ROW_GROUP_TOKENS", "STANDARD_COLUMNS", "Bounds", "CheckedBatch",
           "Kept",
           "add_bounds", "check_batch", "column_bounds", "first_columns", "input_columns",
           "narrowest", "output_schema", "output_types", "retyped", "split_kept", "window_data",
           "write_packed_window"]

ROW_GROUP_TOKENS = 1 << 22  # bins per output row group: ~4M tokens (16 MiB per int32 column)
_I32 = pa.int32()

ATTENTION_MODES: dict[str, str | None] = {**{a: a for a in ATTENTION}, "none": None}
#: the standard layout's columns, in order
STANDARD_COLUMNS = ("input_ids", "labels", "position_ids", SEQ_LENGTHS)

# What a SequenceTooLongError from prepare tells the caller to do.
FIX_PREPARE = ("Pass --overflow truncate, split or drop (overflow= in prepare()) to handle such "
               "rows (each is counted in the report), or filter them out first")


def narrowest(lo: int | None, hi: int | None) -> pa.DataType:
    """The narrowest of int8, int16 and int32 that holds every value in [lo, hi] (int32 when
    there is no value: nothing narrower is proven)."""
    if lo is None or hi is None:
        return _I32
    for t in (pa.int8(), pa.int16()):
        if int_holds(t.bit_width, lo, hi):
            return t
    return _I32


Bounds = dict[str, tuple[int, int]]  # per token column: its smallest and largest value


def add_bounds(total: Bounds, more: Bounds) -> Bounds:
    """``total`` widened by ``more``, column by column (in place; returned)."""
    for k, (lo, hi) in more.items():
        a, b = total.get(k, (lo, hi))
        total[k] = (min(a, lo), max(b, hi))
    return total


def column_bounds(work: dict[str, pa.Array | pa.ChunkedArray], num_threads: int = 1) -> Bounds:
    """The smallest and largest value of each token column (list<int32>; columns without a
    value left out): one pass over the values (``_pack.int32_bounds``), NumPy's two without
    the extension."""
    ext = backend.pack_ext
    out: Bounds = {}
    for name, col in work.items():
        found = [ext.int32_bounds(np.ascontiguousarray(v), num_threads) if ext is not None
                 else (int(v.min()), int(v.max())) for v in arrow.spanned_values(col) if len(v)]
        if found:
            out[name] = (min(b[0] for b in found), max(b[1] for b in found))
    return out


def output_types(layout: str, max_length: int, has_labels: bool,
                 bounds: Bounds | None) -> dict[str, pa.DataType]:
    """The standard layout's value types: the narrowest that hold the input's token values
    (``bounds``; int32 where unknown), -100 in labels, position ids below max_length and
    sequence lengths up to it. The axolotl layout is int32 throughout, as before."""
    if layout != "standard":
        return {}
    ids = (bounds or {}).get("input_ids")
    lab = (bounds or {}).get("labels" if has_labels else "input_ids")
    return {"input_ids": narrowest(*ids) if ids else _I32,
            "labels": narrowest(min(lab[0], IGNORE_INDEX), max(lab[1], IGNORE_INDEX))
            if lab else _I32,
            "position_ids": narrowest(0, max_length - 1),
            SEQ_LENGTHS: narrowest(1, max_length)}


def output_schema(layout: str, has_labels: bool, attention: str, options: dict[str, Any],
                  provenance: dict[str, Any] | None = None,
                  types: dict[str, pa.DataType] | None = None) -> pa.Schema:
    """The packed output's columns, the options in its metadata and, under
    ``fastaxo.provenance``, where it came from (:mod:`fastaxo.pipeline.provenance`).

    ``"standard"``: input_ids, labels (always: -100 on each sequence's first token),
    position_ids, seq_lengths. ``"axolotl"``: input_ids, labels if the input has them,
    position_ids, attention_mask unless attention is "none". Lists of int32 unless ``types``
    (the final types: :func:`output_types`) says narrower: a file is written as int32 and
    its types are set when it is closed."""
    if layout == "standard":
        names = list(STANDARD_COLUMNS)
    else:
        names = ["input_ids"] + (["labels"] if has_labels else []) + ["position_ids"]
        if ATTENTION_MODES[attention] is not None:
            names.append("attention_mask")
    types = types or {}
    fields = [pa.field(n, pa.list_(types.get(n, _I32))) for n in names]
    meta = {"fastaxo.prepare": json.dumps(options)}
    if provenance is not None:
        meta[PROVENANCE] = json.dumps(provenance)
    return pa.schema(fields, metadata=meta)


def retyped(schema: pa.Schema, types: dict[str, pa.DataType]) -> pa.Schema:
    """``schema`` with the value types ``types`` gives (the others kept), metadata kept."""
    return pa.schema([pa.field(f.name, pa.list_(types.get(f.name, f.type.value_type)))
                      for f in schema], metadata=schema.metadata)


def first_columns(schema: pa.Schema, where: str, tokenizing: bool, text_column: str,
                  dedupe_columns: Sequence[str] | None, chat: bool = False
                  ) -> tuple[bool, list[str]]:
    """(labels used, dedupe columns) from the first input's schema, which fixes the columns.
    ``chat``: ``text_column`` is a messages column, which gives labels."""
    if tokenizing:
        if text_column not in schema.names:
            what = "messages column" if chat else "text column"
            raise ColumnNotFoundError(f"{where}: no {what} {text_column!r} to tokenize "
                                      f"(columns: {schema.names}); pass --text-column")
        has_labels = chat
    else:
        if "input_ids" not in schema.names:
            raise ColumnNotFoundError(f"{where}: no column 'input_ids' (columns: {schema.names}); "
                                      "for raw text pass a tokenizer (--tokenizer DIR)")
        has_labels = "labels" in schema.names
    default = ["input_ids", "labels"] if has_labels else ["input_ids"]
    return has_labels, list(dedupe_columns) if dedupe_columns else default


def input_columns(schema: pa.Schema, where: str, first: str, *, tokenizing: bool,
                  text_column: str, has_labels: bool, dedupe: bool,
                  key_cols: list[str], chat: bool = False, has_mask: bool = False) -> list[str]:
    """The columns to read from an input (errors when it does not have what the first input
    has); every input goes through this, the first one too. ``has_mask``: the first input has
    an attention_mask (its padding is dropped), so every input must, and the other way round."""
    need = [text_column] if tokenizing else ["input_ids"] + (["labels"] if has_labels else [])
    if not tokenizing:
        if (MASK in schema.names) != has_mask:
            raise SchemaMismatchError(
                f"{where} {'has no' if has_mask else 'has an'} {MASK!r} column and {first} "
                f"{'has one' if has_mask else 'has none'}; inputs must agree (the mask says "
                "which tokens are padding)")
        need += [MASK] if has_mask else []
        missing = [c for c in need if c not in schema.names]
        if missing:
            raise SchemaMismatchError(f"{where}: no column {missing[0]!r} (columns: "
                                      f"{schema.names}); {first} has it, so every input must")
        if "labels" in schema.names and not has_labels:
            raise SchemaMismatchError(
                f"{where} has a 'labels' column and {first} has none; inputs must agree")
    elif text_column not in schema.names:
        raise ColumnNotFoundError(
            f"{where}: no text column {text_column!r} (columns: {schema.names})")
    if dedupe:
        produced = {"input_ids", "labels"} if not tokenizing or chat else {"input_ids"}
        missing = [c for c in key_cols if c not in produced and c not in schema.names]
        if missing:
            raise ColumnNotFoundError(f"{where}: dedupe column {missing[0]!r} not in the data "
                                      f"(columns: {schema.names})")
    keys = [c for c in key_cols if c in schema.names] if dedupe else []
    return list(dict.fromkeys(need + keys))


class CheckedBatch(NamedTuple):
    """A batch's token columns (list<int32>: input_ids [+ labels]), their lengths, the seconds
    spent tokenizing, the rows over max_row_bytes given no tokens (``overflow="drop"``), and
    the pad tokens the input's attention_mask marked, dropped, and the rows that had any."""

    work: dict[str, pa.Array | pa.ChunkedArray]
    lens: np.ndarray
    tokenize_seconds: float
    too_large: int
    pad_tokens: int = 0
    padded_rows: int = 0
    bounds: Bounds | None = None  # the token columns' value bounds, when asked for


def check_batch(batch: Any, path: str, row0: int, *, tok: Any, text_column: str,
                has_labels: bool, max_length: int, overflow: str,
                has_mask: bool = False, bounds: bool = False,
                num_threads: int = 1, on_rows: Any = None,
                pad_id: int | None = None) -> CheckedBatch:
    """The token columns of a batch whose first row is row ``row0`` of ``path``, checked (errors
    name the file and row) and as list<int32>. With ``tok``, ``text_column`` is tokenized
    instead; a row over the tokenizer's max_row_bytes is refused, or with ``overflow="drop"``
    given no tokens and counted. ``has_mask``: the positions the batch's attention_mask marks
    as padding are dropped first (:func:`~fastaxo.pipeline.unpad.strip_padding`), counted.
    ``bounds``: find each token column's smallest and largest value (the standard layout's
    types are the narrowest that hold them). ``on_rows(k)``: told as rows are tokenized.
    ``pad_id``: the run of it that ends a row is padding, dropped and counted
    (:func:`~fastaxo.pipeline.unpad.strip_pad_run`)."""
    tsec = 0.0
    too_large = 0
    unpadded = None
    if isinstance(tok, ChatTokenizer):
        tt = time.perf_counter()
        ids, labels, too_large = chat_tokenize(tok, batch.column(text_column), text_column, path,
                                               row0, overflow, on_rows)
        work = {"input_ids": ids, "labels": labels}
        tsec = time.perf_counter() - tt
    elif tok is not None:
        tt = time.perf_counter()
        ids, too_large = tokenize(tok, batch.column(text_column), text_column, path, row0,
                                  overflow, on_rows)
        work = {"input_ids": ids}
        tsec = time.perf_counter() - tt
    else:
        work = {"input_ids": token_column(batch.column("input_ids"), "input_ids", path, row0)}
        if has_labels:
            lab = token_column(batch.column("labels"), "labels", path, row0)
            bad = np.flatnonzero(list_lengths(lab) != list_lengths(work["input_ids"]))
            if len(bad):
                i = int(bad[0])
                raise InvalidInputError(
                    f"{row_where(path, row0 + i)}: labels has {int(list_lengths(lab)[i])} values "
                    f"and input_ids {int(list_lengths(work['input_ids'])[i])}; they must be "
                    "aligned")
            work["labels"] = lab
        if has_mask:
            unpadded = strip_padding(work, batch.column(MASK), path, row0)
            work = unpadded.work
        if pad_id is not None:
            run = strip_pad_run(work, pad_id)
            work = run.work
            unpadded = run if unpadded is None else unpadded.then(run)
    lens = list_lengths(work["input_ids"])
    if overflow == "error":
        over = np.flatnonzero(lens > max_length)
        if len(over):
            i = int(over[0])
            raise SequenceTooLongError.of(
                f"{row_where(path, row0 + i)}: input_ids", row0 + i, int(lens[i]), max_length,
                longer=len(over), fix=FIX_PREPARE)
    return CheckedBatch(work, lens, tsec, too_large,
                        unpadded.pad_tokens if unpadded is not None else 0,
                        unpadded.padded_rows if unpadded is not None else 0,
                        column_bounds(work, num_threads) if bounds else None)


class Kept(NamedTuple):
    """A batch's token columns (list<int32>) and the rows of it a window keeps: sorted row
    numbers, or None for all. A window is a list of them, packed without a compacted copy."""

    table: pa.Table
    keep: np.ndarray | None

    @property
    def rows(self) -> int:
        return self.table.num_rows if self.keep is None else len(self.keep)


def split_kept(pieces: list[Kept], n: int) -> tuple[list[Kept], list[Kept]]:
    """(the pieces holding the first ``n`` kept rows, the pieces holding the rest): a piece
    cut between the two shares its table."""
    first: list[Kept] = []
    for i, p in enumerate(pieces):
        if p.rows <= n:
            first.append(p)
            n -= p.rows
            continue
        keep = np.arange(p.table.num_rows) if p.keep is None else p.keep
        rest = [Kept(p.table, keep[n:])] + pieces[i + 1:]
        return (first + [Kept(p.table, keep[:n])] if n else first), rest
    return first, []


def window_data(pieces: list[Kept], names: list[str], strategy: str) -> Any:
    """A window's kept rows as :func:`write_packed_window` takes them: a mapping of ragged
    columns reading the batches' own buffers through a row map (the packer copies each kept
    row once, into its bin), or for "wrapped" a table of the rows back to back."""
    if strategy == "wrapped":
        tables = [p.table if p.keep is None else compact(p.table, p.keep) for p in pieces]
        # (a batch may hold large_list columns where another holds list ones)
        return pa.concat_tables([t.cast(tables[0].schema) for t in tables])
    index, base = [], 0
    for p in pieces:
        index.append(base + (np.arange(p.table.num_rows) if p.keep is None else p.keep))
        base += p.table.num_rows
    idx = np.concatenate(index) if index else np.zeros(0, np.int64)
    out = {}
    for name in names:
        chunks, at = [], 0
        for p in pieces:
            for c in p.table.column(name).chunks:
                if len(c):
                    chunks.append(arrow.list_view(c, name, at))
                    at += len(c)
        out[name] = Ragged(name, chunks, np.dtype(np.int32), index=idx)
    return out


def write_packed_window(table: Any, writer: Any, fields: list[pa.Field], *, max_length: int,
                        strategy: str, overflow: str, att_mode: str | None, has_labels: bool,
                        num_threads: int) -> Any:
    """Pack one window (its kept rows, :func:`window_data`: input_ids [+ labels]) and write its
    bins to
    ``writer`` as row groups of about ROW_GROUP_TOKENS tokens; returns its PackStats. Strategy
    "wrapped": the rows back to back, cut every max_length tokens (pipeline/wrapped.py).
    ``fields`` name the columns written (:func:`output_schema`); every column is written as
    int32 values. The standard layout's labels (the input's, or its input_ids) get -100 on
    each sequence's first token, and its seq_lengths are the bins' entries."""
    standard = SEQ_LENGTHS in [f.name for f in fields]
    if strategy == "wrapped":
        return write_wrapped_window(table, writer, fields, max_length=max_length,
                                    att_mode=att_mode, has_labels=has_labels,
                                    rows_per_group=max(1, ROW_GROUP_TOKENS // max_length))
    it = iter_pack(table, max_length, chunk_bins=max(1, ROW_GROUP_TOKENS // max_length),
                   layout="flat",
                   attention=att_mode, dtype=np.int32, strategy=strategy, overflow=overflow,
                   labels=None if has_labels else False, reuse_buffers=True,
                   num_threads=num_threads)
    spare = np.zeros(0, np.int32)  # the standard layout's labels made from input_ids
    for chunk in it:  # reuse_buffers: each chunk is written before the next one is filled
        # a chunk holds <= max(2**22, max_length) tokens: int32 offsets
        offs = arrow.from_numpy(chunk["bin_offsets"].astype(np.int32))
        cols = dict(chunk.items())
        if standard:
            if not has_labels:
                n = len(chunk["input_ids"])
                if len(spare) < n:
                    spare = np.empty(n, np.int32)
                cols["labels"] = spare[:n]
                np.copyto(cols["labels"], chunk["input_ids"])
            cols["labels"][chunk["cu_seqlens"][:-1]] = IGNORE_INDEX
        out = []
        for f in fields:
            if f.name == SEQ_LENGTHS:  # one entry per sequence: the bins' own entries
                out.append(pa.ListArray.from_arrays(
                    arrow.from_numpy(chunk.bins.offsets.astype(np.int32)),
                    arrow.from_numpy(chunk.bins.lengths.astype(np.int32))))
            else:
                out.append(pa.ListArray.from_arrays(offs, arrow.from_numpy(cols[f.name])))
        writer.write(out)
    return it.stats
