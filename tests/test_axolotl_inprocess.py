"""The plugin's replacements against real axolotl's own functions, in this process.

Every replacement is compared with the function it replaces (imported from the installed
axolotl 0.21.0), on hypothesis-generated inputs: dedupe (kept rows, order, train -> eval
seen_hashes), pack_parallel (bin for bin), the V2 collator (tensor for tensor), and the
plugin's hooks (listed / unlisted / switched off / undone).
"""

from __future__ import annotations

import copy
import os
import pickle
import types
from unittest import mock

import numpy as np
import pytest
from conftest import main_leg_only
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

try:
    import axolotl  # noqa: F401
    import axolotl.utils.data.utils as axo_data
    import axolotl.utils.samplers.multipack as axo_multipack
    import torch
    from axolotl.utils.collators.batching import (
        BatchSamplerDataCollatorForSeq2Seq,
        V2BatchSamplerDataCollatorForSeq2Seq,
    )
    from axolotl.utils.dict import DictDefault
    _MISSING = None
except ImportError as exc:  # pragma: no cover
    _MISSING = exc

main_leg_only(_MISSING, "axolotl")

import datasets  # noqa: E402

import fastaxo  # noqa: E402
from fastaxo.integrations import axolotl as fx  # noqa: E402
from fastaxo.integrations.axolotl import packer as fx_packer  # noqa: E402
from fastaxo.integrations.axolotl import patches as fx_patches  # noqa: E402

