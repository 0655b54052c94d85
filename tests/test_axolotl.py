"""End to end against the REAL axolotl (0.21) on CPU, offline: `axolotl preprocess` and
`axolotl train` in subprocesses on a tiny local tokenizer + random Llama (tests/axolotl_harness.py),
without and with the fastaxo plugin (fastaxo.integrations.axolotl.FastaxoPlugin).

Run (inside the venv that has axolotl; about 3.5-5 min on 2 cores):
    /work/venv-bench/bin/pytest tests/test_axolotl.py -v -s     # -s shows the timings

If `import axolotl` fails the tests FAIL when CI=true (a skip would count as a missing test in
CI) and skip otherwise. Everything is written under pytest's tmp dirs, never into the repo;
the >4 GiB file of the memory-limit test is deleted at its end.

Environment knobs: FASTAXO_TEST_AS_MARGIN_MB (default 512): RLIMIT_AS of the streaming test =
measured VmPeak of a tiny preprocess + this margin.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import math
import os
import pickle
import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import axolotl_harness as H
import numpy as np
import pytest

pytestmark = [pytest.mark.axolotl, pytest.mark.slow]

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
MAX_STEPS = 6
N_ALPACA = 400
DUP_FRACTION = 0.1
_AXOLOTL: tuple[bool, str] | None = None


def require_axolotl() -> None:
    """First line of every test: `import axolotl` must work (in this interpreter, which is the
    one whose bin/ runs axolotl). CI=true: FAIL with the reason; otherwise skip."""
    global _AXOLOTL
    if _AXOLOTL is None:
        _AXOLOTL = H.axolotl_importable()
    ok, info = _AXOLOTL
    if ok:
        return
    msg = (
        f"axolotl is not importable in {H.venv_bin().parent} ({info}); these tests need the "
        "venv with axolotl 0.21 (bench/setup_env.sh, AXOLOTL.md)"
    )
    if IN_CI:
        pytest.fail(msg + " -- CI=true: failing instead of skipping", pytrace=False)
    pytest.skip(msg)


def _say(msg: str) -> None:
    print(f"[axolotl] {msg}", flush=True)


def _once(fn: Callable[[Any], Any]) -> property:
    """A lazily computed Workspace attribute; a failure is cached too (re-raised, not re-run:
    an axolotl run that failed once costs 30 s each time it is retried)."""
    key = fn.__name__

    def get(self):
        if key not in self._cache:
            try:
                self._cache[key] = (True, fn(self))
            except BaseException as exc:  # noqa: BLE001 - re-raised for every user
                self._cache[key] = (False, exc)
        ok, value = self._cache[key]
        if not ok:
            raise value
        return value

    return property(get, doc=fn.__doc__)


class Workspace:
    """Session-wide tiny model, data and shared axolotl runs, all built lazily on first use
    (so a test can call require_axolotl() before anything imports transformers)."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory):
        self.root = tmp_path_factory.mktemp("axolotl")
        self._cache: dict[str, tuple[bool, Any]] = {}
        self.timings: dict[str, float] = {}

    def _timed(self, name: str, seconds: float) -> None:
        self.timings[name] = seconds
        _say(f"{name}: {seconds:.1f} s")

    @_once
    def model_dir(self) -> Path:
        """Tokenizer + random Llama in one dir (base_model and tokenizer_config)."""
        t0 = time.perf_counter()
        tok = H.make_tokenizer(self.root / "tokenizer")
        d = H.make_model(self.root / "model", tok)
        self._timed("make tokenizer + model", time.perf_counter() - t0)
        return d

    @_once
    def tokenizer(self):
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(self.model_dir))

    @_once
    def alpaca(self) -> dict[str, Any]:
        return H.make_alpaca(self.root / "data" / "alpaca.jsonl", N_ALPACA, DUP_FRACTION, seed=0)

    @_once
    def baseline(self) -> dict[str, Any]:
        """`axolotl preprocess` then `axolotl train` (6 steps), no plugin."""
        run = self.root / "baseline"
        cfg = H.write_config(run, model_dir=self.model_dir, datasets=self.alpaca["path"])
        pre = H.run_axolotl("preprocess", cfg, timeout=600)
        self._timed("baseline preprocess", pre.seconds)
        assert pre.returncode == 0, H.describe_failure(pre)
        train = H.run_axolotl("train", cfg, timeout=600)
        self._timed("baseline train", train.seconds)
        assert train.returncode == 0, H.describe_failure(train)
        return {"dir": run, "config": cfg, "prepared": run / "prepared", "preprocess": pre, "train": train}

    @_once
    def baseline_dataset(self):
        return H.load_prepared(self.baseline["prepared"])

    @_once
    def plugin_prep(self) -> dict[str, Any]:
        """`axolotl preprocess` with the plugin (defaults: dedupe, packing, collator on)."""
        run = self.root / "plugin"
        report = run / "preprocess_report.jsonl"
        cfg = H.write_config(
            run, model_dir=self.model_dir, datasets=self.alpaca["path"], name="preprocess.yml",
            **H.plugin_overrides(report),
        )
        pre = H.run_axolotl("preprocess", cfg, timeout=600)
        self._timed("plugin preprocess", pre.seconds)
        assert pre.returncode == 0, H.describe_failure(pre)
        return {"dir": run, "config": cfg, "prepared": run / "prepared", "preprocess": pre, "report": report}


