"""`fastaxo bench`: real (small) runs of the benchmark matrix, its outputs, skips and checks. No mocks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fastaxo._bench import matrix as BM
from fastaxo._bench.util import Digest

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REPO = Path(__file__).resolve().parent.parent
KERNELS = ["hash_rows", "pack_bins", "pack", "pad", "read_parquet"]


def _cli(*args: object, timeout: int = 300) -> subprocess.CompletedProcess:
    # cwd="/": never import fastaxo from a source tree; the compiled extension must load.
    env = {**os.environ, "FASTAXO_REQUIRE_EXTENSION": "1"}
    return subprocess.run([sys.executable, "-m", "fastaxo", "bench", *map(str, args)], capture_output=True,
                          text=True, cwd="/", env=env, timeout=timeout)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One real run: every installed baseline at 10k rows; the 20k cells all skipped by the time limit."""
    d = tmp_path_factory.mktemp("bench")
    out = d / "out"
    doc = d / "doc" / "BENCHMARKS.md"
    doc.parent.mkdir()
    r = _cli("--quick", "--sizes", "10000,20000", "--kernels", ",".join(KERNELS), "--out", out,
             "--max-cell-seconds", "1e-9", "--markdown-doc", doc)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with open(out / "results.json") as f:
        results = json.load(f)
    return {"dir": d, "out": out, "doc": doc, "proc": r, "results": results}


def test_json_schema_and_every_cell_ran_and_passed_its_check(run):
    res = run["results"]
    assert res["schema"] == BM.SCHEMA
    assert res["command"].startswith("fastaxo bench --quick --sizes 10000,20000")
    for key in ("cpu", "cores", "ram_gib", "os", "python"):
        assert res["machine"][key]
    for key in ("fastaxo", "numpy", "pyarrow"):
        assert res["versions"][key]
    assert res["settings"]["sizes"] == [10000, 20000]
    assert res["settings"]["kernels"] == KERNELS
    assert res["settings"]["reps"] == 1
    assert res["summary"]["checks_failed"] == 0 and res["summary"]["ok_overall"]
    ran = [c for c in res["cells"] if c["rows"] == 10000]
    assert {c["kernel"] for c in ran} == set(KERNELS)
    not_run = {(u["kernel"], u["impl"]) for u in res["unavailable"]}
    for k in KERNELS:
        for key, im in res["kernels"][k]["impls"].items():
            assert (k, key) in not_run or any(c["kernel"] == k and c["impl"] == key for c in ran), (k, key)
    for c in ran:
        assert c["status"] == "ok", (c["kernel"], c["impl"], c["status"], c.get("reason"))
        assert c["median_s"] > 0 and len(c["times_s"]) == 1
        assert c["rows_per_s"] == pytest.approx(10000 / c["median_s"])
        assert (c["tokens_per_s"] or c["mb_per_s"]) > 0
        if sys.platform.startswith("linux"):
            assert c["peak_mib"] is not None and c["peak_mib"] >= 0
        assert c["check"]["status"] == "pass", c["check"]
        assert c["check"]["comparisons"] and all(x["pass"] for x in c["check"]["comparisons"])
        if c["role"] == "baseline" and res["kernels"][c["kernel"]]["impls"][c["impl"]]["counterpart"]:
            assert c["fastaxo_speedup"] > 0
    # every kernel compared fastaxo with at least one baseline
    for k in KERNELS:
        assert any(c["kernel"] == k and c["role"] == "baseline" and c["status"] == "ok" for c in ran), k


def test_skipped_cells_carry_their_reason(run):
    res = run["results"]
    skipped = [c for c in res["cells"] if c["rows"] == 20000]
    assert skipped and all(c["status"] == "skipped" for c in skipped)
    for c in skipped:
        assert c["reason"].startswith("time: estimated") and "1e-09 s" in c["reason"], c["reason"]
        assert c["median_s"] is None
    assert res["summary"]["skipped"] == len(skipped)
    md = (run["out"] / "results.md").read_text()
    assert md.count("skipped: time: estimated") == len(skipped)
    for u in res["unavailable"]:  # baselines that are not installed are listed, never silently left out
        assert u["reason"] and u["label"] in md


def test_markdown_has_a_table_per_kernel_and_the_context(run):
    md = (run["out"] / "results.md").read_text()
    for k in KERNELS:
        assert f"## {run['results']['kernels'][k]['title']}" in md
        assert f"({k}_throughput.png)" in md and f"({k}_memory.png)" in md
    assert md.count("| rows | implementation | median | rows/s |") == len(KERNELS)
    assert "fastaxo speed-up" in md and "peak MiB" in md
    assert "fastaxo bench --quick" in md and "## Machine" in md and "## Versions" in md
    out = run["proc"].stdout
    assert "[1/" in out and "kernel" in out and "check / reason" in out  # progress lines + summary table


