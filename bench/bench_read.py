"""Benchmark: the streaming reader (fastaxo.iter_parquet / iter_batches) against pyarrow, HF datasets
streaming and fast-axolotl, on chat-shaped data.

    python bench/bench_read.py                                   # 50k, 500k, 2M rows; all formats at 200k
    python bench/bench_read.py --quick                           # smoke test, about a minute
    python bench/bench_read.py --sizes 20000 --format-rows 20000 --reps 1
    python bench/bench_read.py --dir /tmp/readbench --keep --json out.jsonl   # keep (and reuse) the files

Data (fastaxo._bench.demo.chat_batches, seed 0, generated in chunks of 65,536 rows, never timed): `id` int64,
`text` string (~1.2 kB random printable ASCII, no newlines), `input_ids` list<int32> (lognormal, mean
~300 tokens). Parquet is written with pyarrow.parquet.ParquetWriter (default settings: snappy), one
row group per --row-group-rows rows.

Parquet section: every reader runs in a FRESH interpreter (`bench_read.py --child READER FORMAT PATH`):
it imports what it needs (pyarrow, and fastaxo / pyarrow.dataset / datasets / fast_axolotl), takes the
RSS after those imports as its baseline, resets VmHWM (/proc/self/clear_refs), then opens the source
and iterates it to the end, counting rows (the timed part: open + iteration). Reported: rows/s
(median over --reps), batches/s, the open time, and the peak RSS over the baseline (VmHWM - baseline,
max over reps). The parent polls each child's VmRSS every 50 ms and kills it above --mem-limit-gib
("killed at X GiB": a result, not a failure), and kills it after --timeout seconds. Reps are
interleaved round-robin across readers (round 1: every reader once, round 2: ...).

  fastaxo                     fastaxo.iter_parquet(path)  (defaults: batch_rows=8192, prefetch 4 / 256 MiB)
  pyarrow_iter_batches        pq.ParquetFile(path).iter_batches()  (defaults)
  pyarrow_iter_batches_nopre  pq.ParquetFile(path, pre_buffer=False).iter_batches()  (a tuned baseline)
  pyarrow_scanner             pyarrow.dataset.dataset(path).to_batches()  (defaults)
  hf_stream_rows              datasets.load_dataset("parquet", data_files=path, split="train",
                              streaming=True), iterated row by row (dicts); skipped above --hf-max-rows
  hf_stream_arrow             the same dataset .with_format("arrow").iter(batch_size=1000) (pyarrow Tables)
  fast_axolotl                fast_axolotl.streaming_dataset_reader(path, "parquet", batch_size=1000)
                              (dicts of Python lists)

Before timing, fastaxo's output for each Parquet file is checked against pq.ParquetFile.iter_batches
(streamed side by side, bounded memory): the same rows and values, in order.

Formats section (--formats, --format-rows rows): the same kind of data written as Arrow IPC file and
stream (also with lz4 body compression), JSON Lines, CSV, TSV and plain text (csv/tsv/text: no list
column; text: the `text` column only, one line per row), optionally compressed by the name's ending
(.gz, .bz2, .zst). For each: (a) correctness, in this process: the whole file read by
fastaxo.iter_batches against pyarrow's own reader of that format (ipc read_all, pyarrow.json.read_json,
pyarrow.csv.read_csv; for text, Python's split of the decoded file on "\\n" with one trailing "\\r"
dropped per line), compared with Table.equals; (b) throughput, fresh processes as above: fastaxo against
pyarrow's streaming reader of that format (IPC reader batches, pyarrow.json.open_json,
pyarrow.csv.open_csv; text: open_csv as a one-column CSV without quoting, as pyarrow has no text reader).

The HF datasets cache of the children is a directory inside the temporary directory; nothing is
written outside it. The page cache is warm (the files were just written, or reused).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _baselines_pack import fmt_n, rate, versions  # noqa: E402
from _common import (  # noqa: E402
    JsonRecorder,
    fmt_table,
    machine,
    median,
    release_freed_memory,
    reset_peak,
    status_kib,
)

PARQUET_READERS = ["fastaxo", "pyarrow_iter_batches", "pyarrow_iter_batches_nopre", "pyarrow_scanner",
                   "hf_stream_rows", "hf_stream_arrow", "fast_axolotl"]
PYARROW_READERS = ["pyarrow_iter_batches", "pyarrow_iter_batches_nopre", "pyarrow_scanner"]
LABELS = {
    "fastaxo": "fastaxo.iter_parquet (defaults)",
    "pyarrow_iter_batches": "pyarrow ParquetFile.iter_batches (defaults)",
    "pyarrow_iter_batches_nopre": "pyarrow ParquetFile(pre_buffer=False).iter_batches (tuned)",
    "pyarrow_scanner": "pyarrow dataset scanner to_batches (defaults)",
    "hf_stream_rows": "HF datasets streaming, rows",
    "hf_stream_arrow": "HF datasets streaming, arrow iter(batch_size=1000)",
    "fast_axolotl": "fast_axolotl.streaming_dataset_reader(batch_size=1000)",
}
ROW_READERS = {"hf_stream_rows"}  # one item per row: no batches

# format name -> (file ending, reader kind). A ".gz" / ".bz2" / ".zst" suffix compresses the text formats.
FORMAT_BASES = {
    "arrow_file": (".arrow", "ipc_file"),
    "arrow_file_lz4": ("_lz4.arrow", "ipc_file"),
    "arrow_stream": (".arrows", "ipc_stream"),
    "jsonl": (".jsonl", "jsonl"),
    "csv": (".csv", "csv"),
    "tsv": (".tsv", "tsv"),
    "text": (".txt", "text"),
}
COMPRESSIONS = {"gz": "gzip", "bz2": "bz2", "zst": "zstd"}
FORMAT_READERS = ["fastaxo", "pyarrow"]
FORMAT_LABELS = {
    "ipc_file": "pyarrow ipc.open_file, get_batch(i)",
    "ipc_stream": "pyarrow ipc.open_stream, iterated",
    "jsonl": "pyarrow.json.open_json",
    "csv": "pyarrow.csv.open_csv",
    "tsv": "pyarrow.csv.open_csv(delimiter='\\t')",
    "text": "pyarrow.csv.open_csv as 1-column text (no quoting)",
}
CHUNK_ROWS = 65_536
NOTES: list[str] = []


def note(msg: str) -> None:
    NOTES.append(msg)
    print(f"# {msg}", file=sys.stderr, flush=True)


def mib(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f} MiB"


def ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:,.2f}x"


# ===================================================================================== child


def _open_reader(reader: str, kind: str) -> Callable[[str], tuple[Any, Callable[[Any], int]]]:
    """Import what `reader` needs (before the baseline) and return open(path) -> (iterable, rows_of)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.ipc  # noqa: F401
    import pyarrow.json as pjson
    import pyarrow.parquet as pq

    nrows = lambda b: b.num_rows  # noqa: E731
    if reader == "fastaxo":
        import fastaxo

        if kind == "parquet":
            return lambda p: (fastaxo.iter_parquet(p), nrows)
        return lambda p: (fastaxo.iter_batches(p), nrows)
    if kind == "parquet":
        if reader == "pyarrow_iter_batches":
            return lambda p: (pq.ParquetFile(p).iter_batches(), nrows)
        if reader == "pyarrow_iter_batches_nopre":
            return lambda p: (pq.ParquetFile(p, pre_buffer=False).iter_batches(), nrows)
        if reader == "pyarrow_scanner":
            import pyarrow.dataset as pds

            return lambda p: (pds.dataset(p, format="parquet").to_batches(), nrows)
        if reader in ("hf_stream_rows", "hf_stream_arrow"):
            import datasets

            datasets.disable_progress_bars()
            datasets.logging.set_verbosity_error()

            def hf(p: str):
                ds = datasets.load_dataset("parquet", data_files=p, split="train", streaming=True)
                if reader == "hf_stream_rows":
                    return iter(ds), (lambda r: 1)
                return ds.with_format("arrow").iter(batch_size=1000), (lambda t: t.num_rows)

            return hf
        if reader == "fast_axolotl":
            import fast_axolotl

            def fa(p: str):
                def n(b: dict) -> int:
                    return len(next(iter(b.values()))) if b else 0

                return fast_axolotl.streaming_dataset_reader(p, "parquet", batch_size=1000), n

            return fa
        raise SystemExit(f"unknown parquet reader {reader!r}")
    if reader != "pyarrow":
        raise SystemExit(f"unknown reader {reader!r} for {kind}")
    if kind == "ipc_file":
        def ipc_file(p: str):
            r = pa.ipc.open_file(p)
            return (r.get_batch(i) for i in range(r.num_record_batches)), nrows

        return ipc_file
    if kind == "ipc_stream":
        return lambda p: (pa.ipc.open_stream(p), nrows)
    if kind == "jsonl":
        return lambda p: (pjson.open_json(p), nrows)
    if kind in ("csv", "tsv"):
        po = pcsv.ParseOptions(delimiter="\t" if kind == "tsv" else ",")
        return lambda p: (pcsv.open_csv(p, parse_options=po), nrows)
    if kind == "text":
        ro = pcsv.ReadOptions(column_names=["text"])
        po = pcsv.ParseOptions(delimiter="\x1f", quote_char=False, escape_char=False, ignore_empty_lines=False)
        co = pcsv.ConvertOptions(column_types={"text": pa.string()})
        return lambda p: (pcsv.open_csv(p, read_options=ro, parse_options=po, convert_options=co), nrows)
    raise SystemExit(f"unknown format kind {kind!r}")


