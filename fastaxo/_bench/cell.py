"""One cell of the matrix, in its own interpreter: load the input (untimed), build the input
form, run the check run (peak RSS, output digests) and the timed runs."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fastaxo._bench.baselines import numpy_pad, py_pack_build, py_pad
from fastaxo._bench.spec import (
    AX_BIN_SIZE,
    AX_GROUP,
    CHUNK_ROWS,
    EOS_ID,
    LABEL_PAD_ID,
    PACK_KEYS,
    PAD_ID,
    PAD_KEYS,
    PREFAULT_MAX,
    PROMPT_FRACTION_DEN,
    PROMPT_FRACTION_NUM,
    SHAPES,
)
from fastaxo._bench.util import Digest, prefault, release_memory
from fastaxo._core.proc import reset_peak, status_kib

# ============================================================================ child: inputs


def _load_column(path: str, name: str):
    """One column of an Arrow IPC file, read into memory (not memory-mapped: mapped pages would be
    counted in the RSS of whatever touches them first)."""
    import pyarrow as pa

    with pa.OSFile(path) as f:
        idx = pa.ipc.open_file(f).schema.get_field_index(name)
    with pa.OSFile(path) as f:
        r = pa.ipc.open_file(f, options=pa.ipc.IpcReadOptions(included_fields=[idx]))
        return r.read_all().column(0)


def _flat(arr) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets from 0) of a list array chunk, slices respected."""
    offs = arr.offsets.to_numpy().astype(np.int64)
    vals = arr.flatten().to_numpy()
    return vals, offs - offs[0]


