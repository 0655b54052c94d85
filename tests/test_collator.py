"""PackedCollator against its plain-Python twin (fastaxo._reference.collate): a differential
fuzz with padding anywhere in the rows, every layout, marking and input type; and the faults
it is there to keep out (a varlen sequence opening on padding, unchecked input values, a 4-D
mask too big to allocate), each as a table of one-line cases."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest
from conftest import main_leg_only
from hypothesis import given
from hypothesis import strategies as st

import fastaxo
from fastaxo._core.proc import mem_available_bytes
from fastaxo._reference.collate import packed_collate

try:
    import torch

    from fastaxo.integrations.transformers import PackedCollator
    _MISSING = None
except ImportError as exc:  # pragma: no cover
    _MISSING = exc
main_leg_only(_MISSING, "torch")

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


# ---------------------------------------------------------------------------------------------
# the fuzz

def as_kind(values: list[int], kind: str, small: bool) -> object:
    """One row's column as a list, a NumPy array or a torch tensor (of a dtype that holds it)."""
    if kind == "list":
        return values
    lo, hi = min(values, default=0), max(values, default=0)
    if kind == "numpy":
        if small and lo >= 0 and hi <= 1:
            return np.array(values, bool)
        if lo >= 0 and hi > 2**62:
            return np.array(values, np.uint64)
        return np.array(values, np.int32 if -2**31 <= lo and hi < 2**31 else np.int64)
    if small and lo >= 0 and hi <= 1:
        return torch.tensor(values, dtype=torch.bool)
    if lo >= 0 and hi < 256:
        return torch.tensor(values, dtype=torch.uint8)
    return torch.tensor(values, dtype=torch.int64)


@st.composite
def padded_sequence(draw):
    """One sequence as a row holds it: token flags (True = padding, attention_mask 0) for
    padding before it (left padding), a gap inside it, padding after it (right padding)."""
    lead, body, gap, rest, trail = draw(st.tuples(st.integers(0, 2), st.integers(1, 4),
                                                  st.integers(0, 2), st.integers(0, 3),
                                                  st.integers(0, 2)))
    return [True] * lead + [False] * body + [True] * gap + [False] * rest + [True] * trail


MARKINGS = ("seq_lengths", "position_ids", "position_ids+ones", "segments", "ones")


@st.composite
def batches(draw):
    """A batch of packed rows: padded sequences side by side, rows of padding only, empty
    rows; as a mapping marking -> the same rows marked that way: TRL's seq_lengths (one
    declared sequence per padded sequence, empty ones between, padding after them
    undeclared; a mask or none), position ids (with or without a 0/1 mask), fastaxo's
    segment ids, or a 0/1 mask alone. Columns as lists, NumPy arrays or torch tensors, row
    by row."""
    ids_st = st.integers(0, 50) | st.sampled_from([I64_MAX, 2**63 - 2, 2**31, 2**31 - 1])
    shapes = []
    for _ in range(draw(st.integers(0, 4))):
        seqs = draw(st.lists(padded_sequence(), max_size=4))
        tail = draw(st.integers(0, 3) if draw(st.booleans()) else st.just(0))  # undeclared
        n = sum(map(len, seqs)) + tail
        shapes.append((seqs, tail, draw(st.lists(ids_st, min_size=n, max_size=n)),
                       draw(st.lists(st.sampled_from([None, None, -100, 5, I64_MIN]),
                                     min_size=n, max_size=n))))
    with_labels = draw(st.booleans())
    masks = {m: m != "position_ids" for m in MARKINGS}
    masks["seq_lengths"] = draw(st.integers(0, 3)) > 0  # seq_lengths without a mask too
    return {m: [mark(draw, m, *shape, masks[m], with_labels) for shape in shapes]
            for m in MARKINGS}


