"""Benchmark: sample packing (bin assignment and materialisation), side by side with the baselines.

    python bench/bench_pack.py                                  # 10k, 100k, 1M, 10M; both shapes
    python bench/bench_pack.py --sizes 10000,100000 --reps 1 --no-memory
    python bench/bench_pack.py --only bins --shapes chat --json out.jsonl

Shapes (bench/_baselines_pack.py, fixed seeds, int32 tokens in [0, 32000), labels = input_ids
with the first 30% of each row set to -100):
  peer  uniform 10-100 tokens per sequence, bins of 512 tokens (fast-axolotl's own benchmark)
  chat  lognormal, mean ~300, clipped to [1, 4096], bins of 4096 tokens

Sections (--only, repeatable):
  bins    bin assignment. Each strategy against a plain-Python packer with identical output
          (BFD: bisect over a sorted list of remaining spaces; FFD / FF: a max segment tree over
          bins; NF), Axolotl 0.21's numba `pack_parallel(lengths, cap, group_size=100000,
          bin_size=200)` (its compile time reported on its own) against
          `fastaxo.pack_bins(..., strategy="ff", group_size=100000, max_rows_per_bin=200)`, and
          TRL's BFD: `trl.data_utils._pack_bfd` on one Arrow table of the whole input (it also
          builds the packed table) and `trl.pack_dataset(Dataset, seq_length, strategy="bfd")`
          as users call it (BFD per map batch of 1000 rows). Bins, efficiency =
          tokens / (bins * capacity) and the lower bound ceil(tokens / capacity) for each.
  pack    materialisation: `fastaxo.pack` (assignment + padded input_ids, labels, position_ids,
          attention_mask (segment ids), cu_seqlens) and `fastaxo.pack(bins=...)` (building only)
          against the plain-Python packer producing the same arrays, NumPy per-bin copies
          (np.concatenate per bin into preallocated rows), fast-axolotl 0.2.0's
          `pack_sequences` (own format: seq + [eos, pad] per sequence, next-fit, labels =
          input_ids) and `concatenate_and_pack` (next-fit, 1/0 mask; checked against
          `fastaxo.pack(strategy="nf", attention="ones")`), and this machine's memcpy
          bandwidth (np.copyto into fresh and into reused memory) to state fastaxo's output
          bytes per second as a share of it.
  memory  peak RSS of `fastaxo.pack` / `fastaxo.pack_bins` in a fresh process (VmHWM reset after
          the data is generated) against the size of their output.

Identical output is checked inside the run for every size where a baseline runs (bins:
indices and offsets; arrays: SHA-256 of every array, values as int64) and printed.
Where a baseline would take too long or too much memory at a size it runs on a prefix of the
rows (--py-max-cells, --py-assign-max-rows, --trl-max-rows, --numpy-max-rows), next to
fastaxo on the same prefix; rates are per row. At sizes whose data would not fit in memory
(--data-max-gib: 10M chat rows are 24 GB of int32 input_ids + labels) the rows are generated
and packed in consecutive groups (bins do not cross groups; noted), and outputs larger than
--max-out-gib are materialised with `fastaxo.iter_pack` in chunks of --out-chunk-gib
(the NumPy baseline builds the same chunks). Generation is never timed. Nothing is
written outside a temporary directory.

Before each timed call of the materialisation and TRL cases, up to --prefault-gib of memory
(the largest output chunk) is touched and freed, untimed: on the VMs these run on, memory
freed for more than about a second goes back to the hypervisor and the next first touch runs
at 0.3-2 GB/s instead of 4-7 GB/s, so without it an implementation's cost would depend on how
long the one before it took. --prefault-gib 0 turns this off.
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
from _baselines_pack import Table, fmt_n, ms, rate, yesno  # noqa: E402
from _common import (  # noqa: E402
    JsonRecorder,
    child_peak,
    interleaved,
    machine,
    median,
    release_freed_memory,
    reset_peak,
    status_kib,
)

KEYS = ["input_ids", "labels", "position_ids", "attention_mask", "cu_seqlens"]
PREFIX_NOTE = ("rows \"m of n\": the row ran on the first m of the n rows only (that baseline's limit at this size); "
               "its ratio is against fastaxo on the same m rows, and its rates are per row.")
BIN_KEYS_FA = ["input_ids", "labels", "attention_mask"]
EOS_ID = 2
AX_GROUP, AX_BIN_SIZE = 100_000, 200
TRL_MAP_BATCH = 1000

fastaxo: Any = None
fast_axolotl: Any = None
AX_PACK_PARALLEL: Any = None
TRL: dict[str, Any] = {}
AX_COMPILED = False
NOTES: list[str] = []


def note(msg: str) -> None:
    NOTES.append(msg)
    print(f"# {msg}", file=sys.stderr, flush=True)


def load_baselines(want_bins: bool, want_pack: bool) -> None:
    """Axolotl first: fast_axolotl's import shim hides the real axolotl package otherwise."""
    global fast_axolotl, AX_PACK_PARALLEL
    if want_bins:
        try:
            from axolotl.utils.samplers.multipack import pack_parallel

            AX_PACK_PARALLEL = pack_parallel
        except Exception as exc:  # pragma: no cover
            note(f"Axolotl not importable ({exc!r}): its pack_parallel baseline is skipped")
        try:
            import datasets
            from trl import pack_dataset
            from trl.data_utils import _pack_bfd

            datasets.disable_progress_bars()
            datasets.logging.set_verbosity_error()
            TRL.update(pack_bfd=_pack_bfd, pack_dataset=pack_dataset, Dataset=datasets.Dataset)
        except Exception as exc:  # pragma: no cover
            note(f"TRL not importable ({exc!r}): its BFD baselines are skipped")
    if want_pack:
        fast_axolotl = B.import_fast_axolotl(note)