def child(argv: list[str]) -> None:
    """`--child READER KIND PATH`: one full read in this fresh process; prints one JSON line."""
    reader, kind, path = argv[:3]
    open_fn = _open_reader(reader, kind)
    gc.collect()
    release_freed_memory()
    base = status_kib("VmRSS")
    ok = reset_peak()
    t0 = time.perf_counter()
    it, rows_of = open_fn(path)
    t_open = time.perf_counter() - t0
    rows = batches = 0
    what = None
    for b in it:
        if what is None:
            what = type(b).__module__ + "." + type(b).__name__
        rows += rows_of(b)
        batches += 1
    dt = time.perf_counter() - t0
    hwm = status_kib("VmHWM")
    out: dict[str, Any] = {
        "reader": reader, "kind": kind, "rows": rows, "batches": None if reader in ROW_READERS else batches,
        "seconds": dt, "open_seconds": t_open, "rows_per_s": rows / dt if dt > 0 else None,
        "batches_per_s": (batches / dt if dt > 0 else None) if reader not in ROW_READERS else None,
        "baseline_mib": base / 1024, "peak_mib": (hwm - base) / 1024 if ok else None,
        "hwm_reset": ok, "yields": what,
    }
    if reader == "fastaxo":
        out["stats"] = it.stats.as_dict()
        it.close()
    print(json.dumps(out), flush=True)