def mark(draw, marking, seqs, tail, ids, labels, with_mask, with_labels):
    """One row marked one way, each column a list, a NumPy array or a torch tensor."""
    flags = [f for q in seqs for f in q] + [True] * tail  # True: padding
    row: dict[str, list[int]] = {"input_ids": ids}
    if with_labels:  # the token itself, or a label of its own
        row["labels"] = [t if x is None else x for t, x in zip(ids, labels)]
    if with_mask:
        if marking == "segments":
            row["attention_mask"] = [0 if f else k + 1 for k, q in enumerate(seqs)
                                     for f in q] + [0] * tail
        else:  # 1/0, or any non-zero value inside TRL's declared sequences
            on = draw(st.sampled_from([1, 1, 2, 7])) if marking == "seq_lengths" else 1
            row["attention_mask"] = [0 if f else on for f in flags]
    if marking.startswith("position_ids"):
        anything = iter(draw(st.lists(st.sampled_from([0, 1, 3, I64_MAX, I64_MIN]),
                                      min_size=len(flags), max_size=len(flags))))
        pos = []  # each sequence's tokens count from 0; padding's positions are anything
        for q in seqs + [[True] * tail]:
            at = 0
            for f in q:
                pos.append(next(anything) if f else at)
                at += not f
        row["position_ids"] = pos
    if marking == "seq_lengths":
        declared = [len(q) for q in seqs]
        if not with_mask:
            declared.append(tail)  # no mask, no padding: the tail is one more sequence
        for _ in range(draw(st.integers(0, 2))):  # empty sequences anywhere
            declared.insert(draw(st.integers(0, len(declared))), 0)
        row["seq_lengths"] = declared
    kind_st = st.sampled_from(["list", "numpy", "torch"])
    return {k: as_kind(v, draw(kind_st), k == "attention_mask") for k, v in row.items()}


def layouts(model_dtype):
    """(label, collator keyword arguments, layout): sdpa's boolean mask, eager's float mask in
    a dtype a model may have (and NumPy's float32), the varlen keywords; pt and np."""
    model = types.SimpleNamespace(dtype=model_dtype, config=types.SimpleNamespace(
        _attn_implementation="eager", pad_token_id=None))
    return [("sdpa pt", {"attn_implementation": "sdpa"}, "mask"),
            ("sdpa np", {"attn_implementation": "sdpa", "return_tensors": "np"}, "mask"),
            (f"eager {model_dtype}", {"model": model}, "mask"),
            ("eager np", {"attn_implementation": "eager", "return_tensors": "np"}, "mask"),
            ("varlen pt", {"attn_implementation": "flash_attention_2"}, "varlen"),
            ("varlen np", {"attn_implementation": "flash_attention_3", "return_tensors": "np"},
             "varlen")]


def plain(v):
    return v.tolist() if isinstance(v, (np.ndarray, torch.Tensor)) else v


def check_against_twin(rows, kw, marking, model_dtype):
    want = {layout: packed_collate(rows, layout, **kw) for layout in ("mask", "varlen")}
    for name, args, layout in layouts(model_dtype):
        label = f"{marking}: {name}"
        got = PackedCollator(**args, **kw)(rows)
        w = want[layout]
        tensors = args.get("return_tensors", "pt")
        for k in ("input_ids", "labels", "position_ids"):
            assert got[k].dtype == (np.int64 if tensors == "np" else torch.int64), (label, k)
            if layout == "varlen":
                assert plain(got[k]) == [w[k]], (label, k)
            else:
                assert plain(got[k]) == w[k], (label, k)
        if layout == "varlen":
            for k in ("cu_seq_lens_q", "cu_seq_lens_k"):
                assert plain(got[k]) == w["cu_seq_lens"], (label, k)
                assert got[k].dtype == (np.int32 if tensors == "np" else torch.int32)
            longest = max(np.diff(w["cu_seq_lens"]), default=0)
            assert got["max_length_q"] == got["max_length_k"] == longest, label
            continue
        m = got["attention_mask"]
        if "sdpa" in label:
            assert m.dtype in (np.bool_, torch.bool), label
            assert plain(m[:, 0]) == w["attention_mask"], label
            continue
        want_dt = np.float32 if tensors == "np" else args["model"].dtype
        assert m.dtype == want_dt, label
        lowest = (np.finfo(np.float32) if tensors == "np" else torch.finfo(want_dt)).min
        keep = np.array(w["attention_mask"], bool).reshape(m.shape[0], m.shape[-1], m.shape[-1])
        cells = m[:, 0].double().numpy() if tensors == "pt" else m[:, 0]
        assert np.array_equal(cells == 0, keep), label
        assert (cells[~keep] == float(lowest)).all(), label


