"""The input of a Ray prepare: units (runs of consecutive rows in the global order), the
configuration every task gets, and a unit read and checked as ``fastaxo prepare`` does."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import ray
import ray.data

import fastaxo
from fastaxo._core.checks import MAX_ROW_BYTES
from fastaxo.errors import SchemaMismatchError
from fastaxo.pipeline.columns import ChatTokenizer, load_tokenizer, settled_schema
from fastaxo.pipeline.stages import Bounds, add_bounds, check_batch
from fastaxo.pipeline.unpad import MASK
from fastaxo.readers.sources import TEXT_FORMATS

__all__ = ["KEY_SHIFT", "ROW_MASK", "Cfg", "CheckedUnit", "Unit", "add_counts", "chat_options",
           "checked_unit", "plan_files", "read_unit", "schema_of_unit"]

KEY_SHIFT = 32              # key = unit << 32 | row in unit
ROW_MASK = (1 << KEY_SHIFT) - 1


@dataclass(frozen=True)
class Unit:
    """Consecutive rows of the input: rows [row0, row0 + nrows) of a file (Parquet: the row
    groups ``rgs``; other formats: the whole file, nrows unknown until read = -1), or block
    ``block`` of a dataset."""

    kind: str                 # "parquet" | "file" | "block"
    path: str = ""
    fmt: str = ""
    compression: str | None = None
    rgs: tuple[int, ...] = ()
    row0: int = 0
    nrows: int = -1
    block: int = -1
    # "block": the block's ObjectRef (a task that gets the unit can get it)
    ref: Any = None

    def where(self, row: int) -> tuple[str, int]:
        """(the file or block named in errors, the row there) of row ``row`` of this unit."""
        if self.kind == "block":
            return f"dataset block {self.block}", row
        return self.path, self.row0 + row


def plan_files(inputs: Any, fmt: str | None, unit_rows: int
               ) -> tuple[list[Unit], dict[str, pa.Schema]]:
    """The files cut into units (Parquet: whole row groups up to about ``unit_rows``) and the
    schema of each Parquet file, from the one read of its footer that cut it."""
    from fastaxo.readers import resolve_source

    units: list[Unit] = []
    schemas: dict[str, pa.Schema] = {}
    for path, f, comp in resolve_source(inputs, fmt):
        if f != "parquet":
            units.append(Unit("file", path, f, comp))
            continue
        import pyarrow.parquet as pq

        try:
            md = pq.read_metadata(path)
        except (pa.ArrowInvalid, OSError) as e:
            from fastaxo.errors import FileFormatError

            raise FileFormatError(f"{path}: not a readable Parquet file: {e}", path) from None
        schemas[path] = md.schema.to_arrow_schema()
        rgs: list[int] = []
        n = row0 = 0
        for g in range(md.num_row_groups):
            rgs.append(g)
            n += md.row_group(g).num_rows
            if n >= unit_rows:
                units.append(Unit("parquet", path, f, None, tuple(rgs), row0, n))
                row0 += n
                rgs, n = [], 0
        if rgs:
            units.append(Unit("parquet", path, f, None, tuple(rgs), row0, n))
    return units, schemas


def schema_of_unit(u: Unit, schemas: dict[str, pa.Schema] | None = None) -> pa.Schema:
    """The schema of a unit's input: a file's from ``schemas`` (plan_files' Parquet footers, the
    driver's JSON Lines inferences) when it is there, else read."""
    if schemas is not None and u.kind in ("parquet", "file") and u.path in schemas:
        return schemas[u.path]
    if u.kind == "block":
        return ray.get(u.ref).schema
    if u.kind == "parquet":
        import pyarrow.parquet as pq

        return pq.read_schema(u.path)
    return fastaxo.iter_batches(u.path, format=u.fmt, compression=u.compression,
                                batch_rows=1024).schema


def read_unit(u: Unit, columns: list[str]) -> pa.Table:
    """The unit's rows, the given columns, as one table."""
    if u.kind == "block":
        t = ray.get(u.ref)
        missing = [c for c in columns if c not in t.column_names]
        if missing:
            raise SchemaMismatchError(f"dataset block {u.block}: no column {missing[0]!r} "
                                      f"(columns: {t.column_names}); "
                                      "every block must have the columns of the first")
        return t.select(columns)
    if u.kind == "parquet":
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(u.path, pre_buffer=False, buffer_size=1 << 20)
        return pf.read_row_groups(list(u.rgs), columns=columns, use_threads=False)
    it = fastaxo.iter_batches(u.path, format=u.fmt, compression=u.compression, columns=columns,
                              prefetch=0)
    fixed = settled_schema(it.file_schema) if u.fmt in TEXT_FORMATS else None
    if fixed is not None:  # a token column's type unknown from the first 16 MiB (as prepare)
        it.close()
        it = fastaxo.iter_batches(u.path, format=u.fmt, compression=u.compression,
                                  columns=columns, schema=fixed, prefetch=0)
    with it:
        batches = list(it)
        if not batches:
            return it.schema.empty_table()
        return pa.Table.from_batches(batches, schema=it.schema)


@dataclass(frozen=True)
class Cfg:
    """Everything a task needs besides its unit (pickled into each task)."""

    max_length: int
    strategy: str
    overflow: str
    attention: str
    dedupe: bool
    key_cols: tuple[str, ...]
    has_labels: bool
    tokenizer: str | None
    text_column: str
    partitions: int
    threads: int
    schema_options: str   # json of the output's metadata
    add_special_tokens: bool = True   # the tokenizer options of fastaxo.prepare
    append_eos: bool = False
    eos_token: str | None = None
    #: the driver's encoder ("fastaxo" or "hf"; None: each worker's FASTAXO_TOKENIZER): the
    #: workers make the ids the driver's report names, whatever their environment
    encoder: str | None = None
    #: the largest text handed to the tokenizer (prepare's max_row_bytes)
    max_row_bytes: int = MAX_ROW_BYTES
    #: chat data: the driver's ChatTokenizer options, pickled (chat_options); text_column is
    #: then the messages column
    chat: bytes | None = None
    #: rows a tokenizer takes at a time (prepare's batch_rows)
    batch_rows: int = 8192
    #: the inputs have an attention_mask: the padding it marks is dropped (as prepare's)
    has_mask: bool = False
    #: json of the output's provenance (fastaxo.pipeline.provenance), as the driver made it
    provenance: str = ""
    #: the output's layout ("standard" or "axolotl", as prepare's)
    layout: str = "standard"
    #: json of the output's final value types ({column: type name}), known after the scan
    types: str = ""
    #: a run of it ending a row is padding, dropped (prepare's pad_token_id)
    pad_token_id: int | None = None


def read_columns(cfg: Cfg) -> list[str]:
    if cfg.tokenizer is not None:
        need = [cfg.text_column]
    else:
        need = ["input_ids"] + (["labels"] if cfg.has_labels else [])
        need += [MASK] if cfg.has_mask else []
    extra = [c for c in cfg.key_cols if c not in ("input_ids", "labels")] if cfg.dedupe else []
    return list(dict.fromkeys(need + extra))


_TOKENIZERS: dict[tuple, Any] = {}


def chat_options(ct: ChatTokenizer) -> bytes:
    """What a worker needs to build the driver's :class:`ChatTokenizer` (``Cfg.chat``): its
    options, a template given by the user as the text the driver resolved (not a file or
    an Axolotl name: every node renders the driver's template, without Axolotl), and the
    driver's encoder."""
    template = None
    if ct.template_source != "tokenizer_config.json":  # (else: the tokenizer's, as on the driver)
        template = ct.spec.chat_template
        if "{%" not in template and "{{" not in template:
            # ChatTokenizer reads such a string as a file or a name; an empty expression in
            # front makes it a template that renders the same text
            template = "{{ '' }}" + template
    # the driver's encoder (the one its report names), whatever a worker's FASTAXO_TOKENIZER
    return pickle.dumps({**ct.options, "chat_template": template, "encoder": ct.spec.encoder})


def unit_tokenizer(cfg: Cfg) -> Any:
    if cfg.tokenizer is None:
        return None
    if cfg.chat is not None:
        ckey = ("chat", cfg.tokenizer, cfg.chat)
        ct = _TOKENIZERS.get(ckey)
        if ct is None:
            ct = _TOKENIZERS[ckey] = ChatTokenizer(cfg.tokenizer, **pickle.loads(cfg.chat))
        return ct
    key = (cfg.tokenizer, cfg.add_special_tokens, cfg.append_eos, cfg.eos_token, cfg.encoder,
           cfg.threads, cfg.max_row_bytes)
    tok = _TOKENIZERS.get(key)
    if tok is None:
        # the function prepare uses on one machine (columns.tokenize via check_batch)
        tok = _TOKENIZERS[key] = load_tokenizer(
            cfg.tokenizer, add_special_tokens=cfg.add_special_tokens, append_eos=cfg.append_eos,
            eos_token=cfg.eos_token, max_row_bytes=cfg.max_row_bytes, encoder=cfg.encoder,
            num_threads=cfg.threads)
    return tok


class CheckedUnit(NamedTuple):
    """A unit read and checked: its raw columns, its token columns (list<int32>), their
    lengths, and what the unit adds to the report's counts (:func:`add_counts`):
    ``rows_too_large``, the rows over max_row_bytes given no tokens (``overflow="drop"``),
    ``pad_tokens_dropped`` / ``padded_rows``, the padding the attention_mask marked, and
    for chat data ``fallback_rows`` / ``fallback_turns`` (by reason, as
    ``ChatTokenizer.settings``)."""

    raw: pa.RecordBatch
    work: dict[str, pa.Array | pa.ChunkedArray]
    lens: np.ndarray
    counts: dict[str, Any]


def add_counts(total: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """``total`` plus ``more`` (counts, or dicts of counts by reason), key by key; ``bounds``
    (the token columns' smallest and largest values) widened instead."""
    for k, v in more.items():
        if k == "bounds":
            add_bounds(total.setdefault(k, {}), {c: tuple(b) for c, b in v.items()})
        elif isinstance(v, dict):
            add_counts(total.setdefault(k, {}), v)
        else:
            total[k] = total.get(k, 0) + v
    return total


def checked_unit(u: Unit, cfg: Cfg, bounds: bool = False) -> CheckedUnit:
    """The unit read, checked and tokenized with the checks and errors of ``fastaxo prepare``
    (the file and row named); with ``bounds``, the token columns' value bounds go into its
    counts (``bounds``). A tokenizer takes ``cfg.batch_rows`` rows at a time, as
    ``fastaxo prepare``'s batches: HF's and the chat path make Python objects of the rows they
    tokenize, and a unit can be a whole JSON Lines file."""
    raw = read_unit(u, read_columns(cfg)).combine_chunks()
    path, row0 = u.where(0)
    batch = pa.RecordBatch.from_arrays(
        [c.chunk(0) if c.num_chunks else pa.array([], c.type) for c in raw.columns],
        schema=raw.schema)
    tok = unit_tokenizer(cfg)
    chat = isinstance(tok, ChatTokenizer)
    # (the worker's ChatTokenizer is reused and adds up its fallbacks: this unit's are the
    # difference)
    before = (dict(tok.fallbacks), dict(tok.turn_fallbacks)) if chat else None
    n = batch.num_rows
    step = cfg.batch_rows if tok is not None else max(n, 1)
    parts = []
    for s in range(0, max(n, 1), step):
        parts.append(check_batch(batch.slice(s, step), path, row0 + s, tok=tok,
                                 text_column=cfg.text_column, has_labels=cfg.has_labels,
                                 max_length=cfg.max_length, overflow=cfg.overflow,
                                 has_mask=cfg.has_mask, bounds=bounds,
                                 num_threads=cfg.threads, pad_id=cfg.pad_token_id))
    counts: dict[str, Any] = {}
    for name, n_ in (("rows_too_large", sum(p.too_large for p in parts)),
                     ("pad_tokens_dropped", sum(p.pad_tokens for p in parts)),
                     ("padded_rows", sum(p.padded_rows for p in parts))):
        if n_:
            counts[name] = n_
    found: Bounds = {}
    for p in parts:
        add_bounds(found, p.bounds or {})
    if found:
        counts["bounds"] = found
    if before is not None:
        for name, now, was in (("fallback_rows", tok.fallbacks, before[0]),
                               ("fallback_turns", tok.turn_fallbacks, before[1])):
            more = {r: c - was.get(r, 0) for r, c in now.items() if c != was.get(r, 0)}
            if more:
                counts[name] = more
    if len(parts) == 1:
        return CheckedUnit(batch, parts[0].work, parts[0].lens, counts)
    work = {c: _joined([p.work[c] for p in parts]) for c in parts[0].work}
    return CheckedUnit(batch, work, np.concatenate([p.lens for p in parts]), counts)


def _joined(columns: list[pa.Array | pa.ChunkedArray]) -> pa.Array | pa.ChunkedArray:
    """The token columns of consecutive slices as one column (large_list throughout when a
    slice needed it)."""
    arrays = [c for col in columns
              for c in (col.chunks if isinstance(col, pa.ChunkedArray) else [col])]
    if len({a.type for a in arrays}) > 1:
        arrays = [a.cast(pa.large_list(pa.int32())) for a in arrays]
    return pa.chunked_array(arrays)
