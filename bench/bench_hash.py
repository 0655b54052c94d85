"""Benchmark: SHA-256 row hashing and exact dedupe, side by side with the baselines.

    python bench/bench_hash.py                      # 100k and 1M rows, 5 interleaved rounds
    python bench/bench_hash.py --rows 100000 --reps 3 --json out.jsonl

Cases: short (~60 B) strings, chat-like (~1.2 kB) strings, 4 kB strings, token rows
(list<int32>, lognormal lengths, mean ~300) read from an Arrow IPC file (memory-mapped),
and dedupe of a tokenized table (input_ids, attention_mask, labels) with 10% duplicates.

Baselines, measured in the same process run, interleaved, medians of --reps rounds:
* hashlib: the list comprehension a user writes (`sha256(s.encode())` over a list of str;
  for token rows `sha256(row.tobytes())`, both over zero-copy NumPy slices of the Arrow
  buffers, hashlib's best case, and over the rows `col.to_numpy(zero_copy_only=False)` gives,
  what a user typically writes, conversion included);
* fast-axolotl 0.2.0 `parallel_hash_rows` (list[str] -> hex), when installed;
* Axolotl 0.21's `_deduplicate_dataset` (`sha256(str(row))` over dict rows), when installed,
  on the first --axolotl-rows rows (its cost is linear in rows; rates are per row).
Peak memory: each hasher runs once more in a fresh interpreter that resets VmHWM after
loading the data, and reports the peak RSS over that baseline.
Data is generated under a temporary directory (fixed seeds), never in the repo.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    JsonRecorder,
    child_peak,
    fmt_table,
    interleaved,
    machine,
    median,
    reset_peak,
    status_kib,
)

import fastaxo  # noqa: E402
from fastaxo._bench.demo import text_rows, tokenized_table  # noqa: E402

fast_axolotl = None  # imported by load_baselines(), AFTER axolotl: its import shim hides axolotl
AXOLOTL_DEDUPE = None


def load_baselines(want_axolotl: bool) -> None:
    global fast_axolotl, AXOLOTL_DEDUPE
    if want_axolotl:
        try:
            from axolotl.utils.data.utils import _deduplicate_dataset

            AXOLOTL_DEDUPE = _deduplicate_dataset
        except Exception as exc:  # pragma: no cover
            print(f"# Axolotl not importable ({exc!r}); its dedupe baseline is skipped", file=sys.stderr)
    try:
        import fast_axolotl as fa

        fast_axolotl = fa
    except ImportError:  # pragma: no cover
        pass

CASES = {
    "short ~60 B": ("text", 60),
    "chat ~1.2 kB": ("text", 1200),
    "4 kB": ("text", 4096),
    "tokens ~300": ("tokens", 300),
}


def make_file(tmp: Path, case: str, n: int) -> Path:
    path = tmp / f"{case.split()[0]}_{n}.arrow"
    if path.exists():
        return path
    kind, size = CASES[case]
    if kind == "text":
        table = pa.table({"text": text_rows(n, size, seed=11)})
    else:
        table = tokenized_table(n, 0.0, seed=12, mean_tokens=size).select(["input_ids"])
    with ipc.new_file(path, table.schema) as w:
        w.write_table(table, max_chunksize=1 << 20)
    return path


def load(path: Path) -> pa.ChunkedArray:
    """Read the Arrow IPC file into memory (not memory-mapped: mapped pages would count as
    the hasher's RSS when first touched)."""
    with pa.OSFile(str(path)) as f:
        return ipc.open_file(f).read_all().column(0)


def hashers(col: pa.ChunkedArray, kind: str, threads: int):
    """name -> (prepare() -> state, run(state)); prepare is not timed."""
    h: dict[str, tuple] = {}
    if kind == "text":
        cache: list = []

        def pylist():  # one list of str shared by every list-based hasher (4 GB at 1M x 4 kB)
            if not cache:
                cache.append(col.to_pylist())
            return cache[0]

        h["hashlib (list of str)"] = (pylist, lambda rows: [hashlib.sha256(s.encode()).digest() for s in rows])
        if fast_axolotl is not None:
            h["fast-axolotl (list of str)"] = (pylist, lambda rows: fast_axolotl.parallel_hash_rows(rows, threads))
        h["fastaxo (list of str)"] = (pylist, lambda rows: fastaxo.hash_rows(rows, num_threads=threads))
        h["fastaxo (Arrow)"] = (lambda: col, lambda c: fastaxo.hash_rows(c, num_threads=threads))
    else:
        def views():
            arr = col.combine_chunks()
            return arr.offsets.to_numpy(), arr.values.to_numpy()

        def loop(state):
            o, v = state
            sha = hashlib.sha256
            return [sha(v[o[i] : o[i + 1]].tobytes()).digest() for i in range(len(o) - 1)]

        h["hashlib (row.tobytes(), zero-copy slices)"] = (views, loop)

        def user_loop(c):
            # What a user writes to get NumPy rows out of Arrow: the conversion is part of it.
            sha = hashlib.sha256
            return [sha(row.tobytes()).digest() for row in c.to_numpy(zero_copy_only=False)]

        h["hashlib (to_numpy() rows)"] = (lambda: col, user_loop)
        h["fastaxo (Arrow)"] = (lambda: col, lambda c: fastaxo.hash_rows(c, num_threads=threads))
    return h


def child(args: list[str]) -> None:
    """Fresh-process peak memory of one hasher: `--child case n path name threads`."""
    case, n, path, name, threads = args[0], int(args[1]), Path(args[2]), args[3], int(args[4])
    load_baselines(False)
    col = load(path)
    prep, run = hashers(col, CASES[case][0], threads)[name]
    state = prep()
    base = status_kib("VmRSS")
    ok = reset_peak()
    t0 = time.perf_counter()
    out = run(state)
    dt = time.perf_counter() - t0
    peak = status_kib("VmHWM")
    print(json.dumps({"case": case, "rows": n, "impl": name, "extra_peak_mib": (peak - base) / 1024 if ok else None,
                      "seconds": dt, "n_out": len(out)}))


def digests_equal(a, b) -> bool:
    def norm(x):
        if isinstance(x, np.ndarray):
            return x.tobytes().hex()
        return "".join(y if isinstance(y, str) else y.hex() for y in x)

    return norm(a) == norm(b)


def bench_hashing(tmp: Path, sizes: list[int], reps: int, threads: int, memory: bool, results: list[dict]) -> str:
    rows_out = []
    for n in sizes:
        for case, (kind, _size) in CASES.items():
            path = make_file(tmp, case, n)
            col = load(path)
            nbytes = sum(len(c.values) * 4 for c in col.chunks) if kind == "tokens" else sum(
                c.buffers()[2].size for c in col.chunks)
            hs = hashers(col, kind, threads)
            states = {name: prep() for name, (prep, _run) in hs.items()}
            outs = {name: run(states[name]) for name, (_prep, run) in hs.items()}  # warm-up + check
            ref = outs[next(iter(hs))]
            for name, out in outs.items():
                if not digests_equal(out, ref):
                    raise AssertionError(f"{name} digests differ from the baseline on {case} x {n}")
            fns = {name: (lambda r=run, s=states[name]: r(s)) for name, (_p, run) in hs.items()}
            times = interleaved(fns, reps)
            base = median(times[next(iter(hs))])
            fa = median(times["fast-axolotl (list of str)"]) if "fast-axolotl (list of str)" in times else None
            del states, outs
            for name, ts in times.items():
                med = median(ts)
                peak = child_peak(__file__, [case, str(n), str(path), name, str(threads)])["extra_peak_mib"] if memory else None
                rec = {"bench": "hash", "case": case, "rows": n, "impl": name, "threads": threads, "median_s": med,
                       "rows_per_s": n / med, "mb_per_s": nbytes / med / 1e6, "x_vs_hashlib": base / med,
                       "x_vs_fast_axolotl": (fa / med) if fa else None, "extra_peak_mib": peak,
                       "extra_bytes_per_row": (peak * 2**20 / n) if peak is not None else None}
                results.append(rec)
                print(json.dumps(rec), flush=True)
                rows_out.append([f"{n:,}", case, name, f"{med * 1e3:,.1f}", f"{n / med / 1e6:,.2f}M",
                                 f"{nbytes / med / 1e6:,.0f}", f"{base / med:,.1f}x",
                                 f"{fa / med:,.1f}x" if fa else "-",
                                 f"{peak:,.1f}" if peak is not None else "-"])
    return fmt_table(["rows", "case", "implementation", "median ms", "rows/s", "MB/s", "vs hashlib", "vs fast-axolotl",
                      "extra peak MiB"], rows_out)


def bench_dedupe(n: int, axolotl_rows: int, reps: int, threads: int, results: list[dict]) -> str:
    table = tokenized_table(n, 0.1, seed=13)
    rows_out = []
    t_fx = interleaved({"fastaxo": lambda: fastaxo.dedupe(table, num_threads=threads)}, reps)["fastaxo"]
    res = fastaxo.dedupe(table, num_threads=threads)
    assert res.n_duplicates == round(n * 0.1)
    med_fx = median(t_fx)
    rec = {"bench": "dedupe", "rows": n, "impl": "fastaxo.dedupe", "median_s": med_fx, "rows_per_s": n / med_fx,
           "kept": len(res.keep)}
    results.append(rec)
    print(json.dumps(rec), flush=True)
    rows_out.append([f"{n:,}", "fastaxo.dedupe (Arrow table)", f"{med_fx * 1e3:,.0f}", f"{n / med_fx:,.0f}", "1.0x", f"{len(res.keep):,}"])
    dd = AXOLOTL_DEDUPE
    if dd is not None:
        import datasets

        m = min(axolotl_rows, n)
        sub = table.slice(0, m)
        ds = datasets.Dataset(sub)
        t0 = time.perf_counter()
        kept_ds, seen = dd(ds)
        t_ax = time.perf_counter() - t0
        sub_res = fastaxo.dedupe(ds, num_threads=threads)
        # Axolotl returns dataset.select(kept): its indices mapping IS the kept row list
        # (comparing the kept rows as Python lists would take ~10 GB at 1M rows).
        ax_keep = np.asarray(kept_ds._indices.column(0).to_numpy() if kept_ds._indices is not None else np.arange(len(kept_ds)))
        same = bool(np.array_equal(ax_keep, sub_res.keep))
        t_fx_sub = median(interleaved({"f": lambda: fastaxo.dedupe(ds, num_threads=threads)}, reps)["f"])
        rate_ax = m / t_ax
        rec = {"bench": "dedupe", "rows": m, "impl": "axolotl _deduplicate_dataset", "median_s": t_ax,
               "rows_per_s": rate_ax, "kept": len(kept_ds), "same_kept_rows_as_fastaxo": bool(same),
               "fastaxo_same_rows_s": t_fx_sub, "x_fastaxo_vs_axolotl_same_rows": t_ax / t_fx_sub,
               "x_fastaxo_1M_rate_vs_axolotl_rate": (n / med_fx) / rate_ax}
        results.append(rec)
        print(json.dumps(rec), flush=True)
        rows_out.append([f"{m:,}", "Axolotl _deduplicate_dataset (1 run)", f"{t_ax * 1e3:,.0f}", f"{rate_ax:,.0f}",
                         f"{(n / med_fx) / rate_ax:,.0f}x slower", f"{len(kept_ds):,} (same rows: {same})"])
        rows_out.append([f"{m:,}", "fastaxo.dedupe (same HF Dataset)", f"{t_fx_sub * 1e3:,.0f}", f"{m / t_fx_sub:,.0f}",
                         f"{t_ax / t_fx_sub:,.0f}x faster than Axolotl", f"{len(sub_res.keep):,}"])
    return fmt_table(["rows", "dedupe of a tokenized table, 10% dups", "median ms", "rows/s", "ratio", "kept"], rows_out)


def openssl_rate() -> float | None:
    try:
        r = subprocess.run(["openssl", "speed", "-evp", "sha256", "-bytes", "16384", "-seconds", "3"],
                           capture_output=True, text=True, timeout=60)
        last = [ln for ln in r.stdout.splitlines() if ln.startswith("sha256")][-1]
        return float(last.split()[-1].rstrip("k")) * 1000 / 1e6  # MB/s
    except Exception:
        return None


def bench_bulk(threads: int, reps: int, results: list[dict]) -> str:
    ossl = openssl_rate()
    rows_out = []
    rng = np.random.default_rng(7)
    for row_bytes in (1024, 4096, 16384):
        n = (256 * 2**20) // row_bytes
        data = rng.integers(0, 256, n * row_bytes, dtype=np.uint8).reshape(n, row_bytes)
        out = {}
        for nt in sorted({1, threads}):
            med = median(interleaved({"f": lambda nt=nt: fastaxo.hash_rows(data, num_threads=nt)}, reps)["f"])
            out[nt] = data.nbytes / med / 1e6
            target = 0.85 * ossl * nt if ossl else None
            rec = {"bench": "bulk", "row_bytes": row_bytes, "threads": nt, "mb_per_s": out[nt],
                   "openssl_1thread_16k_mb_per_s": ossl, "pct_of_openssl_x_threads": 100 * out[nt] / (ossl * nt) if ossl else None}
            results.append(rec)
            print(json.dumps(rec), flush=True)
            rows_out.append([f"{row_bytes:,} B", str(nt), f"{out[nt]:,.0f}", f"{ossl * nt:,.0f}" if ossl else "-",
                             f"{100 * out[nt] / (ossl * nt):.0f}%" if ossl else "-", f"{target:,.0f}" if target else "-"])
    return fmt_table(["row size", "threads", "fastaxo MB/s", "openssl x threads MB/s", "% of openssl", "85% target"], rows_out)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="100000,1000000", help="comma-separated row counts")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", type=int, default=fastaxo.default_num_threads())
    p.add_argument("--dedupe-rows", type=int, default=1_000_000)
    p.add_argument("--axolotl-rows", type=int, default=50_000)
    p.add_argument("--no-memory", action="store_true", help="skip the fresh-process peak-memory runs")
    p.add_argument("--only", choices=["bulk", "hash", "dedupe"], action="append")
    p.add_argument("--json", help="also write every record as a JSON line to this file")
    args = p.parse_args()
    sizes = [int(s) for s in args.rows.split(",")]
    results = JsonRecorder(args.json)
    only = set(args.only or ["bulk", "hash", "dedupe"])
    load_baselines("dedupe" in only)
    print(f"# fastaxo {fastaxo.__version__}; {machine()}")
    cfg = fastaxo.config()
    print(f"# openmp={cfg['openmp']} sha256={cfg['sha256']} threads={args.threads}; "
          f"fast-axolotl={'installed' if fast_axolotl else 'not installed'}")
    print(f"# command: python bench/bench_hash.py {' '.join(sys.argv[1:])}".rstrip())
    sections = []
    if "bulk" in only:
        sections.append("## Bulk rate vs `openssl speed -evp sha256 -bytes 16384`\n\n" + bench_bulk(args.threads, args.reps, results))
    if "hash" in only:
        with tempfile.TemporaryDirectory(prefix="fastaxo-bench-") as tmp:
            sections.append("## hash_rows\n\n" + bench_hashing(Path(tmp), sizes, args.reps, args.threads, not args.no_memory, results))
    if "dedupe" in only:
        sections.append("## dedupe\n\n" + bench_dedupe(args.dedupe_rows, args.axolotl_rows, args.reps, args.threads, results))
    print()
    print("\n\n".join(sections))


if __name__ == "__main__":
    main()