@given(marked=batches(), mult=st.sampled_from([None, 1, 3, 8]),
       sep=st.sampled_from([-100, None, 9]), pad_id=st.sampled_from([0, 2]),
       label_pad=st.sampled_from([-100, -1]), model_dtype=st.sampled_from(FLOATS))
def test_collator_equals_its_twin(marked, mult, sep, pad_id, label_pad, model_dtype):
    """Every layout of PackedCollator against fastaxo._reference.collate, token for token and
    mask cell for mask cell, on one batch marked every way; an empty batch refused by every
    layout."""
    kw = {"pad_token_id": pad_id, "label_pad_token_id": label_pad, "separator_id": sep,
          "pad_to_multiple_of": mult}
    for marking, rows in marked.items():
        if not rows:
            for _, args, _ in layouts(model_dtype):
                with pytest.raises(fastaxo.InvalidInputError, match="features is empty"):
                    PackedCollator(**args, **kw)(rows)
            continue
        check_against_twin(rows, kw, marking, model_dtype)


# ---------------------------------------------------------------------------------------------
# item by item

TRL_LEFT_PADDED = [  # TRL's pack_dataset rows (bfd) of left-padded sequences: padding first
    {"input_ids": [0, 0, 5, 6], "attention_mask": [0, 0, 1, 1], "seq_lengths": [4]},
    {"input_ids": [0, 7, 8, 0, 9], "attention_mask": [0, 1, 1, 0, 1], "seq_lengths": [3, 2]},
]


@pytest.mark.parametrize("rows, cu, labels", [
    # a row's first sequence opens on padding: it stays its own sequence
    (TRL_LEFT_PADDED, [0, 2, 4, 5], [-100, 6, -100, 8, -100]),
    # the same inside a row: the second declared sequence opens on padding
    ([{"input_ids": [5, 6, 0, 7], "attention_mask": [1, 1, 0, 1], "seq_lengths": [2, 2]}],
     [0, 2, 3], [-100, 6, -100]),
    # padding inside a declared sequence does not split it
    ([{"input_ids": [5, 0, 6], "attention_mask": [1, 0, 1], "seq_lengths": [3]}],
     [0, 2], [-100, 6]),
    # the same batch marked by a 0/1 mask with position ids, and by segment ids
    ([{"input_ids": [0, 0, 5, 6], "attention_mask": [0, 0, 1, 1], "position_ids": [0, 1, 0, 1]},
      {"input_ids": [0, 7, 8, 0, 9], "attention_mask": [0, 1, 1, 0, 1],
       "position_ids": [0, 0, 1, 0, 0]}],
     [0, 2, 4, 5], [-100, 6, -100, 8, -100]),
    ([{"input_ids": [0, 0, 5, 6], "attention_mask": [0, 0, 1, 1]},
      {"input_ids": [0, 7, 8, 0, 9], "attention_mask": [0, 1, 1, 0, 2]}],
     [0, 2, 4, 5], [-100, 6, -100, 8, -100]),
])
def test_varlen_sequence_opening_on_padding_keeps_its_start(rows, cu, labels):
    """A sequence whose first tokens are padding (attention_mask 0) starts at its first kept
    token in the varlen layout: it neither joins the sequence before it nor is its first
    token predicted from that sequence (the separator label goes on it)."""
    got = PackedCollator(attn_implementation="flash_attention_2", return_tensors="np")(rows)
    assert got["cu_seq_lens_q"].tolist() == cu
    assert got["labels"][0].tolist() == labels
    assert got["position_ids"][0].tolist() == [i - a for a, z in zip(cu, cu[1:])
                                                for i in range(a, z)]
    assert got["cu_seq_lens_q"].tolist() == packed_collate(rows, "varlen")["cu_seq_lens"]
    mask = PackedCollator(attn_implementation="sdpa", return_tensors="np")(rows)
    assert mask["labels"].tolist() == packed_collate(rows, "mask")["labels"]