# ============================================================================ run a child


def _rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def run_child(reader: str, kind: str, path: str, a: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    """A fresh interpreter with a memory watchdog (VmRSS polled every 50 ms) and a timeout."""
    limit_kib = int(a.mem_limit_gib * 2**20)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", reader, kind, path],
                             stdout=out, stderr=err, env=env, cwd=a.workdir)
        max_rss = 0
        killed_at = None
        timed_out = False
        while p.poll() is None:
            rss = _rss_kib(p.pid)
            if rss is not None:
                max_rss = max(max_rss, rss)
                if rss > limit_kib:
                    killed_at = rss
                    p.send_signal(signal.SIGKILL)
                    break
            if time.perf_counter() - t0 > a.timeout:
                timed_out = True
                p.send_signal(signal.SIGKILL)
                break
            time.sleep(0.05)
        p.wait()
        elapsed = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    base: dict[str, Any] = {"reader": reader, "kind": kind, "killed": killed_at is not None, "timeout": timed_out,
                            "error": None, "wall_seconds": elapsed, "watch_max_rss_mib": max_rss / 1024}
    if killed_at is not None:
        base["killed_at_gib"] = killed_at / 2**20
        return base
    if timed_out:
        return base
    if p.returncode != 0:
        tail = stderr.strip().splitlines()[-12:]
        base["error"] = f"exit {p.returncode}: " + " | ".join(tail)[-1500:]
        return base
    try:
        res = json.loads(stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        base["error"] = f"no JSON from the child: {stdout[-500:]!r} {stderr[-1000:]!r}"
        return base
    return {**base, **res}


def failure(r: dict[str, Any]) -> str | None:
    if r.get("killed"):
        return f"killed at {r['killed_at_gib']:.1f} GiB after {r['wall_seconds']:.0f} s"
    if r.get("timeout"):
        return f"timeout after {r['wall_seconds']:.0f} s"
    if r.get("error"):
        return f"error: {r['error']}"
    return None


def progress(prefix: str, r: dict[str, Any]) -> None:
    f = failure(r)
    if f:
        msg = f
    else:
        msg = (f"{r['rows']:,} rows, {rate(r['rows_per_s'])} rows/s, open {r['open_seconds']:.2f} s, "
               f"peak {mib(r['peak_mib'])} over {r['baseline_mib']:.0f} MiB")
    print(f"# {prefix} {r['reader']}: {msg}", file=sys.stderr, flush=True)


# ================================================================================= data


def gen_parquet(path: str, n: int, rg_rows: int, seed: int) -> tuple[bool, float]:
    """Write n chat rows to `path` in row groups of rg_rows; reuse a file that matches. (reused, seconds)"""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fastaxo._bench.demo import chat_batches

    if os.path.exists(path):
        try:
            md = pq.ParquetFile(path).metadata
            want_groups = -(-n // rg_rows)
            if md.num_rows == n and md.num_row_groups == want_groups:
                return True, 0.0
        except Exception:
            pass
    t0 = time.perf_counter()
    tmp = path + ".part"
    w = None
    buf: list[pa.Table] = []
    have = 0
    try:
        for t in chat_batches(n, seed=seed, chunk_rows=CHUNK_ROWS):
            if w is None:
                w = pq.ParquetWriter(tmp, t.schema)
            buf.append(t)
            have += t.num_rows
            while have >= rg_rows:  # exact row groups of rg_rows, whatever the chunk size
                whole = pa.concat_tables(buf) if len(buf) > 1 else buf[0]
                w.write_table(whole.slice(0, rg_rows), row_group_size=rg_rows)
                rest = whole.slice(rg_rows)
                buf, have = ([rest] if rest.num_rows else []), rest.num_rows
        if have:
            w.write_table(pa.concat_tables(buf) if len(buf) > 1 else buf[0], row_group_size=rg_rows)
    finally:
        if w is not None:
            w.close()
    os.replace(tmp, path)
    return False, time.perf_counter() - t0


def format_path(d: str, fmt: str, n: int) -> tuple[str, str, str | None]:
    """(path, reader kind, compression) of a --formats name."""
    base, _, comp = fmt.partition(".")
    if base not in FORMAT_BASES:
        raise SystemExit(f"--formats: unknown format {fmt!r} (bases: {', '.join(FORMAT_BASES)}; "
                         f"text formats take .gz/.bz2/.zst)")
    ext, kind = FORMAT_BASES[base]
    if comp:
        if comp not in COMPRESSIONS or kind not in ("jsonl", "csv", "tsv", "text"):
            raise SystemExit(f"--formats: {fmt!r}: only jsonl/csv/tsv/text take a .gz/.bz2/.zst ending")
        ext += "." + comp
    return os.path.join(d, f"chat_{n}{ext}"), kind, COMPRESSIONS.get(comp) if comp else None


class _Writer:
    """Streams chunks of the chat table into one file of one format."""

    def __init__(self, fmt: str, path: str, kind: str, comp: str | None, schema):
        import pyarrow as pa
        import pyarrow.csv as pcsv

        self.kind, self.path, self.tmp = kind, path, path + ".part"
        self.sink = self.w = None
        if kind in ("ipc_file", "ipc_stream"):
            opts = pa.ipc.IpcWriteOptions(compression="lz4") if fmt.startswith("arrow_file_lz4") else None
            new = pa.ipc.new_file if kind == "ipc_file" else pa.ipc.new_stream
            self.w = new(self.tmp, schema, options=opts)
        else:
            self.sink = pa.output_stream(self.tmp, compression=comp)
            if kind in ("csv", "tsv"):
                self.w = pcsv.CSVWriter(self.sink, schema.remove(schema.get_field_index("input_ids")),
                                        write_options=pcsv.WriteOptions(delimiter="\t" if kind == "tsv" else ","))

    def write(self, t, cache: dict[str, bytes]) -> None:
        if self.kind in ("ipc_file", "ipc_stream"):
            self.w.write_table(t)
        elif self.kind in ("csv", "tsv"):
            self.w.write_table(t.select(["id", "text"]))
        elif self.kind == "jsonl":
            if "jsonl" not in cache:
                cache["jsonl"] = "".join(json.dumps(r, separators=(",", ":")) + "\n"
                                         for r in t.to_pylist()).encode()
            self.sink.write(cache["jsonl"])
        elif self.kind == "text":
            if "text" not in cache:
                cache["text"] = ("\n".join(t.column("text").to_pylist()) + "\n").encode()
            self.sink.write(cache["text"])

    def close(self) -> None:
        if self.w is not None:
            self.w.close()
        if self.sink is not None:
            self.sink.close()
        os.replace(self.tmp, self.path)


def gen_formats(d: str, formats: list[str], n: int, seed: int) -> dict[str, tuple[str, str, bool]]:
    """Write the first n chat rows in every format in one pass; a `.rows` marker lets --dir reuse them."""
    from fastaxo._bench.demo import chat_batches

    out: dict[str, tuple[str, str, bool]] = {}
    todo = []
    for fmt in formats:
        path, kind, comp = format_path(d, fmt, n)
        marker = path + ".rows"
        reused = os.path.exists(path) and os.path.exists(marker) and open(marker).read().strip() == str(n)
        out[fmt] = (path, kind, reused)
        if not reused:
            todo.append((fmt, path, kind, comp))
    if todo:
        writers = None
        for t in chat_batches(n, seed=seed, chunk_rows=CHUNK_ROWS):
            if writers is None:
                writers = [_Writer(f, p, k, c, t.schema) for f, p, k, c in todo]
            cache: dict[str, bytes] = {}
            for w in writers:
                w.write(t, cache)
        for w in writers or []:
            w.close()
            with open(w.path + ".rows", "w") as fh:
                fh.write(str(n))
    return out


# =========================================================================== correctness


def _short(v: Any, k: int = 120) -> str:
    s = repr(v)
    return s if len(s) <= k else s[:k] + f"... ({len(s)} chars)"


def first_difference(a, b, offset: int = 0, names: tuple[str, str] = ("fastaxo", "pyarrow")) -> str | None:
    """None if the tables hold the same columns, types and values in order; else the first difference."""
    if a.schema.names != b.schema.names:
        return f"columns: {names[0]} {a.schema.names} vs {names[1]} {b.schema.names}"
    for fa, fb in zip(a.schema, b.schema):
        if not fa.type.equals(fb.type):
            return f"column {fa.name!r}: {names[0]} type {fa.type} vs {names[1]} {fb.type}"
    n = min(a.num_rows, b.num_rows)
    first = None
    for name in a.schema.names:
        ca, cb = a.column(name), b.column(name)
        step = 4096
        for s in range(0, n, step):
            if first is not None and s >= first[0]:
                break
            if ca.slice(s, step).equals(cb.slice(s, step)):
                continue
            for i in range(s, min(s + step, n)):
                if not ca[i].equals(cb[i]):
                    if first is None or i < first[0]:
                        first = (i, name, ca[i].as_py(), cb[i].as_py())
                    break
            break
    if first is not None:
        i, name, va, vb = first
        return f"row {offset + i:,} column {name!r}: {names[0]} {_short(va)} vs {names[1]} {_short(vb)}"
    if a.num_rows != b.num_rows:
        return (f"{names[0]} has {offset + a.num_rows:,} rows, {names[1]} {offset + b.num_rows:,} "
                f"(the first {offset + n:,} equal)")
    return None


def compare_streams(xa: Iterator, xb: Iterator) -> tuple[int, int, str | None]:
    """Walk two batch streams side by side (any batch sizes). (rows a, rows b, first difference or None)."""
    import pyarrow as pa

    def nxt(it):
        for x in it:
            if x.num_rows:
                return x
        return None

    a, b = nxt(xa), nxt(xb)
    pos = 0
    while a is not None and b is not None:
        k = min(a.num_rows, b.num_rows)
        sa, sb = a.slice(0, k), b.slice(0, k)
        if not sa.equals(sb):
            d = first_difference(pa.Table.from_batches([sa]), pa.Table.from_batches([sb]), offset=pos)
            if d is not None:
                return pos, pos, d
        pos += k
        a = a.slice(k) if k < a.num_rows else nxt(xa)
        b = b.slice(k) if k < b.num_rows else nxt(xb)
    ra = pos + (a.num_rows + sum(x.num_rows for x in xa) if a is not None else 0)
    rb = pos + (b.num_rows + sum(x.num_rows for x in xb) if b is not None else 0)
    if ra != rb:
        return ra, rb, f"fastaxo has {ra:,} rows, pyarrow {rb:,} (the first {pos:,} equal)"
    return ra, rb, None


def check_parquet(path: str) -> tuple[int, str | None]:
    import pyarrow.parquet as pq

    import fastaxo

    try:
        with fastaxo.iter_parquet(path) as r:
            ra, rb, d = compare_streams(iter(r), iter(pq.ParquetFile(path).iter_batches()))
    except Exception as e:  # a reader bug: show it, go on
        return 0, f"fastaxo raised {type(e).__name__}: {e}"
    return ra, d


def reference_table(path: str, kind: str):
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.json as pjson

    if kind == "ipc_file":
        return pa.ipc.open_file(path).read_all()
    if kind == "ipc_stream":
        return pa.ipc.open_stream(path).read_all()
    if kind == "jsonl":
        return pjson.read_json(path)
    if kind in ("csv", "tsv"):
        return pcsv.read_csv(path, parse_options=pcsv.ParseOptions(delimiter="\t" if kind == "tsv" else ","))
    if kind == "text":
        if path.endswith(tuple("." + c for c in COMPRESSIONS)):
            with pa.input_stream(path, compression="detect") as s:
                data = s.read().decode("utf-8")
        else:
            with open(path, encoding="utf-8", newline="") as f:
                data = f.read()
        lines = data.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        lines = [x[:-1] if x.endswith("\r") else x for x in lines]
        return pa.table({"text": pa.array(lines, pa.string())})
    raise ValueError(kind)


def check_format(path: str, kind: str) -> tuple[int, str | None]:
    import pyarrow as pa

    import fastaxo

    try:
        with fastaxo.iter_batches(path) as r:
            got = pa.Table.from_batches(list(r), schema=r.schema).combine_chunks()
    except Exception as e:
        return 0, f"fastaxo raised {type(e).__name__}: {e}"
    ref = reference_table(path, kind).combine_chunks()
    if got.equals(ref):
        return got.num_rows, None
    return got.num_rows, first_difference(got, ref) or "Table.equals is False (schema metadata?)"


# ================================================================================ tables


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if failure(r) is None]
    bad = [failure(r) for r in runs if failure(r) is not None]
    s: dict[str, Any] = {"n_ok": len(ok), "n": len(runs), "failures": bad}
    if ok:
        s["rows"] = sorted({r["rows"] for r in ok})
        s["rows_per_s"] = median([r["rows_per_s"] for r in ok])
        bps = [r["batches_per_s"] for r in ok if r.get("batches_per_s") is not None]
        s["batches_per_s"] = median(bps) if bps else None
        s["batches"] = ok[0].get("batches")
        s["open_seconds"] = median([r["open_seconds"] for r in ok])
        peaks = [r["peak_mib"] for r in ok if r.get("peak_mib") is not None]
        s["peak_mib"] = max(peaks) if peaks else None
        s["baseline_mib"] = median([r["baseline_mib"] for r in ok])
        s["yields"] = ok[0].get("yields")
        st = [r["stats"] for r in ok if r.get("stats")]
        if st:
            s["stall_fraction"] = median([x["stall_fraction"] for x in st])
    return s


def result_rows(order: list[str], res: dict[str, list[dict[str, Any]]], labels: dict[str, str], expect: int,
                skipped: dict[str, str]) -> tuple[list[list[str]], dict[str, dict[str, Any]]]:
    sums = {k: summarise(v) for k, v in res.items()}
    fx = sums.get("fastaxo", {}).get("rows_per_s")
    rows = []
    for name in order:
        label = labels.get(name, name)
        if name in skipped:
            rows.append([label, "skipped", "-", "-", "-", "-", "-", skipped[name]])
            continue
        if name not in sums:
            continue
        s = sums[name]
        notes = []
        if s["failures"]:
            notes.append(f"{len(s['failures'])} of {s['n']} runs: " + "; ".join(dict.fromkeys(s["failures"])))
        if not s["n_ok"]:
            rows.append([label, "-", "-", "-", "-", "-", "-", "; ".join(notes)])
            continue
        if s["rows"] != [expect]:
            notes.append(f"ROWS {', '.join(f'{x:,}' for x in s['rows'])} (expected {expect:,})")
        if s.get("stall_fraction") is not None:
            notes.append(f"consumer stall {100 * s['stall_fraction']:.0f}%")
        r = s["rows_per_s"]
        vs = "-" if name == "fastaxo" or not fx else f"{fx / r:,.1f}x"
        rows.append([label, rate(r), rate(s["batches_per_s"]) if s["batches_per_s"] is not None else "-",
                     f"{s['open_seconds']:.2f}", mib(s["peak_mib"]), f"{s['baseline_mib']:,.0f} MiB", vs,
                     "; ".join(notes)])
    return rows, sums


HEAD = ["reader", "rows/s (median)", "batches/s", "open s", "peak RSS over baseline (max)", "baseline RSS",
        "vs fastaxo", "notes"]


# ================================================================================== main


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default=None, help="Parquet row counts, comma-separated (default 50000,500000,2000000)")
    p.add_argument("--readers", default=",".join(PARQUET_READERS),
                   help=f"Parquet readers, comma-separated (default all: {','.join(PARQUET_READERS)})")
    p.add_argument("--formats", default="arrow_file,arrow_stream,jsonl,csv,tsv,text,jsonl.gz,csv.zst,text.bz2,"
                                        "arrow_file_lz4", help="other formats ('none': skip the section)")
    p.add_argument("--format-rows", type=int, default=None, help="rows of the other formats (default 200000)")
    p.add_argument("--reps", type=int, default=None, help="fresh processes per (reader, size), interleaved (default 3)")
    p.add_argument("--row-group-rows", type=int, default=CHUNK_ROWS, help="Parquet row group size")
    p.add_argument("--hf-max-rows", type=int, default=500_000, help="hf_stream_rows: skip sizes above this")
    p.add_argument("--mem-limit-gib", type=float, default=8.0, help="kill a child whose RSS exceeds this")
    p.add_argument("--timeout", type=float, default=900.0, help="kill a child after this many seconds")
    p.add_argument("--dir", default=None, help="data directory (a cache: matching files are reused and kept); "
                                               "default a new temporary directory under /tmp, removed at the end")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    p.add_argument("--no-check", action="store_true", help="skip the Parquet correctness check")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write every record as a JSON line to this file")
    p.add_argument("--quick", action="store_true", help="smoke test: sizes 20000,100000, format rows 20000, reps 1")
    a = p.parse_args()
    q = a.quick
    a.sizes = [int(float(s)) for s in (a.sizes or ("20000,100000" if q else "50000,500000,2000000")).split(",") if s]
    a.format_rows = a.format_rows if a.format_rows is not None else (20_000 if q else 200_000)
    a.reps = a.reps if a.reps is not None else (1 if q else 3)
    a.readers = [r for r in a.readers.split(",") if r]
    bad = [r for r in a.readers if r not in PARQUET_READERS]
    if bad:
        p.error(f"--readers: unknown {bad}; known: {PARQUET_READERS}")
    a.formats = [] if a.formats in ("", "none") else [f for f in a.formats.split(",") if f]
    return a


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    a = parse()
    for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(k, "1")
    made = a.dir is None
    d = tempfile.mkdtemp(prefix="fastaxo-bench-read-", dir="/tmp") if made else os.path.abspath(a.dir)
    os.makedirs(d, exist_ok=True)
    hf_home = os.path.join(d, "hf-home")
    env = dict(os.environ, HF_HOME=hf_home, HF_DATASETS_CACHE=os.path.join(hf_home, "datasets"),
               HF_DATASETS_DISABLE_PROGRESS_BARS="1")
    a.workdir = d
    rec = JsonRecorder(a.json)
    try:
        run(a, d, env, rec)
    finally:
        shutil.rmtree(hf_home, ignore_errors=True)
        if made and not a.keep:
            shutil.rmtree(d, ignore_errors=True)
        elif made:
            print(f"# kept {d}")


