"""The matrix's results as text: summary, tables, notes, results.md and BENCHMARKS.md."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from typing import Any

from fastaxo._bench.util import fmt_mib, fmt_n, fmt_rate, fmt_time

# ============================================================================ reports


def _speedup_text(c: dict) -> str:
    x = c.get("fastaxo_speedup")
    return "-" if x is None else (f"{x:,.1f}x" if x < 100 else f"{x:,.0f}x")


def _check_text(c: dict) -> str:
    ch = c.get("check")
    if not ch:
        return "-"
    if ch["status"] == "pass":
        return "pass (= " + ", ".join(x["against"] for x in ch["comparisons"] if x["pass"]) + ")"
    return f"{ch['status'].upper()}: {ch['detail']}"


def kernel_table(results: dict[str, Any], kname: str) -> str:
    meta = results["kernels"][kname]
    unit = meta["unit"]
    cells = [c for c in results["cells"] if c["kernel"] == kname]
    lines = [
        f"| rows | implementation | median | rows/s | {unit} | fastaxo speed-up | peak MiB | check "
        "|",
        "|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for c in sorted(cells, key=lambda c: (c["rows"], list(meta["impls"]).index(c["impl"]))):
        label = f"**{c['label']}**" if c["role"] == "fastaxo" else c["label"]
        if c["status"] != "ok":
            lines.append(
                f"| {fmt_n(c['rows'])} | {label} | {c['status']}: {c['reason']} | | | | | |"
            )
            continue
        tput = fmt_rate(c["tokens_per_s"]) if unit == "tokens/s" else (
            "-" if c["mb_per_s"] is None else f"{c['mb_per_s']:,.1f}")
        lines.append(
            f"| {fmt_n(c['rows'])} | {label} | {fmt_time(c['median_s'])} | "
            f"{fmt_rate(c['rows_per_s'])} | "
            f"{tput} | {_speedup_text(c)} | {fmt_mib(c['peak_mib'])} | {_check_text(c)} |"
        )
    return "\n".join(lines)


def kernel_notes(results: dict[str, Any], kname: str) -> str:
    meta = results["kernels"][kname]
    out = [meta["about"], ""]
    for key, im in meta["impls"].items():
        vs = ""
        if im["counterpart"]:
            other = meta["impls"][im["counterpart"]]["label"]
            vs = f" Speed-up: this baseline's median / {other}'s."
        out.append(f"- **{im['label']}** (`{key}`, {im['role']}): {im['what']}.{vs}")
    out.append("")
    for g, eq in meta["groups"].items():
        members = [im["label"] for im in meta["impls"].values() if im["group"] == g]
        if len(members) > 1:
            out.append(f"- Check ({', '.join(members)}): {eq}.")
    return "\n".join(out)


def render_markdown(
    results: dict[str, Any],
    images: dict[str, list[tuple[str, str]]] | None,
    image_prefix: str = "",
    title: str = "fastaxo bench results",
    doc: bool = False,
) -> str:
    s = results["settings"]
    m = results["machine"]
    v = results["versions"]
    out = [f"# {title}", ""]
    if doc:
        out += [
            f"Made by `fastaxo bench` on {results['started'][:10]}; regenerate with the command "
            "below "
            "(`--markdown-doc BENCHMARKS.md` writes this file and its charts under `docs/bench/`).",
            "",
        ]
    out += [
        "## Command",
        "",
        "```",
        results["command"],
        "```",
        "",
        f"Wall time {results['wall_s']:,.0f} s; fastaxo git commit: "
        f"{results.get('git_commit') or 'n/a (installed package)'}.",
        "",
        "## Machine",
        "",
        f"- CPU: {m['cpu']} ({m['cores']} cores, {m['machine']})",
        f"- RAM: {m['ram_gib']} GiB ({m['mem_available_gib']} GiB available at the start)",
        f"- OS: {m['os']}",
        f"- Python: {m['python']}",
        "",
        "## Versions",
        "",
    ]
    out += [f"- {k}: {val}" for k, val in v.items() if val is not None]
    missing = [k for k, val in v.items() if val is None]
    if images and v.get("matplotlib") is None:
        # the run had no matplotlib; the charts were drawn from results.json afterwards
        try:
            import matplotlib

            missing = [k for k in missing if k != "matplotlib"]
            out.append(
                f"- matplotlib: {matplotlib.__version__} (the charts, drawn afterwards from "
                "results.json "
                "with `fastaxo bench --from-json`; the run itself had none)"
            )
        except ImportError:
            pass
    if missing:
        out.append(f"- not installed: {', '.join(missing)}")
    cfg = results.get("fastaxo_config", {})
    ext = {True: "loaded", False: "MISSING (pure-Python fallback)"}.get(
        cfg.get("extension"), cfg.get("extension")
    )
    out += [
        f"- fastaxo build: extension {ext}, OpenMP {cfg.get('openmp')}, SHA-256 path "
        f"{cfg.get('sha256')}, threads used {s['threads']}",
        "",
        "## Method",
        "",
        f"- Sizes: {', '.join(fmt_n(x) for x in s['sizes'])} rows; {s['reps']} timed run(s) per "
        "cell, the median "
        "is reported. Data: "
        + s["shape_description"]
        + "; generated (seeded) under a temporary directory.",
        "- Each cell (kernel, implementation, rows) runs in a fresh Python process: it loads the "
        "data and "
        "builds the input form the implementation takes (lists of Python objects for the "
        "plain-Python "
        "baselines and fast-axolotl: not timed), then runs once for the check and the peak memory, "
        "then "
        "the timed runs; before each timed run it touches (untimed) as much fresh memory as the "
        "first run's "
        "peak, so no implementation pays for pages the VM took back after the previous run.",
        f"- Threads: fastaxo {s['threads']}; fast-axolotl num_threads=0 (its own choice) where it "
        "takes "
        "one; pyarrow and HF datasets their defaults; the Python baselines one.",
        "- peak MiB: the process's VmHWM during that first run minus its RSS just before it (the "
        "loaded "
        "input excluded).",
        "- Checks: fastaxo's output is compared with each baseline of its group (SHA-256 of every "
        "output "
        "array); `baseline differs` marks a baseline whose output differs from both fastaxo and "
        "the "
        "reference implementation of the group.",
        f"- Skips: a cell is skipped when its estimated peak exceeds the memory budget "
        f"({s['memory_budget_gib']} GiB: half of MemAvailable unless `--memory-budget-gib`), when "
        "one run "
        f"is estimated (from the smaller sizes) to take over {s['max_cell_seconds']:g} s, or when "
        "the data "
        "would not fit on the temp disk. Every skip is listed with its reason.",
        "- fastaxo speed-up: the baseline's median time / the median time of the fastaxo "
        "implementation "
        "named in the notes of each kernel (same input, same output or the stated equivalence).",
        "",
    ]
    if results["unavailable"]:
        out += ["### Baselines not run", ""]
        out += [f"- {u['kernel']} / {u['label']}: {u['reason']}" for u in results["unavailable"]]
        out.append("")
    sm = results["summary"]
    out += [
        "## Summary",
        "",
        f"{sm['cells']} cells: {sm['ok']} ran, {sm['skipped']} skipped, {sm['errors']} errors; "
        "checks: "
        f"{sm['checks_passed']} passed, {sm['checks_failed']} failed, {sm['baselines_differing']} "
        "baselines "
        f"differing from the reference.",
        "",
    ]
    for kname in results["kernels"]:
        meta = results["kernels"][kname]
        out += [
            f"## {meta['title']}",
            "",
            kernel_notes(results, kname),
            "",
            kernel_table(results, kname),
            "",
        ]
        for alt, fname in (images or {}).get(kname, []):
            out += [f"![{alt}]({image_prefix}{fname})", ""]
        if images is not None and not images.get(kname):
            out += ["_No chart: no cell of this kernel ran._", ""]
    if images is None:
        out += [
            "_Charts were not drawn: matplotlib is not installed (`pip install 'fastaxo[bench]'` "
            "or "
            "`pip install matplotlib`)._",
            "",
        ]
    return "\n".join(out)


def summary_text(results: dict[str, Any]) -> str:
    rows = []
    for c in results["cells"]:
        if c["status"] == "ok":
            rows.append(
                [
                    c["kernel"],
                    fmt_n(c["rows"]),
                    c["label"],
                    fmt_time(c["median_s"]),
                    fmt_rate(c["rows_per_s"]),
                    _speedup_text(c),
                    fmt_mib(c["peak_mib"]),
                    (c.get("check") or {}).get("status", "-"),
                ]
            )
        else:
            rows.append(
                [
                    c["kernel"],
                    fmt_n(c["rows"]),
                    c["label"],
                    c["status"],
                    "",
                    "",
                    "",
                    (c["reason"] or "")[:60],
                ]
            )
    headers = [
        "kernel",
        "rows",
        "implementation",
        "median",
        "rows/s",
        "fastaxo x",
        "peak MiB",
        "check / reason",
    ]
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    fmt = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(headers), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


#: In BENCHMARKS.md, what follows this line was written by another benchmark and is kept when
#: the matrix rewrites the file.
KEEP_MARKER = "<!-- below: sections of other benchmarks (kept when fastaxo bench rewrites this) -->"


def write_outputs(results: dict[str, Any], out_dir: str, markdown_doc: str | None,
                  log: Callable[[str], None] = print) -> dict[str, Any]:
    """results.json, results.md, the charts (when matplotlib is there) and optionally BENCHMARKS.md.
    """
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    images: dict[str, list[tuple[str, str]]] | None
    try:
        from fastaxo._bench import charts

        images = charts.write_charts(results, out_dir)
    except ImportError as exc:
        images = None
        log(f"charts skipped: matplotlib is not installed ({exc}); install it with "
            "`pip install 'fastaxo[bench]'` (or `pip install matplotlib`) and re-render with "
            f"`fastaxo bench --from-json {os.path.join(out_dir, 'results.json')} --out {out_dir}`")
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(render_markdown(results, images))
    written = {
        "json": os.path.join(out_dir, "results.json"),
        "md": os.path.join(out_dir, "results.md"),
        "charts": [os.path.join(out_dir, fn) for v in (images or {}).values() for _a, fn in v],
    }
    if markdown_doc:
        doc_dir = os.path.dirname(os.path.abspath(markdown_doc))
        rel = "docs/bench/"
        img_dir = os.path.join(doc_dir, rel)
        os.makedirs(doc_dir, exist_ok=True)
        if images:
            os.makedirs(img_dir, exist_ok=True)
            for v in images.values():
                for _a, fn in v:
                    shutil.copyfile(os.path.join(out_dir, fn), os.path.join(img_dir, fn))
        kept = ""  # sections other benchmarks wrote (bench/bench_contention.py) stay
        if os.path.isfile(markdown_doc):
            with open(markdown_doc) as f:
                old = f.read()
            if KEEP_MARKER in old:
                kept = "\n" + old[old.index(KEEP_MARKER):]
        with open(markdown_doc, "w") as f:
            f.write(render_markdown(results, images, rel, title="fastaxo benchmarks", doc=True))
            f.write(kept)
        written["doc"] = markdown_doc
    return written