def load_fastaxo(skip: bool = False) -> None:
    global fastaxo
    fastaxo = B.import_fastaxo(skip, ("pack", "pack_bins", "iter_pack"), note)


# -------------------------------------------------------------------------------- helpers


def canon_bins(out: Any) -> tuple[np.ndarray, np.ndarray]:
    """Any bin assignment -> (indices int64, offsets int64)."""
    if hasattr(out, "indices") and hasattr(out, "offsets"):
        return np.asarray(out.indices, dtype=np.int64), np.asarray(out.offsets, dtype=np.int64)
    return B.bins_to_arrays(out)


# -------------------------------------------------------------------------------- (a) bins


def bins_section(shape: B.Shape, n: int, a: argparse.Namespace, out: Table, rec: JsonRecorder) -> None:
    global AX_COMPILED
    cap = shape.capacity
    lengths = shape.lengths(n)
    nt = a.threads
    m = min(n, a.py_assign_max_rows)
    ll = lengths[:m].tolist()

    def emit(case: str, rows: int, name: str, t: float, t_ref: float | None, n_bins: int, same: bool | None,
             check: str, extra: dict | None = None) -> None:
        tokens = int(lengths[:rows].sum())
        st = B.bin_stats(lengths[:0], n_bins, cap, tokens)
        r = {"bench": "pack_bins", "shape": shape.name, "size": n, "rows": rows, "case": case, "impl": name,
             "median_s": t, "rows_per_s": rows / t, "tokens_per_s": tokens / t,
             "x_fastaxo_faster": (t / t_ref) if t_ref else None, **st, "identical": same, "check": check,
             "prefix": rows < n, **(extra or {})}
        rec.append(r)
        print(json.dumps(r), flush=True)
        out.rows.append([shape.name, fmt_n(rows) + (f" of {fmt_n(n)}" if rows < n else ""), case, name, ms(t),
                         rate(rows / t), f"{t / t_ref:,.1f}x" if t_ref else "-", f"{st['bins']:,}",
                         f"{st['efficiency'] * 100:.2f}%", f"{st['lower_bound']:,}", check])

    def run(case: str, rows: int, fns: dict[str, Callable[[], Any]], checks: dict[str, tuple[str, str]],
            fx_name: str | None) -> None:
        """Warm-up (its output kept as canonical bins for the checks), then interleaved timing."""
        canon = {}
        for name, fn in fns.items():
            canon[name] = canon_bins(fn())
            gc.collect()
        times = interleaved(fns, a.reps)
        t_fx = median(times[fx_name]) if fx_name in times else None
        for name in fns:
            same, label = None, ""
            if name in checks and checks[name][0] in canon:
                same = B.bins_equal(canon[name], canon[checks[name][0]])
                label = f"{checks[name][1]}: {yesno(same)}"
                out.checks.append(f"{shape.name} {fmt_n(rows)} {case}: {name} {label}")
            emit(case, rows, name, median(times[name]), t_fx if name != fx_name else None,
                 len(canon[name][1]) - 1, same, label)
        canon.clear()

    # --- BFD / FFD / NF: the plain-Python packer against fastaxo on the same rows
    for strat, pyname in (("bfd", "Python BFD (bisect)"), ("ffd", "Python FFD (segment tree)"), ("nf", "Python NF")):
        if strat not in a.strategies:
            continue
        fxn = f"fastaxo.pack_bins({strat})" if fastaxo is not None else None
        for rows in sorted({m, n}):
            lr = lengths[:rows]
            fns: dict[str, Callable[[], Any]] = {}
            if rows <= m:
                fns[pyname] = lambda s=strat, r=rows: B.py_pack_bins(ll[:r] if r < m else ll, cap, s)
            if fxn:
                fns[fxn] = lambda s=strat, lr=lr: fastaxo.pack_bins(lr, cap, strategy=s, num_threads=nt)
            if fns:
                run(strat, rows, fns, {pyname: (fxn, "same bins as fastaxo")} if fxn else {}, fxn)

    # --- first fit with Axolotl's parameters
    if "ff" in a.strategies:
        case = f"ff, groups {fmt_n(AX_GROUP)}, <= {AX_BIN_SIZE} rows/bin"
        ax_m = n if not a.axolotl_max_rows else min(n, a.axolotl_max_rows)
        axn, pyn = "Axolotl pack_parallel (numba)", "Python FF (segment tree)"
        fxn = "fastaxo.pack_bins(ff, group_size=100000, max_rows_per_bin=200)" if fastaxo is not None else None
        if AX_PACK_PARALLEL is not None and not AX_COMPILED:
            AX_COMPILED = True
            warm = lengths[: min(n, 2000)].copy()
            _, t_first = B.timed(lambda: AX_PACK_PARALLEL(warm, cap, group_size=AX_GROUP, bin_size=AX_BIN_SIZE))
            _, t_second = B.timed(lambda: AX_PACK_PARALLEL(warm, cap, group_size=AX_GROUP, bin_size=AX_BIN_SIZE))
            r = {"bench": "pack_bins", "shape": shape.name, "size": n, "impl": "axolotl pack_parallel numba compile",
                 "first_call_s": t_first, "second_call_s": t_second, "compile_s": t_first - t_second,
                 "rows": len(warm)}
            rec.append(r)
            print(json.dumps(r), flush=True)
            out.checks.append(f"{shape.name} {fmt_n(n)}: Axolotl pack_parallel numba JIT compile (first call on "
                              f"{len(warm):,} rows; warm-up, excluded from the timings): {t_first - t_second:.2f} s")
        members = {n: {fxn, axn if ax_m >= n else None, pyn if m >= n else None}}
        if ax_m < n:
            members[ax_m] = {fxn, axn, pyn if m >= ax_m else None}
        if m < n and m != ax_m:
            members[m] = {fxn, pyn, axn if ax_m >= m else None}
        for rows in sorted(members):
            who = members[rows]
            lr = lengths[:rows]
            fns = {}
            if axn in who and AX_PACK_PARALLEL is not None:
                fns[axn] = lambda lr=lr: AX_PACK_PARALLEL(lr, cap, group_size=AX_GROUP, bin_size=AX_BIN_SIZE)
            if pyn in who:
                fns[pyn] = lambda r=rows: B.py_pack_bins(ll[:r] if r < m else ll, cap, "ff", AX_BIN_SIZE, AX_GROUP)
            if fxn:
                fns[fxn] = lambda lr=lr: fastaxo.pack_bins(lr, cap, strategy="ff", group_size=AX_GROUP,
                                                           max_rows_per_bin=AX_BIN_SIZE, num_threads=nt)
            ref = fxn or (axn if axn in fns else None)
            checks = {k: (ref, f"same bins as {'fastaxo' if fxn else 'Axolotl'}") for k in fns if ref and k != ref}
            if len(fns) > 1 or (fns and rows == n):
                run(case, rows, fns, checks, fxn)

    # --- TRL's BFD (needs the token data)
    if "bfd" in a.strategies and TRL:
        trl_section(shape, n, lengths, a, out, rec, emit)


