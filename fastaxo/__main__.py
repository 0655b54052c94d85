"""The ``fastaxo`` command line.

fastaxo info                 what this build is: version, OpenMP, threads, SHA-256 path
fastaxo dedupe [FILE ...]    exact dedupe of Parquet files (streamed, bounded memory);
                             with no FILE, of the built-in default dataset
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time


def _rss_peak_mib() -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _cmd_info(args: argparse.Namespace) -> int:
    import fastaxo

    fastaxo.show_config()
    return 0


def _dedupe_builtin(args: argparse.Namespace) -> int:
    import numpy as np

    import fastaxo
    from fastaxo._demo import tokenized_table

    print(f"fastaxo dedupe: built-in default dataset ({args.rows:,} tokenized rows, 10% exact duplicates, seed 0)")
    table = tokenized_table(args.rows, 0.1, seed=0)
    tokens = len(table.column("input_ids").combine_chunks().values)
    print(f"  columns {table.column_names}, {tokens:,} tokens, {table.nbytes / 2**20:,.0f} MiB in Arrow")
    t0 = time.perf_counter()
    res = fastaxo.dedupe(table, num_threads=args.threads)
    dt = time.perf_counter() - t0
    # Check the kept rows against a plain hashlib pass over the same canonical rows.
    ids = table.column("input_ids").combine_chunks()
    t1 = time.perf_counter()
    seen: set[bytes] = set()
    offs = ids.offsets.to_numpy()
    vals = ids.values.to_numpy()
    for i in range(len(ids)):
        seen.add(hashlib.sha256(vals[offs[i] : offs[i + 1]].tobytes()).digest())
    dt_ref = time.perf_counter() - t1
    print(f"  kept {len(res.keep):,} rows, dropped {res.n_duplicates:,} duplicates "
          f"(hashlib on input_ids alone finds {len(seen):,} distinct rows)")
    print(f"  fastaxo.dedupe over all 3 columns: {dt * 1e3:,.0f} ms = {len(table) / dt:,.0f} rows/s "
          f"({fastaxo.config()['default_threads'] if args.threads is None else args.threads} threads, "
          f"SHA-256 path {fastaxo.config()['sha256']})")
    print(f"  a hashlib loop over input_ids alone: {dt_ref * 1e3:,.0f} ms ({dt_ref / dt:.1f}x slower)")
    print(f"  seen set: {res.seen.nbytes / 2**20:.1f} MiB for {len(res.seen):,} distinct rows; peak RSS {_rss_peak_mib() or 0:,.0f} MiB")
    ok = len(res.keep) == len(seen) and bool(np.all(np.diff(res.keep) > 0))
    print("  result:", "OK" if ok else "MISMATCH")
    return 0 if ok else 1


def _cmd_dedupe(args: argparse.Namespace) -> int:
    if not args.inputs:
        return _dedupe_builtin(args)
    import pyarrow.parquet as pq

    import fastaxo

    seen = fastaxo.Seen()
    writer = None
    n_in = n_out = 0
    t0 = time.perf_counter()
    columns = args.columns.split(",") if args.columns else None
    try:
        for path in args.inputs:
            pf = pq.ParquetFile(path, pre_buffer=False)
            for batch in pf.iter_batches(batch_size=args.batch_rows):
                res = fastaxo.dedupe(batch, columns=columns, seen=seen, num_threads=args.threads)
                n_in += res.n_rows
                n_out += len(res.keep)
                if args.output:
                    kept = res.apply(batch)
                    if writer is None:
                        writer = pq.ParquetWriter(args.output, kept.schema)
                    writer.write_batch(kept)
    finally:
        if writer is not None:
            writer.close()
    dt = time.perf_counter() - t0
    print(f"fastaxo dedupe: {n_in:,} rows in, {n_out:,} kept, {n_in - n_out:,} duplicates dropped, "
          f"{dt:.2f} s ({n_in / max(dt, 1e-9):,.0f} rows/s), peak RSS {_rss_peak_mib() or 0:,.0f} MiB"
          + (f"; wrote {args.output}" if args.output else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fastaxo", description="Fast, memory-bounded data preparation for Axolotl.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_info = sub.add_parser("info", help="show version, OpenMP, threads and the SHA-256 path")
    p_info.set_defaults(func=_cmd_info)
    p_d = sub.add_parser("dedupe", help="exact dedupe of Parquet files, or of the built-in dataset")
    p_d.add_argument("inputs", nargs="*", help="Parquet files (default: the built-in dataset)")
    p_d.add_argument("-o", "--output", help="write the kept rows to this Parquet file")
    p_d.add_argument("--columns", help="comma-separated columns to compare (default: all)")
    p_d.add_argument("--batch-rows", type=int, default=65536, help="rows per batch read (default 65536)")
    p_d.add_argument("--threads", type=int, default=None, help="threads (default: FASTAXO_NUM_THREADS, OMP_NUM_THREADS, CPUs)")
    p_d.add_argument("--rows", type=int, default=200_000, help="rows of the built-in dataset (default 200000)")
    p_d.set_defaults(func=_cmd_dedupe)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
