"""Benchmark: fastaxo prepare on Ray (fastaxo.integrations.ray) against the single-machine
`fastaxo prepare`, on the same files, in one run.

    cd / && /path/to/venv/bin/python /work/main/bench/bench_ray.py            # 400k rows, 8 files
    ... --rows 100000 --reps 1                                                  # smoke run

Data: N generated tokenized chat-shaped rows (fastaxo._bench.demo.tokenized_table: input_ids and
labels, lognormal lengths, mean --mean-tokens; 10% exact duplicates), shuffled across --files
Parquet files (row groups of 10,000 rows), so that duplicates sit in other files than their
first occurrence. Everything lives in a temp dir.

Configurations, each run --reps times, interleaved (order rotating), each in a fresh driver
process (`python -c ...`, so that no import or Ray connection is shared):
  single     fastaxo.prepare(files, out.parquet) with the default threads (2 here)
  ray-1      a Ray cluster of one node started with `ray start --head --num-cpus=1` (one worker
             process at a time), fastaxo.integrations.ray.prepare(..., address=head)
  ray-2      the head (--num-cpus=1) + a second node (`ray start --address=...`, --num-cpus=1):
             two worker processes in two raylets, as two machines would have
Clusters are started before their runs and stopped after them (outside the timings); the
drivers connect to them. Reported: wall time of prepare (median), rows/s, the Ray report's
stage times (plan, scan, count, dedupe shuffle, pack), and whether the shards read in order
equal the single-machine file (every run is checked).

Output: a text report (stdout and <--out>.txt) and JSON lines (<--out>.jsonl),
default bench/results/bench_ray.{txt,jsonl}.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import JsonRecorder, fmt_table, machine  # noqa: E402

sys.path.insert(0, str(HERE.parent / "tests"))
from ray_harness import LocalCluster  # noqa: E402  (the tests' cluster: `ray start` nodes, own token)


def log(msg: str) -> None:
    print(f"[bench_ray {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def make_files(d: Path, rows: int, files: int, mean_tokens: float, seed: int) -> list[str]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fastaxo._bench.demo import tokenized_table

    t = tokenized_table(rows, dup_fraction=0.1, seed=seed, mean_tokens=mean_tokens).select(["input_ids", "labels"])
    # shuffle rows across files so that a duplicate usually sits in another file than its first copy
    perm = np.random.default_rng(seed + 1).permutation(rows)
    t = t.take(pa.array(perm))
    out = []
    per = -(-rows // files)
    for k in range(files):
        p = d / f"part{k:03d}.parquet"
        pq.write_table(t.slice(k * per, per), p, row_group_size=10_000, compression="zstd")
        out.append(str(p))
    return out


DRIVER = r'''
import json, sys, time
args = json.loads(sys.argv[1])
t0 = time.perf_counter()
if args["mode"] == "single":
    import fastaxo
    rep = fastaxo.prepare(args["files"], args["out"], args["seq_len"], pack_window=args["window"])
    d = rep.as_dict()
else:
    from fastaxo.integrations.ray import prepare
    rep = prepare(args["files"], args["out"], args["seq_len"], pack_window=args["window"],
                  unit_rows=args["unit_rows"], address=args["address"])
    d = rep.as_dict()
d["driver_wall_s"] = time.perf_counter() - t0
print("RESULT " + json.dumps(d))
'''


def run_driver(mode: str, files: list[str], out: str, a: argparse.Namespace, cluster: LocalCluster | None) -> dict:
    args = {"mode": mode, "files": files, "out": out, "seq_len": a.seq_len, "window": a.window,
            "unit_rows": a.unit_rows, "address": cluster.address if cluster else None}
    env = {**os.environ, "FASTAXO_REQUIRE_EXTENSION": "1", "RAY_USAGE_STATS_ENABLED": "0",
           **(cluster.env if cluster else {})}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(args)], capture_output=True, text=True, cwd="/",
                       env=env, timeout=a.timeout)
    wall = time.perf_counter() - t0
    if r.returncode:
        raise RuntimeError(f"{mode} driver failed (exit {r.returncode}): {r.stderr[-3000:]}")
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    res = json.loads(line[7:])
    res["process_wall_s"] = wall
    return res


def same_rows(single_file: str, out_dir: str) -> bool:
    import pyarrow as pa
    import pyarrow.parquet as pq

    a = pq.read_table(single_file)
    b = pa.concat_tables([pq.read_table(p) for p in sorted(glob.glob(os.path.join(out_dir, "part-*.parquet")))])
    return a.num_rows == b.num_rows and all(a.column(c).equals(b.column(c).cast(a.schema.field(c).type))
                                            for c in a.column_names)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=400_000)
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--mean-tokens", type=float, default=300.0)
    p.add_argument("--max-length", type=int, default=4096)
    p.add_argument("--window", type=int, default=100_000, help="pack_window (kept rows per shard)")
    p.add_argument("--unit-rows", type=int, default=20_000, help="rows per Ray scan task (row groups are 10,000)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--object-store-mib", type=int, default=1024, help="object store per Ray node")
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--windows", default="1000,5000,20000,100000,400000",
                   help="pack_window values of the quality/parallelism sweep (single machine, same data)")
    p.add_argument("--out", default=str(HERE / "results" / "bench_ray"))
    a = p.parse_args()
    import ray

    import fastaxo

    t_run = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="fastaxo-bench-ray-"))
    git = subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(HERE.parent), "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip()
    rec = JsonRecorder(a.out + ".jsonl")  # (after the git check: it truncates its own output file)
    hdr = [
        "# bench_ray: fastaxo prepare on Ray vs the single-machine fastaxo prepare, in one run",
        f"# command: python bench/bench_ray.py {' '.join(sys.argv[1:])}   (cwd=/, {sys.executable})",
        f"# commit: {git}{' (working tree dirty)' if dirty else ' (clean)'}; fastaxo {fastaxo.__version__} at "
        f"{Path(fastaxo.__file__).parent}; ray {ray.__version__}",
        f"# machine: {machine()}; loadavg at start {os.getloadavg()[0]:.2f}",
    ]
    try:
        t0 = time.perf_counter()
        files = make_files(tmp, a.rows, a.files, a.mean_tokens, seed=0)
        size = sum(os.path.getsize(f) for f in files)
        hdr.append(f"# data: {a.rows:,} generated chat-shaped rows (10% exact duplicates, shuffled across files), "
                   f"mean {a.mean_tokens:.0f} tokens, {a.files} Parquet files, {size / 2**20:,.0f} MiB "
                   f"({time.perf_counter() - t0:.1f} s to make); seq_len {a.seq_len}, pack_window {a.window:,}, "
                   f"unit_rows {a.unit_rows:,}")
        for h in hdr:
            log(h)
        results: dict[str, list[dict]] = {"single": [], "ray-1": [], "ray-2": []}
        single_ref = None
        for rep_i in range(a.reps):
            order = ["single", "ray-1", "ray-2"]
            order = order[rep_i % 3:] + order[: rep_i % 3]
            for mode in order:
                out = str(tmp / f"out-{mode}-{rep_i}")
                if mode == "single":
                    res = run_driver("single", files, out + ".parquet", a, None)
                    if single_ref is None:
                        single_ref = out + ".parquet"
                    res["identical"] = True
                else:
                    nodes = int(mode.split("-")[1])
                    cl = LocalCluster(nodes=nodes, cpus=1, object_store=a.object_store_mib << 20, prefix="fxb-")
                    try:
                        res = run_driver("ray", files, out, a, cl)
                    finally:
                        cl.stop()
                results[mode].append(res)
                log(f"rep {rep_i} {mode}: {res['driver_wall_s']:.2f} s" +
                    (f" stages {res['stage_seconds']}" if "stage_seconds" in res else ""))
        for mode in ("ray-1", "ray-2"):
            for i, res in enumerate(results[mode]):
                res["identical"] = same_rows(single_ref, str(tmp / f"out-{mode}-{i}"))
        rows = []
        base = statistics.median(r["driver_wall_s"] for r in results["single"])
        for mode, rs in results.items():
            wall = statistics.median(r["driver_wall_s"] for r in rs)
            r0 = rs[0]
            stages = {}
            if "stage_seconds" in r0:
                for k in r0["stage_seconds"]:
                    stages[k] = statistics.median(r["stage_seconds"][k] for r in rs)
            rows.append([mode, f"{wall:.2f} s", f"{r0['rows_in'] / wall:,.0f}", f"{base / wall:.2f}x",
                         ", ".join(f"{k} {v:.2f}" for k, v in stages.items()) or "-",
                         f"{r0['bins']:,}", f"{r0['duplicates']:,}", "yes" if all(r["identical"] for r in rs) else "NO"])
            rec.append({"bench": "ray", "mode": mode, "wall_s": wall, "walls": [r["driver_wall_s"] for r in rs],
                        "stages": stages, "rows": r0["rows_in"], "bins": r0["bins"], "duplicates": r0["duplicates"],
                        "identical": all(r["identical"] for r in rs), "report": r0})
        table = fmt_table(["configuration", "prepare wall (median)", "rows/s", "vs single", "stages (s)", "bins",
                           "duplicates", "same output as single"], rows)
        # the window size: packing quality against parallelism (a window is one pack task)
        sweep = []
        for wsize in [int(x) for x in a.windows.split(",") if x]:
            aw = argparse.Namespace(**{**vars(a), "window": wsize})
            res = run_driver("single", files, str(tmp / f"sweep-{wsize}.parquet"), aw, None)
            extra = res["bins"] - res["lower_bound"]
            sweep.append([f"{wsize:,}", f"{res['windows']:,}", f"{res['bins']:,}", f"{res['lower_bound']:,}",
                          f"+{extra:,} ({100 * extra / max(res['lower_bound'], 1):.3f}%)",
                          f"{100 * res['efficiency']:.3f}%", f"{res['driver_wall_s']:.2f} s"])
            rec.append({"bench": "ray", "section": "window_sweep", "pack_window": wsize, "windows": res["windows"],
                        "bins": res["bins"], "lower_bound": res["lower_bound"], "efficiency": res["efficiency"],
                        "wall_s": res["driver_wall_s"]})
            log(f"window {wsize}: {res['windows']} windows, {res['bins']} bins (lower bound {res['lower_bound']})")
        table += ("\n\nPacking quality against window size (fastaxo prepare, bfd, same data; a window is one pack "
                  "task on Ray, so smaller windows mean more parallel tasks):\n\n"
                  + fmt_table(["pack_window", "windows (pack tasks)", "bins", "lower bound", "over the bound",
                               "efficiency", "single-machine wall"], sweep))
        hdr.append(f"# total run time: {(time.perf_counter() - t_run) / 60:.1f} min; loadavg at end "
                   f"{os.getloadavg()[0]:.2f}")
        text = "\n".join(hdr) + "\n\n" + table + "\n"
        print(text)
        Path(a.out + ".txt").write_text(text)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
