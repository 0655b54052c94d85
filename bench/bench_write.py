"""Benchmark: writing prepare's packed output to Parquet.

    python bench/bench_write.py                       # 20k and 200k rows, 5 rounds
    python bench/bench_write.py --rows 20000 --reps 3 --json out.jsonl

Data: `fastaxo._bench.demo.tokenized_table` (the demo's chat-shaped rows, seed 0) packed by
`fastaxo.pack` (BFD, --max-length 4096) into the columns `prepare` writes: input_ids, labels,
position_ids, attention_mask (list<int32>), cut into row groups of ~4M tokens as prepare's.
Each round writes the whole table, interleaved, to a fresh file in a temporary directory:
- pyarrow's `ParquetWriter` with prepare's former settings (zstd level 1, no dictionary, no
  statistics), the baseline;
- fastaxo's `ListTableWriter` on one thread and on the default thread count.
Reported: median wall time, the ratio to pyarrow, the file's size, and the peak RSS above
the table (VmHWM reset before each writer's first, untimed, write). Every file is read back
with pyarrow and compared to the table; the run says so.
"""

from __future__ import annotations

import os
import sys
import tempfile

import _common as mem
import pyarrow as pa
import pyarrow.parquet as pq
from _common import JsonRecorder, fmt_table, interleaved, machine, median, rows_parser

import fastaxo
from fastaxo._bench.demo import tokenized_table
from fastaxo._core.threads import resolve_num_threads
from fastaxo.pipeline.parquet import ListTableWriter

ROW_GROUP_TOKENS = 4 << 20


def packed_table(rows: int, max_length: int) -> pa.Table:
    t = tokenized_table(rows, 0.1, seed=0)
    return fastaxo.pack(t.column("input_ids"), max_length=max_length, labels=t.column("labels"),
                        layout="flat", dtype="int32").to_arrow()


def row_groups(table: pa.Table, max_length: int) -> list[list[pa.Array]]:
    step = max(1, ROW_GROUP_TOKENS // max_length)
    return [[c.combine_chunks() for c in table.slice(o, step).columns]
            for o in range(0, len(table), step)]


def main() -> None:
    ap = rows_parser(__doc__)
    args = ap.parse_args()
    rec = JsonRecorder(args.json)
    threads = resolve_num_threads(None)
    print(f"# machine: {machine()}; loadavg at start {os.getloadavg()[0]:.2f}; "
          f"fastaxo {fastaxo.__version__}, pyarrow {pa.__version__}; default threads {threads}")
    tmp = tempfile.mkdtemp(prefix="fastaxo-bench-write-")
    for rows in (int(x) for x in args.rows.split(",")):
        table = packed_table(rows, args.max_length)
        schema = table.schema
        groups = row_groups(table, args.max_length)
        raw = sum(c.nbytes for c in table.columns)

        def pyarrow_writer(path: str) -> None:
            w = pq.ParquetWriter(path, schema, compression="zstd", compression_level=1,
                                 use_dictionary=False, write_statistics=False)
            for g in groups:
                w.write_table(pa.Table.from_arrays(g, schema=schema), row_group_size=len(g[0]))
            w.close()

        def ours(n: int):
            def run(path: str) -> None:
                w = ListTableWriter(path, schema, num_threads=n)
                for g in groups:
                    w.write(g)
                w.close()
            return run

        writers = {"pyarrow ParquetWriter": pyarrow_writer, "fastaxo, 1 thread": ours(1),
                   f"fastaxo, {threads} threads": ours(threads)}
        paths = {k: os.path.join(tmp, f"{rows}-{i}.parquet") for i, k in enumerate(writers)}
        peaks: dict[str, float] = {}
        for k, fn in writers.items():  # untimed first write: peak memory, read-back check
            mem.release_freed_memory()
            base = mem.status_kib("VmRSS") or 0
            mem.reset_peak()
            fn(paths[k])
            peaks[k] = ((mem.status_kib("VmHWM") or 0) - base) / 1024
            if not pq.read_table(paths[k]).equals(table):
                sys.exit(f"{k}: the file does not read back as the table")

        def timed(k: str):
            def run() -> None:
                os.unlink(paths[k])
                writers[k](paths[k])
            return run

        times = interleaved({k: timed(k) for k in writers}, args.reps)
        base_t = median(times["pyarrow ParquetWriter"])
        out = []
        for k in writers:
            m = median(times[k])
            size = os.path.getsize(paths[k])
            out.append([k, f"{m * 1e3:,.0f}", f"{base_t / m:.2f}x", f"{raw / m / 1e9:.2f}",
                        f"{size / 2**20:,.1f}", f"{peaks[k]:,.0f}"])
            rec.append({"bench": "write", "rows": rows, "writer": k, "median_s": m,
                        "times": times[k], "bytes": size, "peak_mib": peaks[k],
                        "raw_bytes": raw, "row_groups": len(groups)})
        print(f"\n{rows:,} rows packed to {len(table):,} rows of {args.max_length:,} "
              f"({raw / 2**20:,.0f} MiB of columns, {len(groups)} row groups); "
              f"medians of {args.reps}, interleaved; every file reads back as the table: yes")
        print(fmt_table(["writer", "ms", "x pyarrow", "GB/s of columns", "file MiB",
                         "peak MiB above the table"], out))
        del table, groups
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)


if __name__ == "__main__":
    main()
