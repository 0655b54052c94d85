"""`fastaxo bench`: the benchmark matrix (kernels x implementations x sizes), from an installed
wheel.

Every cell (kernel, implementation, rows) runs in a fresh interpreter
(``python -m fastaxo._bench.matrix --cell JSON``) that loads its input (untimed), prepares the
input form the implementation takes (untimed: lists for the plain-Python baselines and the peer),
records its RSS, resets VmHWM (/proc/self/clear_refs), runs once (the check run: its peak RSS over
that baseline is the cell's peak; its output is digested afterwards), then ``reps`` timed runs
whose median is the cell's time. The parent watches each child's RSS (killed above the memory
budget) and compares the output digests of fastaxo and each baseline (identical arrays, or the
stated equivalence of the kernel's group).

Cells are skipped, with the reason recorded, when their estimated peak exceeds the memory budget
(half of MemAvailable by default), when the estimate from the previous size says one run would
take longer than ``--max-cell-seconds``, or when the data would not fit on the temp disk.
Data: seeded, generated under a temporary directory once per size, removed after that size.

Nothing here is imported by ``import fastaxo``; matplotlib (charts) is optional.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastaxo._bench.cell import child_main
from fastaxo._bench.data import estimate_data, generate_data
from fastaxo._bench.report import summary_text, write_outputs
from fastaxo._bench.spec import (
    DEFAULT_SIZES,
    INTERPRETER_BYTES,
    KERNELS,
    QUICK_SIZES,
    SCHEMA,
    SHAPES,
    Est,
    GiB,
    Impl,
    Kernel,
    MiB,
    parse_kernels,
    parse_sizes,
)
from fastaxo._bench.util import (
    compare_outputs,
    fmt_mib,
    fmt_n,
    fmt_rate,
    fmt_time,
    git_commit,
    machine_info,
    machine_short,
    secs,
    versions_info,
)
from fastaxo._core.checks import cli_positive_float, cli_positive_int
from fastaxo._core.proc import mem_available_bytes, status_kib


def _child_env(tmp: str) -> dict[str, str]:
    import fastaxo

    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(fastaxo.__file__)))
    if "site-packages" not in root and "dist-packages" not in root:
        # a source checkout (PYTHONPATH or in-place build): the children import the same fastaxo
        env["PYTHONPATH"] = os.pathsep.join(
            [root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        )
    env.setdefault("HF_DATASETS_CACHE", os.path.join(tmp, "hf-cache"))
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def detect_baselines(
    kernels: list[str], env: dict[str, str], cwd: str
) -> tuple[dict[str, bool], dict[str, str]]:
    """Which optional baselines can run: {requirement: available}, {requirement: why not}."""
    need = {r for k in kernels for im in KERNELS[k].impls for r in im.requires}
    avail: dict[str, bool] = {}
    why: dict[str, str] = {}
    hints = {"fast_axolotl": "pip install fast-axolotl==0.2.0", "datasets": "pip install datasets",
             "axolotl": "pip install axolotl (with torch and numba)"}
    for req in sorted(need):
        ok = importlib.util.find_spec(req) is not None
        reason = f"not installed ({hints[req]})"
        if ok and req == "axolotl":
            # Heavy (torch, numba): imported only in the cells that use it; checked once here.
            try:
                r = subprocess.run(
                    [sys.executable, "-c", "import axolotl.utils.samplers.multipack"],
                    env=env,
                    cwd=cwd,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                ok = r.returncode == 0
                tail = (r.stderr.strip().splitlines() or ["?"])[-1]
                reason = f"`import axolotl.utils.samplers.multipack` failed: {tail[:300]}"
            except subprocess.TimeoutExpired:
                ok, reason = False, "`import axolotl.utils.samplers.multipack` took over 300 s"
        avail[req] = ok
        if not ok:
            why[req] = reason
    return avail, why


# ============================================================================ parent: running cells



def spawn_cell(
    spec: dict, env: dict[str, str], cwd: str, mem_limit: float | None, timeout: float
) -> dict[str, Any]:
    """Run one cell in a fresh interpreter, killed above mem_limit bytes of RSS or after timeout s.
    """
    from fastaxo._core.backend import child_argv, child_env

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(child_argv("fastaxo._bench.matrix", "--cell", json.dumps(spec)),
                             stdout=out, stderr=err, env=child_env(env), cwd=cwd)
        killed_at = None
        timed_out = False
        max_rss = 0
        try:
            while p.poll() is None:
                rss = status_kib("VmRSS", p.pid)
                if rss is not None:
                    max_rss = max(max_rss, rss)
                    if mem_limit is not None and rss * 1024 > mem_limit:
                        killed_at = rss * 1024
                        p.kill()
                        break
                if time.perf_counter() - t0 > timeout:
                    timed_out = True
                    p.kill()
                    break
                time.sleep(0.02)
        except BaseException:
            p.kill()
            p.wait()
            raise
        p.wait()
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if killed_at is not None:
        assert mem_limit is not None  # only a limit kills
        return {"status": "error", "error_kind": "killed", "wall_s": wall,
                "reason": f"killed: RSS reached {killed_at / GiB:.2f} GiB, over the memory budget "
                          f"{mem_limit / GiB:.2f} GiB"}
    if timed_out:
        return {"status": "error", "error_kind": "timeout", "wall_s": wall,
                "reason": f"killed after the cell timeout of {timeout:.0f} s"}
    lines = [ln for ln in stdout.strip().splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = " | ".join(stderr.strip().splitlines()[-6:])[-1200:]
        return {"status": "error", "error_kind": "exception", "wall_s": wall,
                "reason": f"exit {p.returncode}: {tail or stdout[-500:]}"}
    res = json.loads(lines[-1])
    res.update(status="ok", wall_s=wall, watch_max_rss_mib=max_rss / 1024)
    return res


def estimate_seconds(prev: list[tuple[int, float]], n: int) -> float | None:
    """One run's time at n rows, from the measured medians at smaller sizes (power law from the last
    two, exponent clamped to [1, 2]; linear from one)."""
    if not prev:
        return None
    (n2, t2) = prev[-1]
    slope = 1.0
    if len(prev) >= 2:
        (n1, t1) = prev[-2]
        if t1 > 0 and t2 > 0 and n2 > n1:
            slope = min(2.0, max(1.0, math.log(t2 / t1) / math.log(n2 / n1)))
    return t2 * (n / n2) ** slope


@dataclass
class Options:
    sizes: list[int]
    kernels: list[str]
    reps: int
    quick: bool
    out: str
    shape: str = "peer"
    threads: int | None = None
    pad_batch: int = 16
    max_cell_seconds: float = 60.0
    memory_budget: float | None = None  # bytes
    cell_timeout: float = 1800.0
    markdown_doc: str | None = None
    command: str = "fastaxo bench"
    tmp_dir: str | None = None


def _cell_record(kernel: Kernel, im: Impl, n: int) -> dict[str, Any]:
    return {
        "kernel": kernel.name,
        "impl": im.key,
        "label": im.label,
        "role": im.role,
        "group": im.group,
        "rows": n,
        "status": None,
        "reason": None,
        "median_s": None,
        "times_s": None,
        "rows_per_s": None,
        "tokens_per_s": None,
        "mb_per_s": None,
        "peak_mib": None,
        "check": None,
    }


def _apply_checks(kernel: Kernel, cells: list[dict]) -> None:
    """Compare outputs within each group at one size; set every cell's check."""
    ok = {c["impl"]: c for c in cells if c["status"] == "ok"}
    comps: dict[str, list[dict]] = {c["impl"]: [] for c in cells}
    for f in kernel.impls:
        if f.role != "fastaxo" or f.key not in ok:
            continue
        for b in kernel.impls:
            if b.role != "baseline" or b.group != f.group or b.key not in ok:
                continue
            same, detail = compare_outputs(
                ok[f.key]["digests"], ok[b.key]["digests"], set(f.keys) & set(b.keys)
            )
            comps[f.key].append(
                {"against": b.key, "pass": same, "detail": detail, "oracle": b.oracle}
            )
            comps[b.key].append({"against": f.key, "pass": same, "detail": detail, "oracle": False})
    for c in cells:
        if c["status"] != "ok":
            continue
        cs = comps[c["impl"]]
        if not cs:
            c["check"] = {
                "status": "unchecked",
                "detail": "no other implementation of its group ran at this size",
                "comparisons": [],
            }
            continue
        failed = [x for x in cs if not x["pass"]]
        status = "pass" if not failed else "fail"
        if failed and c["role"] == "fastaxo":
            oracle = [x for x in cs if x["oracle"]]
            if oracle and all(x["pass"] for x in oracle):
                # fastaxo matches the reference; the other baseline differs (its own cell says so)
                status = "pass"
        elif failed and c["role"] == "baseline":
            f_cell = ok.get(cs[0]["against"])
            f_oracle = [x for x in comps.get(cs[0]["against"], []) if x["oracle"]] if f_cell else []
            if f_oracle and all(x["pass"] for x in f_oracle) and not kernel.impl(c["impl"]).oracle:
                status = (
                    "baseline differs"  # its output differs from fastaxo AND from the reference
                )
        c["check"] = {
            "status": status,
            "comparisons": cs,
            "detail": "; ".join(
                f"{'=' if x['pass'] else '!='} {x['against']}: {x['detail']}" for x in cs
            ),
        }