def test_trl_left_padded_rows_give_unpacked_logits():
    """TRL's own pack_dataset on left-padded rows, collated for flash attention (run here on
    sdpa from the position ids, as transformers does without a mask): every sequence's logits
    equal its unpadded run."""
    trl_utils = pytest.importorskip("trl.data_utils")
    datasets = pytest.importorskip("datasets")
    transformers = pytest.importorskip("transformers")
    rng = np.random.default_rng(7)
    seqs = [rng.integers(3, 97, int(k)).tolist() for k in rng.integers(1, 12, 24)]
    width = 12  # each sequence left-padded to it, as a tokenizer with padding_side="left" does
    padded = {"input_ids": [[0] * (width - len(s)) + s for s in seqs],
              "attention_mask": [[0] * (width - len(s)) + [1] * len(s) for s in seqs]}
    packed = trl_utils.pack_dataset(datasets.Dataset.from_dict(padded), 40, strategy="bfd")
    rows = [packed[i] for i in range(len(packed))]
    cfg = transformers.LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, pad_token_id=0, use_cache=False)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    model.config._attn_implementation = "sdpa"
    batch = PackedCollator(attn_implementation="flash_attention_2")(rows)
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"]).logits[0]
        want = {tuple(s): model(input_ids=torch.tensor([s])).logits[0] for s in seqs}
    cu = batch["cu_seq_lens_q"].tolist()
    assert len(cu) - 1 == len(seqs)
    for a, z in zip(cu, cu[1:]):
        key = tuple(batch["input_ids"][0, a:z].tolist())
        assert torch.allclose(logits[a:z], want[key], atol=1e-4), key
        assert batch["labels"][0, a].item() == -100


@pytest.mark.parametrize("rows, match", [
    # seq_lengths: every value >= 0; the sum exactly the row's length, computed without a wrap
    ([{"input_ids": [1, 2, 3], "seq_lengths": [2**62] * 3 + [2**62 + 3]}],
     r"features\[0\]\['seq_lengths'\] add up to 18,446,744,073,709,551,619; the row has 3"),
    ([{"input_ids": [1, 2, 3], "seq_lengths": np.array([2**63 - 1, 2**63 - 1, 5], np.int64)}],
     r"features\[0\]\['seq_lengths'\] add up to 18,446,744,073,709,551,619; the row has 3"),
    ([{"input_ids": [1, 2], "seq_lengths": [2]}, {"input_ids": [1, 2], "seq_lengths": [3, -1]}],
     r"features\[1\]\['seq_lengths'\]\[1\] is -1; sequence lengths must be >= 0"),
    ([{"input_ids": [1, 2, 3], "seq_lengths": [1]}],
     r"features\[0\]\['seq_lengths'\] add up to 1; the row has 3 tokens: they must add up"),
    ([{"input_ids": [1, 2, 3], "seq_lengths": [1], "attention_mask": [1, 1, 0]}],
     r"add up to 1; the row has 3 tokens.*padding only where the row's attention_mask is 0"),
    ([{"input_ids": [1, 2, 3], "seq_lengths": [4, 5]}], r"seq_lengths'\] add up to 9"),
    # values beyond int64: uint64 arrays and tensors, Python ints
    ([{"input_ids": np.array([1, 2**63], np.uint64)}],
     r"features\[0\]\['input_ids'\] holds 9223372036854775808 at position 1; expected "
     r"integers that fit int64"),
    ([{"input_ids": [1]}, {"input_ids": torch.tensor([3, 2**64 - 1], dtype=torch.uint64)}],
     r"features\[1\]\['input_ids'\] holds 18446744073709551615 at position 1"),
    ([{"input_ids": [1, 2**63]}], r"features\[0\]\['input_ids'\] holds 9223372036854775808"),
    ([{"input_ids": [1, 2], "labels": [1, -(2**63) - 1]}],
     r"features\[0\]\['labels'\] holds -9223372036854775809 at position 1"),
    # not integers
    ([{"input_ids": [1], "position_ids": [0]}, {"input_ids": [1], "position_ids": [0.5]}],
     r"features\[1\]\['position_ids'\] must be a 1-D sequence of integers, got list \(float "
     r"0\.5 at position 0\)"),
    ([{"input_ids": np.array([1.0, 2.0])}],
     r"features\[0\]\['input_ids'\] must be .* integers, got float64 \(float 1\.0 at position"),
    ([{"input_ids": torch.tensor([1, 2], dtype=torch.bfloat16)}],
     r"features\[0\]\['input_ids'\] must be .* integers, got a torch\.bfloat16 tensor"),
    ([{"input_ids": torch.tensor([1.0, 2.0])}], r"got a torch\.float32 tensor"),
    ([{"input_ids": [1, 2], "labels": np.array([1, None], object)}],
     r"features\[0\]\['labels'\] must be .* integers, got object \(NoneType None at position 1"),
    ([{"input_ids": [1, 2], "attention_mask": ["1", "1"]}],
     r"features\[0\]\['attention_mask'\] must be .*, got list \(str '1' at position 0\)"),
    ([{"input_ids": [[1, 2], [3]]}],
     r"features\[0\]\['input_ids'\] must be .*, got list \(list \[1, 2\] at position 0\)"),
    ([{"input_ids": np.array([[1, 2], [3, 4]])}], r"got shape \(2, 2\)"),
    ([{"input_ids": 5}], r"features\[0\]\['input_ids'\] must be .*, got shape \(\)"),
    # a mapping of columns whose columns disagree
    ({"input_ids": [[1, 2], [3]], "labels": [[1, 2]]},
     r"features\['labels'\] has 1 rows; features\['input_ids'\] has 2"),
    ({"input_ids": 3}, r"features\['input_ids'\] must be a column"),
    ({"input_ids": []}, "features is empty"),
])
@pytest.mark.parametrize("attn", ["sdpa", "flash_attention_2"])
def test_values_that_are_not_int64_are_refused(rows, match, attn):
    with pytest.raises(fastaxo.InvalidInputError, match=match):
        PackedCollator(attn_implementation=attn)(rows)