def trl_section(shape: B.Shape, n: int, lengths: np.ndarray, a: argparse.Namespace, out: Table, rec: JsonRecorder,
                emit: Callable[..., None]) -> None:
    cap = shape.capacity
    nt = a.threads
    tm = min(n, a.trl_max_rows)
    rows = shape.rows(lengths, 0, tm)
    table = rows.table()
    ds = TRL["Dataset"](table)
    ltm = lengths[:tm]
    t1, t2 = "TRL _pack_bfd (one Arrow table)", f"TRL pack_dataset(bfd; map batches of {TRL_MAP_BATCH})"
    fns: dict[str, Callable[[], Any]] = {
        t1: lambda: TRL["pack_bfd"](table, cap),
        t2: lambda: TRL["pack_dataset"](ds, cap, strategy="bfd"),
    }
    fxn = fxg = fxf = None
    if fastaxo is not None:
        fxn, fxg = "fastaxo.pack_bins(bfd)", f"fastaxo.pack_bins(bfd, group_size={TRL_MAP_BATCH})"
        fxf = "fastaxo.pack(bfd, layout=flat, int32, attention=None)"
        ids_a, lab_a = rows.arrow("input_ids"), rows.arrow("labels")
        fns[fxn] = lambda: fastaxo.pack_bins(ltm, cap, strategy="bfd", num_threads=nt)
        fns[fxg] = lambda: fastaxo.pack_bins(ltm, cap, strategy="bfd", group_size=TRL_MAP_BATCH, num_threads=nt)
        fns[fxf] = lambda: fastaxo.pack(ids_a, cap, labels=lab_a, layout="flat", attention=None, dtype=np.int32,
                                        num_threads=nt)
    # warm-up + checks. TRL's output is the packed table: compare it with the table the Python
    # BFD with FIFO ties (TRL's rule: among bins with equal remaining space the oldest) implies.
    arrow_ids = rows.arrow("input_ids")

    def packed_col(o: Any):
        tbl = o.data.table if hasattr(o, "data") and hasattr(o.data, "table") else o
        return tbl.column("input_ids").combine_chunks()

    def same_table(col, ref_bins: list[list[int]]) -> bool:
        idx, off = B.bins_to_arrays(ref_bins)
        bin_tok = np.add.reduceat(ltm[idx], off[:-1]) if len(idx) else np.zeros(0, np.int64)
        return bool(len(col) == len(ref_bins) and np.array_equal(np.diff(col.offsets.to_numpy()), bin_tok)
                    and np.array_equal(col.flatten().to_numpy(), arrow_ids.take(idx).flatten().to_numpy()))

    n_bins: dict[str, int] = {}
    same: dict[str, tuple[bool | None, str]] = {}
    ref1 = B.py_pack_bins(ltm.tolist(), cap, "bfd", fifo=True)
    col = packed_col(fns[t1]())
    n_bins[t1] = len(col)
    s = same_table(col, ref1)
    same[t1] = (s, f"= BFD with FIFO ties (Python): {yesno(s)}")
    del col, ref1
    ref2 = B.py_pack_bins(ltm.tolist(), cap, "bfd", fifo=True, group_size=TRL_MAP_BATCH)
    col = packed_col(fns[t2]())
    n_bins[t2] = len(col)
    s2 = same_table(col, ref2)
    same[t2] = (s2, f"= the same per {TRL_MAP_BATCH} rows: {yesno(s2)}")
    del col, ref2
    if fastaxo is not None:
        n_bins[fxn] = len(fns[fxn]())
        n_bins[fxg] = len(fns[fxg]())
        n_bins[fxf] = len(fns[fxf]().bins)
        same[fxg] = (None, "pack_dataset's grouping")
        same[fxf] = (None, "assignment + flat int32 arrays, like TRL's table")
    gc.collect()
    tok_bytes = int(ltm.sum()) * 4 * 2  # TRL's packed int32 input_ids + labels
    out.checks.append(f"{shape.name} {fmt_n(tm)} TRL: _pack_bfd's packed table = Python BFD with FIFO ties among bins "
                      f"of equal remaining space (fastaxo's rule is LIFO) : {yesno(s)}; pack_dataset = the same per "
                      f"map batch of {TRL_MAP_BATCH}: {yesno(s2)}")
    times = B.interleaved_prefault(fns, a.reps, min(tok_bytes, a.prefault_bytes))
    t_fx = median(times[fxn]) if fxn else None
    t_flat = median(times[fxf]) if fxf else None
    for name in fns:
        sm, label = same.get(name, (None, ""))
        t_ref, extra = None, {}
        if name in (t1, t2):
            t_ref = t_fx
            if t_flat:  # TRL also builds the packed table: the like-for-like ratio is against fastaxo's flat pack
                extra = {"x_fastaxo_flat_faster": median(times[name]) / t_flat}
                label += f"; {median(times[name]) / t_flat:,.1f}x fastaxo flat"
        emit("bfd (TRL)", tm, name, median(times[name]), t_ref, n_bins[name], sm, label, extra)
    del table, ds, rows, fns
    gc.collect()