def _apply_speedups(kernel: Kernel, cells: list[dict]) -> None:
    ok = {c["impl"]: c for c in cells if c["status"] == "ok"}
    for c in cells:
        im = kernel.impl(c["impl"])
        if c["status"] == "ok" and im.role == "baseline" and im.counterpart in ok:
            x = c["median_s"] / ok[im.counterpart]["median_s"]
            c["fastaxo_speedup"] = x
            c["speedup_vs"] = im.counterpart
            ok[im.counterpart].setdefault("speedups", {})[im.key] = x


def run_matrix(o: Options, log: Callable[[str], None] = print) -> dict[str, Any]:
    import fastaxo

    t_start = time.perf_counter()
    shape = SHAPES[o.shape]
    avail_bytes = mem_available_bytes()
    budget = (
        o.memory_budget
        if o.memory_budget is not None
        else (avail_bytes / 2 if avail_bytes else None)
    )
    tmp = tempfile.mkdtemp(prefix="fastaxo-bench-", dir=o.tmp_dir)
    env = _child_env(tmp)
    machine = machine_info()
    try:
        avail, why = detect_baselines(o.kernels, env, tmp)
        versions = versions_info(avail)
        cfg = fastaxo.config()
        log(
            f"fastaxo bench: {', '.join(o.kernels)} at {', '.join(fmt_n(s) for s in o.sizes)} "
            "rows, "
            f"{o.reps} timed rep(s) per cell (+1 check run), shape {o.shape}"
        )
        log(f"  machine: {machine_short(machine)}, {machine['os']}, {machine['python']}")
        log(
            f"  fastaxo {fastaxo.__version__} (extension "
            f"{'loaded' if cfg.get('extension') else 'MISSING'}, "
            f"openmp {cfg.get('openmp')}, {o.threads or cfg.get('default_threads')} threads, "
            f"sha256 {cfg.get('sha256')}); memory budget "
            f"{'none' if budget is None else f'{budget / GiB:.1f} GiB'}; cells over "
            f"{o.max_cell_seconds:g} s per run (estimated) are skipped"
        )
        unavailable = []
        for k in o.kernels:
            for im in KERNELS[k].impls:
                missing = [r for r in im.requires if not avail.get(r, False)]
                if missing:
                    unavailable.append(
                        {
                            "kernel": k,
                            "impl": im.key,
                            "label": im.label,
                            "reason": "; ".join(
                                f"{r}: {why.get(r, 'not available')}" for r in missing
                            ),
                        }
                    )
        for u in unavailable:
            log(f"  not run: {u['kernel']} / {u['label']}: {u['reason']}")
        cells: list[dict] = []
        history: dict[tuple[str, str], list[tuple[int, float]]] = {}
        mem_hist: dict[tuple[str, str], tuple[int, float, float]] = {}
        time_skipped: set[tuple[str, str]] = set()
        runnable = [(KERNELS[k], im) for k in o.kernels for im in KERNELS[k].impls
                    if all(avail.get(r, False) for r in im.requires)]
        total_cells = len(runnable) * len(o.sizes)
        done = 0
        data_stats: dict[int, dict[str, Any]] = {}
        for n in o.sizes:
            est_d = estimate_data(n, shape)
            # --- decide the skips of this size before generating anything
            plan: list[tuple[Kernel, Impl, dict]] = []
            for kernel, im in runnable:
                rec = _cell_record(kernel, im, n)
                fmt = kernel.data if kernel.data in ("parquet", "jsonl", "arrow") else "arrow"
                e = Est(n, est_d["tokens"], est_d["text"], est_d[fmt], shape.capacity)
                est_mem = INTERPRETER_BYTES + im.mem(e)
                mh = None if im.bounded else mem_hist.get((kernel.name, im.key))
                if mh is not None:  # the measured total at the previous size, scaled
                    n0, start, total = mh
                    est_mem = max(est_mem, start * MiB + (total - start) * MiB * n / n0)
                rec["est_peak_gib"] = round(est_mem / GiB, 3)
                est_s = estimate_seconds(history.get((kernel.name, im.key), []), n)
                rec["est_s"] = est_s
                if budget is not None and est_mem > budget:
                    rec.update(
                        status="skipped",
                        reason=f"memory: estimated peak {est_mem / GiB:.2f} GiB > budget "
                        f"{budget / GiB:.2f} GiB",
                    )
                elif (kernel.name, im.key) in time_skipped:
                    rec.update(status="skipped", reason="time: skipped at a smaller size")
                elif est_s is not None and est_s > o.max_cell_seconds:
                    prev = history[(kernel.name, im.key)][-1]
                    rec.update(
                        status="skipped",
                        reason=f"time: estimated {secs(est_s)} s per run (from "
                        f"{prev[1]:.2f} s at {fmt_n(prev[0])} rows) > "
                        f"{o.max_cell_seconds:g} s",
                    )
                    time_skipped.add((kernel.name, im.key))
                plan.append((kernel, im, rec))
            formats = {
                k.data
                for k, _im, r in plan
                if r["status"] is None and k.data in ("parquet", "jsonl")
            }
            need_data = any(r["status"] is None for _k, _im, r in plan)
            ddir = os.path.join(tmp, f"data-{n}")
            stats = None
            if need_data:
                need = est_d["arrow"] + est_d["lengths"] + sum(est_d[f] for f in formats)
                free = shutil.disk_usage(tmp).free
                if need > 0.9 * free:
                    for _k, _im, r in plan:
                        if r["status"] is None:
                            r.update(
                                status="skipped",
                                reason=f"disk: the data would take {need / GiB:.1f} GiB, "
                                f"{free / GiB:.1f} GiB free in {tmp}",
                            )
                else:
                    t0 = time.perf_counter()
                    stats = generate_data(ddir, n, shape, formats)
                    data_stats[n] = {k: v for k, v in stats.items() if k != "paths"}
                    log(
                        f"[data] {fmt_n(n)} rows: {stats['tokens']:,} tokens, "
                        f"{stats['text_bytes'] / MiB:,.1f} MiB "
                        "of text; files "
                        + ", ".join(f"{k} {v / MiB:,.1f} MiB"
                                    for k, v in stats["file_bytes"].items())
                        + f" ({time.perf_counter() - t0:.1f} s, untimed)"
                    )
            by_kernel: dict[str, list[dict]] = {}
            for kernel, im, rec in plan:
                done += 1
                by_kernel.setdefault(kernel.name, []).append(rec)
                tag = f"[{done}/{total_cells}] {kernel.name:<12} {fmt_n(n):>5}  {im.label:<44}"
                if rec["status"] == "skipped":
                    log(f"{tag} skipped: {rec['reason']}")
                    cells.append(rec)
                    continue
                assert stats is not None  # a cell that runs has its size's data
                spec = {
                    "kernel": kernel.name,
                    "impl": im.key,
                    "rows": n,
                    "reps": o.reps,
                    "shape": o.shape,
                    "threads": o.threads,
                    "pad_batch": o.pad_batch,
                    "paths": stats["paths"],
                }
                res = spawn_cell(spec, env, tmp, budget, o.cell_timeout)
                rec["status"] = res["status"]
                if res["status"] != "ok":
                    rec.update(reason=res["reason"], error_kind=res.get("error_kind"))
                    if res.get("error_kind") == "timeout":
                        time_skipped.add((kernel.name, im.key))
                    log(f"{tag} ERROR: {res['reason']}")
                    cells.append(rec)
                    continue
                med = statistics.median(res["times_s"])
                rec.update(
                    median_s=med,
                    times_s=res["times_s"],
                    first_s=res["first_s"],
                    prep_s=res["prep_s"],
                    peak_mib=res["peak_mib"],
                    baseline_rss_mib=res["baseline_rss_mib"],
                    total_peak_mib=res["total_peak_mib"],
                    digests=res["digests"],
                    notes=res["notes"],
                    rows_per_s=n / med if med > 0 else None,
                )
                if kernel.unit == "tokens/s":
                    rec["tokens_per_s"] = stats["tokens"] / med if med > 0 else None
                elif kernel.data == "text":
                    rec["mb_per_s"] = stats["text_bytes"] / med / 1e6 if med > 0 else None
                else:
                    rec["mb_per_s"] = (
                        stats["file_bytes"][kernel.data] / med / 1e6 if med > 0 else None
                    )
                history.setdefault((kernel.name, im.key), []).append((n, med))
                if res.get("start_rss_mib") and res.get("total_peak_mib"):
                    mem_hist[(kernel.name, im.key)] = (
                        n,
                        res["start_rss_mib"],
                        res["total_peak_mib"],
                    )
                cells.append(rec)
                unit = (
                    f"{fmt_rate(rec['tokens_per_s'])} tokens/s"
                    if rec["tokens_per_s"] is not None
                    else f"{rec['mb_per_s']:,.1f} MB/s"
                )
                log(
                    f"{tag} {fmt_time(med):>10}  {fmt_rate(rec['rows_per_s']):>7} rows/s  "
                    f"{unit:>16}  "
                    f"peak {fmt_mib(rec['peak_mib'])} MiB"
                )
            for kname, kcells in by_kernel.items():
                _apply_checks(KERNELS[kname], kcells)
                _apply_speedups(KERNELS[kname], kcells)
                for c in kcells:
                    if c["check"] is not None and c["check"]["status"] != "pass":
                        log(
                            f"  check {kname} {fmt_n(n)} {c['label']}: "
                            f"{c['check']['status'].upper()} "
                            f"({c['check']['detail']})"
                        )
            shutil.rmtree(ddir, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results = {
        "schema": SCHEMA,
        "command": o.command,
        "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "wall_s": time.perf_counter() - t_start,
        "machine": machine,
        "versions": versions,
        "git_commit": git_commit(),
        "fastaxo_config": {
            k: v for k, v in cfg.items() if isinstance(v, (str, int, float, bool, type(None)))
        },
        "settings": {
            "sizes": o.sizes,
            "kernels": o.kernels,
            "reps": o.reps,
            "quick": o.quick,
            "shape": o.shape,
            "shape_description": shape.describe(),
            "capacity": shape.capacity,
            "threads": o.threads or cfg.get("default_threads"),
            "pad_batch": o.pad_batch,
            "max_cell_seconds": o.max_cell_seconds,
            "memory_budget_gib": None if budget is None else round(budget / GiB, 2),
            "mem_available_gib": None if avail_bytes is None else round(avail_bytes / GiB, 2),
        },
        "data": {str(k): v for k, v in data_stats.items()},
        "kernels": {k: kernel_meta(KERNELS[k]) for k in o.kernels},
        "unavailable": unavailable,
        "cells": cells,
    }
    results["summary"] = summarize(results)
    return results


def kernel_meta(k: Kernel) -> dict[str, Any]:
    return {
        "title": k.title,
        "about": k.about,
        "unit": k.unit,
        "groups": k.groups,
        "impls": {
            im.key: {
                "label": im.label,
                "role": im.role,
                "group": im.group,
                "what": im.what,
                "counterpart": im.counterpart,
                "oracle": im.oracle,
                "requires": list(im.requires),
            }
            for im in k.impls
        },
    }


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    cells = results["cells"]
    failed = [c for c in cells if (c.get("check") or {}).get("status") == "fail"]
    fx_errors = [c for c in cells if c["status"] == "error" and c["role"] == "fastaxo"
                 and c.get("error_kind") == "exception"]
    return {
        "cells": len(cells),
        "ok": sum(c["status"] == "ok" for c in cells),
        "skipped": sum(c["status"] == "skipped" for c in cells),
        "errors": sum(c["status"] == "error" for c in cells),
        "checks_passed": sum((c.get("check") or {}).get("status") == "pass" for c in cells),
        "checks_failed": len(failed),
        "baselines_differing": sum(
            (c.get("check") or {}).get("status") == "baseline differs" for c in cells
        ),
        "fastaxo_errors": len(fx_errors),
        "ok_overall": not failed and not fx_errors,
    }


def exit_code(results: dict[str, Any]) -> int:
    """0 when every check passed and no fastaxo cell raised; 1 otherwise."""
    return 0 if summarize(results)["ok_overall"] else 1


# ============================================================================ entry points


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true",
                   help="sizes 10k and 100k, 1 timed run per cell (under two minutes on 2 cores)")
    p.add_argument(
        "--out",
        default="fastaxo-bench",
        metavar="DIR",
        help="where results.json, results.md and the PNG charts go (default ./fastaxo-bench)",
    )
    p.add_argument(
        "--sizes",
        type=parse_sizes,
        metavar="N,N,...",
        help="row counts (default 10k,100k,1M,10M; --quick: 10k,100k); k/M suffixes accepted",
    )
    p.add_argument(
        "--kernels",
        type=parse_kernels,
        metavar="K,K,...",
        help=f"kernels to run (default all): {', '.join(KERNELS)}; 'read' = the three readers",
    )
    p.add_argument(
        "--reps",
        type=cli_positive_int,
        metavar="N",
        help="timed runs per cell, median reported (default 3; --quick: 1)",
    )
    p.add_argument(
        "--shape",
        choices=sorted(SHAPES),
        default="peer",
        help="data shape: peer = uniform 10-100 tokens into 512-token bins, ~256 B text (default); "
        "chat = lognormal ~300 tokens into 4096-token bins, ~1.2 kB text",
    )
    p.add_argument(
        "--threads",
        type=cli_positive_int,
        metavar="T",
        help="fastaxo threads (default: its default)",
    )
    p.add_argument(
        "--pad-batch",
        type=cli_positive_int,
        default=16,
        metavar="N",
        help="rows per collator batch in `pad` (default 16)",
    )
    p.add_argument(
        "--max-cell-seconds",
        type=cli_positive_float,
        default=60.0,
        metavar="S",
        help="skip a cell whose run is estimated (from the smaller sizes) to take longer "
        "(default 60)",
    )
    p.add_argument("--memory-budget-gib", type=cli_positive_float, metavar="GIB",
                   help="skip cells estimated to peak above this, kill those that reach it "
                        "(default: half of MemAvailable)")
    p.add_argument("--cell-timeout", type=cli_positive_float, default=1800.0, metavar="S",
                   help="kill a cell after this many seconds (default 1800)")
    p.add_argument(
        "--markdown-doc",
        metavar="FILE",
        help="also write FILE (e.g. BENCHMARKS.md): command, machine, versions, tables, with the "
        "charts copied to docs/bench/ next to it",
    )
    p.add_argument(
        "--from-json",
        metavar="FILE",
        help="do not run anything: re-render results.md, the charts and --markdown-doc from a "
        "results.json",
    )
    p.add_argument(
        "--tmp-dir",
        metavar="DIR",
        help="where to make the temporary data directory (default: the system's)",
    )