def test_values_that_fit_are_taken_as_they_are():
    """The edges of the checks above: uint64 ids up to 2**63-1, int64's extremes, bool masks,
    an unsigned seq_lengths array, empty float rows (no values to be wrong)."""
    rows = [{"input_ids": np.array([2**63 - 1, 0], np.uint64), "labels": [I64_MIN, I64_MAX],
             "attention_mask": np.array([True, True]), "seq_lengths": np.array([1, 1], np.uint8)},
            {"input_ids": torch.tensor([], dtype=torch.float32), "labels": np.array([]),
             "attention_mask": [], "seq_lengths": []}]
    got = PackedCollator(attn_implementation="sdpa", return_tensors="np", separator_id=None)(rows)
    assert got["input_ids"].tolist() == [[I64_MAX, 0], [0, 0]]
    assert got["labels"].tolist() == [[I64_MIN, I64_MAX], [-100, -100]]
    assert got["position_ids"].tolist() == [[0, 0], [0, 1]]


def test_position_ids_at_int64_max_do_not_wrap_into_one_sequence():
    """2**63-1 followed by -2**63 is no continuation by one (int64 arithmetic wraps it)."""
    rows = [{"input_ids": [5, 6, 7], "position_ids": [I64_MAX - 1, I64_MAX, I64_MIN]}]
    got = PackedCollator(attn_implementation="flash_attention_2", return_tensors="np")(rows)
    assert got["cu_seq_lens_q"].tolist() == [0, 2, 3] == packed_collate(rows, "varlen")[
        "cu_seq_lens"]


@pytest.mark.parametrize("value, match", [
    ("float33", "mask_dtype must be a float dtype"),
    (torch.int64, r"mask_dtype must be a float dtype .* got torch\.int64"),
    (np.int32, "mask_dtype must be a float dtype"),
])
def test_mask_dtype_must_be_a_float(value, match):
    with pytest.raises(fastaxo.InvalidInputError, match=match):
        PackedCollator(attn_implementation="eager", mask_dtype=value)


@pytest.mark.parametrize("value, want", [
    ("bfloat16", torch.bfloat16), (np.float16, torch.float16), (torch.float64, torch.float64),
])
def test_mask_dtype_by_any_name(value, want):
    got = PackedCollator(attn_implementation="eager", mask_dtype=value)([{"input_ids": [1, 2]}])
    assert got["attention_mask"].dtype == want
    assert got["attention_mask"][0, 0, 0, 1].item() == torch.finfo(want).min


def test_a_model_whose_dtype_is_no_float_gets_a_float32_mask():
    model = types.SimpleNamespace(config=types.SimpleNamespace(_attn_implementation="eager"),
                                  dtype=torch.int8)
    got = PackedCollator(model=model)([{"input_ids": [1, 2]}])
    assert got["attention_mask"].dtype == torch.float32