@pytest.fixture(scope="session")
def ws(tmp_path_factory) -> Workspace:
    w = Workspace(tmp_path_factory)
    yield w
    if w.timings:
        _say("timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in w.timings.items()))


def _plugin_module():
    """fastaxo.integrations.axolotl (the installed one): an ImportError here is a failure."""
    return importlib.import_module("fastaxo.integrations.axolotl")


# --------------------------------------------------------------------------- baseline


def test_baseline_preprocess_and_train(ws):
    """The harness against real axolotl, no plugin: exact dedupe drops exactly the planted
    duplicates, and 6 training steps give finite losses."""
    require_axolotl()
    meta = ws.alpaca
    rows = H.read_alpaca(meta["path"])
    assert len(rows) == N_ALPACA
    # independent expectation: distinct (instruction, input, output) triples in the file
    expected_kept = H.distinct_count(H.row_key(r) for r in rows)
    assert expected_kept == meta["unique"] and len(rows) - expected_kept == meta["duplicates"] > 0

    ds = ws.baseline_dataset
    assert {"input_ids", "labels", "position_ids", "length"} <= set(ds.column_names)
    # every row fits sequence_len (256), so the length filter dropped nothing and the prepared
    # dataset is short by exactly the planted duplicates
    assert max(ds["length"]) <= 256
    assert len(ds) == expected_kept, (len(ds), expected_kept)
    assert len(rows) - len(ds) == meta["duplicates"]
    # and what is left is duplicate-free (tokenized rows are distinct)
    assert H.distinct_count(ds["input_ids"]) == len(ds)

    losses = H.parse_losses(ws.baseline["train"].stdout)
    assert len(losses) == MAX_STEPS, (losses, H.tail(ws.baseline["train"].stdout))
    assert H.all_finite(losses), losses
    _say(f"baseline losses {losses}")


# --------------------------------------------------------------------------- plugin


def _assert_same_rows(base, ds, who: str) -> None:
    """Same columns, features, row count and rows in the same order, column by column."""
    assert ds.column_names == base.column_names, (who, ds.column_names, base.column_names)
    assert ds.features == base.features, (who, ds.features, base.features)
    assert len(ds) == len(base), (who, len(ds), len(base))
    for col in base.column_names:
        a, b = base[col], ds[col]
        if a != b:
            i = next(k for k, (x, y) in enumerate(zip(a, b)) if x != y)
            pytest.fail(f"column {col!r} differs first at row {i}: axolotl {a[i]!r:.300} vs {who} {b[i]!r:.300}")


def test_plugin_preprocess_same_rows(ws):
    """Preprocess with the plugin keeps exactly axolotl's rows, in axolotl's order."""
    require_axolotl()
    base = ws.baseline_dataset
    prep = ws.plugin_prep
    ds = H.load_prepared(prep["prepared"])

    _assert_same_rows(base, ds, "plugin")

    report = H.read_report(prep["report"])
    dedupe = H.events(report, "dedupe")
    assert dedupe, f"no dedupe event in {prep['report']}: {report}"
    assert any(e.get("rows_kept") == len(ds) for e in dedupe), dedupe
    assert any(e.get("rows_in") == ws.alpaca["rows"] for e in dedupe), dedupe

    # in process: the replacement honours _deduplicate_dataset's contract, including the
    # train -> eval seen_hashes hand-over
    import axolotl.utils.data.utils as axo_data
    import datasets

    fx = _plugin_module()
    original = axo_data._deduplicate_dataset
    n = len(base)
    k = 2 * n // 3
    # train: rows [0, k) plus copies; eval: rows [k - 20, n) plus copies (20 of them seen in train)
    train = datasets.concatenate_datasets([base.select(range(k)), base.select(range(0, k, 3))])
    evalset = datasets.concatenate_datasets([base.select(range(k - 20, n)), base.select(range(k, n, 4))])
    train_a, seen_a = original(train)
    eval_a, _ = original(evalset, seen_a)
    with fx.patched():
        replaced = axo_data._deduplicate_dataset
        assert replaced is not original, "patched() did not replace _deduplicate_dataset"
        train_b, seen_b = replaced(train)
        eval_b, _ = replaced(evalset, seen_b)
    assert axo_data._deduplicate_dataset is original, "patched() did not restore _deduplicate_dataset"
    assert (len(train_a), len(eval_a)) == (k, n - k)
    assert train_b.to_dict() == train_a.to_dict()
    assert eval_b.to_dict() == eval_a.to_dict()


def _multipack(lengths: np.ndarray, *, batch_size: int, cap: int, group_size: int, bin_size: int,
               in_order: bool, seed: int = 0) -> list[list[list[int]]]:
    import torch
    from axolotl.utils.samplers.multipack import MultipackBatchSampler
    from torch.utils.data import RandomSampler, SequentialSampler

    data = range(len(lengths))
    sampler = SequentialSampler(data) if in_order else RandomSampler(
        data, generator=torch.Generator().manual_seed(seed))
    s = MultipackBatchSampler(
        sampler=sampler, batch_size=batch_size, batch_max_len=cap, lengths=lengths,
        bin_size=bin_size, group_size=group_size, drop_last=False, num_processes=1,
    )
    return [[list(map(int, b)) for b in batch] for batch in s]


def test_plugin_train(ws):
    """6 training steps with the plugin (packer + collator in a DataLoader worker + loader
    health), then axolotl's MultipackBatchSampler in process with and without patched()."""
    require_axolotl()
    prep = ws.plugin_prep  # train reuses the plugin's prepared dataset
    run = prep["dir"]
    report_path = run / "train_report.jsonl"
    cfg = H.write_config(
        run, model_dir=ws.model_dir, datasets=ws.alpaca["path"], name="train.yml",
        dataloader_num_workers=1, **H.plugin_overrides(report_path),
    )
    train = H.run_axolotl("train", cfg, timeout=600)
    ws._timed("plugin train", train.seconds)
    assert train.returncode == 0, H.describe_failure(train)
    losses = H.parse_losses(train.stdout)
    assert len(losses) == MAX_STEPS, (losses, H.tail(train.stdout))
    assert H.all_finite(losses), losses
    _say(f"plugin losses {losses}")

    report = H.read_report(report_path)
    packs = H.events(report, "pack")
    assert packs, f"no pack event in {report_path}: {[e.get('event') for e in report]}"
    for e in packs:
        assert e.get("every_index_once") is True, e
        assert e.get("within_capacity") is not False, e
        assert e["tokens"] <= e["bins"] * e["capacity"] or e.get("within_capacity") is True, e
        assert e["bins"] <= e["sequences"], e
    # dataloader_num_workers=1: every collate call runs in the DataLoader worker process, so
    # collate events exist only if the plugin reports from there
    collates = H.events(report, "collate")
    assert collates, f"no collate event in {report_path}: {[e.get('event') for e in report]}"
    assert all(e.get("batches", 0) >= 1 for e in collates), collates
    assert H.events(report, "loader_health"), f"no loader_health event: {[e.get('event') for e in report]}"

    # same data, same bins, same tensors -> the same losses as axolotl without the plugin
    base_losses = H.parse_losses(ws.baseline["train"].stdout)
    assert losses == pytest.approx(base_losses, abs=2e-3), (losses, base_losses)

    # in process: the replacement of pack_parallel inside axolotl's own sampler
    import axolotl.utils.data.utils as axo_data
    import axolotl.utils.samplers.multipack as axo_multipack

    fx = _plugin_module()
    ds = ws.baseline_dataset
    lengths = np.asarray(ds["length"], dtype=np.int64)
    token_rows = ds["input_ids"]
    orig_pack, orig_dedupe = axo_multipack.pack_parallel, axo_data._deduplicate_dataset
    cases = [
        dict(batch_size=2, cap=256, group_size=100_000, bin_size=200, in_order=False),  # the run's
        dict(batch_size=2, cap=256, group_size=100_000, bin_size=200, in_order=True),
        dict(batch_size=1, cap=512, group_size=64, bin_size=3, in_order=False),  # bin_size binds
        dict(batch_size=3, cap=300, group_size=50, bin_size=200, in_order=False, seed=7),
        dict(batch_size=1, cap=150, group_size=100_000, bin_size=200, in_order=True),  # over-long rows
    ]
    for case in cases:
        ref = _multipack(lengths, **case)
        with fx.patched():
            assert axo_multipack.pack_parallel is not orig_pack, "patched() did not replace pack_parallel"
            assert axo_data._deduplicate_dataset is not orig_dedupe, "patched() did not replace _deduplicate_dataset"
            got = _multipack(lengths, **case)
        assert axo_multipack.pack_parallel is orig_pack and axo_data._deduplicate_dataset is orig_dedupe

        bins = [b for batch in got for b in batch]
        flat = [i for b in bins for i in b]
        assert sorted(flat) == list(range(len(lengths))), f"{case}: not every index exactly once"
        for b in bins:
            assert len(b) <= case["bin_size"], (case, b)
            assert len(b) == 1 or lengths[b].sum() <= case["cap"], (case, b, lengths[b])
        assert all(len(batch) <= case["batch_size"] for batch in got)

        def packed_tokens(batches):
            return Counter(t for batch in batches for b in batch for i in b for t in token_rows[i])

        assert packed_tokens(got) == packed_tokens(ref), f"{case}: packed tokens differ"
        # the documented contract (ARCHITECTURE.md): axolotl's pack_parallel bin for bin
        assert got == ref, f"{case}: bins differ from axolotl's pack_parallel"


def test_train_with_two_dataloader_workers_after_a_parallel_dedupe(ws, tmp_path):
    """Fork safety in a real run (issue 18): `axolotl train` preprocesses in the training
    process itself (a fresh prepared path), where the plugin dedupes on 2 threads (an OpenMP
    team now exists in the parent); then the DataLoader forks 2 workers that collate 8-bin
    micro-batches with fastaxo. GNU OpenMP's team does not survive fork: a child that starts a
    parallel region hangs. The run must finish, the workers must report that their kernels run
    on one thread, and the losses must be finite."""
    require_axolotl()
    run = tmp_path / "run"
    report_path = run / "report.jsonl"
    cfg = H.write_config(
        run, model_dir=ws.model_dir, datasets=ws.alpaca["path"], name="train.yml",
        dataloader_num_workers=2, micro_batch_size=8, max_steps=4,
        **H.plugin_overrides(report_path, fastaxo_threads=2),
    )
    train = H.run_axolotl("train", cfg, timeout=600)
    ws._timed("train, 2 DataLoader workers", train.seconds)
    assert train.returncode == 0, H.describe_failure(train)
    losses = H.parse_losses(train.stdout)
    assert len(losses) == 4 and H.all_finite(losses), (losses, H.tail(train.stdout))

    report = H.read_report(report_path)
    dedupes = H.events(report, "dedupe")
    assert dedupes, f"no dedupe event: {[e.get('event') for e in report]}"
    parents = {e["pid"] for e in dedupes}
    assert all(e["kernel_threads"] == 2 and not e["forked_child"] for e in dedupes), dedupes
    collates = H.events(report, "collate")
    workers = {e["pid"] for e in collates}
    assert len(workers) == 2 and not workers & parents, (workers, parents)
    assert all(e["forked_child"] and e["kernel_threads"] == 1 for e in collates), collates[:3]
    assert all(e["bins"] == 8 for e in collates[:-1]), [e["bins"] for e in collates]


# --------------------------------------------------------------------------- collator


def _assert_same_batch(a, b, where: str) -> None:
    import torch

    assert set(a.keys()) == set(b.keys()), f"{where}: keys {sorted(a.keys())} vs {sorted(b.keys())}"
    for k in a.keys():
        x, y = a[k], b[k]
        assert isinstance(y, torch.Tensor), f"{where}: {k} is {type(y).__name__}, not a tensor"
        assert x.dtype == y.dtype, f"{where}: {k} dtype {x.dtype} vs {y.dtype}"
        assert x.shape == y.shape, f"{where}: {k} shape {tuple(x.shape)} vs {tuple(y.shape)}"
        assert torch.equal(x, y), f"{where}: {k} values differ\naxolotl {x}\nfastaxo {y}"


def test_collator_matches_axolotl(ws):
    """FastaxoCollator == V2BatchSamplerDataCollatorForSeq2Seq, tensor for tensor, on real
    packed rows of the prepared dataset; and it survives pickling (DataLoader workers)."""
    require_axolotl()
    from axolotl.utils.collators.batching import V2BatchSamplerDataCollatorForSeq2Seq

    fx = _plugin_module()
    FastaxoCollator = fx.FastaxoCollator
    assert dataclasses.is_dataclass(FastaxoCollator), "axolotl passes extra fields: must be a @dataclass"
    tok = ws.tokenizer
    ds = ws.baseline_dataset
    lengths = np.asarray(ds["length"], dtype=np.int64)
    sampler_batches = _multipack(lengths, batch_size=2, cap=256, group_size=100_000, bin_size=200,
                                 in_order=False)
    groupings: dict[str, Any] = {
        "sampler bins": sampler_batches[:3],
        "single-row bins": [[[0], [1], [2]]],
        "one long bin": [[[3, 4, 5, 6, 7, 8]]],
        "uneven bins": [[[9, 10, 11], [12], [13, 14]]],
        "flat rows": "flat",
    }
    checked = 0
    for name, batches in groupings.items():
        for multiple in (None, 64, 256):
            for with_mask in (True, False):
                kw = dict(padding=True, pad_to_multiple_of=multiple, return_tensors="pt")
                ref_c = V2BatchSamplerDataCollatorForSeq2Seq(tok, **kw)
                fx_c = FastaxoCollator(tok, **kw)
                if batches == "flat":
                    inputs = [ds.__getitems__([15, 16, 17])]  # a bare list of rows = one bin
                else:
                    inputs = [[ds.__getitems__(b) for b in batch] for batch in batches]
                for features in inputs:
                    if not with_mask:
                        features = (
                            [{k: v for k, v in r.items() if k != "attention_mask"} for r in features]
                            if isinstance(features[0], dict)
                            else [[{k: v for k, v in r.items() if k != "attention_mask"} for r in b] for b in features]
                        )
                    where = f"{name}, pad_to_multiple_of={multiple}, attention_mask={'kept' if with_mask else 'absent'}"
                    want = ref_c(copy.deepcopy(features))
                    got = fx_c(copy.deepcopy(features))
                    _assert_same_batch(want, got, where)
                    again = pickle.loads(pickle.dumps(fx_c))
                    _assert_same_batch(want, again(copy.deepcopy(features)), where + ", unpickled")
                    checked += 1
    assert checked >= 30
    _say(f"collator: {checked} batches identical")


# --------------------------------------------------------------------------- streaming


def test_streaming_same_rows_as_axolotl(ws, tmp_path):
    """`fastaxo_streaming: true` prepares exactly Axolotl's rows, in Axolotl's order (its merged
    shuffle, shuffle_merged_datasets at its default, then exact dedupe keeping first occurrences),
    although it runs Axolotl's per-row steps batch by batch: (1) the alpaca file through Axolotl's
    alpaca prompt strategy, and `axolotl train` on the streamed data gives the baseline's losses;
    (2) two pre-tokenized Parquet datasets (several row groups) with planted duplicates and rows
    over sequence_len that Axolotl's length filter drops."""
    require_axolotl()

    # 1. prompt strategy (alpaca): against the shared baseline run (no plugin)
    base = ws.baseline_dataset
    run = tmp_path / "alpaca"
    report = run / "report.jsonl"
    cfg = H.write_config(run, model_dir=ws.model_dir, datasets=ws.alpaca["path"],
                         **H.plugin_overrides(report, fastaxo_streaming=True, fastaxo_batch_rows=64))
    pre = H.run_axolotl("preprocess", cfg, timeout=600)
    ws._timed("streaming preprocess (alpaca)", pre.seconds)
    assert pre.returncode == 0, H.describe_failure(pre)
    assert H.prepared_dirs(run / "prepared") == [], "Axolotl's own loader ran: streaming was not used"
    ds, meta = H.load_streamed(run / "prepared")
    assert meta["rows_in"] == ws.alpaca["rows"], meta
    assert meta["duplicates"] == ws.alpaca["duplicates"] > 0, meta
    assert meta["readers"][0]["batch_rows"] == 64, meta  # 400 rows in 7 batches (copies sit anywhere later)
    _assert_same_rows(base, ds, "streaming")

    train = H.run_axolotl("train", cfg, timeout=600)
    ws._timed("streaming train (alpaca)", train.seconds)
    assert train.returncode == 0, H.describe_failure(train)
    events = H.read_report(report)
    assert H.events(events, "stream_cached"), f"train did not use the streamed data: {[e.get('event') for e in events]}"
    assert H.prepared_dirs(run / "prepared") == [], "train ran Axolotl's own loader"
    losses = H.parse_losses(train.stdout)
    base_losses = H.parse_losses(ws.baseline["train"].stdout)
    assert len(losses) == MAX_STEPS, (losses, H.tail(train.stdout))
    _say(f"streaming losses {losses}")
    # same rows, same order -> same bins and batches -> the baseline's losses (the plugin's
    # packer and collator are exact too: test_plugin_train)
    assert losses == pytest.approx(base_losses, abs=2e-3), (losses, base_losses)

    # 2. pre-tokenized, two datasets (merged, then shuffled as one), some rows over sequence_len
    data = tmp_path / "data"
    a = H.make_pretokenized(data / "a.parquet", 300, 0.15, seed=3, max_len=320, row_group_rows=64)
    b = H.make_pretokenized(data / "b.parquet", 120, 0.1, seed=4, max_len=280)
    datasets = [{"path": a["path"]}, {"path": b["path"]}]
    cfg = H.write_config(tmp_path / "pretok_base", model_dir=ws.model_dir, datasets=datasets)
    pre = H.run_axolotl("preprocess", cfg, timeout=600)
    ws._timed("baseline preprocess (pre-tokenized x2)", pre.seconds)
    assert pre.returncode == 0, H.describe_failure(pre)
    base = H.load_prepared(tmp_path / "pretok_base" / "prepared")
    cfg = H.write_config(tmp_path / "pretok_stream", model_dir=ws.model_dir, datasets=datasets,
                         **H.plugin_overrides(None, fastaxo_streaming=True, fastaxo_batch_rows=50))
    pre = H.run_axolotl("preprocess", cfg, timeout=600)
    ws._timed("streaming preprocess (pre-tokenized x2)", pre.seconds)
    assert pre.returncode == 0, H.describe_failure(pre)
    ds, meta = H.load_streamed(tmp_path / "pretok_stream" / "prepared")
    assert meta["rows_in"] == a["rows"] + b["rows"], meta
    assert meta["rows_wrapped"] - meta["rows_filtered"] > 0, f"no row over sequence_len: {meta}"
    assert meta["duplicates"] > 0, meta
    _assert_same_rows(base, ds, "streaming")
    _say(f"streaming == axolotl: alpaca {len(ws.baseline_dataset)} rows, pre-tokenized {len(ds)} rows "
         f"({meta['rows_wrapped'] - meta['rows_filtered']} over-long dropped, {meta['duplicates']} duplicates)")


# (under RLIMIT_AS a new thread's stack may be what does not fit: pthread_create says EAGAIN)
MEMORY_ERRORS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "ENOMEM",
                 "out of memory", "[Errno 12]", "Failed to launch worker thread: Resource "
                 "temporarily unavailable")