def cmd_bench(args: argparse.Namespace, argv: list[str] | None = None) -> int:
    command = "fastaxo bench" + ("" if not argv else " " + shlex.join(argv))
    # Checked before anything runs: a full matrix takes a while.
    bad = None
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        bad = f"--out {args.out} exists and is not a directory"
    elif args.markdown_doc and os.path.isdir(args.markdown_doc):
        bad = (f"--markdown-doc {args.markdown_doc} is a directory; give a file name such as "
               "BENCHMARKS.md")
    if bad:
        print(f"fastaxo bench: error: {bad}", file=sys.stderr)
        return 2
    if args.from_json:
        try:
            with open(args.from_json) as f:
                results = json.load(f)
        except (OSError, ValueError) as exc:
            print(f"fastaxo bench: error: --from-json {args.from_json}: {exc}", file=sys.stderr)
            return 2
        if not isinstance(results, dict) or results.get("schema") != SCHEMA:
            print(
                f"fastaxo bench: error: {args.from_json} is not a {SCHEMA} results file",
                file=sys.stderr,
            )
            return 2
        results["summary"] = summarize(results)
    else:
        sizes = args.sizes or list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
        reps = args.reps or (1 if args.quick else 3)
        o = Options(
            sizes=sizes,
            kernels=args.kernels or list(KERNELS),
            reps=reps,
            quick=args.quick,
            out=args.out,
            shape=args.shape,
            threads=args.threads,
            pad_batch=args.pad_batch,
            max_cell_seconds=args.max_cell_seconds,
            memory_budget=None if args.memory_budget_gib is None else args.memory_budget_gib * GiB,
            cell_timeout=args.cell_timeout,
            markdown_doc=args.markdown_doc,
            command=command,
            tmp_dir=args.tmp_dir,
        )
        try:
            results = run_matrix(o)
        except KeyboardInterrupt:
            print("fastaxo bench: interrupted; nothing written", file=sys.stderr)
            return 130
    written = write_outputs(results, args.out, args.markdown_doc)
    print()
    print(summary_text(results))
    sm = results["summary"]
    print()
    print(
        f"{sm['cells']} cells: {sm['ok']} ran, {sm['skipped']} skipped, {sm['errors']} errors; "
        "checks: "
        f"{sm['checks_passed']} passed, {sm['checks_failed']} FAILED, {sm['baselines_differing']} "
        "baselines "
        f"differing from the reference; {results['wall_s']:,.0f} s"
    )
    print(
        f"wrote {written['json']}, {written['md']}"
        + (
            f", {len(written['charts'])} charts in {args.out}"
            if written["charts"]
            else ", no charts"
        )
        + (f", {written['doc']}" if written.get("doc") else "")
    )
    code = exit_code(results)
    if code:
        print("fastaxo bench: a check failed or a fastaxo cell raised (see above)", file=sys.stderr)
    return code


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--cell":
        sys.exit(child_main(sys.argv[2:]))
    ap = argparse.ArgumentParser(prog="python -m fastaxo._bench.matrix")
    add_arguments(ap)
    ns = ap.parse_args()
    sys.exit(cmd_bench(ns, sys.argv[1:]))
