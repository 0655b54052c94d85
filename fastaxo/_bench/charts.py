"""PNG charts of `fastaxo bench` results (matplotlib, Agg canvas; optional dependency).

Per kernel: throughput against rows (log-log, one line per implementation, a marker per
measured point) and peak memory against rows (log-log). Importing this module raises
ImportError when matplotlib is missing; the caller then writes JSON + Markdown only.
"""

from __future__ import annotations

import math
import os
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from fastaxo._bench.util import fmt_n, machine_short

COLORS = {
    "fastaxo": "#1f77b4",
    "fastaxo_list": "#17becf",
    "fastaxo_ff": "#9467bd",
    "fastaxo_nf": "#9467bd",
    "hashlib": "#ff7f0e",
    "python": "#ff7f0e",
    "pyarrow": "#ff7f0e",
    "numpy": "#8c564b",
    "fast_axolotl": "#d62728",
    "axolotl": "#e377c2",
    "hf_streaming": "#2ca02c",
}
MARKERS = {
    "fastaxo": "o",
    "fastaxo_list": "s",
    "fastaxo_ff": "D",
    "fastaxo_nf": "D",
    "hashlib": "^",
    "python": "^",
    "pyarrow": "^",
    "numpy": "v",
    "fast_axolotl": "X",
    "axolotl": "P",
    "hf_streaming": "v",
}
MEM_FLOOR_MIB = 0.05


def _human(x: float, _pos: Any = None) -> str:
    if x <= 0:
        return "0"
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= div:
            v = x / div
            return f"{v:.0f}{suf}" if v >= 10 or v == int(v) else f"{v:.1f}{suf}"
    if x >= 1:
        return f"{x:.0f}"
    return f"{x:g}"


def _series(
    results: dict[str, Any], kname: str, value: str
) -> list[tuple[str, dict, list[tuple[int, float]], list[str]]]:
    meta = results["kernels"][kname]
    cells = [c for c in results["cells"] if c["kernel"] == kname]
    out = []
    for key, im in meta["impls"].items():
        mine = sorted((c for c in cells if c["impl"] == key), key=lambda c: c["rows"])
        if not mine:
            continue
        pts = [
            (c["rows"], c[value]) for c in mine if c["status"] == "ok" and c.get(value) is not None
        ]
        missing = [
            f"{fmt_n(c['rows'])}: {(c.get('reason') or c['status']).split(':')[0]}"
            for c in mine
            if c["status"] != "ok"
        ]
        out.append((key, im, pts, missing))
    return out


def _setup_x(ax: Any, sizes: list[int]) -> None:
    ax.set_xscale("log")
    lo, hi = min(sizes), max(sizes)
    ax.set_xlim(lo / 1.8, hi * 1.8)
    ax.set_xticks(sizes)
    ax.set_xticklabels([fmt_n(s) for s in sizes])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("rows (log scale)")


def _figure(results: dict[str, Any], kname: str, what: str) -> tuple[Figure, Any]:
    fig = Figure(figsize=(10, 5.4), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    s = results["settings"]
    title = results["kernels"][kname]["title"]
    how = (f"median of {s['reps']} run(s)" if what == "throughput"
           else "the first run of each cell, fresh process")
    ax.set_title(
        f"{title}: {what}\n{machine_short(results['machine'])}; shape {s['shape']}, {how}",
        fontsize=10,
    )
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.12)
    return fig, ax


def _plot(ax: Any, series: list, floor: float | None = None) -> bool:
    clamped = False
    for key, im, pts, missing in series:
        label = im["label"]
        if missing:
            label += "\n  (not run at " + "; ".join(missing) + ")"
        if not pts:
            ax.plot([], [], label=label + " [no point]", color=COLORS.get(key, "gray"))
            continue
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        if floor is not None:
            clamped |= any(y < floor for y in ys)
            ys = [max(y, floor) for y in ys]
        fx = im["role"] == "fastaxo"
        ax.plot(
            xs,
            ys,
            label=label,
            color=COLORS.get(key),
            marker=MARKERS.get(key, "o"),
            markersize=7,
            linewidth=2.2 if fx else 1.6,
            linestyle="-" if fx else "--",
        )
    return clamped


def _setup_y(ax: Any) -> None:
    """Log y axis with readable labels: 1-2-5 steps when the data spans few decades."""
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    decades = math.log10(hi / lo) if lo > 0 and hi > lo else 1.0
    subs = (
        (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0)
        if decades <= 1.2
        else (1.0, 2.0, 5.0)
        if decades <= 3.5
        else (1.0,)
    )
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(_human))
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs=tuple(range(1, 10))))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _finish(fig: Figure, ax: Any, path: str) -> None:
    ax.legend(
        loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False, borderaxespad=0.0
    )
    fig.savefig(path, bbox_inches="tight")


def throughput_chart(results: dict[str, Any], kname: str, path: str) -> None:
    fig, ax = _figure(results, kname, "throughput")
    series = _series(results, kname, "rows_per_s")
    _plot(ax, series)
    _setup_x(ax, results["settings"]["sizes"])
    _setup_y(ax)
    ax.set_ylabel("throughput (rows/s, log scale; higher is better)")
    _finish(fig, ax, path)


def memory_chart(results: dict[str, Any], kname: str, path: str) -> None:
    fig, ax = _figure(results, kname, "peak memory")
    series = _series(results, kname, "peak_mib")
    clamped = _plot(ax, series, floor=MEM_FLOOR_MIB)
    _setup_x(ax, results["settings"]["sizes"])
    _setup_y(ax)
    ax.set_ylabel("peak RSS above the loaded input (MiB, log scale; lower is better)")
    if clamped:
        ax.text(0.01, 0.01, f"values below {MEM_FLOOR_MIB} MiB are drawn at {MEM_FLOOR_MIB}",
                transform=ax.transAxes, fontsize=7, alpha=0.7)
    _finish(fig, ax, path)


def write_charts(results: dict[str, Any], out_dir: str) -> dict[str, list[tuple[str, str]]]:
    """Two PNGs per kernel in out_dir; returns {kernel: [(alt text, file name), ...]}."""
    os.makedirs(out_dir, exist_ok=True)
    out: dict[str, list[tuple[str, str]]] = {}
    for kname in results["kernels"]:
        if not any(c["kernel"] == kname and c["status"] == "ok" for c in results["cells"]):
            continue  # nothing ran (all skipped): the Markdown table says why
        files = []
        fn = f"{kname}_throughput.png"
        throughput_chart(results, kname, os.path.join(out_dir, fn))
        files.append((f"{kname}: throughput (rows/s) against rows", fn))
        fn = f"{kname}_memory.png"
        memory_chart(results, kname, os.path.join(out_dir, fn))
        files.append((f"{kname}: peak memory (MiB) against rows", fn))
        out[kname] = files
    return out