def test_streaming_under_memory_limit(ws, tmp_path):
    """A pre-tokenized Parquet file bigger than RLIMIT_AS: preprocess with fastaxo_streaming
    succeeds under the limit; axolotl alone fails under the same limit (the limit binds)."""
    require_axolotl()
    if H.prlimit_path() is None:
        pytest.fail("prlimit (util-linux) is required for the RLIMIT_AS test", pytrace=False)
    margin = int(os.environ.get("FASTAXO_TEST_AS_MARGIN_MB", "512")) << 20
    data = tmp_path / "data"
    try:
        # 1. the address space `axolotl preprocess` needs for a tiny pre-tokenized dataset
        small = H.make_pretokenized(data / "small.parquet", 200, DUP_FRACTION, seed=1)
        cfg = H.write_config(tmp_path / "measure", model_dir=ws.model_dir, datasets=[{"path": small["path"]}])
        vm_peak, proc = H.measure_vm_peak("preprocess", cfg, timeout=600)
        ws._timed("VmPeak measurement (tiny preprocess)", proc.seconds)
        assert proc.returncode == 0, H.describe_failure(proc)
        assert len(H.load_prepared(tmp_path / "measure" / "prepared")) == small["unique"]
        limit = vm_peak + margin
        _say(f"VmPeak of a tiny preprocess {vm_peak / 2**20:.0f} MiB -> RLIMIT_AS {limit / 2**20:.0f} MiB")

        # 2. a file bigger than the limit (big incompressible text column)
        n = 2000
        text_bytes = math.ceil(1.1 * limit / n)
        t0 = time.perf_counter()
        big = H.make_pretokenized(data / "big.parquet", n, DUP_FRACTION, seed=2, text_bytes=text_bytes)
        ws._timed(f"generate {big['bytes'] / 2**30:.2f} GiB Parquet", time.perf_counter() - t0)
        assert big["bytes"] > limit

        # 3. axolotl alone, same limit: must fail, and for lack of memory (the limit binds)
        cfg = H.write_config(tmp_path / "plain", model_dir=ws.model_dir, datasets=[{"path": big["path"]}])
        bad = H.run_axolotl("preprocess", cfg, timeout=600, prlimit_as=limit)
        ws._timed("axolotl preprocess under RLIMIT_AS (expected to fail)", bad.seconds)
        assert bad.returncode != 0, (
            "axolotl alone succeeded under the limit: the limit does not bind\n" + H.describe_failure(bad))
        out = bad.stdout + bad.stderr
        assert any(m in out for m in MEMORY_ERRORS), (
            "axolotl alone failed, but not for lack of memory:\n" + H.describe_failure(bad))
        _say("axolotl alone under the limit: " + next(l.strip() for l in out.splitlines() if any(m in l for m in MEMORY_ERRORS)))
        shutil.rmtree(tmp_path / "plain", ignore_errors=True)

        # 4. with the plugin's streaming loader, its default settings (batch rows sized from the
        # Parquet footers, 64 MiB read-ahead) and no allocator tuning: succeeds under the same limit
        report = tmp_path / "stream_report.jsonl"
        cfg = H.write_config(
            tmp_path / "stream", model_dir=ws.model_dir, datasets=[{"path": big["path"]}],
            **H.plugin_overrides(report, fastaxo_streaming=True),
        )
        ok = H.run_axolotl("preprocess", cfg, timeout=600, prlimit_as=limit)
        ws._timed("plugin streaming preprocess under RLIMIT_AS", ok.seconds)
        assert ok.returncode == 0, H.describe_failure(ok)
        streams = H.events(H.read_report(report), "stream")
        assert streams, f"no stream event in {report}"
        assert any(e.get("rows_in") == big["rows"] for e in streams), streams
        assert any(e.get("rows_out") == big["unique"] for e in streams), streams
        for e in streams:
            assert e["peak_rss_bytes"] < limit and e["vm_peak"] < limit, e
            _say(f"streaming under the limit: VmSize {e['vm_before'] / 2**20:.0f} MiB before the first batch, "
                 f"VmPeak {e['vm_peak'] / 2**20:.0f} MiB (limit {limit / 2**20:.0f} MiB), peak RSS "
                 f"{e['peak_rss_bytes'] / 2**20:.0f} MiB, {e['seconds']:.1f} s, readers {e['readers']}")
    finally:
        shutil.rmtree(data, ignore_errors=True)
        for sub in ("stream", "plain", "measure"):
            shutil.rmtree(tmp_path / sub, ignore_errors=True)