def run(a: argparse.Namespace, d: str, env: dict[str, str], rec: JsonRecorder) -> None:
    import pyarrow.parquet as pq

    import fastaxo

    print(f"# fastaxo {fastaxo.__version__} ({os.path.dirname(fastaxo.__file__)}); {machine()}")
    print(f"# python={sys.version.split()[0]} {versions(['pyarrow', 'fastaxo', 'datasets', 'fast-axolotl'])}")
    print(f"# command: python bench/bench_read.py {shlex.join(sys.argv[1:])}".rstrip())
    print(f"# date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}; data dir {d}; "
          f"reps {a.reps} (fresh process each, interleaved); memory limit {a.mem_limit_gib:g} GiB, "
          f"timeout {a.timeout:g} s per child")
    print(f"# data: fastaxo._bench.demo.chat_batches(seed={a.seed}): id int64, text ~1.2 kB, "
          "input_ids list<int32> ~300 tokens")
    rec.append({"bench": "read_env", "machine": machine(), "versions": versions(
        ['pyarrow', 'fastaxo', 'datasets', 'fast-axolotl']), "python": sys.version.split()[0], "argv": sys.argv[1:],
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds")})
    sections: list[str] = []
    fx_peaks: dict[int, float | None] = {}
    speed: dict[int, dict[str, dict[str, Any]]] = {}

    # ------------------------------------------------------------------ Parquet
    paths: dict[int, str] = {}
    data_lines = []
    for n in a.sizes:
        path = os.path.join(d, f"chat_{n}_rg{a.row_group_rows}.parquet")
        reused, secs = gen_parquet(path, n, a.row_group_rows, a.seed)
        paths[n] = path
        md = pq.ParquetFile(path).metadata
        size = os.path.getsize(path)
        groups = f"{md.num_row_groups} row group{'s' if md.num_row_groups != 1 else ''}"
        line = (f"{os.path.basename(path)}: {n:,} rows, {groups} of <= {a.row_group_rows:,} "
                f"rows, {size / 2**20:,.1f} MiB ({'reused' if reused else f'generated in {secs:.1f} s'})")
        data_lines.append(line)
        print(f"# {line}", flush=True)
        rec.append({"bench": "read_data", "format": "parquet", "size": n, "path": path, "bytes": size,
                    "row_groups": md.num_row_groups, "reused": reused, "gen_seconds": secs})
    checks = []
    if not a.no_check:
        for n in a.sizes:
            t0 = time.perf_counter()
            got, diff = check_parquet(paths[n])
            c = (f"parquet {fmt_n(n)}: fastaxo.iter_parquet vs pq.ParquetFile.iter_batches: "
                 + ("identical" if diff is None and got == n else f"DIFFERENT: {diff or f'{got:,} rows'}")
                 + f" ({time.perf_counter() - t0:.1f} s)")
            checks.append(c)
            print(f"# {c}", flush=True)
            rec.append({"bench": "read_check", "format": "parquet", "size": n, "identical": diff is None and got == n,
                        "rows": got, "difference": diff})
    for n in a.sizes:
        skipped = {}
        if "hf_stream_rows" in a.readers and n > a.hf_max_rows:
            skipped["hf_stream_rows"] = f"not run above --hf-max-rows {a.hf_max_rows:,} (slow)"
        order = [r for r in a.readers if r not in skipped]
        res: dict[str, list[dict[str, Any]]] = {r: [] for r in order}
        for rep in range(a.reps):
            for reader in order:
                r = run_child(reader, "parquet", paths[n], a, env)
                r.update(bench="read", section="parquet", format="parquet", size=n, rep=rep)
                rec.append(r)
                res[reader].append(r)
                progress(f"[parquet {fmt_n(n)} rep {rep + 1}/{a.reps}]", r)
        rows, sums = result_rows(a.readers, res, LABELS, n, skipped)
        speed[n] = sums
        fx_peaks[n] = sums.get("fastaxo", {}).get("peak_mib")
        for name, s in sums.items():
            rec.append({"bench": "read_summary", "section": "parquet", "format": "parquet", "size": n, "reader": name,
                        **{k: v for k, v in s.items() if k != "failures"}, "failures": s["failures"]})
        yields = "; ".join(f"{k}: {s['yields']}" for k, s in sums.items() if s.get("yields")
                           and k in ("hf_stream_rows", "hf_stream_arrow", "fast_axolotl"))
        sections.append(f"## Parquet, {n:,} rows ({os.path.getsize(paths[n]) / 2**20:,.0f} MiB)\n\n"
                        + fmt_table(HEAD, rows) + (f"\n\nYields: {yields}" if yields else ""))

    # ------------------------------------------------------------------ other formats
    fmt_checks = []
    if a.formats:
        t0 = time.perf_counter()
        files = gen_formats(d, a.formats, a.format_rows, a.seed)
        print(f"# formats: {a.format_rows:,} rows each ({time.perf_counter() - t0:.1f} s to write)", flush=True)
        for fmt, (path, _kind, reused) in files.items():
            size = os.path.getsize(path)
            line = f"{os.path.basename(path)}: {size / 2**20:,.1f} MiB{' (reused)' if reused else ''}"
            data_lines.append(line)
            print(f"# {line}", flush=True)
            rec.append({"bench": "read_data", "format": fmt, "size": a.format_rows, "path": path, "bytes": size,
                        "reused": reused})
        for fmt, (path, kind, _) in files.items():
            t0 = time.perf_counter()
            got, diff = check_format(path, kind)
            same = diff is None and got == a.format_rows
            c = (f"{fmt}: fastaxo.iter_batches vs {reference_name(kind)}: "
                 + ("identical" if same else f"DIFFERENT: {diff or f'{got:,} rows, expected {a.format_rows:,}'}")
                 + f" ({got:,} rows, {time.perf_counter() - t0:.1f} s)")
            fmt_checks.append(c)
            print(f"# {c}", flush=True)
            rec.append({"bench": "read_check", "format": fmt, "size": a.format_rows, "identical": same, "rows": got,
                        "difference": diff})
            gc.collect()
            release_freed_memory()
        for fmt, (path, kind, _) in files.items():
            res = {r: [] for r in FORMAT_READERS}
            for rep in range(a.reps):
                for reader in FORMAT_READERS:
                    r = run_child(reader, kind, path, a, env)
                    r.update(bench="read", section="formats", format=fmt, size=a.format_rows, rep=rep)
                    rec.append(r)
                    res[reader].append(r)
                    progress(f"[{fmt} {fmt_n(a.format_rows)} rep {rep + 1}/{a.reps}]", r)
            labels = {"fastaxo": "fastaxo.iter_batches (defaults)", "pyarrow": FORMAT_LABELS[kind]}
            rows, sums = result_rows(FORMAT_READERS, res, labels, a.format_rows, {})
            for name, s in sums.items():
                rec.append({"bench": "read_summary", "section": "formats", "format": fmt, "size": a.format_rows,
                            "reader": name, **s})
            sections.append(f"## {fmt}, {a.format_rows:,} rows ({os.path.getsize(path) / 2**20:,.1f} MiB)\n\n"
                            + fmt_table(HEAD, rows))

    # ------------------------------------------------------------------ report
    print()
    print("Data:\n" + "\n".join(f"- {x}" for x in data_lines))
    print()
    print("rows/s = rows / (open + full iteration) in a fresh process, median over reps; peak RSS = VmHWM - RSS "
          "after the imports, max over reps; vs fastaxo = fastaxo rows/s / this reader's rows/s.\n")
    print("\n\n".join(sections))
    print("\n## Correctness (same rows and values, in order, as pyarrow's own reader)\n")
    print("\n".join(f"- {c}" for c in checks + fmt_checks) or "(not checked)")
    print("\n## Summary\n")
    summary = summary_lines(a, fx_peaks, speed)
    print("\n".join(f"- {x}" for x in summary))
    for x in summary:
        rec.append({"bench": "read_target", "text": x})
    if NOTES:
        print("\nNotes:\n" + "\n".join(f"- {x}" for x in dict.fromkeys(NOTES)))


def reference_name(kind: str) -> str:
    return {"ipc_file": "pa.ipc.open_file().read_all()", "ipc_stream": "pa.ipc.open_stream().read_all()",
            "jsonl": "pyarrow.json.read_json", "csv": "pyarrow.csv.read_csv",
            "tsv": "pyarrow.csv.read_csv(delimiter='\\t')",
            "text": "Python str.split('\\n') of the decoded file"}[kind]


def summary_lines(a: argparse.Namespace, fx_peaks: dict[int, float | None],
                  speed: dict[int, dict[str, dict[str, Any]]]) -> list[str]:
    out = []
    sizes = sorted(n for n, v in fx_peaks.items() if v is not None)
    if len(sizes) >= 2:
        lo, hi = sizes[0], sizes[-1]
        r = fx_peaks[hi] / fx_peaks[lo] if fx_peaks[lo] else None
        met = r is not None and r <= 1.25 and fx_peaks[hi] < 512
        out.append(f"fastaxo peak RSS over baseline, default settings: {fmt_n(lo)} rows {mib(fx_peaks[lo])}, "
                   f"{fmt_n(hi)} rows {mib(fx_peaks[hi])}: ratio {ratio(r)} (target <= 1.25x and < 512 MiB at "
                   f"{fmt_n(hi)}: {'met' if met else 'NOT met'})")
    elif sizes:
        out.append(f"fastaxo peak RSS over baseline at {fmt_n(sizes[0])} rows: {mib(fx_peaks[sizes[0]])} "
                   f"(one size only: no ratio)")
    for n, sums in sorted(speed.items()):
        fx = sums.get("fastaxo", {}).get("rows_per_s")
        if not fx:
            out.append(f"{fmt_n(n)} rows: fastaxo did not complete")
            continue
        pa_ok = {k: s["rows_per_s"] for k, s in sums.items() if k in PYARROW_READERS and s.get("rows_per_s")}
        parts = [f"{fmt_n(n)} rows: fastaxo {rate(fx)} rows/s"]
        if pa_ok:
            best = max(pa_ok, key=pa_ok.get)
            parts.append(f"fastest pyarrow reader {best} {rate(pa_ok[best])} rows/s, "
                         f"fastaxo / it = {fx / pa_ok[best]:.2f}x")
        hf = sums.get("hf_stream_rows", {}).get("rows_per_s")
        if hf:
            parts.append(f"vs hf_stream_rows {rate(hf)} rows/s: {fx / hf:,.1f}x (target >= 5x: "
                         f"{'met' if fx / hf >= 5 else 'NOT met'})")
        elif "hf_stream_rows" in a.readers:
            parts.append("hf_stream_rows not run at this size" if n > a.hf_max_rows else "hf_stream_rows failed")
        out.append("; ".join(parts))
    return out


if __name__ == "__main__":
    main()
