"""Benchmark: PackedCollator against the baselines, per training batch of packed rows.

    python bench/bench_collator.py                      # every shape, 15 reps, peak memory
    python bench/bench_collator.py --reps 5 --no-memory

Shapes: ``rows x width`` packed rows of lognormal sequences (mean ~300 tokens, clipped to the
width), packed by ``fastaxo.pack`` (bfd); the rows reach the collator as a datasets ``Dataset``
gives them (dicts of Python lists, unpadded, as ``fastaxo prepare`` writes them).

- varlen (flash attention): ``PackedCollator(attn_implementation="flash_attention_2")`` on the
  packed rows against transformers' ``DataCollatorWithFlattening(return_flash_attn_kwargs=True)``
  on the same sequences (its input: one dict per sequence). Outputs are compared tensor for
  tensor.
- mask (sdpa): ``PackedCollator(attn_implementation="sdpa")`` against a plain-Python collator
  that finds the sequences from the position ids row by row, pads the lists and builds the same
  block-diagonal boolean mask with torch broadcasting. Outputs are compared tensor for tensor.

Medians of interleaved runs; peak RSS (VmHWM) of one collate call per implementation in a fresh
process (``--child``, after one warm-up call), over the process's RSS before the call. The
outputs are the same size for both implementations of a layout; the mask layout's 4-D mask is
rows x width x width bytes (the kernel maps the zeroed memory lazily: only what is written or
read counts).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt_table, interleaved, machine, median, reset_peak, status_kib  # noqa: E402

SHAPES = [(4, 1024), (8, 2048), (8, 4096), (16, 4096)]


def make(rows: int, width: int, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """(packed rows as dicts of lists, the same sequences as dicts of lists in packed order)."""
    import fastaxo

    rng = np.random.default_rng(seed)
    seqs: list[np.ndarray] = []
    while sum(map(len, seqs)) < rows * width * 1.1:
        n = int(np.clip(rng.lognormal(5.4, 0.8), 2, width))
        seqs.append(rng.integers(3, 32000, n).astype(np.int64))
    labels = [np.where(np.arange(len(s)) < len(s) // 3, -100, s) for s in seqs]
    packed = fastaxo.pack(seqs, width, labels=labels, layout="flat")
    table = packed.to_arrow().slice(0, rows)
    packed_rows = table.to_pylist()
    order = packed.bins.indices[:int(packed.bins.offsets[rows])]
    flat = [{"input_ids": seqs[i].tolist(), "labels": labels[i].tolist()} for i in order]
    return packed_rows, flat


def plain_mask(rows: list[dict]):
    """The plain-Python collator for sdpa: sequences from the position ids, lists padded, the
    block-diagonal mask by broadcasting."""
    import torch

    width = max(len(r["input_ids"]) for r in rows)
    ids, labs, pos, seg = [], [], [], []
    for r in rows:
        n = len(r["input_ids"])
        p = r["position_ids"]
        s, cur, lab = [], 0, list(r["labels"])
        for i in range(n):
            if i and p[i] != p[i - 1] + 1:
                cur += 1
            if i == 0 or p[i] != p[i - 1] + 1:
                lab[i] = -100
            s.append(cur)
        positions = [p[i] if True else 0 for i in range(n)]
        tail = width - n
        ids.append(list(r["input_ids"]) + [0] * tail)
        labs.append(lab + [-100] * tail)
        pos.append(positions + list(range(tail)))
        seg.append(s + [cur + 1] * tail)
    seg_t = torch.tensor(seg)
    causal = torch.ones(width, width, dtype=torch.bool).tril()
    mask = (seg_t[:, :, None] == seg_t[:, None, :]) & causal
    return {"input_ids": torch.tensor(ids), "labels": torch.tensor(labs),
            "position_ids": torch.tensor(pos), "attention_mask": mask[:, None]}


def impls(rows: list[dict], flat: list[dict]) -> dict:
    from transformers import DataCollatorWithFlattening

    from fastaxo.integrations.transformers import PackedCollator

    varlen = PackedCollator(attn_implementation="flash_attention_2")
    mask = PackedCollator(attn_implementation="sdpa")
    hf = DataCollatorWithFlattening(return_flash_attn_kwargs=True)
    return {
        "varlen: fastaxo PackedCollator": lambda: varlen(rows),
        "varlen: transformers DataCollatorWithFlattening": lambda: hf(flat),
        "mask: fastaxo PackedCollator": lambda: mask(rows),
        "mask: plain Python + torch": lambda: plain_mask(rows),
    }


def same(a: dict, b: dict) -> bool:
    import torch

    if set(a) != set(b):
        return False
    for k in a:
        if isinstance(a[k], torch.Tensor):
            if a[k].dtype != b[k].dtype or not torch.equal(a[k], b[k]):
                return False
        elif a[k] != b[k]:
            return False
    return True


def child(name: str, rows_n: int, width: int) -> None:
    rows, flat = make(rows_n, width)
    fn = impls(rows, flat)[name]
    fn()  # imports (torch) and first-call caches are not the collator's memory
    base = status_kib("VmRSS") or 0
    reset_peak()
    fn()
    print(json.dumps({"peak_mib": ((status_kib("VmHWM") or 0) - base) / 1024}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--child", nargs=3)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], int(a.child[1]), int(a.child[2]))
        return
    from _common import child_peak

    print(f"bench_collator on {machine()}; {a.reps} interleaved reps per shape")
    table = []
    for rows_n, width in SHAPES:
        rows, flat = make(rows_n, width)
        fns = impls(rows, flat)
        names = list(fns)
        outs = {k: f() for k, f in fns.items()}
        ok_varlen = same(outs[names[0]], outs[names[1]])
        ok_mask = same(outs[names[2]], outs[names[3]])
        times = interleaved(fns, a.reps)
        seqs = len(flat)
        for i, k in enumerate(names):
            pair = names[i - 1] if i % 2 else names[i + 1]
            ratio = median(times[pair]) / median(times[k]) if i % 2 == 0 else None
            peak = "" if a.no_memory else f"{child_peak(__file__, [k, str(rows_n), str(width)])['peak_mib']:.1f}"
            table.append([f"{rows_n} x {width} ({seqs} seqs)", k, f"{median(times[k]) * 1e3:.2f}",
                          "" if ratio is None else f"{ratio:.1f}x", peak,
                          "yes" if (ok_varlen if i < 2 else ok_mask) else "NO"])
    print(fmt_table(["batch", "collator", "median ms", "fastaxo speed-up", "peak MiB",
                     "identical"], table))


if __name__ == "__main__":
    main()