pytestmark = pytest.mark.axolotl
SETTINGS = settings(max_examples=int(os.environ.get("FASTAXO_AXOLOTL_EXAMPLES", "60")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.WordLevel({"<unk>": 0, "<pad>": 1}, unk_token="<unk>"))
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", unk_token="<unk>")


# ------------------------------------------------------------------------------- pack_parallel

@SETTINGS
@given(lengths=st.lists(st.integers(0, 300), max_size=400), cap=st.integers(1, 256),
       group=st.integers(1, 150), bin_size=st.integers(1, 12))
def test_pack_parallel_bin_for_bin(lengths, cap, group, bin_size):
    orig = fx_patches._originals.get(("packing", "pack_parallel"), (None, None, axo_multipack.pack_parallel))[2]
    arr = np.asarray(lengths, dtype=np.int64)
    want = orig(arr, cap, group, bin_size, num_processes=1)
    got = fx.make_pack_parallel(orig)(arr, cap, group, bin_size, num_processes=1)
    assert got == want
    flat = sorted(i for b in got for i in b)
    assert flat == list(range(len(lengths)))  # every index exactly once
    for b in got:
        assert len(b) <= bin_size
        assert len(b) == 1 or sum(lengths[i] for i in b) <= cap


def test_pack_parallel_dtype_fallback():
    orig = axo_multipack.pack_parallel
    lengths = np.array([3.0, 4.0, 5.0])
    assert fx.make_pack_parallel(orig)(lengths, 8, 10, 4, num_processes=1) == \
        orig(lengths, 8, 10, 4, num_processes=1)


# ------------------------------------------------------------------ MultipackBatchSampler

class _ListSampler(torch.utils.data.Sampler):
    """A sampler of no type fastaxo knows: read through its iterator."""

    def __init__(self, order):
        self.order = order

    def __iter__(self):
        return iter(self.order)

    def __len__(self):
        return len(self.order)


def _sampler(kind, n, seed):
    if kind == "random-gen":
        return torch.utils.data.RandomSampler(range(n), generator=torch.Generator().manual_seed(seed))
    if kind == "random-global":
        return torch.utils.data.RandomSampler(range(n))
    if kind == "random-num-samples":
        return torch.utils.data.RandomSampler(range(n), num_samples=2 * n + 3,
                                              generator=torch.Generator().manual_seed(seed))
    if kind == "random-global-num-samples":  # fastaxo replays the fresh generator in C
        return torch.utils.data.RandomSampler(range(n), num_samples=max(1, n * (seed % 3) + seed % 7))
    if kind == "sequential":
        return torch.utils.data.SequentialSampler(range(n))
    return _ListSampler(list(np.random.default_rng(seed).permutation(n)))


@SETTINGS
@given(lengths=st.lists(st.integers(1, 300), min_size=1, max_size=300), cap=st.integers(300, 700),
       batch_size=st.integers(1, 5), bin_size=st.integers(1, 12), group=st.integers(1, 400),
       drop_last=st.booleans(), seed=st.integers(0, 2**16),
       kind=st.sampled_from(["random-gen", "random-global", "random-num-samples", "random-global-num-samples",
                             "sequential", "custom"]))
def test_generate_batches_same_batches_stats_and_draws(lengths, cap, batch_size, bin_size, group, drop_last,
                                                       seed, kind):
    orig = fx_patches._originals.get(("packing", "MultipackBatchSampler.generate_batches"),
                             (None, None, axo_multipack.MultipackBatchSampler.generate_batches))[2]
    repl = fx.make_generate_batches(orig)
    lengths = np.asarray(lengths)
    runs = []
    # Axolotl's generate_batches ends with gc.collect() (~0.2 s with torch loaded): skipped here
    # through the module's own `gc` name, which changes no result.
    with mock.patch.object(axo_multipack, "gc", types.SimpleNamespace(collect=lambda *a: 0)):
        for fn in (orig, repl):
            runs.append(_draw_batches(fn, kind, lengths, cap, batch_size, bin_size, group, drop_last, seed))
    assert runs[0] == runs[1]
    batches = runs[1][0]
    flat = [i for b in batches for bin_ in b for i in bin_]
    if not kind.endswith("num-samples"):  # those draw more samples than rows: indices repeat
        assert len(flat) == len(set(flat))  # no index twice
    for b in batches:
        assert len(b) == batch_size or not drop_last
        for bin_ in b:
            assert len(bin_) <= bin_size and (len(bin_) == 1 or lengths[bin_].sum() <= cap)


def _draw_batches(fn, kind, lengths, cap, batch_size, bin_size, group, drop_last, seed):
    """Two generate_batches calls on a fresh sampler: batches, statistics, and where the global
    torch generator is left."""
    torch.manual_seed(seed)  # the global generator, for RandomSampler without its own
    s = axo_multipack.MultipackBatchSampler(_sampler(kind, len(lengths), seed), batch_size=batch_size,
                                            batch_max_len=cap, lengths=lengths, bin_size=bin_size,
                                            group_size=group, drop_last=drop_last, num_processes=1)
    first = fn(s, set_stats=True)
    s._batches = None
    second = fn(s, set_stats=False)  # the next draws of the same generator
    return (list(first), list(second), s.total_tokens_used, s.total_token_slots, torch.rand(1).item())


@pytest.mark.parametrize("n", [1, 2, 623, 625, 90_000])
def test_sampler_replay_equals_torch(n):
    """RandomSampler without a generator: fastaxo's C replay of the fresh generator (MT19937 +
    torch's Fisher-Yates) gives torch's own order, and leaves the global generator where
    torch's iterator leaves it."""
    out = []
    for fn in (fx_packer._sampler_indices, lambda s: np.fromiter(iter(s), dtype=np.int64)):
        torch.manual_seed(n)
        s = torch.utils.data.RandomSampler(range(n), num_samples=2 * n + n // 3)
        out.append((fn(s).tolist(), torch.rand(1).item()))
    assert fx_packer._SAMPLER_CHECK == [True]
    assert out[0] == out[1]


def test_packed_batches_behave_like_the_list():
    ids = np.array([7, 3, 9, 1, 4, 2, 8], dtype=np.int64)
    offsets = np.array([0, 2, 3, 5, 6, 7], dtype=np.int64)  # 5 bins
    pb = fx.PackedBatches(ids, offsets, 2, 0, 3)
    want = [[[7, 3], [9]], [[1, 4], [2]], [[8]]]
    assert list(pb) == want and pb == want and len(pb) == 3
    assert pb[0] == want[0] and pb[-1] == want[-1] and pb[1:] == want[1:] and list(pb[:2]) == want[:2]
    assert pb[::2] == want[::2] and list(pb[5:]) == []
    with pytest.raises(IndexError):
        pb[3]


def test_sampler_with_len_and_iter_under_the_patch():
    lengths = np.random.default_rng(0).integers(1, 500, 3000)
    outs = []
    for patch in (False, True):
        torch.manual_seed(3)
        s = axo_multipack.MultipackBatchSampler(torch.utils.data.RandomSampler(range(len(lengths))),
                                                batch_size=2, batch_max_len=1024, lengths=lengths,
                                                bin_size=200, num_processes=1)
        if patch:
            with fx.patched(parts=("packing",)):
                assert getattr(axo_multipack.MultipackBatchSampler.generate_batches, "__fastaxo__", False)
                outs.append((len(s), s.efficiency(), list(iter(s))))
        else:
            outs.append((len(s), s.efficiency(), list(iter(s))))
    assert outs[0] == outs[1]
    assert not getattr(axo_multipack.MultipackBatchSampler.generate_batches, "__fastaxo__", False)


# ------------------------------------------------------------------------------------ dedupe

_rows = st.lists(st.lists(st.integers(-100, 3000), max_size=12), max_size=60)


def _dataset(token_rows, extra):
    return datasets.Dataset.from_dict({
        "input_ids": token_rows,
        "labels": [[-100] + r[1:] if r else [] for r in token_rows],
        "score": [float(len(r)) + extra for r in token_rows],
    })


@SETTINGS
@given(rows=_rows, dup=st.lists(st.integers(0, 59), max_size=30), seed=st.integers(0, 2**16),
       eval_take=st.integers(0, 20), shuffle=st.booleans())
def test_dedupe_same_rows_and_order(rows, dup, seed, eval_take, shuffle):
    rows = rows + [rows[i % len(rows)] for i in dup] if rows else rows
    ds = _dataset(rows, 0.5)
    if shuffle and len(ds):
        ds = ds.shuffle(seed=seed)  # an indices mapping, as after Axolotl's merge
    ev = ds.select(range(min(eval_take, len(ds)))) if len(ds) else ds
    orig = fx_patches._originals.get(("dedupe", "_deduplicate_dataset"), (None, None, axo_data._deduplicate_dataset))[2]
    a_train, a_seen = orig(ds)
    a_eval, _ = orig(ev, a_seen)
    repl = fx.make_deduplicate_dataset(orig)
    b_train, b_seen = repl(ds)
    b_eval, _ = repl(ev, b_seen)
    assert isinstance(b_seen, fx.SeenHashes) and len(b_seen) == len(a_seen)
    assert b_train.to_dict() == a_train.to_dict()
    assert b_eval.to_dict() == a_eval.to_dict()


def test_dedupe_foreign_seen_falls_back():
    orig = axo_data._deduplicate_dataset
    ds = _dataset([[1, 2], [1, 2], [3]], 0.0)
    _, seen = orig(ds)  # Axolotl's hex strings
    ev = _dataset([[1, 2], [4]], 0.0)
    got, _ = fx.make_deduplicate_dataset(orig)(ev, set(seen))
    want, _ = orig(ev, set(seen))
    assert got.to_dict() == want.to_dict() == {"input_ids": [[4]], "labels": [[-100]], "score": [1.0]}


def test_patched_replaces_and_restores():
    before = (axo_data._deduplicate_dataset, axo_multipack.pack_parallel)
    with fx.patched():
        assert getattr(axo_data._deduplicate_dataset, "__fastaxo__", False)
        assert getattr(axo_multipack.pack_parallel, "__fastaxo__", False)
        ds = _dataset([[5, 6], [7], [5, 6]], 0.0)
        out, _ = axo_data.deduplicate_and_log_datasets(dataset=ds)
        assert out["input_ids"] == [[5, 6], [7]]
    assert (axo_data._deduplicate_dataset, axo_multipack.pack_parallel) == before


# ---------------------------------------------------------------------------------- collator

@st.composite
def _bins(draw):
    mask = draw(st.booleans())
    pos = draw(st.booleans())
    as_numpy = draw(st.booleans())
    n_bins = draw(st.integers(1, 4))
    bins = []
    for _ in range(n_bins):
        rows = []
        for _ in range(draw(st.integers(1, 5))):
            n = draw(st.integers(0, 40))
            ids = draw(st.lists(st.integers(2, 999), min_size=n, max_size=n))
            row = {"input_ids": ids, "labels": [-100] * min(2, n) + ids[2:]}
            if mask:
                row["attention_mask"] = [1] * n
            if pos:
                row["position_ids"] = list(range(n))
            row["length"] = n
            if as_numpy:
                row = {k: (np.asarray(v, dtype=np.int64) if isinstance(v, list) else v) for k, v in row.items()}
            rows.append(row)
        bins.append(rows)
    if all(len(r["input_ids"]) == 0 for b in bins for r in b):
        bins[0][0] = {k: ([7] if k != "length" else 1) for k in bins[0][0]}
        if "labels" in bins[0][0]:
            bins[0][0]["labels"] = [7]
    return bins


def _assert_same(ref, got):
    assert set(ref.keys()) == set(got.keys())
    for k in ref:
        assert ref[k].dtype == got[k].dtype, k
        assert tuple(ref[k].shape) == tuple(got[k].shape), k
        assert torch.equal(ref[k], got[k]), k


@SETTINGS
@given(bins=_bins(), multiple=st.sampled_from([None, 1, 8, 64, 256]), segments=st.booleans())
def test_collator_tensor_for_tensor(tokenizer, bins, multiple, segments):
    ref_cls = V2BatchSamplerDataCollatorForSeq2Seq if segments else BatchSamplerDataCollatorForSeq2Seq
    ref = ref_cls(tokenizer, padding=True, pad_to_multiple_of=multiple, return_tensors="pt")(copy.deepcopy(bins))
    col = fx.FastaxoCollator(tokenizer, padding=True, pad_to_multiple_of=multiple, return_tensors="pt",
                             segments=segments)
    col = pickle.loads(pickle.dumps(col))  # DataLoader workers get a pickled copy
    _assert_same(ref, col(copy.deepcopy(bins)))


def test_collator_fast_path_runs_and_falls_back(tokenizer, monkeypatch):
    bins = [[{"input_ids": [5, 6, 7], "labels": [-100, 6, 7], "attention_mask": [1, 1, 1],
              "position_ids": [0, 1, 2], "length": 3}]]
    col = fx.FastaxoCollator(tokenizer, padding=True, pad_to_multiple_of=8, return_tensors="pt")
    assert col._fast_ok(bins, "pt") is not None
    calls = []
    real = fx.FastaxoCollator._collate
    monkeypatch.setattr(fx.FastaxoCollator, "_collate", lambda self, b, k: calls.append(1) or real(self, b, k))
    col(copy.deepcopy(bins))
    assert calls == [1]
    # an extra column is Axolotl's business: same output as its own collator, fast path not taken
    odd = [[dict(bins[0][0], token_type_ids=[0, 0, 0])]]
    assert col._fast_ok(odd, "pt") is None
    _assert_same(V2BatchSamplerDataCollatorForSeq2Seq(tokenizer, padding=True, pad_to_multiple_of=8,
                                                      return_tensors="pt")(copy.deepcopy(odd)), col(copy.deepcopy(odd)))
    # left padding: Axolotl's collator too
    tokenizer.padding_side = "left"
    try:
        assert col._fast_ok(bins, "pt") is None
        _assert_same(V2BatchSamplerDataCollatorForSeq2Seq(tokenizer, padding=True, pad_to_multiple_of=8,
                                                          return_tensors="pt")(copy.deepcopy(bins)),
                     col(copy.deepcopy(bins)))
    finally:
        tokenizer.padding_side = "right"


# ------------------------------------------------------------------------------------- hooks

def _cfg(**kw):
    base = {"sample_packing": True, "eval_sample_packing": False, "attn_implementation": "sdpa",
            "model_config_type": "llama"}
    base.update(kw)
    return DictDefault(base)


def test_plugin_listed_turns_on_defaults_and_undoes():
    p = fx.FastaxoPlugin()
    try:
        p.register({"plugins": [fx.PLUGIN_NAME]})
        assert p.active and p.settings.dedupe and p.settings.packing and p.settings.collator
        assert not p.settings.streaming
        assert getattr(axo_multipack.pack_parallel, "__fastaxo__", False)
        assert getattr(axo_data._deduplicate_dataset, "__fastaxo__", False)
        cls, kw = p.get_collator_cls_and_kwargs(_cfg(), is_eval=False)
        assert cls is fx.FastaxoCollator and kw["segments"] is True
        assert p.get_collator_cls_and_kwargs(_cfg(), is_eval=True) is None  # eval not packed
        assert p.get_collator_cls_and_kwargs(_cfg(attn_implementation="flash_attention_2"), False) is None
        assert p.get_collator_cls_and_kwargs(_cfg(sample_packing=False), False) is None
    finally:
        p.on_config_validation_error({})
    assert not getattr(axo_multipack.pack_parallel, "__fastaxo__", False)
    assert not getattr(axo_data._deduplicate_dataset, "__fastaxo__", False)


def test_plugin_switches_off_each_part():
    p = fx.FastaxoPlugin()
    try:
        p.register({"plugins": [fx.PLUGIN_NAME], "fastaxo_dedupe": False, "fastaxo_collator": False,
                    "fastaxo_loader_health": False})
        assert getattr(axo_multipack.pack_parallel, "__fastaxo__", False)
        assert not getattr(axo_data._deduplicate_dataset, "__fastaxo__", False)
        assert p.get_collator_cls_and_kwargs(_cfg(), is_eval=False) is None
        assert p.add_callbacks_post_trainer(_cfg(), trainer=None) == []
        assert p.load_datasets(_cfg(), preprocess=True) is None
    finally:
        p.on_config_validation_error({})


def test_plugin_unlisted_without_keys_does_nothing():
    # An entry-point-loaded plugin sees configs that never asked for it.
    p = fx.FastaxoPlugin()
    p.register({"plugins": ["some.other.Plugin"], "sample_packing": True})
    assert not p.active
    assert not getattr(axo_multipack.pack_parallel, "__fastaxo__", False)
    assert p.get_collator_cls_and_kwargs(_cfg(), is_eval=False) is None
    assert p.load_datasets(_cfg(), preprocess=True) is None
    assert p.add_callbacks_post_trainer(_cfg(), trainer=None) == []


@pytest.mark.parametrize("version, ok", [
    ("0.18.2", False), ("0.19.0", True), ("0.19.1", True), ("0.20.0", False),  # 0.20: untested
    ("0.21.0", True), ("0.22.0", False), ("1.21.0", False)])
def test_version_check_message(monkeypatch, version, ok):
    monkeypatch.setattr(fx._axolotl, "__version__", version)
    if ok:
        fx.check_axolotl_version()
        return
    with pytest.raises(RuntimeError) as exc:  # (a fastaxo error, and a RuntimeError as before)
        fx.check_axolotl_version()
    assert isinstance(exc.value, fastaxo.UnsupportedVersionError)
    msg = str(exc.value)
    assert "\n" not in msg
    assert f"supports axolotl 0.19 and 0.21; this is axolotl {version}." in msg
    assert "pip install 'fastaxo[axolotl]'" in msg


def test_streaming_declines_what_it_does_not_cover(tmp_path):
    from fastaxo.integrations.axolotl.stream import _unsupported

    f = tmp_path / "d.parquet"
    f.write_bytes(b"PAR1")
    ok = DictDefault({"datasets": [DictDefault({"path": str(f)})]})
    assert _unsupported(ok) is None
    assert "val_set_size" in _unsupported(DictDefault(dict(ok, val_set_size=0.1)))
    assert "not a local file" in _unsupported(DictDefault({"datasets": [DictDefault({"path": "org/hub-name"})]}))
    j = tmp_path / "d.json"
    j.write_text("[]")
    assert "format .json is not covered" in _unsupported(DictDefault({"datasets": [DictDefault({"path": str(j)})]}))


def test_extra_pins_exactly_the_supported_axolotls():
    """The installed fastaxo's `axolotl` extra gives each Python one Axolotl minor, and those are
    the plugin's SUPPORTED: what pip installs is what the plugin accepts (and CI tests)."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    reqs = [Requirement(r) for r in md.requires("fastaxo") or [] if r.startswith("axolotl")]
    picked = {}
    for py in ("3.10", "3.11", "3.12", "3.13", "3.14"):
        env = {"extra": "axolotl", "python_version": py}
        got = [str(r.specifier) for r in reqs if r.marker is not None and r.marker.evaluate(env)]
        assert len(got) == 1, (py, got)
        picked[py] = got[0]
    assert picked == {"3.10": "==0.19.*", "3.11": "==0.19.*", "3.12": "==0.21.*",
                      "3.13": "==0.21.*", "3.14": "==0.21.*"}
    assert sorted({tuple(map(int, p[2:-2].split("."))) for p in picked.values()}) == \
        sorted(fx.SUPPORTED)


# -- a dataset packed by fastaxo prepare: the collator Axolotl builds for it --------------------

def test_prepacked_collator_takes_fastaxo_max_mask_bytes(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    import fastaxo
    from fastaxo.errors import CapacityError
    from fastaxo.integrations.axolotl import prepacked

    src = tmp_path / "t.parquet"
    pq.write_table(pa.table({"input_ids": [[1, 2, 3], [4, 5], [6, 7, 8, 9]]}), src)
    out = tmp_path / "packed.parquet"
    fastaxo.prepare(str(src), str(out), 8, progress=False)
    rows = pq.read_table(out).to_pylist()
    for limit, refused in ((None, False), (4096, False), (16, True)):
        cfg = DictDefault({"datasets": [{"path": str(out)}], "attn_implementation": "sdpa",
                           "fastaxo_max_mask_bytes": limit})
        cls, kwargs = prepacked.collator_for_prepacked(cfg, False, lambda *a, **k: None)
        collate = cls(None, **kwargs)  # as Axolotl builds it
        width = len(rows[0]["input_ids"])
        if refused:  # 1 row x width x width booleans, more than 16 bytes
            with pytest.raises(CapacityError, match="max_mask_bytes"):
                collate(rows[:1])
        else:
            assert collate(rows[:1])["attention_mask"].shape[-2:] == (width, width)


def test_a_damaged_or_odd_parquet_file_is_not_taken_for_a_packed_one(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fastaxo.integrations.axolotl import prepacked

    path = tmp_path / "names.parquet"
    pq.write_table(pa.table({"zqzqzq": [1]}), path)
    path.write_bytes(path.read_bytes().replace(b"zqzqzq", b"\xff\xfezqzq"))  # not UTF-8
    cut = tmp_path / "cut.parquet"
    pq.write_table(pa.table({"a": [1]}), cut)
    cut.write_bytes(cut.read_bytes()[:-9])
    assert not prepacked.is_prepacked(str(path)) and not prepacked.is_prepacked(str(cut))


def test_architecture_lists_every_replaced_function():
    """ARCHITECTURE.md's list of the Axolotl functions the plugin replaces is the patch table,
    part by part, and each one is there to replace in the installed Axolotl (the functions
    only newer Axolotls have aside); the methods wrapped on one object (the trainer's
    get_batch_samples) are listed too."""
    import importlib
    import inspect
    import re

    from conftest import REPO

    text = (REPO / "ARCHITECTURE.md").read_text()
    block = text.split("<!-- replaced-functions -->")[1].split("<!-- /replaced-functions -->")[0]
    listed: dict[str, set[str]] = {}
    part = None
    for line in block.splitlines():
        m = re.match(r"\s*- (\w+):", line)
        if m:
            part = m.group(1)
        if part is not None:
            listed.setdefault(part, set()).update(
                re.findall(r"`((?:axolotl|transformers)\.[\w.]+)`", line))
    table = {part: {f"{mod}.{attr}" for mod, attr, _, _ in targets}
             for part, targets in fx_patches._TARGETS.items()}
    table |= {part: {f"{mod}.{attr}" for mod, attr, _ in wraps}
              for part, wraps in fx_patches.INSTANCE_WRAPS.items()}
    assert listed == table
    for wraps in fx_patches.INSTANCE_WRAPS.values():  # each there, with the listed parameters
        for mod, attr, params in wraps:
            cls_name, name = attr.split(".")
            fn = getattr(getattr(importlib.import_module(mod), cls_name), name)
            assert tuple(inspect.signature(fn).parameters)[1:] == params, attr
    for targets in fx_patches._TARGETS.values():
        for mod, attr, _, _ in targets:
            if attr in fx_patches._NEWER_ONLY:
                continue
            if mod in fx_patches._IMPORT_FIRST:
                importlib.import_module(fx_patches._IMPORT_FIRST[mod])
            owner = importlib.import_module(mod)
            for name in attr.split("."):
                owner = getattr(owner, name)
            assert callable(owner), f"{mod}.{attr}"


def test_the_health_callback_wraps_only_the_listed_method():
    """The loader-health callback wraps one trainer's get_batch_samples when its parameters
    are the ones patches.INSTANCE_WRAPS lists, and times the pulls; a trainer whose method
    takes other parameters keeps it (said once, not wrapped blindly)."""
    from fastaxo.integrations.axolotl.health import LoaderHealthCallback

    class Trainer:
        def get_batch_samples(self, epoch_iterator, num_batches, device):
            return [next(epoch_iterator) for _ in range(num_batches)], None

    class Other:
        def get_batch_samples(self, epoch_iterator, num_batches):
            return [], None

    settings = types.SimpleNamespace(peak_flops=None)
    good, other = Trainer(), Other()
    own = other.get_batch_samples
    cb = LoaderHealthCallback(good, {}, settings)
    LoaderHealthCallback(other, {}, settings)
    assert "get_batch_samples" in vars(good) and other.get_batch_samples == own
    batch = {"input_ids": np.ones((2, 3), np.int64), "attention_mask": np.ones((2, 3), np.int64)}
    out, _ = good.get_batch_samples(iter([batch, batch]), 2, "cpu")
    assert len(out) == 2 and cb.batches == 2 and cb.wait >= 0