def test_png_charts_exist_and_are_valid(run):
    for k in KERNELS:
        for what in ("throughput", "memory"):
            p = run["out"] / f"{k}_{what}.png"
            data = p.read_bytes()
            assert data[:8] == PNG_MAGIC and len(data) > 5000, p


def test_markdown_doc_with_relative_chart_links(run):
    doc = run["doc"].read_text()
    assert doc.startswith("# fastaxo benchmarks")
    for k in KERNELS:
        link = f"docs/bench/{k}_throughput.png"
        assert f"]({link})" in doc
        assert (run["doc"].parent / link).read_bytes()[:8] == PNG_MAGIC
    assert "## Command" in doc and "## Machine" in doc and "- pyarrow:" in doc


def test_markdown_doc_keeps_the_sections_of_other_benchmarks(run, tmp_path):
    from fastaxo._bench.report import KEEP_MARKER

    doc = tmp_path / "BENCHMARKS.md"
    kept = f"{KEEP_MARKER}\n\n## Contention\n\n| kernel | ratio |\n"
    doc.write_text("# old matrix text\n\n" + kept)
    r = _cli("--from-json", run["out"] / "results.json", "--out", tmp_path / "out", "--markdown-doc", doc)
    assert r.returncode == 0, r.stderr
    text = doc.read_text()
    assert text.startswith("# fastaxo benchmarks") and "# old matrix text" not in text
    assert text.endswith(kept)


