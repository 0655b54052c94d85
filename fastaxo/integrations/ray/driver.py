"""The driver of a Ray prepare: options, the plan, the stages in order, the report and the
manifest (:func:`prepare`, :class:`RayPrepareReport`)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import ray
import ray.data

import fastaxo
from fastaxo._core.checks import MAX_ROW_BYTES, positive_int
from fastaxo._core.files import TempOutput
from fastaxo.errors import FastaxoError, InvalidInputError, InvalidTypeError
from fastaxo.integrations.ray.tasks import (
    block_totals,
    count_keys,
    first_keys_fn,
    merge_bucket,
    pack_task,
    scan_batch,
    split_parts_fn,
)
from fastaxo.integrations.ray.units import (
    Cfg,
    Unit,
    add_counts,
    chat_options,
    plan_files,
    schema_of_unit,
)
from fastaxo.pipeline.columns import ChatTokenizer
from fastaxo.pipeline.options import DEFAULT_PACK_WINDOW, options_of_call
from fastaxo.pipeline.provenance import provenance
from fastaxo.pipeline.report import ReportCounts
from fastaxo.pipeline.stages import (
    Bounds,
    first_columns,
    input_columns,
    output_schema,
    output_types,
    retyped,
)
from fastaxo.pipeline.unpad import MASK

__all__ = ["prepare", "RayPrepareReport", "DEFAULT_UNIT_ROWS", "MANIFEST"]

# rows per unit of input (Parquet: whole row groups up to about this). A window's task reads
# whole units, so smaller units read fewer rows it does not pack
DEFAULT_UNIT_ROWS = 16_384
MANIFEST = "_fastaxo_ray.json"


# ---------------------------------------------------------------------------------------------
# the report

@dataclass
class RayPrepareReport(ReportCounts):
    """What :func:`prepare` did on Ray. The counts mean what :class:`fastaxo.PrepareReport`'s do
    (``empty_files``: inputs with no rows, skipped); ``shards`` are the output files in order
    (shard w = window w), ``window_bins`` / ``window_lower_bound`` each window's bins and its own
    lower bound; stage times are wall seconds of the driver waiting for each stage; ``nodes`` /
    ``cpus`` describe the cluster."""

    units: int = 0
    empty_files: int = 0
    partitions: int = 0
    buckets: int = 0
    shards: list[str] = field(default_factory=list)
    window_bins: list[int] = field(default_factory=list)
    window_lower_bound: list[int] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    nodes: int = 0
    cpus: float = 0.0
    cpus_per_task: float = 1.0
    threads_per_task: int = 1

    def __str__(self) -> str:
        pct = lambda a, b: f"{100 * a / b:.2f}%" if b else "0%"  # noqa: E731
        extra = self.bins - self.lower_bound
        worst = max(((b - lb) / lb for b, lb in zip(self.window_bins, self.window_lower_bound)
                     if lb), default=0.0)
        stages = ", ".join(f"{k} {v:.2f} s" for k, v in self.stage_seconds.items())
        return "\n".join([
            f"fastaxo prepare on Ray ({self.nodes} node(s), {self.cpus:g} CPUs, "
            f"{self.cpus_per_task:g} CPU(s) and {self.threads_per_task} thread(s) a task): "
            f"{len(self.inputs)} input(s)"
            + (f" ({self.empty_files} with no rows, skipped)" if self.empty_files else "")
            + f" -> {self.output}",
            f"  rows in            {self.rows_in:,} ({self.tokens_in:,} tokens) in "
            f"{self.units:,} units",
            f"  duplicates dropped {self.duplicates:,} ({pct(self.duplicates, self.rows_in)})"
            + ("" if self.dedupe else " [dedupe off]")
            + (f"; empty rows left out {self.empty_rows:,}" if self.empty_rows else "")
            + (f"; rows over max_row_bytes left out {self.rows_too_large:,}"
               if self.rows_too_large else "")
            + f"; shuffle: {self.partitions} digest partitions, {self.buckets} key buckets",
            *self._padding_lines(),
            f"  over-long rows     {self.overlong:,} longer than {self.max_length:,}"
            + (f" ({self.overflow})" if self.overlong else ""),
            *self._tokenizer_lines(),
            f"  packed             {self.rows_packed:,} rows ({self.sequences_out:,} sequences, "
            f"{self.tokens_out:,} tokens) -> {self.bins:,} bins of {self.max_length:,} "
            f"({self.strategy}, {self.windows:,} windows of "
            f"{self.pack_window:,} rows, a shard each)",
            f"  efficiency         {self.efficiency:.4%} of the bins' tokens used; lower bound "
            f"{self.lower_bound:,} bins (+{extra:,}, {pct(extra, self.lower_bound)}); worst "
            f"window +{worst:.2%} over its own bound",
            *self._columns_lines(),
            *self._build_lines(),
            f"  time               {self.seconds:.2f} s: {self.rows_per_s:,.0f} rows/s, "
            f"{self.tokens_per_s:,.0f} "
            f"tokens/s; stages: {stages}",
            f"  output             {len(self.shards):,} shards, {self.row_groups:,} row groups, "
            f"{self.output_bytes / 2**20:,.0f} MiB",
        ])


# ---------------------------------------------------------------------------------------------
# the driver

def _unwrap(exc: BaseException) -> BaseException:
    """The fastaxo error inside a Ray task error, if there is one."""
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, FastaxoError):
            return e
        cause = getattr(e, "cause", None)
        if isinstance(cause, BaseException) and id(cause) not in seen:
            e = cause
            continue
        e = e.__cause__ or e.__context__
    return exc


def _quiet_ray_data() -> None:
    """No progress bars or per-operator INFO lines from Ray Data (fastaxo prints its report)."""
    import logging

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    for attr in ("enable_operator_progress_bars", "print_on_execution_start"):
        if hasattr(ctx, attr):
            setattr(ctx, attr, False)
    for name in ("ray.data", "ray.data._internal.execution.streaming_executor",
                 "ray.data._internal.progress"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _init_ray(address: str | None) -> None:
    _quiet_ray_data()
    if ray.is_initialized():
        return
    kw: dict[str, Any] = {"include_dashboard": False, "logging_level": "ERROR",
                          "log_to_driver": False}
    if address in (None, "", "local"):
        ray.init(**kw)
    else:
        ray.init(address=address, **kw)


def _worker_fastaxo() -> tuple[str, bool, str]:
    """(where a worker imports fastaxo from, whether its compiled extension loaded, why not)."""
    from fastaxo._core import backend

    return fastaxo.__file__, backend.ext is not None, repr(backend.import_error)


def _check_workers_fastaxo() -> None:
    """Refuse to run when the workers' fastaxo lacks the compiled extension the driver has:
    Ray puts the driver's working directory on its workers' ``sys.path``, so a driver started
    in a fastaxo source checkout makes the workers import that uncompiled tree and run the
    pure-Python fallback, silently ~20x slower (what the tests' driver once did)."""
    from fastaxo._core import backend

    if backend.ext is None:
        return
    remedy = (f"this driver uses {os.path.dirname(fastaxo.__file__)}. Ray puts the driver's "
              f"working directory ({os.getcwd()}) on its workers' sys.path: start the driver "
              "from another directory, or install "
              "fastaxo (with its extension) where the workers import it")
    try:
        probe = ray.remote(num_cpus=0, max_retries=0)(_worker_fastaxo)
        where, has_ext, why = ray.get(probe.remote())
    except ray.exceptions.RayTaskError as exc:  # e.g. FASTAXO_REQUIRE_EXTENSION=1 on the workers
        last = [ln.strip() for ln in str(exc).splitlines() if ln.strip()][-1]
        raise FastaxoError(f"Ray workers cannot import fastaxo with its compiled extension "
                           f"({last}); {remedy}") from None
    if not has_ext:
        raise FastaxoError(f"Ray workers import fastaxo from {os.path.dirname(where)} without "
                           "its compiled "
                           f"extension ({why}); {remedy}")


def prepare(inputs: Any, output: str, max_length: int, *, strategy: str = "bfd",
            overflow: str = "error", layout: str = "standard", attention: str | None = "auto",
            dedupe: bool = True,
            dedupe_columns: list[str] | None = None, pack_window: int = DEFAULT_PACK_WINDOW,
            tokenizer: str | None = None, text_column: str = "text", format: str | None = None,
            unit_rows: int = DEFAULT_UNIT_ROWS, partitions: int | None = None,
            num_cpus_per_task: float = 1, threads_per_task: int | None = None,
            address: str | None = None, add_special_tokens: bool = True,
            append_eos: bool = False, eos_token: str | None = None,
            max_row_bytes: int = MAX_ROW_BYTES, messages_column: str | None = None,
            chat: Mapping[str, Any] | None = None, batch_rows: int = 8192,
            pad_token_id: int | None = None) -> RayPrepareReport:
    """Dedupe and pack tokenized rows on a Ray cluster: ``fastaxo prepare`` across machines.

    Parameters
    ----------
    inputs : path, directory, glob, list of them, or ray.data.Dataset
        Files any :func:`fastaxo.iter_batches` format reads (Parquet is cut by row groups), or
        a Ray Dataset with ``input_ids`` (and ``labels``) list columns, or text with
        ``tokenizer``. Its row order is the global order; make it deterministic.
    output : str
        A directory (created if missing; it must not hold shards already) for
        ``part-NNNNN.parquet`` and the manifest ``_fastaxo_ray.json``. On a cluster, a path every
        node can write (a shared file system).
    max_length, strategy, overflow, layout, attention, dedupe, dedupe_columns, pack_window, \
tokenizer, text_column, format, add_special_tokens, append_eos, eos_token, max_row_bytes, \
messages_column, chat, pad_token_id
        As for :func:`fastaxo.prepare` (chat data too: the same input_ids and labels; a
        ``chat_template`` given travels to the workers as the text the driver resolved);
        ``pack_window`` kept rows are packed together (a window is a shard, and the unit of
        parallelism of the packing stage: efficiency is measured per window, against its own
        lower bound). ``tokenizer`` is a local directory every node can read; with it, the text
        is tokenized twice (scan and pack) instead of holding the tokenized corpus in the
        object store.
    unit_rows : int
        Rows per unit of input (Parquet: whole row groups up to about this many).
    batch_rows : int
        With ``tokenizer``: rows tokenized at a time within a unit (as :func:`fastaxo.prepare`'s
        batches: HF's tokenizer and the chat path hold Python objects of these rows).
    partitions : int, optional
        Digest partitions of the dedupe shuffle (default: about one per 2M rows, at least the
        cluster's CPUs).
    num_cpus_per_task : float
        CPUs each task reserves; ``threads_per_task`` (default: the same, at least 1) threads
        for fastaxo's kernels inside it.
    address : str, optional
        Ray cluster to connect to (``"auto"``, ``"host:port"``); ``None`` or ``"local"`` starts
        or joins a local Ray. An already initialised Ray is used as it is.

    Returns
    -------
    RayPrepareReport
    """
    o = options_of_call(locals())  # (first: locals() holds only the arguments)
    unit_rows = positive_int(unit_rows, "unit_rows")
    if partitions is not None:
        partitions = positive_int(partitions, "partitions")
    threads = _threads(num_cpus_per_task, threads_per_task)
    output = _output_dir(output)
    if o.tokenizer is not None and not isinstance(o.tokenizer, str):
        raise InvalidTypeError("tokenizer: on Ray, a tokenizer directory every node can read "
                               f"(a path), got a {type(o.tokenizer).__name__} object")
    tok_dir = os.path.abspath(o.tokenizer) if o.tokenizer is not None else None
    # (built now, from the options alone: a bad tokenizer or option fails here, not in a task)
    chat_mode = o.chat_asked
    tok: Any = o.make_tokenizer(chat_mode, tok_dir)

    t_start = time.perf_counter()
    _init_ray(address)
    _check_workers_fastaxo()
    stage: dict[str, float] = {}

    # ---- 1. plan: the units, the columns (the first unit fixes them), the task config
    t = time.perf_counter()
    units, names, refs, schemas = _units(inputs, format, unit_rows, output)
    where0 = units[0].where(0)[0]
    schema0 = schema_of_unit(units[0], schemas)
    if not chat_mode and o.chat_mode(schema0):  # a chat dataset (its messages column)
        chat_mode = True
        tok = o.make_tokenizer(chat_mode, tok_dir)
    column = o.column(chat_mode)
    has_labels, key_cols = first_columns(schema0, where0, tok_dir is not None, column,
                                         o.dedupe_columns, chat=chat_mode)
    has_mask = tok_dir is None and MASK in schema0.names  # (its padding is dropped, counted)
    for u in ([units[0]] if refs is not None
              else [x for k, x in enumerate(units) if k == 0 or x.path != units[k - 1].path]):
        input_columns(schema_of_unit(u, schemas), u.where(0)[0], where0,
                      tokenizing=tok_dir is not None,
                      text_column=column, has_labels=has_labels, dedupe=o.dedupe,
                      key_cols=key_cols, chat=chat_mode, has_mask=has_mask)
    known_rows = sum(u.nrows for u in units if u.nrows > 0)
    res = ray.cluster_resources()
    cpus = float(res.get("CPU", 1.0))
    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    P = partitions or max(int(cpus), -(-max(known_rows, 1) // 2_000_000))
    text = None if chat_mode else tok
    options = o.schema_options(key_cols)
    prov = provenance(names, tok, options)
    cfg = Cfg(o.max_length, o.strategy, o.overflow, o.attention, o.dedupe, tuple(key_cols),
              has_labels, tok_dir, column, P, threads, json.dumps(options),
              o.add_special_tokens, o.append_eos, o.eos_token,
              None if text is None else text.encoder,
              MAX_ROW_BYTES if text is None else text.max_row_bytes,
              chat_options(tok) if chat_mode else None, o.batch_rows, has_mask,
              json.dumps(prov), o.layout, pad_token_id=o.pad_token_id)
    os.makedirs(output, exist_ok=True)
    stage["plan"] = time.perf_counter() - t

    rep = RayPrepareReport(inputs=names, output=output, max_length=o.max_length,
                           strategy=o.strategy, overflow=o.overflow, attention=o.attention,
                           layout=o.layout, pad_token_id=o.pad_token_id,
                           pack_window=o.pack_window, dedupe=o.dedupe,
                           dedupe_columns=key_cols if o.dedupe else None, labels=has_labels,
                           tokenizer=tok_dir,
                           tokenizer_settings=None if tok is None else tok.settings(),
                           provenance=prov, units=len(units), partitions=P, nodes=nodes, cpus=cpus,
                           empty_files=len(names) - len({u.path for u in units}) if refs is None
                           else 0,
                           cpus_per_task=float(num_cpus_per_task), threads_per_task=threads)
    task_opts = {"num_cpus": num_cpus_per_task}
    with _task_errors(output):
        t = time.perf_counter()
        scan_refs = _scan(units, refs, cfg, task_opts)  # ---- 2. scan
        stage["scan"] = time.perf_counter() - t
        t = time.perf_counter()
        per_unit, bounds = _count(rep, scan_refs, tok, len(units))
        cfg = _typed(rep, cfg, o, has_labels, bounds)
        stage["count"] = time.perf_counter() - t
        t = time.perf_counter()
        buckets, counts, bucket_of_unit = _dedupe(  # ---- 3. dedupe
            rep, scan_refs, per_unit, pack_window=o.pack_window, cpus=cpus, partitions=P,
            dedupe=o.dedupe, task_opts=task_opts)
        stage["dedupe"] = time.perf_counter() - t
        t = time.perf_counter()
        results = _pack_windows(  # ---- 4. windows
            rep, units, buckets, counts, bucket_of_unit, pack_window=o.pack_window, cfg=cfg,
            output=output, task_opts=task_opts)
        stage["pack"] = time.perf_counter() - t
    _finish(rep, results, stage, t_start, output)
    return rep


@contextlib.contextmanager
def _task_errors(output: str) -> Iterator[None]:
    """A task's own exception raised as itself (Ray wraps it: RayTaskError, Ray Data's
    UserCodeException); the temporary files of attempts that died before their rename (a
    retry wrote the shard) removed whatever happens."""
    try:
        yield
    except Exception as exc:
        inner = _unwrap(exc)
        if inner is not exc:
            raise inner from None
        raise
    finally:
        for n in os.listdir(output):
            if n.startswith(".part-") and ".fastaxo-tmp-" in n:
                try:
                    os.unlink(os.path.join(output, n))
                except OSError:
                    pass


def _threads(num_cpus_per_task: Any, threads_per_task: Any) -> int:
    """The kernels' threads in a task (default: its CPUs, at least 1), the options checked."""
    if (not isinstance(num_cpus_per_task, (int, float)) or isinstance(num_cpus_per_task, bool)
            or num_cpus_per_task <= 0):
        raise InvalidInputError(
            f"num_cpus_per_task must be a number > 0, got {num_cpus_per_task!r:.40}")
    return positive_int(threads_per_task, "threads_per_task") if threads_per_task is not None \
        else max(1, int(num_cpus_per_task))


def _output_dir(output: Any) -> str:
    """The shards' directory, absolute: not a file, and holding no shards yet."""
    if not isinstance(output, (str, os.PathLike)):
        raise InvalidTypeError(f"output must be a directory path, got {type(output).__name__}")
    if not os.fspath(output):  # (abspath would make it the working directory)
        raise InvalidInputError("output: the path is empty; give the directory for the shards")
    output = os.path.abspath(os.fspath(output))
    if os.path.exists(output) and not os.path.isdir(output):
        raise InvalidInputError(f"output: {output!r} exists and is not a directory")
    if os.path.isdir(output) and any(n.startswith("part-") and n.endswith(".parquet")
                                     for n in os.listdir(output)):
        raise InvalidInputError(f"output: {output!r} already holds shards (part-*.parquet); use "
                                "an empty directory")
    return output


def _units(inputs: Any, format: str | None, unit_rows: int, output: str
           ) -> tuple[list[Unit], list[str], list[Any] | None, dict[str, pa.Schema]]:
    """The units of input (a Dataset's blocks, or the files cut by row groups), the inputs'
    names, the Dataset's block references (None: files) and the Parquet files' schemas (their
    footers read once, here)."""
    refs = None
    schemas: dict[str, pa.Schema] = {}
    if isinstance(inputs, ray.data.Dataset):
        refs = inputs.materialize().to_arrow_refs()
        units = [Unit("block", block=i, ref=r) for i, r in enumerate(refs)]
        names = [f"ray.data.Dataset ({len(refs)} blocks)"]
    else:
        units, schemas = plan_files(inputs, format, unit_rows)
        names = list(dict.fromkeys(u.path for u in units))
        units = _without_empty_files(units, schemas)
        out_dir = output + os.sep
        for p in names:
            if os.path.abspath(p).startswith(out_dir):
                raise InvalidInputError(f"output: {output!r} holds the input {p!r}")
    if not units:
        raise InvalidInputError("inputs: no rows (a dataset without blocks)" if refs is not None
                                else f"no input has rows ({len(names)} file(s): JSON Lines "
                                "of nothing but whitespace): nothing to prepare")
    if len(units) >= 2**31:
        raise InvalidInputError(f"inputs: {len(units):,} units; raise unit_rows")
    return units, names, refs, schemas


def _without_empty_files(units: list[Unit], schemas: dict[str, pa.Schema]) -> list[Unit]:
    """The units but those of JSON Lines files with no rows (only whitespace: an empty shard,
    skipped and counted as on one machine); the schemas of the JSON Lines files read to tell
    are kept in ``schemas`` (one inference a file)."""
    import fastaxo

    kept = []
    for u in units:
        if u.kind == "file" and u.fmt == "jsonl":
            with fastaxo.iter_batches(u.path, format=u.fmt, compression=u.compression,
                                      batch_rows=1024) as r:
                if r.no_rows:
                    continue
                schemas[u.path] = r.schema
        kept.append(u)
    return kept


def _scan(units: list[Unit], refs: list[Any] | None, cfg: Cfg, task_opts: dict[str, Any]
          ) -> list[Any]:
    """map_batches over the units (each checked, tokenized, hashed): the scan's blocks."""
    import pickle

    # one row a unit, with its descriptor: each scan task carries its own unit, not the list
    specs = [pickle.dumps(dataclasses.replace(u, ref=None)) for u in units]
    unit_ids = pa.array(np.arange(len(units), dtype=np.int64))
    units_ds = ray.data.from_arrow(pa.table({"unit": unit_ids,
                                             "spec": pa.array(specs, pa.binary())}))
    units_ds = units_ds.repartition(len(units))
    scan_kwargs = {"cfg": cfg, "block_refs": refs}
    scanned = units_ds.map_batches(scan_batch, batch_size=1, batch_format="pyarrow",
                                   zero_copy_batch=True, fn_kwargs=scan_kwargs,
                                   **task_opts).materialize()
    return scanned.to_arrow_refs()


def _typed(rep: RayPrepareReport, cfg: Cfg, o: Any, has_labels: bool, bounds: Bounds) -> Cfg:
    """``cfg`` with the output's value types, decided from every unit's values (each shard is
    written with them, so all agree), and the report's columns."""
    types = output_types(o.layout, o.max_length, has_labels, bounds)
    options = json.loads(cfg.schema_options)
    rep.columns = {f.name: str(f.type.value_type) for f in retyped(
        output_schema(o.layout, has_labels, o.attention, options), types)}
    return dataclasses.replace(cfg, types=json.dumps({k: str(v) for k, v in types.items()}))


def _count(rep: RayPrepareReport, scan_refs: list[Any], tok: Any, n_units: int
           ) -> tuple[np.ndarray, Bounds]:
    """The scan's totals into the report (a task's error raised here); the non-empty rows of
    each unit, and the token columns' value bounds (the standard layout's; else empty)."""
    import pickle

    totals = ray.get([block_totals.remote(r) for r in scan_refs])
    errors = [x["error"] for x in totals if x["error"] is not None]
    if errors:
        raise pickle.loads(min(errors)[1])
    rep.rows_in = sum(x["rows"] for x in totals)
    scan_counts: dict[str, Any] = {}
    for x in totals:
        add_counts(scan_counts, x["counts"])
    # (a row over max_row_bytes, dropped, has no tokens: it is neither empty nor given an EOS)
    rep.rows_too_large = scan_counts.get("rows_too_large", 0)
    rep.pad_tokens_dropped = scan_counts.get("pad_tokens_dropped", 0)
    rep.padded_rows = scan_counts.get("padded_rows", 0)
    if tok is not None and tok.eos_id is not None:
        rep.eos_appended = rep.rows_in - rep.rows_too_large
    if isinstance(tok, ChatTokenizer) and rep.tokenizer_settings is not None:
        # the rows and turns Axolotl's algorithm made, counted where they were tokenized
        for k in ("fallback_rows", "fallback_turns"):
            rep.tokenizer_settings[k] = scan_counts.get(k, {})
    rep.tokens_in = sum(x["tokens"] for x in totals)
    per_unit = np.zeros(n_units, np.int64)
    for x in totals:
        for u, c in x["nonempty"].items():
            per_unit[u] += c
    rep.empty_rows = rep.rows_in - int(per_unit.sum()) - rep.rows_too_large
    bounds = {c: (int(b[0]), int(b[1])) for c, b in scan_counts.get("bounds", {}).items()}
    return per_unit, bounds


def _dedupe(rep: RayPrepareReport, scan_refs: list[Any], per_unit: np.ndarray, *,
            pack_window: int, cpus: float, partitions: int, dedupe: bool,
            task_opts: dict[str, Any]) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """A shuffle keyed on the digest; the kept keys by bucket, sorted: (buckets, kept rows per
    bucket, bucket of each unit). Buckets: runs of units of about range_rows non-empty rows
    (at least a window, and about four a CPU), so that the objects of the shuffle stay
    (split tasks + buckets) x partitions."""
    P = partitions
    nonempty = int(per_unit.sum())
    range_rows = max(pack_window, -(-nonempty // max(4 * int(cpus), 1)))
    cum = np.cumsum(per_unit)
    bucket_of_unit = np.maximum(cum - 1, 0) // range_rows
    bucket_of_unit = np.maximum.accumulate(bucket_of_unit).astype(np.int64)  # monotone by unit
    B = int(bucket_of_unit[-1]) + 1
    rep.buckets = B
    split = ray.remote(max_retries=3)(split_parts_fn).options(num_returns=P, **task_opts)
    first = ray.remote(max_retries=3)(first_keys_fn).options(num_returns=B, **task_opts)
    n_split = min(len(scan_refs), max(4 * int(cpus), 1))
    groups = [scan_refs[i::n_split] for i in range(n_split)]
    parts_of_block = [split.remote(P, *g) for g in groups if g]
    if P == 1:
        parts_of_block = [[x] for x in parts_of_block]
    bucket_of_unit_ref = ray.put(bucket_of_unit)
    firsts = []
    for part in range(P):
        out = first.remote(bucket_of_unit_ref, B, dedupe, *[pb[part] for pb in parts_of_block])
        firsts.append([out] if B == 1 else out)
    buckets = [merge_bucket.remote(*[f[b] for f in firsts]) for b in range(B)]
    counts = np.array(ray.get([count_keys.remote(x) for x in buckets]), np.int64)
    rep.duplicates = nonempty - int(counts.sum())
    return buckets, counts, bucket_of_unit


def _pack_windows(rep: RayPrepareReport, units: list[Unit], buckets: list[Any],
                  counts: np.ndarray, bucket_of_unit: np.ndarray, *, pack_window: int,
                  cfg: Cfg, output: str, task_opts: dict[str, Any]) -> list[dict[str, Any]]:
    """Kept rows in the global order, pack_window at a time: one pack task (and shard) a
    window; their results."""
    kept_total = int(counts.sum())
    starts = np.zeros(len(buckets) + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    nwin = -(-kept_total // pack_window)
    pack = ray.remote(max_retries=3)(pack_task).options(**task_opts)
    futures = []
    for w in range(nwin):
        lo, hi = w * pack_window, min(kept_total, (w + 1) * pack_window)
        b0 = int(np.searchsorted(starts, lo, side="right")) - 1
        b1 = int(np.searchsorted(starts, hi, side="left"))   # buckets [b0, b1) hold [lo, hi)
        u_lo = int(np.searchsorted(bucket_of_unit, b0, side="left"))
        # the units of buckets [b0, b1)
        u_hi = int(np.searchsorted(bucket_of_unit, b1, side="left"))
        futures.append(pack.remote(w, lo, hi, int(starts[b0]), u_lo, units[u_lo:u_hi], cfg,
                                   output, *buckets[b0:b1]))
    return ray.get(futures)


def _finish(rep: RayPrepareReport, results: list[dict[str, Any]], stage: dict[str, float],
            t_start: float, output: str) -> None:
    """The windows' counts into the report, and the manifest written."""
    for r in sorted(results, key=lambda r: r["window"]):
        st = r["stats"]
        rep.add_pack_stats(st)
        rep.shards.append(r["shard"])
        rep.window_bins.append(st.bins)
        rep.window_lower_bound.append(st.lower_bound)
        rep.row_groups += r["row_groups"]
        rep.output_bytes += r["bytes"]
    rep.stage_seconds = {k: round(v, 3) for k, v in stage.items()}
    rep.finish(time.perf_counter() - t_start)
    # (as every output: a temporary, fsynced, then renamed)
    with TempOutput(os.path.join(output, MANIFEST)) as tmp, open(tmp.path, "w") as fh:
        json.dump({"shards": rep.shards, "report": rep.as_dict()}, fh, indent=1)
