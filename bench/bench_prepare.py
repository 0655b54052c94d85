"""Benchmark: `fastaxo prepare` against its floor, pyarrow alone reading and writing.

    python bench/bench_prepare.py                     # 20k and 200k rows, 5 rounds
    python bench/bench_prepare.py --rows 200000 --reps 7 --json out.jsonl

Data: the demo's rows (`fastaxo._bench.demo.tokenized_table`: chat-shaped input_ids + labels,
10% exact duplicates, seed 0), written to Parquet as `fastaxo demo` writes them. Each round
runs, interleaved, each in a fresh process:
- `fastaxo prepare DATA -o OUT --max-length 4096` (the standard layout, the default): the
  report's seconds (the call, without the interpreter's start) and the process's wall time;
- the old floor: pyarrow reading DATA whole and writing the same packed rows in the layout
  prepare wrote before (input_ids, labels, position_ids, segment ids; int32), zstd level 1,
  no dictionary, no statistics, prepare's row groups (`fastaxo._bench.floor`);
- the new floor: the same with prepare's own columns and types.
The floors' tables are built from prepare's output before their clock starts: they time the
read and the write only, no dedupe and no packing. Reported: medians, prepare's ratio to each
floor, and peak RSS (prepare's report; the floors' VmHWM, their table included).
The outputs are checked: prepare's sequences equal the plain pipeline's kept rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import _common as mem
import pyarrow.parquet as pq
from _common import JsonRecorder, fmt_table, machine, median, rows_parser

import fastaxo
from fastaxo._bench.demo import tokenized_table
from fastaxo._bench.floor import floor_seconds, layouts
from fastaxo._bench.plain_pipeline import check_packed, plain_prepare
from fastaxo._core.backend import child_argv, child_env


def child(data: str, packed: str, layout: str, out: str, max_length: int) -> None:
    """One floor run in this fresh process: its seconds and peak RSS (the table it writes,
    built before the clock, included)."""
    table = layouts(pq.read_table(packed))[layout]
    mem.release_freed_memory()
    mem.reset_peak()
    s = floor_seconds(data, table, out, max_length)
    print(json.dumps({"seconds": s, "peak_mib": (mem.status_kib("VmHWM") or 0) / 1024}))


def run_prepare(data: str, out: str, max_length: int, rj: str) -> dict:
    if os.path.exists(out):
        os.unlink(out)
    r = subprocess.run(child_argv("fastaxo", "prepare", data, "-o", out, "--max-length",
                                  str(max_length), "--quiet", "--report-json", rj),
                       capture_output=True, text=True, env=child_env(), cwd="/")
    if r.returncode:
        sys.exit(f"fastaxo prepare failed:\n{r.stderr[-2000:]}")
    with open(rj) as fh:
        rep = json.load(fh)
    return {"seconds": rep["seconds"], "peak_mib": (rep["peak_rss_bytes"] or 0) / 2**20,
            "report": rep}


def main() -> None:
    ap = rows_parser(__doc__)
    ap.add_argument("--child", nargs=5, metavar=("DATA", "PACKED", "LAYOUT", "OUT", "LEN"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        d, p, lay, o, n = args.child
        child(d, p, lay, o, int(n))
        return
    rec = JsonRecorder(args.json)
    print(f"# machine: {machine()}; loadavg at start {os.getloadavg()[0]:.2f}; "
          f"fastaxo {fastaxo.__version__}")
    tmp = tempfile.mkdtemp(prefix="fastaxo-bench-prepare-")
    for rows in (int(x) for x in args.rows.split(",")):
        data = os.path.join(tmp, f"data-{rows}.parquet")
        pq.write_table(tokenized_table(rows, 0.1, seed=0).select(["input_ids", "labels"]), data,
                       row_group_size=16384)
        out = os.path.join(tmp, "packed.parquet")
        rj = os.path.join(tmp, "report.json")
        first = run_prepare(data, out, args.max_length, rj)
        ref = plain_prepare(data, os.path.join(tmp, "plain.parquet"), args.max_length,
                            first["report"]["pack_window"])
        chk = check_packed(out, args.max_length, ref["kept"])
        if not (chk["ok"] and chk["bins"] == first["report"]["bins"] == ref["bins"]):
            sys.exit(f"prepare's output is not the plain pipeline's: {chk}")
        kept = os.path.join(tmp, "kept.parquet")  # (the floors' rows: prepare's, kept aside)
        os.replace(out, kept)
        cells: dict[str, list[dict]] = {"prepare": [], "old": [], "new": []}
        for _ in range(args.reps):
            cells["prepare"].append(run_prepare(data, out, args.max_length, rj))
            for lay in ("old", "new"):
                cells[lay].append(mem.child_peak(__file__, [
                    data, kept, lay, os.path.join(tmp, f"floor-{lay}.parquet"),
                    str(args.max_length)]))
        med = {k: median([c["seconds"] for c in v]) for k, v in cells.items()}
        peak = {k: max(c["peak_mib"] for c in v) for k, v in cells.items()}
        names = {"prepare": "fastaxo prepare (standard layout)",
                 "old": "floor: pyarrow read + write, old layout (4 x int32)",
                 "new": "floor: pyarrow read + write, new layout (prepare's types)"}
        table = []
        for k in cells:
            ratio = "" if k == "prepare" else f"{med['prepare'] / med[k]:.2f}x"
            table.append([names[k], f"{med[k]:.2f}", ratio, f"{peak[k]:,.0f}"])
            rec.append({"bench": "prepare", "rows": rows, "cell": k, "median_s": med[k],
                        "times": [c["seconds"] for c in cells[k]], "peak_mib": peak[k]})
        rep = first["report"]
        print(f"\n{rows:,} rows ({rep['tokens_in']:,} tokens, {rep['duplicates']:,} duplicates) "
              f"-> {rep['bins']:,} bins of {args.max_length:,}; medians of {args.reps}, "
              "interleaved, fresh processes; prepare's output equals the plain pipeline's: yes")
        print(fmt_table(["run", "s", "prepare / it", "peak MiB"], table))
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)


if __name__ == "__main__":
    main()