# -------------------------------------------------------------------------------- (b) pack

PY_PACK = "Python packer (BFD + lists + np.array)"
FA_PS = "fast-axolotl pack_sequences (own format)"
FA_CP = "fast-axolotl concatenate_and_pack"
NP_BUILD = "NumPy per-bin copies (build only)"
FX_PACK = "fastaxo.pack (assign + build)"
FX_BUILD = "fastaxo.pack(bins=...) (build only)"
FX_NF = "fastaxo.pack(nf, attention=ones)"
PY_NF = "Python NF reference (check only)"


Impl = B.Impl


def make_pack_impls(rows: B.Rows, cap: int, a: argparse.Namespace, members: set[str], fx_bins: Any,
                    bins_obj: Any, chunk_bins: int | None) -> dict[str, Impl]:
    impls: dict[str, Impl] = {}
    nt = a.threads
    fx = fastaxo is not None
    if PY_PACK in members:
        ids_l, lab_l, len_l = rows.lists("input_ids"), rows.lists("labels"), rows.lengths.tolist()

        def py():
            yield B.py_pack_build(ids_l, lab_l, B.py_pack_bins(len_l, cap, "bfd"), cap)
        impls[PY_PACK] = Impl(py, KEYS, FX_PACK if fx else None, FX_PACK if fx else None)
        if fast_axolotl is not None:
            keep = [i for i, k in enumerate(len_l) if k <= cap - 2]
            fa_ids = [ids_l[i] for i in keep] if len(keep) < len(ids_l) else ids_l
            if len(keep) < len(ids_l):
                note(f"fast-axolotl pack_sequences: {len(ids_l) - len(keep)} of {len(ids_l):,} input rows are longer "
                     f"than max_length-2 = {cap - 2} (it panics on them) and are left out of its input")

            def fa_ps():
                yield fast_axolotl.pack_sequences(fa_ids, cap, B.PAD_ID, EOS_ID)
            impls[FA_PS] = Impl(fa_ps, [], FX_NF if fx else None, None)
            masks = [[1] * k for k in len_l]

            def fa_cp():
                yield fast_axolotl.concatenate_and_pack(ids_l, lab_l, masks, cap, B.PAD_ID, B.LABEL_PAD_ID)
            impls[FA_CP] = Impl(fa_cp, BIN_KEYS_FA, FX_NF if fx else None, FX_NF if fx else PY_NF)
            if not fx:  # the next-fit reference for the check (not timed when fastaxo is there)
                def py_nf():
                    bins = B.py_pack_bins(len_l, cap, "nf")
                    out = B.py_pack_build(ids_l, lab_l, bins, cap)
                    out["attention_mask"] = (out["attention_mask"] > 0).astype(np.int64)
                    yield out
                impls[PY_NF] = Impl(py_nf, KEYS, None, None)
    if NP_BUILD in members and fx_bins is not None:
        idx, boff = fx_bins

        def npb():
            nb = len(boff) - 1
            step = chunk_bins or max(nb, 1)
            for s in range(0, nb, step):
                yield B.numpy_pack_build(rows, idx, boff, cap, s, min(nb, s + step))
        impls[NP_BUILD] = Impl(npb, KEYS, FX_BUILD if fx else None,
                               FX_PACK if fx else (PY_PACK if PY_PACK in members else None))
    if fx:
        ids_a, lab_a = rows.arrow("input_ids"), rows.arrow("labels")

        def fx_pack():
            if chunk_bins is None:
                yield fastaxo.pack(ids_a, cap, labels=lab_a, num_threads=nt)
            else:
                yield from fastaxo.iter_pack(ids_a, cap, labels=lab_a, chunk_bins=chunk_bins, num_threads=nt)
        impls[FX_PACK] = Impl(fx_pack, KEYS, None, PY_PACK if PY_PACK in members else None)

        def fx_build():
            if chunk_bins is None:
                yield fastaxo.pack(ids_a, cap, labels=lab_a, bins=bins_obj, num_threads=nt)
            else:
                yield from fastaxo.iter_pack(ids_a, cap, labels=lab_a, bins=bins_obj, chunk_bins=chunk_bins,
                                             num_threads=nt)
        impls[FX_BUILD] = Impl(fx_build, KEYS, None, FX_PACK)
        if FA_CP in impls:
            def fx_nf():
                yield fastaxo.pack(ids_a, cap, labels=lab_a, strategy="nf", attention="ones", num_threads=nt)
            impls[FX_NF] = Impl(fx_nf, KEYS, None, None)
    return impls