def _labels_chunk(arr):
    """labels for a chunk of input_ids: the first 30% of each row is -100."""
    import pyarrow as pa

    vals, offs = _flat(arr)
    lens = np.diff(offs)
    pos = np.arange(len(vals), dtype=np.int64) - np.repeat(offs[:-1], lens)
    lab = vals.astype(np.int32, copy=True)
    lab[pos < np.repeat(lens * PROMPT_FRACTION_NUM // PROMPT_FRACTION_DEN, lens)] = LABEL_PAD_ID
    return pa.ListArray.from_arrays(pa.array(offs.astype(np.int32)), pa.array(lab))


def _tokens(path: str):
    """(input_ids, labels) as ChunkedArrays of list<int32>."""
    import pyarrow as pa

    ids = _load_column(path, "input_ids")
    labels = pa.chunked_array([_labels_chunk(c) for c in ids.chunks], type=pa.list_(pa.int32()))
    return ids, labels


def _np_rows(col) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for c in col.chunks:
        vals, offs = _flat(c)
        o = offs.tolist()
        out.extend(vals[o[i]: o[i + 1]] for i in range(len(o) - 1))
    return out


def _list_rows(col) -> list[list[int]]:
    out: list[list[int]] = []
    for c in col.chunks:
        vals, offs = _flat(c)
        v = vals.tolist()
        o = offs.tolist()
        out.extend(v[o[i]: o[i + 1]] for i in range(len(o) - 1))
        del v
    return out


def _with_eos_pad(col, pad_value: int):
    """Rows + [eos, pad_value] (fast-axolotl's packing format), as a ListArray."""
    import pyarrow as pa

    parts = []
    for c in col.chunks:
        vals, offs = _flat(c)
        lens = np.diff(offs)
        n = len(lens)
        new_offs = offs + 2 * np.arange(n + 1, dtype=np.int64)
        out = np.empty(int(new_offs[-1]), dtype=np.int32)
        mask = np.ones(len(out), dtype=bool)
        mask[new_offs[1:] - 2] = False
        mask[new_offs[1:] - 1] = False
        out[mask] = vals
        out[new_offs[1:] - 2] = EOS_ID
        out[new_offs[1:] - 1] = pad_value
        parts.append(pa.ListArray.from_arrays(pa.array(new_offs.astype(np.int32)), pa.array(out)))
    return pa.chunked_array(parts, type=pa.list_(pa.int32()))


def _bins_digest(d: Digest, indices: Any, offsets: Any) -> None:
    d.array("indices", np.asarray(indices, dtype=np.int64))
    d.array("offsets", np.asarray(offsets, dtype=np.int64))
    d.count("bins", len(offsets) - 1)


def _lists_to_bins(bins: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    sizes = np.fromiter((len(b) for b in bins), dtype=np.int64, count=len(bins))
    offsets = np.zeros(len(bins) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    idx = np.fromiter((i for b in bins for i in b), dtype=np.int64, count=int(offsets[-1]))
    return idx, offsets


# ============================================================================ child: runners


@dataclass
class Runner:
    """run(check) -> output; digest(output, check) fills the Digest after the peak was read."""

    run: Callable[[Digest | None], Any]
    digest: Callable[[Any, Digest], None]
    notes: dict[str, Any] = field(default_factory=dict)


def _digest_arrays(keys: Iterable[str]) -> Callable[[Any, Digest], None]:
    def dig(out: Any, d: Digest) -> None:
        for k in keys:
            if k in out:
                d.array(k, np.asarray(out[k]))
    return dig


def _runner_hash(impl: str, spec: dict, dedupe: bool) -> Runner:
    import fastaxo

    nt = spec.get("threads")
    if impl == "fastaxo":
        col = _load_column(spec["paths"]["arrow"], "text")
        if dedupe:
            return Runner(
                lambda c: fastaxo.dedupe(col, num_threads=nt).keep, lambda o, d: d.array("keep", o)
            )
        return Runner(
            lambda c: fastaxo.hash_rows(col, num_threads=nt), lambda o, d: d.raw("digests", o.data)
        )
    rows = _load_column(spec["paths"]["arrow"], "text").to_pylist()  # the Arrow column is freed
    if impl == "fastaxo_list":
        if dedupe:
            return Runner(
                lambda c: fastaxo.dedupe(rows, num_threads=nt).keep, lambda o, d: d.array("keep", o)
            )
        return Runner(
            lambda c: fastaxo.hash_rows(rows, num_threads=nt), lambda o, d: d.raw("digests", o.data)
        )
    if impl == "hashlib":
        sha = hashlib.sha256
        if dedupe:
            def loop(c):
                seen: set[bytes] = set()
                keep = []
                for i, s in enumerate(rows):
                    h = sha(s.encode()).digest()
                    if h not in seen:
                        seen.add(h)
                        keep.append(i)
                return keep
            return Runner(loop, lambda o, d: d.array("keep", np.asarray(o, dtype=np.int64)))

        def dig_list(o, d):
            for i in range(0, len(o), CHUNK_ROWS):
                d.raw("digests", b"".join(o[i: i + CHUNK_ROWS]))
        return Runner(lambda c: [sha(s.encode()).digest() for s in rows], dig_list)
    if impl == "fast_axolotl":
        import fast_axolotl as fa

        if dedupe:
            return Runner(lambda c: fa.deduplicate_indices(rows)[0],
                          lambda o, d: d.array("keep", np.asarray(o, dtype=np.int64)))

        def dig_hex(o, d):
            for i in range(0, len(o), CHUNK_ROWS):
                d.raw("digests", bytes.fromhex("".join(o[i: i + CHUNK_ROWS])))
        return Runner(lambda c: fa.parallel_hash_rows(rows, 0), dig_hex)
    raise KeyError(impl)


def _runner_pack_bins(impl: str, spec: dict) -> Runner:
    import fastaxo

    nt = spec.get("threads")
    cap = SHAPES[spec["shape"]].capacity
    lengths = np.load(spec["paths"]["lengths"])
    if impl == "fastaxo":
        return Runner(lambda c: fastaxo.pack_bins(lengths, cap, num_threads=nt),
                      lambda o, d: _bins_digest(d, o.indices, o.offsets))
    if impl == "fastaxo_ff":
        return Runner(lambda c: fastaxo.pack_bins(lengths, cap, strategy="ff", group_size=AX_GROUP,
                                                  max_rows_per_bin=AX_BIN_SIZE, num_threads=nt),
                      lambda o, d: _bins_digest(d, o.indices, o.offsets))
    if impl == "python":
        from fastaxo._reference import packing as reference

        ll = lengths.tolist()
        return Runner(lambda c: reference.assign(ll, cap, 2**62, "bfd", False),
                      lambda o, d: _bins_digest(d, o[0], o[1]))
    if impl == "axolotl":
        from axolotl.utils.samplers.multipack import pack_parallel

        t0 = time.perf_counter()
        pack_parallel(
            lengths[: min(len(lengths), 2000)].copy(),
            cap,
            group_size=AX_GROUP,
            bin_size=AX_BIN_SIZE,
        )
        compile_s = time.perf_counter() - t0
        return Runner(
            lambda c: pack_parallel(lengths, cap, group_size=AX_GROUP, bin_size=AX_BIN_SIZE),
            lambda o, d: _bins_digest(d, *_lists_to_bins(o)),
            {"numba_compile_s": compile_s},
        )
    raise KeyError(impl)


def _runner_pack(impl: str, spec: dict) -> Runner:
    import fastaxo

    nt = spec.get("threads")
    cap = SHAPES[spec["shape"]].capacity
    ids, labels = _tokens(spec["paths"]["arrow"])
    if impl == "fastaxo":
        return Runner(
            lambda c: fastaxo.pack(ids, cap, labels=labels, num_threads=nt),
            _digest_arrays(PACK_KEYS),
        )
    if impl == "fastaxo_nf":
        ids2 = _with_eos_pad(ids, PAD_ID)
        lab2 = _with_eos_pad(ids, LABEL_PAD_ID)
        del ids, labels

        def dig_nf(o, d):
            # rows of `cap` tokens, hashed without a shape (fast-axolotl's rows are hashed in
            # chunks)
            d.array("input_ids", o["input_ids"], with_shape=False)
            d.array("labels", o["labels"], with_shape=False)
            # fast-axolotl's mask is 0 on the pad after each eos: fastaxo's labels != -100
            d.array("attention_mask", (np.asarray(o["labels"]) != LABEL_PAD_ID), with_shape=False)
            d.count("rows", len(o["input_ids"]))

        return Runner(
            lambda c: fastaxo.pack(
                ids2,
                cap,
                labels=lab2,
                strategy="nf",
                attention="ones",
                position_ids=False,
                num_threads=nt,
            ),
            dig_nf,
        )
    if impl == "python":
        from fastaxo._reference import packing as reference

        lens = np.concatenate([np.diff(_flat(c)[1]) for c in ids.chunks]).tolist()
        ids_l, lab_l = _list_rows(ids), _list_rows(labels)
        del ids, labels

        def py(c):
            order, offsets = reference.assign(lens, cap, 2**62, "bfd", False)
            bins = [order[offsets[b]: offsets[b + 1]] for b in range(len(offsets) - 1)]
            return py_pack_build(ids_l, lab_l, bins, cap)
        return Runner(py, _digest_arrays(PACK_KEYS))
    if impl == "fast_axolotl":
        import fast_axolotl as fa

        ids_l = _list_rows(ids)
        del ids, labels

        def dig_fa(o, d):
            for k in ("input_ids", "labels", "attention_mask"):
                for i in range(0, len(o[k]), CHUNK_ROWS):
                    d.array(
                        k,
                        np.array(o[k][i : i + CHUNK_ROWS], dtype=np.int64).reshape(-1, cap),
                        with_shape=False,
                    )
            d.count("rows", len(o["input_ids"]))
        return Runner(lambda c: fa.pack_sequences(ids_l, cap, PAD_ID, EOS_ID), dig_fa)
    raise KeyError(impl)


def _runner_pad(impl: str, spec: dict) -> Runner:
    import fastaxo

    bs = int(spec["pad_batch"])
    ids, labels = _tokens(spec["paths"]["arrow"])
    ids_r: Any
    lab_r: Any
    if impl in ("fastaxo", "numpy"):
        ids_r, lab_r = _np_rows(ids), _np_rows(labels)
    else:
        ids_r, lab_r = _list_rows(ids), _list_rows(labels)
    del ids, labels
    batches = [(ids_r[i: i + bs], lab_r[i: i + bs]) for i in range(0, len(ids_r), bs)]
    del ids_r, lab_r
    nt = spec.get("threads")

    def per_batch(
        fn: Callable[[Any, Any], Any], keys: tuple[str, ...]
    ) -> Callable[[Digest | None], Any]:
        def run(chk: Digest | None) -> int:
            for a, b in batches:
                out = fn(a, b)
                if chk is not None:
                    for k in keys:
                        chk.array(k, np.asarray(out[k]))
            return len(batches)
        return run

    fn: Callable[[Any, Any], Any]
    keys: tuple[str, ...]
    if impl == "fastaxo":
        fn = lambda a, b: fastaxo.pad(a, labels=b, num_threads=nt)  # noqa: E731
        keys = PAD_KEYS
    elif impl == "numpy":
        fn, keys = numpy_pad, PAD_KEYS
    elif impl == "python":
        fn, keys = py_pad, PAD_KEYS
    elif impl == "fast_axolotl":
        import fast_axolotl as fa

        def fn(a: Any, b: Any) -> Any:
            return {"input_ids": fa.pad_sequences(a, pad_value=PAD_ID),
                    "labels": fa.pad_sequences(b, pad_value=LABEL_PAD_ID)}
        keys = ("input_ids", "labels")
    else:
        raise KeyError(impl)
    return Runner(per_batch(fn, keys), lambda o, d: d.count("batches", o))


def _digest_table(d: Digest, t: Any) -> None:
    """Feed one batch of rows (pa.Table / RecordBatch / dict of lists) into the reader digest."""
    import pyarrow as pa

    if isinstance(t, dict):
        t = pa.table(t)
    d.count("rows", t.num_rows)
    for name in ("id", "text", "input_ids"):
        col = t.column(name)
        for c in (col.chunks if isinstance(col, pa.ChunkedArray) else [col]):
            if c.null_count:
                d.count(f"{name}.nulls", c.null_count)
            if name == "id":
                d.array("id", c.cast(pa.int64()).to_numpy(zero_copy_only=False), with_shape=False)
            elif name == "text":
                c = c.cast(pa.large_string())
                offs = np.frombuffer(c.buffers()[1], dtype=np.int64)[
                    c.offset : c.offset + len(c) + 1
                ]
                d.array("text.lengths", np.diff(offs), with_shape=False)
                if len(c) and offs[-1] > offs[0]:
                    d.raw("text", memoryview(c.buffers()[2])[int(offs[0]): int(offs[-1])])
            else:
                c = c.cast(pa.large_list(pa.int64()))
                offs = c.offsets.to_numpy()
                d.array("input_ids.lengths", np.diff(offs), with_shape=False)
                d.array("input_ids", c.flatten().to_numpy(), with_shape=False)


def _runner_read(impl: str, spec: dict, fmt: str) -> Runner:
    path = spec["paths"][fmt]

    def drain(it: Iterable[Any], rows_of: Callable[[Any], int], chk: Digest | None) -> int:
        n = 0
        for b in it:
            n += rows_of(b)
            if chk is not None:
                _digest_table(chk, b)
        return n

    nrows = lambda b: b.num_rows  # noqa: E731
    if impl == "fastaxo":
        import fastaxo

        def run(chk):
            with fastaxo.iter_batches(path, format="arrow" if fmt == "arrow" else fmt) as r:
                return drain(r, nrows, chk)
        return Runner(run, lambda o, d: None)
    if impl == "pyarrow":
        import pyarrow as pa

        if fmt == "parquet":
            import pyarrow.parquet as pq

            return Runner(
                lambda chk: drain(pq.ParquetFile(path).iter_batches(), nrows, chk),
                lambda o, d: None,
            )
        if fmt == "jsonl":
            import pyarrow.json as pjson

            return Runner(lambda chk: drain(pjson.open_json(path), nrows, chk), lambda o, d: None)

        def ipc(chk):
            with pa.OSFile(path) as f:
                r = pa.ipc.open_file(f)
                return drain((r.get_batch(i) for i in range(r.num_record_batches)), nrows, chk)
        return Runner(ipc, lambda o, d: None)
    if impl == "hf_streaming":
        import datasets

        datasets.disable_progress_bars()
        datasets.logging.set_verbosity_error()
        builder = {"parquet": "parquet", "jsonl": "json", "arrow": "arrow"}[fmt]

        def hf(chk):
            ds = datasets.load_dataset(builder, data_files=path, split="train", streaming=True)
            return drain(ds.with_format("arrow").iter(batch_size=1000), nrows, chk)
        return Runner(hf, lambda o, d: None)
    if impl == "fast_axolotl":
        import fast_axolotl as fa

        def rows_of(b: dict) -> int:
            return len(next(iter(b.values()))) if b else 0

        return Runner(
            lambda chk: drain(
                fa.streaming_dataset_reader(path, fmt, batch_size=1000), rows_of, chk
            ),
            lambda o, d: None,
        )
    raise KeyError(impl)


def make_runner(spec: dict) -> Runner:
    k, impl = spec["kernel"], spec["impl"]
    if k in ("hash_rows", "dedupe"):
        return _runner_hash(impl, spec, k == "dedupe")
    if k == "pack_bins":
        return _runner_pack_bins(impl, spec)
    if k == "pack":
        return _runner_pack(impl, spec)
    if k == "pad":
        return _runner_pad(impl, spec)
    if k.startswith("read_"):
        return _runner_read(impl, spec, k[len("read_"):])
    raise KeyError(k)


def run_cell(spec: dict) -> dict:
    """One cell in this (fresh) process: load + prepare (untimed), the check run (peak), timed reps.
    """
    start_kib = status_kib("VmRSS")
    t0 = time.perf_counter()
    runner = make_runner(spec)
    prep_s = time.perf_counter() - t0
    release_memory()
    prep_hwm = status_kib("VmHWM")
    base = status_kib("VmRSS")
    hwm_ok = reset_peak()
    chk = Digest()
    t0 = time.perf_counter()
    out = runner.run(chk)
    first_s = time.perf_counter() - t0
    hwm = status_kib("VmHWM")
    runner.digest(out, chk)
    del out
    release_memory()
    times = []
    touch = int(min(max(hwm - base, 0) * 1024, PREFAULT_MAX)) if (hwm_ok and hwm and base) else 0
    for _ in range(int(spec["reps"])):
        prefault(touch)
        t0 = time.perf_counter()
        out = runner.run(None)
        times.append(time.perf_counter() - t0)
        del out
    peak = (hwm - base) / 1024 if (hwm_ok and hwm is not None and base is not None) else None
    total = (
        max(x for x in (prep_hwm, hwm, base) if x is not None) / 1024 if base is not None else None
    )
    return {
        "times_s": times,
        "first_s": first_s,
        "prep_s": prep_s,
        "peak_mib": peak,
        "baseline_rss_mib": None if base is None else base / 1024,
        "start_rss_mib": None if start_kib is None else start_kib / 1024,
        "total_peak_mib": total,
        "digests": chk.result(),
        "notes": runner.notes,
    }


def child_main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    res = run_cell(spec)
    sys.stdout.write("\n" + json.dumps(res) + "\n")
    sys.stdout.flush()
    if spec["impl"] == "hf_streaming":
        # HF datasets' streaming Parquet reader leaves a pyarrow thread that aborts the
        # interpreter at exit in about a third of the runs (datasets 5.x, pyarrow 26, with
        # or without fastaxo imported); the cell's result is written, so skip the teardown.
        sys.stderr.flush()
        os._exit(0)
    return 0
