"""Streaming dataset preparation for the Axolotl plugin (``fastaxo_streaming: true``).

Axolotl's loader builds a full Arrow cache of each dataset (``datasets.load_dataset``), then maps
and filters it and memory-maps the result; a dataset larger than the process's memory (or its
address-space limit) does not get through. Here each local file is read by
:func:`fastaxo.iter_batches` in bounded memory, and every batch goes through *Axolotl's own*
per-row steps (its dataset wrapper, ``handle_long_seq_in_dataset``,
``process_datasets_for_packing``), so the rows are Axolotl's rows. Survivors are appended to one
Arrow stream file with their position in the merged dataset; at the end Axolotl's shuffle
permutation (``default_rng(seed).permutation(n)``, what ``Dataset.shuffle(seed)`` draws) orders
them and exact dedupe keeps the first occurrence in that order, as Axolotl's dedupe does after
its shuffle. The result: the same rows in the same order as Axolotl's prepared dataset, with
memory bounded by a batch plus 48 bytes per row (position, digest).

Imported only by the plugin (it imports axolotl and datasets).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import fastaxo
from fastaxo._core.proc import status_kib

LOG = logging.getLogger("fastaxo.axolotl")

_FORMATS = {".parquet": "parquet", ".arrow": "arrow", ".jsonl": "jsonl"}
_ROW = "__fastaxo_row"
LAYOUT_VERSION = 1


def _unsupported(cfg: Any) -> str | None:
    """Why the streaming loader cannot honour this config (None: it can)."""
    for key, why in (("rl", "RL datasets"), ("pretraining_dataset", "pretraining_dataset"),
                     ("streaming", "Axolotl's own streaming mode"),
                     ("test_datasets", "test_datasets"),
                     ("dataset_shard_num", "dataset_shard_num"),
                     ("skip_prepare_dataset", "skip_prepare_dataset"),
                     ("processor_type", "multimodal processors"),
                     ("push_dataset_to_hub", "push_dataset_to_hub"),
                     ("shuffle_before_merging_datasets", "shuffle_before_merging_datasets"),
                     ("use_pose", "use_pose (Axolotl sorts the whole dataset)")):
        if cfg.get(key):
            return f"{why} is not covered"
    if cfg.get("val_set_size"):
        return "val_set_size (an eval split) is not covered"
    if (cfg.get("context_parallel_size") or 1) > 1 and cfg.get("deepspeed"):
        return "DeepSpeed context parallel is not covered"
    if not cfg.get("datasets"):
        return "no datasets configured"
    for d in cfg.datasets:
        for key in ("data_files", "name", "shards", "preprocess_shards", "revision"):
            if d.get(key):
                return f"dataset {d.get('path')}: `{key}` is not covered"
        if d.get("weight") is not None and d.get("weight") < 1.0:
            return f"dataset {d.get('path')}: `weight` is not covered"
        path = d.get("path")
        if not path or not os.path.exists(path):
            return f"dataset {path}: not a local file or directory"
        try:
            files = _files(path)
        except ValueError as exc:
            return str(exc)
        if not files:
            return f"dataset {path}: no .parquet/.arrow/.jsonl files"
    return None


def _files(path: str) -> list[str]:
    if os.path.isdir(path):
        out = []
        for root, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
            out += [os.path.join(root, n) for n in sorted(names)
                    if os.path.splitext(n)[1] in _FORMATS and not n.startswith((".", "_"))]
        fmts = {_FORMATS[os.path.splitext(f)[1]] for f in out}
        if len(fmts) > 1:
            raise ValueError(f"dataset {path}: mixed formats {sorted(fmts)} in one directory")
        return out
    ext = os.path.splitext(path)[1]
    if ext not in _FORMATS:
        raise ValueError(f"dataset {path}: format {ext or '(none)'} is not covered "
                         f"(streaming reads {', '.join(sorted(_FORMATS))})")
    return [path]


_BATCH_BYTES = 16 << 20
_DECODE_ROWS = 4096  # rows per Parquet decode step of the reader when batches are smaller


def _parquet_sizes(files: list[str]) -> tuple[int, int, int]:
    """(rows, decoded bytes, largest decoded row group) from the footers of the first files."""
    import pyarrow.parquet as pq

    n = size = biggest = 0
    for f in files[:8]:
        md = pq.ParquetFile(f).metadata
        n += md.num_rows
        for i in range(md.num_row_groups):
            rg = md.row_group(i)
            size += rg.total_byte_size
            piece = rg.total_byte_size * min(1.0, _DECODE_ROWS / max(1, rg.num_rows))
            biggest = max(biggest, int(piece))
    return n, size, biggest


def _reader_plan(files: list[str], fmt: str, settings: Any) -> tuple[int, int | None]:
    """(rows per batch, reader threads).

    Rows: ``fastaxo_batch_rows``, fewer when Parquet footers say rows are big (each batch is
    copied a few times by Axolotl's maps; a batch of ~16 MiB keeps that bounded).
    Threads: the reader's column-parallel Parquet decoding runs one thread per column group,
    each queueing up to two decoded pieces (a piece is up to 4096 rows of a row group) OUTSIDE
    the ``prefetch_bytes`` budget, and every extra thread also costs glibc a 64 MiB malloc arena
    and an 8 MiB stack of address space. When a piece is bigger than a quarter of the budget
    (rows of megabytes: the 4 GiB test file has 64 MiB row groups), that is what the read-ahead
    costs, so the reader decodes in one thread. Measured on that file (2000 rows of 2 MiB, 32-row
    row groups, 8-row batches, 32 MiB read-ahead): VmPeak 3478 MiB with the column threads, 3026
    MiB with one (VmSize before the first batch: 2697 MiB); no measurable speed difference (the
    per-batch Axolotl work dominates; 13-20 s either way on the shared 2-core VM)."""
    rows, threads = settings.batch_rows, settings.threads
    if fmt == "parquet":
        n, size, biggest = _parquet_sizes(files)
        if n and size:
            rows = min(rows, max(1, int(_BATCH_BYTES // max(1, size // n))))
        if biggest * 4 > settings.prefetch_bytes:
            threads = 1
    return rows, threads


def _cache_key(cfg: Any, tokenizer: Any) -> str:
    from axolotl.utils.data.shared import generate_dataset_hash_from_config

    files = []
    for d in cfg.datasets:
        for f in _files(d.path):
            st = os.stat(f)
            files.append([os.path.abspath(f), st.st_size, st.st_mtime_ns])
    extra = {k: cfg.get(k) for k in ("seed", "shuffle_merged_datasets", "curriculum_sampling",
                                     "min_sample_len", "excess_length_strategy",
                                     "model_config_type", "train_on_inputs", "chat_template",
                                     "default_system_message")}
    blob = json.dumps([LAYOUT_VERSION, fastaxo.__version__,
                       generate_dataset_hash_from_config(cfg, cfg.datasets, tokenizer.name_or_path),
                       files, extra], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@contextlib.contextmanager
def _quiet():
    """Axolotl's per-dataset INFO lines and datasets' progress bars, once per batch, are noise."""
    import datasets

    loggers = [logging.getLogger(n) for n in ("axolotl", "axolotl.utils.data.utils",
                                              "axolotl.utils.trainer",
                                              "axolotl.utils.data.wrappers")]
    levels = [lg.level for lg in loggers]
    bars = datasets.utils.logging.is_progress_bar_enabled()
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        for lg, lv in zip(loggers, levels):
            lg.setLevel(lv)
        if bars:
            datasets.enable_progress_bars()


def _process_batch(batch: pa.RecordBatch, dcfg: Any, cfg1: Any, tokenizer: Any, first_row: int):
    """Axolotl's per-row steps on one batch; returns (table of survivors with _ROW, n wrapped).

    The batch's Dataset gets a random fingerprint: by default ``Dataset(table)`` fingerprints an
    in-memory table by pickling it (dill) and hashing the bytes: a transient copy of the batch,
    and on the 4 GiB test file 30-32 s for the whole run against 18-20 s without. It only names
    cache files, and an in-memory Dataset's maps and filters write none (datasets writes cache
    files only for datasets that have some), so a fresh random one changes nothing but the
    cost; the maps then derive theirs from it (hashing the function and its arguments, not the
    rows)."""
    from axolotl.utils.data.sft import _parse_dataset_type
    from axolotl.utils.data.utils import handle_long_seq_in_dataset
    from axolotl.utils.data.wrappers import get_dataset_wrapper
    from axolotl.utils.trainer import process_datasets_for_packing
    from datasets import Dataset
    from datasets.fingerprint import generate_random_fingerprint

    ds = Dataset(pa.Table.from_batches([batch]), fingerprint=generate_random_fingerprint())
    base, style = _parse_dataset_type(dcfg.type)
    ds, _ = get_dataset_wrapper(dataset_config=dcfg, tokenizer=tokenizer, cfg=cfg1,
                                dataset_base_type=base, dataset=ds, dataset_prompt_style=style,
                                processor=None)
    n = len(ds)
    if n == 0:
        return None, 0
    ds = ds.add_column(_ROW, np.arange(first_row, first_row + n, dtype=np.int64))
    ds = handle_long_seq_in_dataset(ds, cfg1.sequence_len, cfg1)
    if len(ds) and cfg1.sample_packing:
        try:
            ds, _ = process_datasets_for_packing(cfg1, ds, None)
        except ValueError as exc:  # Axolotl raises when a dataset filters to nothing; a batch may
            if "no samples left" not in str(exc):
                raise
            return None, n
    if len(ds) == 0:
        return None, n
    return ds.with_format("arrow")[0 : len(ds)], n


def prepare(cfg: Any, tokenizer: Any, outdir: Path, settings: Any,
            report: Callable[..., None]) -> dict:
    """Stream every dataset of ``cfg`` into ``outdir`` (data.arrow, indices.npy, meta.json)."""
    from axolotl.utils.data.shared import datasets_with_name_generator
    from axolotl.utils.dict import DictDefault

    tmp = outdir.with_name(outdir.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    cfg1 = DictDefault(dict(cfg))
    # per-batch maps stay in this process (datasets 5 pools at num_proc=1)
    cfg1.dataset_num_proc = None
    cfg1.is_preprocess = True  # no datasets cache lookups per batch
    t0 = time.perf_counter()
    writer = None
    schema = None
    rows_in = wrapped = 0
    n_datasets = 0
    vm_before = (status_kib("VmSize") or 0) * 1024
    plans = []
    rows_idx: list[np.ndarray] = []
    digests: list[np.ndarray] = []
    read_bytes = 0
    dedupe = bool(cfg.dataset_exact_deduplication)
    try:
        with _quiet():
            for dcfg in datasets_with_name_generator(cfg.datasets):
                n_datasets += 1
                files = _files(dcfg.path)
                fmt = _FORMATS[os.path.splitext(files[0])[1]]
                batch_rows, threads = _reader_plan(files, fmt, settings)
                plans.append({"batch_rows": batch_rows, "reader_threads": threads})
                reader = fastaxo.iter_batches(files, format=fmt, batch_rows=batch_rows,
                                              prefetch_bytes=settings.prefetch_bytes,
                                              threads=threads)
                with reader:
                    for batch in reader:
                        rows_in += batch.num_rows
                        table, n = _process_batch(batch, dcfg, cfg1, tokenizer, wrapped)
                        wrapped += n
                        if table is None:
                            continue
                        # a COPY: the table's columns are slices of one buffer holding the whole
                        # batch (datasets' map output), and a view of the row column kept that
                        # buffer alive -- every batch of the run stayed in memory (RSS 5.5 GiB,
                        # VmSize 12.7 GiB on the 4.3 GiB test file), the MemoryError under RLIMIT_AS
                        rows_idx.append(np.array(table.column(_ROW).to_numpy(), dtype=np.int64))
                        table = table.drop_columns([_ROW])
                        if dedupe:
                            digests.append(fastaxo.hash_rows(table, num_threads=settings.threads))
                        if writer is None:
                            schema = table.schema
                            writer = pa.ipc.new_stream(str(tmp / "data.arrow"), schema)
                        elif table.schema != schema:
                            try:
                                table = table.cast(schema)
                            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                                raise fastaxo.SchemaMismatchError(
                                    f"fastaxo streaming: dataset {dcfg.path}: a batch came out "
                                    f"of Axolotl's processing with schema {table.schema} after "
                                    f"{schema} ({exc})") from exc
                        writer.write_table(table)
                    read_bytes += reader.stats.io_rchar or 0
        if writer is None:
            raise ValueError(
                "fastaxo streaming: no rows left after Axolotl's filters (empty dataset)")
        writer.close()
        writer = None
        order, kept, shuffle = _final_order(cfg, n_datasets, wrapped, rows_idx,
                                            digests if dedupe else None, settings.threads)
        np.save(tmp / "indices.npy", order)
        meta: dict[str, Any] = {
            "layout": LAYOUT_VERSION, "rows_in": rows_in, "rows_wrapped": wrapped,
            "rows_filtered": kept, "rows_out": len(order), "duplicates": kept - len(order),
            "shuffled": shuffle, "seconds": time.perf_counter() - t0,
            "read_bytes": read_bytes, "peak_rss_bytes": (status_kib("VmHWM") or 0) * 1024,
            "vm_peak": (status_kib("VmPeak") or 0) * 1024, "vm_before": vm_before,
            "readers": plans}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        shutil.rmtree(outdir, ignore_errors=True)
        os.replace(tmp, outdir)
    finally:
        if writer is not None:
            writer.close()
        shutil.rmtree(tmp, ignore_errors=True)
    LOG.info("fastaxo: streamed %d rows -> %d prepared (%d over-long/empty dropped by Axolotl's "
             "filters, %d duplicates) in %.1f s, peak RSS %.0f MiB", meta["rows_in"],
             meta["rows_out"],
             meta["rows_wrapped"] - meta["rows_filtered"], meta["duplicates"], meta["seconds"],
             meta["peak_rss_bytes"] / 2**20)
    # not path=: report's own argument (the report file)
    report("stream", **meta, prepared=str(outdir))
    return meta


def _final_order(cfg: Any, n_datasets: int, wrapped: int, rows_idx: list[np.ndarray],
                 digests: list[np.ndarray] | None, threads: Any
                 ) -> tuple[np.ndarray, int, bool]:
    """The file positions of the rows in Axolotl's order (shuffled as merge_datasets does,
    filtered), deduplicated when ``digests`` are given: (order, rows before dedupe,
    shuffled)."""
    pos_of = np.concatenate(rows_idx) if rows_idx else np.zeros(0, np.int64)
    # merge_datasets: one dataset is shuffled unless curriculum_sampling; several are
    # concatenated and shuffled whenever shuffle_merged_datasets (curriculum only warns)
    shuffle = bool(cfg.shuffle_merged_datasets) and (n_datasets > 1
                                                     or not cfg.curriculum_sampling)
    perm = (np.random.default_rng(cfg.seed).permutation(wrapped) if shuffle
            else np.arange(wrapped))
    where = np.full(wrapped, -1, dtype=np.int64)
    where[pos_of] = np.arange(len(pos_of), dtype=np.int64)
    order = where[perm]
    order = order[order >= 0]  # file positions in Axolotl's (shuffled, filtered) order
    kept = len(order)
    if digests is not None:
        dig = np.concatenate(digests)
        res = fastaxo.dedupe(dig[order], num_threads=threads)
        order = order[res.keep]
    return order, kept, shuffle


def load_datasets_streaming(cfg: Any, preprocess: bool, settings: Any,
                            say_once: Callable[..., None], report: Callable[..., None]) -> Any:
    """The plugin's ``load_datasets`` hook: a ``TrainDatasetMeta``, or None to leave it to
    Axolotl."""
    why = _unsupported(cfg)
    if why:
        say_once(f"stream-{why}", f"streaming: {why}; Axolotl's own loader stays")
        return None
    from axolotl.common.const import DEFAULT_DATASET_PREPARED_PATH
    from axolotl.common.datasets import TrainDatasetMeta
    from axolotl.loaders import load_tokenizer

    tokenizer = load_tokenizer(cfg)
    root = Path(cfg.dataset_prepared_path or DEFAULT_DATASET_PREPARED_PATH)
    outdir = root / f"fastaxo-stream-{_cache_key(cfg, tokenizer)}"
    if (outdir / "meta.json").exists():
        LOG.info("fastaxo: prepared dataset found at %s", outdir)
        report("stream_cached", prepared=str(outdir))
    else:
        prepare(cfg, tokenizer, outdir, settings, report)
    if preprocess:
        # Nothing to map: the prepared files are what the train run opens.
        return TrainDatasetMeta(train_dataset=None, eval_dataset=None, total_num_steps=None)
    from axolotl.utils.trainer import calculate_total_num_steps
    from datasets import Dataset

    try:  # axolotl 0.21; older versions have no such step
        from axolotl.core.trainers.diffusion_lm.sampling import filter_native_diffusion_dataset
    except ImportError:
        filter_native_diffusion_dataset = None
    ds = Dataset.from_file(str(outdir / "data.arrow"))
    order = np.load(outdir / "indices.npy")
    if not (len(order) == len(ds) and (order == np.arange(len(ds))).all()):
        ds = ds.select(order)
    if filter_native_diffusion_dataset is not None:
        # what prepare_datasets does next
        ds = filter_native_diffusion_dataset(cfg, ds, split="train")
    steps = calculate_total_num_steps(cfg, ds)
    if cfg.max_steps:
        steps = min(steps, cfg.max_steps)
    LOG.info("fastaxo: %d prepared rows, %d steps", len(ds), steps)
    return TrainDatasetMeta(train_dataset=ds, eval_dataset=None, total_num_steps=steps)
