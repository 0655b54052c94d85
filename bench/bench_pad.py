"""Benchmark: padding (collator micro-batches, whole arrays, a whole epoch of micro-batches).

    python bench/bench_pad.py                                   # 10k, 100k, 1M, 10M; both shapes
    python bench/bench_pad.py --sizes 10000,100000 --reps 1 --no-memory
    python bench/bench_pad.py --only micro --json out.jsonl

Data as in bench_pack.py (bench/_baselines_pack.py, fixed seeds): int32 tokens, labels with the
first 30% of each row -100; shapes "peer" (uniform 10-100 tokens) and "chat" (lognormal mean
~300, clipped to [1, 4096]). Output everywhere: input_ids (pad 0), attention_mask (1/0),
labels (pad -100), int64, right padding to the longest row.

Sections (--only, repeatable):
  micro    one 16-row collator micro-batch of chat rows, --micro-batches different batches per
           timed round (microseconds per batch): `fastaxo.pad` from a list of NumPy arrays and
           from a list of lists, against a plain-Python padder (lists, then np.array; and the
           same with list output, like fast-axolotl's), NumPy
           per-row copies into preallocated arrays, `torch.nn.utils.rnn.pad_sequence`
           (batch_first, on int64 tensors made before timing; the mask from the lengths),
           fast-axolotl 0.2.0 `pad_sequences` (called for input_ids and labels; it makes no
           mask and returns lists: its time excludes any conversion) and transformers'
           `DataCollatorForSeq2Seq` (return_tensors="np", a tokenizer built locally, no download).
  pad      whole arrays of --sizes rows: `fastaxo.pad` on Arrow ListArrays (and on the list of
           NumPy arrays the NumPy / torch baselines get) against the same baselines; output
           bytes per second and its share of this machine's memcpy bandwidth.
  batches  a whole epoch of 16-row micro-batches, each padded to its own longest row:
           `fastaxo.pad_batches` in one call against the Python padder, NumPy, torch,
           DataCollatorForSeq2Seq, fast-axolotl and `fastaxo.pad` called per batch.
  memory   peak RSS in a fresh process (VmHWM reset after the data is generated) of
           `fastaxo.pad`, NumPy per-row copies and `fastaxo.pad_batches` against their output.

Identical output is checked in the run (SHA-256 of every array, values as int64, and of every
row's width) and printed. Baselines that would be too slow or too big at a size run on a
prefix (--py-max-cells for the Python-level ones, --numpy-max-rows for NumPy / torch / fastaxo
per batch), next to fastaxo on the same prefix; rates are per row. Outputs bigger than
--max-out-gib are produced in chunks of rows of --out-chunk-gib (each chunk padded to its own
longest row; every implementation gets the same chunks); cases whose whole output would exceed
--pad-max-total-gib are skipped with a note (1M chat rows padded to 4096 are 98 GB).

Fairness settings: torch runs with 1 intra-op thread (--torch-threads; what DataLoader workers
use: with 2 threads on a 2-core machine pad_sequence was ~7x slower and its spinning OpenMP
threads slowed the implementation timed after it 3-7x). Before each timed call of the pad and
batches cases, up to --prefault-gib of memory (the largest output chunk) is touched and freed,
untimed, as in bench_pack.py (freed memory goes back to the hypervisor after ~1 s on these VMs
and first touch then costs 2-10x more, whichever implementation happens to come next).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _baselines_pack as B  # noqa: E402
from _baselines_pack import Impl, Table, fmt_n, ms, rate, yesno  # noqa: E402
from _common import JsonRecorder, child_peak, machine, release_freed_memory, reset_peak, status_kib  # noqa: E402

KEYS = ["input_ids", "attention_mask", "labels"]
FA_KEYS = ["input_ids", "labels"]
BATCH = 16

fastaxo: Any = None
fast_axolotl: Any = None
torch: Any = None
COLLATOR: Any = None
NOTES: list[str] = []

PY = "Python padder (lists -> np.array)"
PYL = "Python padder (lists only, no np.array)"
PREFIX_NOTE = ("rows \"m of n\": the row ran on the first m of the n rows only (that baseline's limit at this size); "
               "its ratio is against fastaxo on the same m rows, and its rates are per row.")
NP = "NumPy per-row copies"
TORCH = "torch pad_sequence (int64 tensors)"
FA = "fast-axolotl pad_sequences x2 (lists, no mask)"
COL = "DataCollatorForSeq2Seq (np)"
FXR = "fastaxo.pad (Arrow)"
FXA = "fastaxo.pad (list of NumPy arrays)"
FXL = "fastaxo.pad (list of lists)"
FXB = "fastaxo.pad_batches (one call)"
FXPB = "fastaxo.pad per batch (list of NumPy arrays)"


def note(msg: str) -> None:
    NOTES.append(msg)
    print(f"# {msg}", file=sys.stderr, flush=True)


def load_baselines(torch_threads: int) -> None:
    global fast_axolotl, torch, COLLATOR
    try:
        import torch as t

        torch = t
        if torch_threads:
            torch.set_num_threads(torch_threads)
        note(f"torch intra-op threads: {torch.get_num_threads()} (--torch-threads; 1 is what DataLoader workers use, "
             "and with 2 on a 2-core machine pad_sequence ran ~7x slower and its spinning OpenMP threads slowed the "
             "implementation timed next 3-7x)")
    except ImportError:  # pragma: no cover
        note("torch not installed: its rows are skipped")
    try:
        import transformers
        from transformers import DataCollatorForSeq2Seq

        transformers.logging.set_verbosity_error()
        t0 = time.perf_counter()
        COLLATOR = DataCollatorForSeq2Seq(B.local_tokenizer(), label_pad_token_id=B.LABEL_PAD_ID,
                                          return_tensors="np")
        note(f"DataCollatorForSeq2Seq with a locally built tokenizer (pad id {B.PAD_ID}, no download): "
             f"constructed in {time.perf_counter() - t0:.2f} s")
    except Exception as exc:  # pragma: no cover
        note(f"DataCollatorForSeq2Seq not available ({exc!r}): its rows are skipped")
    fast_axolotl = B.import_fast_axolotl(note)


def load_fastaxo(skip: bool = False) -> None:
    global fastaxo
    fastaxo = B.import_fastaxo(skip, ("pad", "pad_batches"), note)


class Inputs:
    """The same rows in every input form the implementations take (made before timing)."""

    def __init__(self, rows: B.Rows, forms: set[str]):
        self.rows = rows
        self.arrow = (rows.arrow("input_ids"), rows.arrow("labels")) if "arrow" in forms else None
        want_arrays = bool(forms & {"arrays", "tensors"})
        want_lists = bool(forms & {"lists", "features"})
        self.arrays = (rows.arrays("input_ids"), rows.arrays("labels")) if want_arrays else None
        self.lists = (rows.lists("input_ids"), rows.lists("labels")) if want_lists else None
        self.tensors = None
        if "tensors" in forms and torch is not None:
            self.tensors = ([torch.from_numpy(x.astype(np.int64)) for x in self.arrays[0]],
                            [torch.from_numpy(x.astype(np.int64)) for x in self.arrays[1]])
        self.features = None
        if "features" in forms and COLLATOR is not None:
            self.features = [{"input_ids": i, "attention_mask": [1] * len(i), "labels": lab}
                             for i, lab in zip(*self.lists)]


def pad_fns(inp: Inputs, members: set[str], nt: int | None) -> dict[str, Callable[[int, int], Any]]:
    """name -> pad(rows [s, e)) returning a dict of arrays / tensors / lists."""
    f: dict[str, Callable[[int, int], Any]] = {}
    if PY in members and inp.lists:
        ids, labs = inp.lists
        f[PY] = lambda s, e: B.py_pad(ids[s:e], labs[s:e])
    if PYL in members and inp.lists:
        ids, labs = inp.lists
        f[PYL] = lambda s, e: B.py_pad_lists(ids[s:e], labs[s:e])
    if NP in members and inp.arrays:
        ida, laba = inp.arrays
        f[NP] = lambda s, e: B.numpy_pad(ida[s:e], laba[s:e])
    if TORCH in members and inp.tensors:
        idt, labt = inp.tensors
        f[TORCH] = lambda s, e: B.torch_pad(idt[s:e], labt[s:e])
    if FA in members and fast_axolotl is not None and inp.lists:
        ids, labs = inp.lists
        f[FA] = lambda s, e: {"input_ids": fast_axolotl.pad_sequences(ids[s:e], None, B.PAD_ID),
                              "labels": fast_axolotl.pad_sequences(labs[s:e], None, B.LABEL_PAD_ID)}
    if COL in members and COLLATOR is not None and inp.features:
        feats = inp.features
        f[COL] = lambda s, e: COLLATOR(feats[s:e])
    if fastaxo is not None:
        if FXR in members and inp.arrow:
            ida_, laba_ = inp.arrow
            f[FXR] = lambda s, e: fastaxo.pad(ida_.slice(s, e - s), labels=laba_.slice(s, e - s), num_threads=nt)
        if FXA in members and inp.arrays:
            ida, laba = inp.arrays
            f[FXA] = lambda s, e: fastaxo.pad(ida[s:e], labels=laba[s:e], num_threads=nt)
        if FXL in members and inp.lists:
            ids, labs = inp.lists
            f[FXL] = lambda s, e: fastaxo.pad(ids[s:e], labels=labs[s:e], num_threads=nt)
    return f


def keys_of(name: str) -> list[str]:
    return FA_KEYS if name == FA else KEYS


def emit_rows(section: str, shape: B.Shape, n_total: int, m: int, run: B.GroupedRun, out: Table, rec: JsonRecorder,
              memcpy: dict[str, float], how: str, per_batch: int | None = None) -> None:
    mrows = fmt_n(m) + (f" of {fmt_n(n_total)}" if m < n_total else "")
    for name in run.per_rep:
        im = run.impls[name]
        t = run.median(name)
        same = run.same(name)
        label = ""
        if same is not None:
            what = "input_ids, labels" if name == FA else "all arrays"
            label = f"{what} = {im.check_ref}: {yesno(same)}"
            out.checks.append(f"{shape.name} {mrows} {section}: {name}: {label}")
        elif im.check_ref is None and name.startswith("fastaxo"):
            label = "(reference)"
        t_ref = run.median(im.ref) if im.ref in run.per_rep else None
        ob = run.out_bytes.get(name, 0)
        tok = run.tokens
        pct = {}
        if memcpy and name in (FXR, FXB):
            pct = {f"pct_of_{k.replace(' ', '_')}": 100 * (ob / t) / v for k, v in memcpy.items()}
        r = {"bench": section, "shape": shape.name, "size": n_total, "rows": m, "tokens": tok, "impl": name,
             "median_s": t, "rows_per_s": m / t, "tokens_per_s": tok / t, "out_bytes": ob, "out_gb_per_s": ob / t / 1e9,
             "x_fastaxo_faster": (t / t_ref) if t_ref else None, "vs": im.ref, "identical": same, "check": label,
             "how": how, **pct}
        if per_batch:
            r["us_per_batch"] = t / per_batch * 1e6
            for other, key in ((FXL, "x_fastaxo_lists_faster"), (FXA, "x_fastaxo_arrays_faster")):
                if other in run.per_rep:
                    r[key] = t / run.median(other)
        rec.append(r)
        print(json.dumps(r), flush=True)
        row = [shape.name, mrows, name]
        if per_batch:
            row.append(f"{t / per_batch * 1e6:,.1f}")
        row += [ms(t), rate(m / t), rate(tok / t), f"{ob / t / 1e9:,.2f}", f"{t / t_ref:,.1f}x" if t_ref else "-"]
        if not per_batch:
            row.append(" / ".join(f"{v:.0f}%" for v in pct.values()) if pct else "-")
        row.append(label)
        out.rows.append(row)
    for k, v in memcpy.items():
        r = {"bench": "memcpy", "shape": shape.name, "size": n_total, "rows": m, "impl": k, "gb_per_s": v / 1e9,
             "note": "np.copyto of an int64 buffer the size of fastaxo's output (capped at --memcpy-max-gib)"}
        rec.append(r)
        print(json.dumps(r), flush=True)
        out.rows.append([shape.name, mrows, k, "-", "-", "-", f"{v / 1e9:,.2f}", "-", "-", "np.copyto: the ceiling"])
    if how:
        out.checks.append(f"{shape.name} {mrows} {section}: {how}")


# -------------------------------------------------------------------------------- micro


def micro_section(a: argparse.Namespace, out: Table, rec: JsonRecorder) -> None:
    shape = B.SHAPES["chat"]
    nb = a.micro_batches
    n = nb * BATCH
    lengths = shape.lengths(n)
    rows = shape.rows(lengths, 0, n)
    inp = Inputs(rows, {"arrays", "lists", "tensors", "features"})
    members = {PY, PYL, NP, TORCH, FA, COL, FXA, FXL}
    fns = pad_fns(inp, members, a.threads)
    fx = fastaxo is not None
    ref_of = {PY: FXL, PYL: FXL, FA: FXL, COL: FXL, NP: FXA, TORCH: FXA, FXL: None, FXA: None}
    chk_of = {k: (PY if k != PY else (FXA if fx else None)) for k in fns}

    def produce_all(f: Callable[[int, int], Any]):
        def gen():
            for s in range(0, n, BATCH):
                yield f(s, s + BATCH)
        return gen

    impls = {name: Impl(produce_all(f), keys_of(name), ref_of[name] if fx else None, chk_of[name])
             for name, f in fns.items()}
    run = B.run_grouped([(0, n)], lambda g0, g1: (impls, rows.tokens), max(a.reps, 5), 0)
    emit_rows("pad_micro", shape, n, n, run, out, rec, {}, "", per_batch=nb)
    out.checks.append(f"micro-batches: {nb} batches of {BATCH} chat rows (mean {lengths.mean():.0f} tokens, "
                      f"mean batch width {np.mean([lengths[s:s + BATCH].max() for s in range(0, n, BATCH)]):.0f}), "
                      f"all padded in each timed round, {max(a.reps, 5)} rounds; fast-axolotl's time excludes "
                      "converting its lists to arrays (and it makes no mask)")


# -------------------------------------------------------------------------------- whole arrays


def width_cells(lengths: np.ndarray) -> np.ndarray:
    """Output cells if rows [0, m) are padded to their longest, for every m (index m-1)."""
    return np.maximum.accumulate(lengths) * np.arange(1, len(lengths) + 1)


def pad_case(shape: B.Shape, n_total: int, lengths: np.ndarray, m: int, a: argparse.Namespace, out: Table,
             rec: JsonRecorder, members: set[str], with_memcpy: bool) -> None:
    lm = lengths[:m]
    total_out = int(lm.max()) * m * 8 * len(KEYS)
    chunk_rows = m if total_out <= a.max_out_bytes else max(1, a.out_chunk_bytes // (int(lm.max()) * 8 * len(KEYS)))
    groups = B.plan_groups(lm, a.data_max_tokens)
    how = []
    if len(groups) > 1:
        how.append(f"rows generated in {len(groups)} groups")
    if chunk_rows < m:
        how.append(f"padded in chunks of {chunk_rows:,} rows, each to its own longest row")
    fx = fastaxo is not None
    ref_of = {PY: FXL, FA: FXL, NP: FXA, TORCH: FXA, FXA: FXR, FXL: FXR, FXR: None}
    chk = FXR if fx else (PY if PY in members else NP)

    def make(g0: int, g1: int):
        rows = shape.rows(lengths, g0, g1)
        forms = {"arrow"}
        if members & {NP, FXA, TORCH}:
            forms |= {"arrays"}
        if TORCH in members:
            forms |= {"tensors"}
        if members & {PY, FA, FXL}:
            forms |= {"lists"}
        inp = Inputs(rows, forms)
        fns = pad_fns(inp, members, a.threads)

        def chunks(f):
            def gen():
                for s, e in B.iter_row_chunks(len(rows), chunk_rows):
                    yield f(s, e)
            return gen

        return ({name: Impl(chunks(f), keys_of(name), ref_of[name] if fx else None, chk if name != chk else None)
                 for name, f in fns.items()}, rows.tokens)

    run = B.run_grouped(groups, make, a.reps, a.prefault_bytes)
    mc = min(run.out_bytes.get(FXR) or run.out_bytes.get(NP) or 0, a.memcpy_max_bytes)
    memcpy = B.memcpy_rates(mc, a.reps, a.prefault_bytes) if with_memcpy and mc else {}
    emit_rows("pad", shape, n_total, m, run, out, rec, memcpy, "; ".join(how))


def pad_section(shape: B.Shape, n: int, a: argparse.Namespace, out: Table, rec: JsonRecorder) -> None:
    lengths = shape.lengths(n)
    total = int(lengths.max()) * n * 8 * len(KEYS)
    if total > a.pad_max_total_bytes:
        msg = (f"pad {shape.name} {fmt_n(n)}: skipped, the padded output would be {total / 2**30:,.0f} GiB "
               f"(> --pad-max-total-gib {a.pad_max_total_bytes / 2**30:g})")
        note(msg)
        out.checks.append(msg)
        return
    cells = width_cells(lengths)
    m_py = int(min(n, np.searchsorted(np.maximum(cells, np.cumsum(lengths)), a.py_max_cells, side="right")))
    m_np = min(n, a.numpy_max_rows)
    py_set = {PY, FA, FXL}
    np_set = {NP, TORCH, FXA}
    full = {FXR}
    if m_np >= n:
        full |= np_set
    if m_py >= n:
        full |= py_set
    pad_case(shape, n, lengths, n, a, out, rec, full, with_memcpy=True)
    if m_py < m_np < n:
        pad_case(shape, n, lengths, m_np, a, out, rec, {FXR} | np_set, with_memcpy=False)
    if 0 < m_py < n:
        pad_case(shape, n, lengths, m_py, a, out, rec, {FXR} | np_set | py_set, with_memcpy=False)


# -------------------------------------------------------------------------------- epoch of micro-batches


def batch_cells(lengths: np.ndarray) -> np.ndarray:
    """Cumulative output cells of the 16-row batches (each padded to its longest row)."""
    starts = np.arange(0, len(lengths), BATCH)
    widths = np.maximum.reduceat(lengths, starts)
    sizes = np.minimum(BATCH, len(lengths) - starts)
    return np.cumsum(widths * sizes)


def batches_case(shape: B.Shape, n_total: int, lengths: np.ndarray, m: int, a: argparse.Namespace, out: Table,
                 rec: JsonRecorder, members: set[str], with_memcpy: bool) -> None:
    lm = lengths[:m]
    cum = batch_cells(lm) * 8 * len(KEYS)
    total_out = int(cum[-1])
    # one call per chunk of whole batches (all of them when the output fits --max-out-gib)
    if total_out <= a.max_out_bytes:
        bounds = [0, m]
    else:
        bounds, base = [0], 0
        while bounds[-1] < m:
            bi = int(np.searchsorted(cum, base + a.out_chunk_bytes, side="right"))
            e = min(m, max(bounds[-1] + BATCH, bi * BATCH))
            base = int(cum[(e - 1) // BATCH])
            bounds.append(e)
    groups = B.plan_groups(lm, a.data_max_tokens)
    # chunks must not cross groups: cut the groups at batch boundaries
    groups = [(g0 - g0 % BATCH if g0 % BATCH else g0, g1) for g0, g1 in groups]
    groups = [(groups[i][0], groups[i + 1][0] if i + 1 < len(groups) else m) for i in range(len(groups))]
    how = []
    if len(groups) > 1:
        how.append(f"rows generated in {len(groups)} groups")
    if len(bounds) > 2:
        how.append(f"pad_batches called on {len(bounds) - 1} chunks of whole batches "
                   f"(~{a.out_chunk_bytes / 2**30:g} GiB of output each)")
    fx = fastaxo is not None
    ref = FXB if fx else None
    chk = FXB if fx else PY
    nt = a.threads

    def make(g0: int, g1: int):
        rows = shape.rows(lengths, g0, g1)
        forms = {"arrow"}
        if members & {NP, FXPB, TORCH}:
            forms |= {"arrays"}
        if TORCH in members:
            forms |= {"tensors"}
        if members & {PY, FA}:
            forms |= {"lists"}
        if COL in members:
            forms |= {"features"}
        inp = Inputs(rows, forms)
        n = len(rows)
        cuts = [b - g0 for b in bounds if g0 < b < g1]
        calls = list(zip([0, *cuts], [*cuts, n]))
        per_batch = pad_fns(inp, members - {FXB, FXPB}, nt)
        impls: dict[str, Impl] = {}
        for name, f in per_batch.items():
            def gen(f=f):
                for s in range(0, n, BATCH):
                    yield f(s, min(n, s + BATCH))
            impls[name] = Impl(gen, keys_of(name), ref, chk)
        if fx and FXPB in members:
            ida, laba = inp.arrays

            def gen_fx():
                for s in range(0, n, BATCH):
                    yield fastaxo.pad(ida[s:s + BATCH], labels=laba[s:s + BATCH], num_threads=nt)
            impls[FXPB] = Impl(gen_fx, KEYS, ref, chk)
        if fx and FXB in members:
            ids_a, lab_a = inp.arrow

            def gen_fxb():
                for s, e in calls:
                    offs = np.arange(0, e - s + BATCH, BATCH, dtype=np.int64)
                    offs[-1] = e - s
                    offs = offs[: np.searchsorted(offs, e - s) + 1]
                    yield fastaxo.pad_batches(ids_a.slice(s, e - s), offs, labels=lab_a.slice(s, e - s),
                                              num_threads=nt)
            impls[FXB] = Impl(gen_fxb, KEYS, None, None if chk == FXB else chk)
        return impls, rows.tokens

    run = B.run_grouped(groups, make, a.reps, a.prefault_bytes)
    mc = min(run.out_bytes.get(FXB) or run.out_bytes.get(NP) or 0, a.memcpy_max_bytes)
    memcpy = B.memcpy_rates(mc, a.reps, a.prefault_bytes) if with_memcpy and mc else {}
    emit_rows("pad_batches", shape, n_total, m, run, out, rec, memcpy, "; ".join(how))


def batches_section(shape: B.Shape, n: int, a: argparse.Namespace, out: Table, rec: JsonRecorder) -> None:
    lengths = shape.lengths(n)
    cells = batch_cells(lengths)
    total = int(cells[-1]) * 8 * len(KEYS)
    if total > a.pad_max_total_bytes:
        msg = (f"pad_batches {shape.name} {fmt_n(n)}: skipped, the padded epoch would be {total / 2**30:,.0f} GiB "
               f"(> --pad-max-total-gib {a.pad_max_total_bytes / 2**30:g})")
        note(msg)
        out.checks.append(msg)
        return
    nbatch = int(np.searchsorted(np.maximum(cells, np.cumsum(lengths)[np.minimum(
        np.arange(BATCH, len(lengths) + BATCH, BATCH), len(lengths)) - 1]), a.py_max_cells, side="right"))
    m_py = min(n, nbatch * BATCH)
    m_np = min(n, a.numpy_max_rows // BATCH * BATCH)
    py_set = {PY, FA, COL}
    np_set = {NP, TORCH, FXPB}
    full = {FXB}
    if m_np >= n:
        full |= np_set
    if m_py >= n:
        full |= py_set
    batches_case(shape, n, lengths, n, a, out, rec, full, with_memcpy=True)
    if m_py < m_np < n:
        batches_case(shape, n, lengths, m_np, a, out, rec, {FXB} | np_set, with_memcpy=False)
    if 0 < m_py < n:
        batches_case(shape, n, lengths, m_py, a, out, rec, {FXB} | np_set | py_set, with_memcpy=False)


# -------------------------------------------------------------------------------- memory


def child(args: list[str]) -> None:
    """Fresh-process peak memory: `--child what shape n rows threads`."""
    what, shape_name, n, m, threads = args[0], args[1], int(args[2]), int(args[3]), int(args[4])
    shape = B.SHAPES[shape_name]
    load_fastaxo()
    lengths = shape.lengths(n)
    rows = shape.rows(lengths, 0, m)
    nt = threads or None
    if what == "numpy":
        ida, laba = rows.arrays("input_ids"), rows.arrays("labels")
    else:
        ids, lab = rows.arrow("input_ids"), rows.arrow("labels")
    del lengths
    gc.collect()
    release_freed_memory()
    base = status_kib("VmRSS")
    ok = reset_peak()
    t0 = time.perf_counter()
    if what == "pad":
        o = fastaxo.pad(ids, labels=lab, num_threads=nt)
        out_bytes = sum(v.nbytes for v in o.values())
    elif what == "numpy":
        o = B.numpy_pad(ida, laba)
        out_bytes = sum(v.nbytes for v in o.values())
    else:
        offs = np.arange(0, m + BATCH, BATCH, dtype=np.int64)
        offs = np.minimum(offs, m)
        offs = offs[: np.searchsorted(offs, m) + 1]
        o = fastaxo.pad_batches(ids, offs, labels=lab, num_threads=nt)
        out_bytes = sum(v.nbytes for b in o for v in b.values())
    dt = time.perf_counter() - t0
    peak = status_kib("VmHWM")
    print(json.dumps({"impl": what, "seconds": dt, "extra_peak_mib": (peak - base) / 1024 if ok else None,
                      "out_mib": out_bytes / 2**20}))


def memory_section(shape: B.Shape, n: int, a: argparse.Namespace, out: Table, rec: JsonRecorder) -> None:
    if fastaxo is None:
        return
    lengths = shape.lengths(n)
    whole = int(lengths.max()) * n * 8 * len(KEYS)
    epoch = int(batch_cells(lengths)[-1]) * 8 * len(KEYS)
    for what, label, total in (("pad", "fastaxo.pad (Arrow)", whole), ("numpy", "NumPy per-row copies", whole),
                               ("pad_batches", "fastaxo.pad_batches (one call)", epoch)):
        if total > a.max_out_bytes:
            # the first rows whose output fits one chunk
            per_row = total / n
            m = max(BATCH, int(a.out_chunk_bytes / per_row) // BATCH * BATCH)
        else:
            m = n
        m = min(m, n)
        if what == "numpy" and m > a.numpy_max_rows:
            continue
        res = child_peak(__file__, [what, shape.name, str(n), str(m), str(a.threads or 0)])
        peak = res["extra_peak_mib"]
        r = {"bench": "pad_memory", "shape": shape.name, "size": n, "rows": m, "impl": label, **res,
             "peak_over_output": (peak / res["out_mib"]) if peak is not None and res["out_mib"] else None}
        rec.append(r)
        print(json.dumps(r), flush=True)
        out.rows.append([shape.name, fmt_n(m) + (f" of {fmt_n(n)}" if m < n else ""), label,
                         f"{res['seconds'] * 1e3:,.0f}", f"{peak:,.1f}" if peak is not None else "-",
                         f"{res['out_mib']:,.1f}", f"{peak / res['out_mib']:.2f}x" if peak is not None else "-"])


# -------------------------------------------------------------------------------- main


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="10000,100000,1000000,10000000", help="comma-separated row counts")
    p.add_argument("--shapes", default="peer,chat", help="comma-separated: peer, chat (micro always uses chat)")
    p.add_argument("--reps", type=int, default=5, help="interleaved rounds (medians; micro: at least 5)")
    p.add_argument("--only", choices=["micro", "pad", "batches", "memory"], action="append",
                   help="sections (repeatable)")
    p.add_argument("--threads", type=int, default=None, help="fastaxo num_threads (default: fastaxo's)")
    p.add_argument("--json", help="also write every record as a JSON line to this file")
    p.add_argument("--no-memory", action="store_true", help="skip the fresh-process peak-memory runs")
    p.add_argument("--no-fastaxo", action="store_true", help="run the baselines (and their checks) only")
    p.add_argument("--micro-batches", type=int, default=1000, help="different 16-row batches per timed round")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="torch.set_num_threads for the torch baseline (0: torch's default)")
    p.add_argument("--py-max-cells", type=float, default=2**26,
                   help="Python padder, fast-axolotl, DataCollator, fastaxo on lists: longest prefix with at most "
                        "this many input tokens and output cells")
    p.add_argument("--numpy-max-rows", type=int, default=1_000_000,
                   help="NumPy / torch / fastaxo on a list of arrays or per batch: row prefix")
    p.add_argument("--data-max-gib", type=float, default=6.0, help="generate rows in groups of at most this much")
    p.add_argument("--max-out-gib", type=float, default=8.0, help="pad at once up to this much output, else chunks")
    p.add_argument("--out-chunk-gib", type=float, default=1.0, help="output per chunk beyond --max-out-gib")
    p.add_argument("--pad-max-total-gib", type=float, default=32.0,
                   help="skip a whole-array / epoch case whose total output exceeds this")
    p.add_argument("--memcpy-max-gib", type=float, default=1.0, help="largest buffer for the memcpy reference")
    p.add_argument("--prefault-gib", type=float, default=4.0,
                   help="before each timed call, touch and free up to this much memory (the largest output chunk; "
                        "untimed), so fresh allocations get pages the VM already backs (0: off)")
    a = p.parse_args()
    a.py_max_cells = int(a.py_max_cells)
    a.data_max_tokens = int(a.data_max_gib * 2**30 / 8)
    a.max_out_bytes = int(a.max_out_gib * 2**30)
    a.out_chunk_bytes = int(a.out_chunk_gib * 2**30)
    a.pad_max_total_bytes = int(a.pad_max_total_gib * 2**30)
    a.memcpy_max_bytes = int(a.memcpy_max_gib * 2**30)
    a.prefault_bytes = int(a.prefault_gib * 2**30)
    sizes = [int(float(s)) for s in a.sizes.split(",")]
    shapes = [B.SHAPES[s] for s in a.shapes.split(",")]
    only = set(a.only or ["micro", "pad", "batches", "memory"])
    if a.no_memory:
        only.discard("memory")
    rec = JsonRecorder(a.json)
    with tempfile.TemporaryDirectory(prefix="fastaxo-bench-") as tmp:
        os.environ.setdefault("HF_DATASETS_CACHE", str(Path(tmp) / "hf"))
        load_baselines(a.torch_threads)
        load_fastaxo(a.no_fastaxo)
        threads = a.threads or (fastaxo.default_num_threads() if fastaxo else None)
        print(f"# fastaxo {fastaxo.__version__ if fastaxo else '(pad API missing)'}; {machine()}")
        print(f"# fastaxo threads={threads}; "
              f"{B.versions(['torch', 'transformers', 'fast-axolotl', 'pyarrow', 'numpy'])}")
        print(f"# command: python bench/bench_pad.py {' '.join(sys.argv[1:])}".rstrip())
        for s in shapes:
            print(f"# {s.describe()}")
        sections = []
        head = ["shape", "rows", "implementation", "median ms", "rows/s", "tokens/s", "out GB/s", "fastaxo speed-up"]
        if "micro" in only:
            t = Table(["shape", "rows", "implementation", "us per batch", "median ms (all batches)", "rows/s",
                       "tokens/s", "out GB/s", "fastaxo speed-up", "check"])
            micro_section(a, t, rec)
            sections.append("## One 16-row collator micro-batch (chat rows)\n\nfastaxo speed-up = this row's time / "
                            "fastaxo.pad's on the same input kind (lists: list of lists; NumPy and torch: list of "
                            "arrays).\n\n" + t.text())
        if "pad" in only:
            t = Table(head + ["% of memcpy fresh / reused", "check"])
            for n in sizes:
                for s in shapes:
                    pad_section(s, n, a, t, rec)
                    gc.collect()
            sections.append("## Whole arrays padded to the longest row\n\nfastaxo speed-up = this row's time / "
                            "fastaxo.pad's on the same input kind (Python, fast-axolotl: list of lists; NumPy, torch: "
                            "list of arrays; fastaxo list inputs: against fastaxo on Arrow). " + PREFIX_NOTE
                            + "\n\n" + t.text())
        if "batches" in only:
            t = Table(head + ["% of memcpy fresh / reused", "check"])
            for n in sizes:
                for s in shapes:
                    batches_section(s, n, a, t, rec)
                    gc.collect()
            sections.append(f"## A whole epoch of {BATCH}-row micro-batches, each padded to its longest row\n\n"
                            "fastaxo speed-up = this row's time / fastaxo.pad_batches' (one call). " + PREFIX_NOTE
                            + "\n\n" + t.text())
        if "memory" in only and fastaxo is not None:
            t = Table(["shape", "rows", "implementation", "ms", "extra peak MiB", "output MiB", "peak / output"])
            for n in sizes:
                for s in shapes:
                    memory_section(s, n, a, t, rec)
            sections.append("## Peak memory in a fresh process (over the RSS after the data is generated)\n\n"
                            + t.text())
        print()
        print("\n\n".join(sections))
        if NOTES:
            print("\nNotes:\n" + "\n".join(f"- {x}" for x in dict.fromkeys(NOTES)))


if __name__ == "__main__":
    main()
