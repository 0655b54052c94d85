"""The ``fastaxo`` command line.

fastaxo info                 what this build is: version, OpenMP, threads, SHA-256 path
fastaxo dedupe [FILE ...]    exact dedupe of Parquet files (streamed, bounded memory);
                             with no FILE, of the built-in default dataset
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time


def _rss_peak_mib() -> float | None:
    from fastaxo.reader import _proc_kib

    kib = _proc_kib("VmHWM:")
    return None if kib is None else kib / 1024


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
    ids = table.column("input_ids").combine_chunks()
    print(f"  columns {table.column_names}, {len(ids.values):,} tokens per column, "
          f"{table.nbytes / 2**20:,.0f} MiB in Arrow")
    cfg = fastaxo.config()
    threads = cfg["default_threads"] if args.threads is None else args.threads

    t0 = time.perf_counter()
    res = fastaxo.dedupe(table, num_threads=args.threads)
    dt = time.perf_counter() - t0
    print(f"  dedupe over all {table.num_columns} columns: kept {len(res.keep):,} rows, dropped "
          f"{res.n_duplicates:,} duplicates in {dt * 1e3:,.0f} ms ({len(table) / dt:,.0f} rows/s, "
          f"{threads} threads, SHA-256 path {cfg['sha256']})")

    # The same digests two ways: fastaxo on the Arrow column, and the hashlib loop a user writes.
    t0 = time.perf_counter()
    digests = fastaxo.hash_rows(ids, num_threads=args.threads)
    dt_fx = time.perf_counter() - t0
    offs, vals = np.frombuffer(ids.buffers()[1], np.int32)[: len(ids) + 1], ids.values.to_numpy()
    t0 = time.perf_counter()
    ref = [hashlib.sha256(vals[offs[i] : offs[i + 1]].tobytes()).digest() for i in range(len(ids))]
    dt_ref = time.perf_counter() - t0
    same = digests.tobytes() == b"".join(ref)
    print(f"  SHA-256 of input_ids rows: fastaxo {dt_fx * 1e3:,.0f} ms, hashlib loop {dt_ref * 1e3:,.0f} ms "
          f"({dt_ref / dt_fx:.1f}x), digests identical: {same}")
    distinct = len(set(ref))
    print(f"  seen set: {res.seen.nbytes / 2**20:.1f} MiB for {len(res.seen):,} distinct rows; "
          f"peak RSS {_rss_peak_mib() or 0:,.0f} MiB (mostly the generated dataset)")
    ok = same and len(res.keep) == distinct and bool(np.all(np.diff(res.keep) > 0))
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