def pack_case(shape: B.Shape, n_total: int, lengths: np.ndarray, m: int, a: argparse.Namespace, out: Table,
              rec: JsonRecorder, members: set[str], with_memcpy: bool) -> None:
    """Materialise rows [0, m) (group by group when they don't fit) with every implementation."""
    cap = shape.capacity
    groups = B.plan_groups(lengths[:m], a.data_max_tokens)
    bytes_per_bin = cap * 8 * 4 + 8
    whole = all((int(lengths[g0:g1].sum()) / cap / 0.97 + 1) * bytes_per_bin <= a.max_out_bytes for g0, g1 in groups)
    chunk_bins = None if whole else max(1, a.out_chunk_bytes // bytes_per_bin)
    how = []
    if len(groups) > 1:
        how.append(f"rows generated and packed in {len(groups)} groups of <= {max(g1 - g0 for g0, g1 in groups):,} "
                   "rows (bins do not cross groups)")
    if chunk_bins:
        how.append(f"output materialised in chunks of {chunk_bins:,} bins (iter_pack; NumPy the same chunks)")
    how_s = "; ".join(how)

    def make(g0: int, g1: int) -> tuple[dict[str, Impl], int]:
        rows = shape.rows(lengths, g0, g1)
        fx_bins = bins_obj = None
        if fastaxo is not None:
            bins_obj = fastaxo.pack_bins(rows.lengths, cap, num_threads=a.threads)
            fx_bins = (np.asarray(bins_obj.indices), np.asarray(bins_obj.offsets))
        elif NP_BUILD in members and PY_PACK in members:
            fx_bins = B.bins_to_arrays(B.py_pack_bins(rows.lengths.tolist(), cap, "bfd"))
        return make_pack_impls(rows, cap, a, members, fx_bins, bins_obj, chunk_bins), rows.tokens

    run = B.run_grouped(groups, make, a.reps, a.prefault_bytes)
    tokens_total = run.tokens
    # memcpy bandwidth on a buffer the size of fastaxo's output (capped)
    total_out = run.out_bytes.get(FX_PACK) or run.out_bytes.get(NP_BUILD) or run.out_bytes.get(PY_PACK) or 0
    mc_bytes = min(total_out, a.memcpy_max_bytes) // 8 * 8
    memcpy = B.memcpy_rates(mc_bytes, a.reps, a.prefault_bytes) if with_memcpy and mc_bytes else {}

    mrows = fmt_n(m) + (f" of {fmt_n(n_total)}" if m < n_total else "")
    for name in run.per_rep:
        if name == PY_NF:
            continue
        im = run.impls[name]
        t = run.median(name)
        same = run.same(name)
        label = ""
        if same is not None:
            what = "input_ids, labels, 1/0 mask" if name == FA_CP else "all arrays"
            label = f"{what} = {im.check_ref.split(' (')[0]}: {yesno(same)}"
            out.checks.append(f"{shape.name} {mrows} pack: {name}: {label}")
        elif name == FX_PACK:
            label = "(no baseline at this size)"
        elif name == FA_PS:
            label = "own format (+eos/pad per sequence, next-fit)"
        elif name == FX_NF:
            label = "next-fit, for fast-axolotl"
        t_ref = run.median(im.ref) if im.ref in run.per_rep else None
        ob = run.out_bytes.get(name, 0)
        nb = run.out_rows.get(name, 0)
        pct = {}
        if memcpy and name in (FX_PACK, FX_BUILD):
            pct = {f"pct_of_{k.replace(' ', '_')}": 100 * (ob / t) / v for k, v in memcpy.items()}
        r = {"bench": "pack", "shape": shape.name, "size": n_total, "rows": m, "tokens": tokens_total, "impl": name,
             "median_s": t, "rows_per_s": m / t, "tokens_per_s": tokens_total / t, "bins": nb,
             "efficiency": tokens_total / (nb * cap) if nb and name != FA_PS else None,
             "out_bytes": ob, "out_gb_per_s": ob / t / 1e9, "x_fastaxo_faster": (t / t_ref) if t_ref else None,
             "vs": im.ref, "identical": same, "check": label, "how": how_s, **pct}
        rec.append(r)
        print(json.dumps(r), flush=True)
        out.rows.append([shape.name, mrows, name, ms(t), rate(m / t), rate(tokens_total / t), f"{nb:,}",
                         f"{ob / t / 1e9:,.2f}", f"{t / t_ref:,.1f}x" if t_ref else "-",
                         " / ".join(f"{v:.0f}%" for v in pct.values()) if pct else "-", label])
    for k, v in memcpy.items():
        r = {"bench": "memcpy", "shape": shape.name, "size": n_total, "rows": m, "impl": k, "bytes": mc_bytes,
             "median_s": mc_bytes / v, "gb_per_s": v / 1e9,
             "note": "np.copyto of an int64 buffer the size of fastaxo.pack's output (capped at --memcpy-max-gib)"}
        rec.append(r)
        print(json.dumps(r), flush=True)
        out.rows.append([shape.name, mrows, f"{k} ({mc_bytes / 2**30:.2f} GiB)", ms(mc_bytes / v), "-", "-", "-",
                         f"{v / 1e9:,.2f}", "-", "-", "np.copyto: the bandwidth ceiling"])
    if how_s:
        out.checks.append(f"{shape.name} {mrows} pack: {how_s}")


def pack_section(shape: B.Shape, n: int, a: argparse.Namespace, out: Table, rec: JsonRecorder) -> None:
    lengths = shape.lengths(n)
    # Python-level baselines: the longest prefix whose input tokens and output cells (~tokens / 0.97)
    # stay under --py-max-cells; NumPy per-bin copies: --numpy-max-rows.
    m_py = int(min(n, np.searchsorted(np.cumsum(lengths) / 0.97, a.py_max_cells, side="right")))
    m_np = min(n, a.numpy_max_rows)
    full = {FX_PACK, FX_BUILD}
    if m_np >= n:
        full.add(NP_BUILD)
    if m_py >= n:
        full.add(PY_PACK)
    pack_case(shape, n, lengths, n, a, out, rec, full, with_memcpy=True)
    if m_py < m_np < n:
        pack_case(shape, n, lengths, m_np, a, out, rec, {FX_PACK, FX_BUILD, NP_BUILD}, with_memcpy=False)
    if 0 < m_py < n:
        pack_case(shape, n, lengths, m_py, a, out, rec, {FX_PACK, FX_BUILD, NP_BUILD, PY_PACK}, with_memcpy=False)


# -------------------------------------------------------------------------------- (c) memory


def child(args: list[str]) -> None:
    """Fresh-process peak memory: `--child what shape n row0 row1 threads chunk_bins`."""
    what, shape_name, n, r0, r1, threads, chunk_bins = args[0], args[1], *map(int, args[2:7])
    shape = B.SHAPES[shape_name]
    load_fastaxo()
    lengths = shape.lengths(n)
    nt = threads or None
    if what == "pack_bins":
        data = lengths[r0:r1].copy()
    else:
        rows = shape.rows(lengths, r0, r1)
        ids, lab = rows.arrow("input_ids"), rows.arrow("labels")
        del rows
    del lengths
    gc.collect()
    release_freed_memory()
    base = status_kib("VmRSS")
    ok = reset_peak()
    t0 = time.perf_counter()
    if what == "pack_bins":
        o = fastaxo.pack_bins(data, shape.capacity, num_threads=nt)
        out_bytes = sum(np.asarray(getattr(o, k)).nbytes for k in ("indices", "offsets", "lengths"))
        biggest = out_bytes
    elif chunk_bins:
        out_bytes = biggest = 0
        for c in fastaxo.iter_pack(ids, shape.capacity, labels=lab, chunk_bins=chunk_bins, num_threads=nt):
            out_bytes += c.nbytes
            biggest = max(biggest, c.nbytes)
            del c
    else:
        o = fastaxo.pack(ids, shape.capacity, labels=lab, num_threads=nt)
        out_bytes = biggest = o.nbytes
    dt = time.perf_counter() - t0
    peak = status_kib("VmHWM")
    print(json.dumps({"impl": what, "seconds": dt, "extra_peak_mib": (peak - base) / 1024 if ok else None,
                      "out_mib": out_bytes / 2**20, "largest_chunk_mib": biggest / 2**20}))


def memory_section(shape: B.Shape, n: int, a: argparse.Namespace, out: Table, rec: JsonRecorder) -> None:
    if fastaxo is None:
        return
    lengths = shape.lengths(n)
    groups = B.plan_groups(lengths, a.data_max_tokens)
    g0, g1 = groups[0]
    bytes_per_bin = shape.capacity * 8 * 4 + 8
    est = (int(lengths[g0:g1].sum()) / shape.capacity / 0.97 + 1) * bytes_per_bin
    chunk_bins = 0 if est <= a.max_out_bytes else max(1, a.out_chunk_bytes // bytes_per_bin)
    for what in ("pack_bins", "pack"):
        r0, r1 = (0, n) if what == "pack_bins" else (g0, g1)
        res = child_peak(__file__, [what, shape.name, str(n), str(r0), str(r1), str(a.threads or 0),
                                    str(chunk_bins if what == "pack" else 0)])
        rows_s = f"{fmt_n(r1 - r0)}" + (f" (group 1 of {len(groups)})" if r1 - r0 < n else "")
        label = ("fastaxo.pack_bins" if what == "pack_bins" else
                 (f"fastaxo.iter_pack (chunk_bins={chunk_bins:,})" if chunk_bins else "fastaxo.pack"))
        peak = res["extra_peak_mib"]
        basis = res["largest_chunk_mib"]
        r = {"bench": "pack_memory", "shape": shape.name, "size": n, "rows": r1 - r0, "impl": label, **res,
             "peak_over_output": (peak / basis) if peak is not None and basis else None}
        rec.append(r)
        print(json.dumps(r), flush=True)
        out.rows.append([shape.name, rows_s, label, f"{res['seconds'] * 1e3:,.0f}",
                         f"{peak:,.1f}" if peak is not None else "-", f"{res['out_mib']:,.1f}",
                         f"{basis:,.1f}" if chunk_bins and what == "pack" else "-",
                         f"{peak / basis:.2f}x" if peak is not None and basis else "-"])


# -------------------------------------------------------------------------------- main


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="10000,100000,1000000,10000000", help="comma-separated sequence counts")
    p.add_argument("--shapes", default="peer,chat", help="comma-separated: peer, chat")
    p.add_argument("--reps", type=int, default=5, help="interleaved rounds (medians)")
    p.add_argument("--only", choices=["bins", "pack", "memory"], action="append", help="sections (repeatable)")
    p.add_argument("--strategies", default="bfd,ffd,ff,nf", help="bin assignment strategies for --only bins")
    p.add_argument("--threads", type=int, default=None, help="fastaxo num_threads (default: fastaxo's)")
    p.add_argument("--json", help="also write every record as a JSON line to this file")
    p.add_argument("--no-memory", action="store_true", help="skip the fresh-process peak-memory runs")
    p.add_argument("--no-fastaxo", action="store_true", help="run the baselines (and their checks) only")
    p.add_argument("--py-max-cells", type=float, default=2**26,
                   help="plain-Python packer and fast-axolotl: longest prefix with at most this many input tokens "
                        "and output cells")
    p.add_argument("--py-assign-max-rows", type=int, default=1_000_000, help="Python bin assignment: row prefix")
    p.add_argument("--axolotl-max-rows", type=int, default=0, help="Axolotl pack_parallel: row prefix (0 = all)")
    p.add_argument("--trl-max-rows", type=int, default=1_000_000, help="TRL _pack_bfd / pack_dataset: row prefix")
    p.add_argument("--numpy-max-rows", type=int, default=1_000_000, help="NumPy per-bin copies: row prefix")
    p.add_argument("--data-max-gib", type=float, default=6.0,
                   help="generate and pack the rows in groups of at most this much int32 input_ids + labels")
    p.add_argument("--max-out-gib", type=float, default=10.0,
                   help="materialise a group's output at once up to this size, else in chunks (iter_pack)")
    p.add_argument("--out-chunk-gib", type=float, default=1.0, help="output chunk size beyond --max-out-gib")
    p.add_argument("--memcpy-max-gib", type=float, default=1.0, help="largest buffer for the memcpy reference")
    p.add_argument("--prefault-gib", type=float, default=4.0,
                   help="before each timed call, touch and free up to this much memory (the largest output chunk; "
                        "untimed), so fresh allocations get pages the VM already backs (0: off)")
    a = p.parse_args()
    a.strategies = set(a.strategies.split(","))
    a.py_max_cells = int(a.py_max_cells)
    a.data_max_tokens = int(a.data_max_gib * 2**30 / 8)
    a.max_out_bytes = int(a.max_out_gib * 2**30)
    a.out_chunk_bytes = int(a.out_chunk_gib * 2**30)
    a.memcpy_max_bytes = int(a.memcpy_max_gib * 2**30)
    a.prefault_bytes = int(a.prefault_gib * 2**30)
    sizes = [int(float(s)) for s in a.sizes.split(",")]
    shapes = [B.SHAPES[s] for s in a.shapes.split(",")]
    only = set(a.only or ["bins", "pack", "memory"])
    if a.no_memory:
        only.discard("memory")
    rec = JsonRecorder(a.json)
    with tempfile.TemporaryDirectory(prefix="fastaxo-bench-") as tmp:
        os.environ.setdefault("HF_DATASETS_CACHE", str(Path(tmp) / "hf"))
        os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(tmp) / "numba"))
        load_baselines("bins" in only, "pack" in only)
        load_fastaxo(a.no_fastaxo)
        threads = a.threads or (fastaxo.default_num_threads() if fastaxo else None)
        print(f"# fastaxo {fastaxo.__version__ if fastaxo else '(pack API missing)'}; {machine()}")
        print(f"# fastaxo threads={threads}; "
              f"{B.versions(['axolotl', 'trl', 'fast-axolotl', 'numba', 'datasets', 'pyarrow', 'numpy'])}")
        print(f"# command: python bench/bench_pack.py {' '.join(sys.argv[1:])}".rstrip())
        for s in shapes:
            print(f"# {s.describe()}")
        sections = []
        if "bins" in only:
            t = Table(["shape", "rows", "case", "implementation", "median ms", "rows/s", "fastaxo speed-up", "bins",
                       "efficiency", "lower bound", "check"])
            for n in sizes:
                for s in shapes:
                    bins_section(s, n, a, t, rec)
                    gc.collect()
            sections.append("## Bin assignment\n\nfastaxo speed-up = this row's time / fastaxo's time on the same "
                            "rows and case (> 1: fastaxo is faster). TRL rows against fastaxo.pack_bins(bfd). "
                            + PREFIX_NOTE + "\n\n" + t.text())
        if "pack" in only:
            t = Table(["shape", "rows", "implementation", "median ms", "rows/s", "tokens/s", "bins", "out GB/s",
                       "fastaxo speed-up", "% of memcpy fresh / reused", "check"])
            for n in sizes:
                for s in shapes:
                    pack_section(s, n, a, t, rec)
                    gc.collect()
            sections.append(
                "## Materialisation (padded rows: input_ids, labels, position_ids, attention_mask, cu_seqlens; int64)"
                "\n\nfastaxo speed-up: assign+build rows against fastaxo.pack, build-only rows against "
                "fastaxo.pack(bins=...), fast-axolotl concatenate_and_pack against fastaxo.pack(nf, binary).\n"
                "out GB/s = output bytes written per second (fast-axolotl: its lists counted as int64 arrays); "
                "memcpy GB/s = bytes copied per second. " + PREFIX_NOTE + "\n\n" + t.text())
        if "memory" in only and fastaxo is not None:
            t = Table(["shape", "rows", "implementation", "ms", "extra peak MiB", "output MiB", "largest chunk MiB",
                       "peak / output"])
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