# ---------------------------------------------------------------------------------------------
# the mask layout's size

def rows_of(n: int, width: int) -> list[dict]:
    return [{"input_ids": list(range(width))} for _ in range(n)]


def test_a_mask_too_big_is_refused_before_anything_is_allocated():
    """8 x 32,768 is an 8 GiB 4-D mask for sdpa (32 GiB for eager in float32): refused with its
    size and the way out, in a child whose address space could not hold it (an attempt to
    allocate it would be a MemoryError there; an OOM kill without the limit)."""
    script = textwrap.dedent("""
        import resource
        import fastaxo
        from fastaxo.integrations.transformers import PackedCollator
        import torch  # noqa: F401  (its mappings count before the limit)
        rows = [{"input_ids": list(range(32768))} for _ in range(8)]
        kib = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0])
        limit = kib * 1024 + (1 << 30)  # 1 GiB more than it has mapped now
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        for attn in ("sdpa", "eager"):
            for tensors in ("pt", "np"):
                try:
                    PackedCollator(attn_implementation=attn, return_tensors=tensors)(rows)
                except fastaxo.CapacityError as exc:
                    print(attn, tensors, exc)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd="/", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [["sdpa", "pt"], ["sdpa", "np"],
                                                     ["eager", "pt"], ["eager", "np"]], lines
    for line in lines:
        attn, _, msg = line.split(" ", 2)
        size, dtype = (("8.0 GiB (8,589,934,592 bytes)", "bool") if attn == "sdpa"
                       else ("32.0 GiB (34,359,738,368 bytes)", "float32"))
        assert msg.startswith(f"PackedCollator: this batch's {attn} attention mask "
                              f"([8, 1, 32768, 32768] {dtype}: 8 rows of 32,768 tokens) takes "
                              f"{size}, more than max_mask_bytes (1,073,741,824); use flash "
                              "attention "
                              "(attn_implementation='flash_attention_2': its varlen layout "
                              "needs no mask), or smaller batches or shorter rows, or raise "
                              "max_mask_bytes"), line


@pytest.mark.parametrize("attn, bound, ok, refused", [
    ("sdpa", 2048, (2, 32), (3, 32)),   # bytes: 2,048 and 3,072
    ("eager", 2048, (2, 16), (3, 16)),  # float32: 2,048 and 3,072
    ("sdpa", None, (16, 256), None),
])
def test_max_mask_bytes_is_the_bound(attn, bound, ok, refused):
    c = PackedCollator(attn_implementation=attn, max_mask_bytes=bound, return_tensors="np")
    assert c(rows_of(*ok))["attention_mask"].shape == (ok[0], 1, ok[1], ok[1])
    if refused:
        with pytest.raises(fastaxo.CapacityError,
                           match=r"takes 3,072 bytes, more than max_mask_bytes \(2,048\)"):
            c(rows_of(*refused))
    varlen = PackedCollator(attn_implementation="flash_attention_2", max_mask_bytes=1)
    assert varlen(rows_of(8, 64))["input_ids"].shape == (1, 512)  # no mask, no bound


def test_a_mask_bigger_than_the_memory_available_is_refused_whatever_the_bound():
    avail = mem_available_bytes()
    if avail is None:  # pragma: no cover
        pytest.skip("no /proc/meminfo")
    width = int((avail * 1.5) ** 0.5)  # one row: its 4-D mask is 1.5 x what is available
    c = PackedCollator(attn_implementation="sdpa", max_mask_bytes=None)
    with pytest.raises(fastaxo.CapacityError,
                       match=r"takes [\d.,]+ GiB \([\d,]+ bytes\), more than the [\d.,]+ GiB "
                             r"of memory available; use flash attention"):
        c([{"input_ids": np.arange(width)}])


def test_max_mask_bytes_is_checked():
    for bad in (0, -1):
        with pytest.raises(fastaxo.InvalidInputError, match="max_mask_bytes must be >= 1"):
            PackedCollator(attn_implementation="sdpa", max_mask_bytes=bad)
    with pytest.raises(fastaxo.InvalidTypeError, match="max_mask_bytes must be a positive int"):
        PackedCollator(attn_implementation="sdpa", max_mask_bytes=1.5)