def test_memory_budget_skips_with_reason_and_nothing_runs(tmp_path):
    r = _cli("--sizes", "10000", "--kernels", "hash_rows", "--memory-budget-gib", "0.001", "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["cells"] and all(c["status"] == "skipped" for c in res["cells"])
    assert all(c["reason"].startswith("memory: estimated peak") for c in res["cells"])
    assert res["data"] == {}  # no data generated when every cell is skipped
    assert "memory: estimated peak" in (tmp_path / "results.md").read_text()


def test_charts_skipped_clearly_without_matplotlib(run, tmp_path):
    # A separate interpreter in which `import matplotlib` fails: JSON + Markdown still written.
    code = ("import sys; sys.modules['matplotlib'] = None; from fastaxo.__main__ import main; "
            f"sys.exit(main(['bench', '--from-json', {str(run['out'] / 'results.json')!r}, '--out', {str(tmp_path)!r}]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=120)
    assert r.returncode == 0, r.stderr
    assert "charts skipped: matplotlib is not installed" in r.stdout
    assert "pip install" in r.stdout
    assert (tmp_path / "results.json").exists()
    assert "matplotlib is not installed" in (tmp_path / "results.md").read_text()
    assert not list(tmp_path.glob("*.png"))


@pytest.mark.parametrize("argv", [
    ["--sizes", "abc"],
    ["--sizes", "0"],
    ["--sizes", "1.5"],
    ["--kernels", "nope"],
    ["--kernels", ""],
    ["--reps", "0"],
    ["--max-cell-seconds", "-1"],
    ["--shape", "huge"],
    ["--unknown-flag"],
])
def test_bad_arguments_exit_2(argv, tmp_path):
    r = _cli(*argv, "--out", tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "usage:" in r.stderr
    assert not (tmp_path / "results.json").exists()


def test_unusable_out_or_results_file_exit_2_before_running(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    r = _cli("--quick", "--out", f)
    assert r.returncode == 2 and "not a directory" in r.stderr
    r = _cli("--from-json", tmp_path / "missing.json", "--out", tmp_path / "o")
    assert r.returncode == 2 and "missing.json" in r.stderr
    r = _cli("--from-json", f, "--out", tmp_path / "o")
    assert r.returncode == 2


def _digest(**arrays) -> dict[str, str]:
    d = Digest()
    for k, v in arrays.items():
        d.array(k, np.asarray(v))
    return d.result()


def test_compare_outputs_reports_unequal_outputs():
    a = _digest(input_ids=[[1, 2, 0]], labels=[[1, 2, -100]])
    assert BM.compare_outputs(a, _digest(input_ids=[[1, 2, 0]], labels=[[1, 2, -100]]), ["input_ids", "labels"])[0]
    same, detail = BM.compare_outputs(a, _digest(input_ids=[[1, 2, 0]], labels=[[1, 3, -100]]), ["input_ids", "labels"])
    assert not same and detail == "differs in labels"
    # int32 and int64 values are the same output; a different shape is not
    assert _digest(x=np.array([[1, 2]], np.int32)) == _digest(x=np.array([[1, 2]], np.int64))
    assert not BM.compare_outputs(_digest(x=[[1, 2]]), _digest(x=[[1], [2]]), ["x"])[0]
    assert not BM.compare_outputs(a, {}, ["input_ids"])[0]  # nothing in common is not a pass


def _cell(kernel: str, impl: str, digests: dict[str, str]) -> dict:
    im = BM.KERNELS[kernel].impl(impl)
    c = BM._cell_record(BM.KERNELS[kernel], im, 10)
    c.update(status="ok", median_s=1.0, digests=digests)
    return c


def _results(cells: list[dict]) -> dict:
    return {"cells": cells}


def test_a_broken_check_fails_the_run():
    good = _digest(digests=np.zeros((3, 32), np.uint8))
    bad = _digest(digests=np.ones((3, 32), np.uint8))
    k = BM.KERNELS["hash_rows"]
    # fastaxo differs from the reference (hashlib): a failure, exit code 1
    cells = [_cell("hash_rows", "fastaxo", bad), _cell("hash_rows", "hashlib", good)]
    BM._apply_checks(k, cells)
    assert cells[0]["check"]["status"] == "fail" and "differs in digests" in cells[0]["check"]["detail"]
    assert cells[1]["check"]["status"] == "fail"
    assert BM.summarize(_results(cells))["checks_failed"] == 2
    assert BM.exit_code(_results(cells)) == 1
    # all equal: pass, exit code 0
    cells = [_cell("hash_rows", "fastaxo", good), _cell("hash_rows", "hashlib", good)]
    BM._apply_checks(k, cells)
    assert [c["check"]["status"] for c in cells] == ["pass", "pass"]
    assert BM.exit_code(_results(cells)) == 0


def test_a_peer_that_differs_from_fastaxo_and_the_reference_is_marked_not_failed():
    good = _digest(digests=np.zeros((3, 32), np.uint8))
    bad = _digest(digests=np.ones((3, 32), np.uint8))
    cells = [_cell("hash_rows", "fastaxo", good), _cell("hash_rows", "hashlib", good),
             _cell("hash_rows", "fast_axolotl", bad)]
    BM._apply_checks(BM.KERNELS["hash_rows"], cells)
    assert [c["check"]["status"] for c in cells] == ["pass", "pass", "baseline differs"]
    assert BM.exit_code(_results(cells)) == 0
    # without the reference at that size, the same disagreement is a failure
    cells = [_cell("hash_rows", "fastaxo", good), _cell("hash_rows", "fast_axolotl", bad)]
    BM._apply_checks(BM.KERNELS["hash_rows"], cells)
    assert [c["check"]["status"] for c in cells] == ["fail", "fail"]
    assert BM.exit_code(_results(cells)) == 1


def test_time_estimate_extrapolates_from_smaller_sizes():
    assert BM.estimate_seconds([], 10) is None
    assert BM.estimate_seconds([(10, 1.0)], 100) == pytest.approx(10.0)
    assert BM.estimate_seconds([(10, 1.0), (100, 100.0)], 1000) == pytest.approx(10_000.0)  # quadratic
    assert BM.estimate_seconds([(10, 1.0), (100, 1.0)], 1000) == pytest.approx(10.0)  # never below linear


def test_parse_sizes_and_kernels():
    assert BM.parse_sizes("100k,10000,1M") == [10_000, 100_000, 1_000_000]
    assert BM.parse_kernels("read,pad") == ["pad", "read_parquet", "read_jsonl", "read_arrow"]


def test_bench_tokenize_quick_ids_equal_hf():
    """bench/bench_tokenize.py --quick: a real small run; fastaxo's ids are HF's on every
    benchmarked document (cold, warm, 2 threads), and every row is in the JSON lines."""
    import tokenizer_data

    env = {**os.environ, "FASTAXO_REQUIRE_EXTENSION": "1"}
    r = subprocess.run([sys.executable, str(REPO / "bench" / "bench_tokenize.py"), "--quick"],
                       capture_output=True, text=True, cwd="/", env=env, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "fastaxo vs HF ids: 0 differing documents of " in r.stdout, r.stdout[-3000:]
    recs = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    try:
        tokenizer_data.llama3_json()
        toks = {"qwen3", "llama3"}
    except FileNotFoundError:
        toks = {"qwen3"}
    one = [x for x in recs if x["section"] == "one_thread"]
    assert {(x["tokenizer"], x["corpus"]) for x in one} == {
        (t, c) for t in toks for c in ("english", "code", "multi")}
    fx = [x for x in one if x["method"].startswith("fastaxo")]
    assert len(fx) == 2 * 3 * len(toks)
    assert all(x["docs_differing_from_hf"] == 0 and x["mb_per_s"] > 0 and x["bytes"] >= 300_000
               for x in fx)
    threads = [x for x in recs if x["section"] == "threads"]
    assert len(threads) == 2 * 3 * len(toks)
    assert all(x["docs_differing_from_1_thread"] == 0 for x in threads)
