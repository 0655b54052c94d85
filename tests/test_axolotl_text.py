"""fastaxo's completion and pretraining tokenization against the real Axolotl, in process:
``type: completion`` (CompletionPromptTokenizingStrategy), ``type: pretrain``
(PretrainTokenizationStrategy: pretraining_dataset with sample packing) and
``encode_streaming`` (pretraining_dataset without it), each run by Axolotl's own code and with
``patched(parts=("completion",))`` on the same batches, on Qwen3's and Llama 3.2's real
tokenizers; rows, keys, order and Arrow types compared; and what goes to Axolotl's code."""

from __future__ import annotations

import random

import pytest
from conftest import main_leg_only

try:
    import axolotl  # noqa: F401
    import axolotl.utils.data.streaming as axo_streaming
    import datasets
    from axolotl.datasets import TokenizedPromptDataset
    from axolotl.prompt_strategies.completion import CompletionPromptTokenizingStrategy
    from axolotl.prompt_strategies.completion import load as load_completion
    from axolotl.prompt_strategies.pretrain import load as load_pretrain
    from axolotl.utils.dict import DictDefault
    _MISSING = None
except ImportError as exc:  # pragma: no cover
    _MISSING = exc

main_leg_only(_MISSING, "axolotl")

import chat_data  # noqa: E402
import tokenizer_data  # noqa: E402

from fastaxo.integrations.axolotl import patched  # noqa: E402
from fastaxo.integrations.axolotl.settings import row_counts  # noqa: E402
from fastaxo.integrations.axolotl.text import encoder_for  # noqa: E402

pytestmark = pytest.mark.axolotl
datasets.disable_progress_bars()


@pytest.fixture(scope="module", params=["qwen3", "llama3"])
def tok(request):
    if request.param == "qwen3":
        return chat_data.qwen3_tokenizer()
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tokenizer_data.llama3_json().parent))


@pytest.fixture
def no_hashing(monkeypatch):
    """datasets fingerprints each map by pickling the mapped method with its tokenizer (~2.5 s
    of CPU for Qwen3's, the same with and without fastaxo): a random fingerprint instead.
    The rows do not depend on it."""
    import importlib

    import datasets.fingerprint as fp

    def random_fingerprint(*args, **kwargs):
        return fp.generate_random_fingerprint()

    # Axolotl 0.19 has no work queue
    for name in ("datasets.fingerprint", "datasets.arrow_dataset",
                 "axolotl.utils.data.work_queue"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        monkeypatch.setattr(mod, "update_fingerprint", random_fingerprint)


def texts(seed: int = 0, n: int = 40) -> list[str]:
    """Empty texts, texts far longer than the sequence, unicode, special tokens' strings
    (Qwen's and Llama's, inside words and alone), whitespace runs, and chat-like messages."""
    rng = random.Random(seed)
    fixed = ["", "a", "x " * 700, "数据 模型 训练 東京 🙂🚀 naïve façade ½ ∑ ≤ ١٢٣",
             "<|im_start|>user\nhi<|im_end|>", "a<|endoftext|>b<|begin_of_text|>c<|eot_id|>",
             "<|end_of_text|>", "  \n\n\t  ", "", "Don'T 12345 it's\r\n"]
    return fixed + [chat_data.message(rng, 1, 400) for _ in range(n)]


def cfg(seq: int) -> DictDefault:
    return DictDefault({"sequence_len": seq, "train_on_inputs": False,
                        "pretraining_dataset": [{"text_column": "text"}]})


def plain(v):
    return v.tolist() if hasattr(v, "tolist") else v


def assert_same(want, got) -> None:
    assert type(got) is type(want)
    assert list(got) == list(want)
    for key in want:
        assert len(got[key]) == len(want[key]), key
        for i, (a, b) in enumerate(zip(want[key], got[key], strict=True)):
            assert plain(b) == plain(a), f"column {key} row {i} differs"


def counts(kind: str, before: dict[str, int]) -> dict[str, int]:
    after = row_counts(kind)
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def strategy(kind: str, tok, seq: int):
    return (load_completion if kind == "completion" else load_pretrain)(tok, cfg(seq))


# ------------------------------------------------------------------------- the strategies

@pytest.mark.parametrize("kind", ["completion", "pretrain"])
@pytest.mark.parametrize("seq", [5, 16, 300, 4096])
def test_strategy_batches_identical(tok, kind, seq):
    strat = strategy(kind, tok, seq)
    data = texts(seed=seq)
    batches = [{"text": data[i:i + 16]} for i in range(0, len(data), 16)]
    want = [strat.tokenize_prompt(dict(b)) for b in batches]
    before = row_counts(kind)
    with patched(parts=("completion",)):
        got = [strat.tokenize_prompt(dict(b)) for b in batches]
    for w, g in zip(want, got, strict=True):
        assert_same(w, g)
    # transformers 5.16 (Axolotl 0.19's) returns each text's first window only: Axolotl's code
    why = encoder_for(tok)[0].windows if kind == "pretrain" else None
    assert counts(kind, before) == ({"fast": len(data)} if why is None
                                    else {f"fallback: {why}": len(data)})


def test_first_window_only_goes_to_axolotl(monkeypatch):
    """A tokenizer whose overflowing call returns each text's first window only (transformers
    5.16's, what Axolotl 0.19 installs) must not get fastaxo's windows: its rows are Axolotl's."""
    from transformers import PreTrainedTokenizerFast as Fast

    call = Fast.__call__

    def first_windows(self, *args, **kwargs):
        out = call(self, *args, **kwargs)
        if kwargs.get("return_overflowing_tokens") and "overflow_to_sample_mapping" in out:
            which, keep = out["overflow_to_sample_mapping"], []
            for i, w in enumerate(which):
                if i == 0 or which[i - 1] != w:
                    keep.append(i)
            for key in list(out.keys()):
                out[key] = [out[key][i] for i in keep]
        return out

    monkeypatch.setattr(Fast, "__call__", first_windows)
    tok = chat_data.qwen3_tokenizer()  # a new object: its encoder check runs again
    strat = strategy("pretrain", tok, 16)
    batch = {"text": texts(seed=5, n=20)}
    want = strat.tokenize_prompt(dict(batch))
    assert len(want["input_ids"]) == len(batch["text"])  # the simulation holds
    before = row_counts("pretrain")
    with patched(parts=("completion",)):
        got = strat.tokenize_prompt(dict(batch))
    assert_same(want, got)
    assert counts("pretrain", before) == {
        "fallback: the tokenizer's overflowing windows are not HF's (all windows of each "
        "text)": len(batch["text"])}


@pytest.mark.parametrize(("kind", "num_proc"), [("completion", 1), ("pretrain", 1),
                                               ("completion", 2)])
def test_tokenized_dataset_identical(tok, kind, num_proc, no_hashing):
    """Axolotl's TokenizedPromptDataset (Dataset.map, or its work queue with 2 processes): the
    same Arrow table, types included (input_ids int32, attention_mask int8, labels int64)."""
    strat = strategy(kind, tok, 64)
    ds = datasets.Dataset.from_dict({"text": texts(seed=7, n=60)})
    want = TokenizedPromptDataset(strat, ds, process_count=num_proc, keep_in_memory=True)
    with patched(parts=("completion",)):
        got = TokenizedPromptDataset(strat, ds, process_count=num_proc, keep_in_memory=True)
    assert got.features == want.features
    assert got.data.table.equals(want.data.table)


def test_completion_null_text_gives_no_row(tok, no_hashing):
    strat = strategy("completion", tok, 32)
    ds = datasets.Dataset.from_dict({"text": ["a b c", None, "", "d e"]})
    want = ds.map(strat.tokenize_prompt, batched=True, remove_columns=["text"])
    before = row_counts("completion")
    with patched(parts=("completion",)):
        got = ds.map(strat.tokenize_prompt, batched=True, remove_columns=["text"])
    assert got.data.table.equals(want.data.table)
    assert len(got) == 2
    assert counts("completion", before) == {"fast": 4}


# --------------------------------------------------------------------- encode_streaming

@pytest.mark.parametrize("concatenate", [True, False])
@pytest.mark.parametrize("max_tokens", [8, 64, 1000])
def test_encode_streaming_identical(tok, concatenate, max_tokens):
    data = texts(seed=max_tokens)
    if tok.bos_token_id is None and concatenate:
        data = [t for t in data if t]  # (see test_encode_streaming_empty_text_without_bos)
    want = axo_streaming.encode_streaming({"text": list(data)}, tok, max_tokens, "text", concatenate)
    before = row_counts("pretrain")
    with patched(parts=("completion",)):
        got = axo_streaming.encode_streaming({"text": list(data)}, tok, max_tokens, "text",
                                             concatenate)
    assert_same(want, got)
    assert counts("pretrain", before) == {"fast": len(data)}


def test_encode_streaming_empty_text_without_bos():
    """Qwen3 adds no BOS: Axolotl's row of an empty text is float (torch.tensor([])), which
    fastaxo does not reproduce: the batch goes to Axolotl's code, counted."""
    tok = chat_data.qwen3_tokenizer()
    batch = {"text": ["a b", "", "c"]}
    want = axo_streaming.encode_streaming(dict(batch), tok, 16, "text", True)
    before = row_counts("pretrain")
    with patched(parts=("completion",)):
        got = axo_streaming.encode_streaming(dict(batch), tok, 16, "text", True)
    assert got == want
    assert counts("pretrain", before) == {
        "fallback: an empty text without a BOS (Axolotl's row is float)": 3}


def test_streaming_dataset_identical(tok):
    """Axolotl's own streaming wrapper (pretraining_dataset, no sample packing): the same rows
    out of the IterableDataset."""
    data = texts(seed=3, n=50)
    if tok.bos_token_id is None:
        data = [t for t in data if t]
    c = DictDefault({"sequence_len": 128, "sample_packing": False,
                     "pretraining_dataset": [DictDefault({"text_column": "text"})],
                     "pretraining_sample_concatenation": True,
                     "streaming_multipack_buffer_size": 16, "shuffle_merged_datasets": False})

    def rows():
        it = datasets.Dataset.from_dict({"text": data}).to_iterable_dataset()
        return list(axo_streaming.wrap_streaming_dataset(it, tok, c, None))

    want = rows()
    with patched(parts=("completion",)):
        got = rows()
    assert got == want and len(want) > 1


# ------------------------------------------------------------ what goes to Axolotl's code

def test_forced_hf_goes_to_axolotl(tok, monkeypatch):
    monkeypatch.setenv("FASTAXO_TOKENIZER", "hf")
    strat = strategy("completion", tok, 64)
    batch = {"text": texts(seed=5, n=5)}
    want = strat.tokenize_prompt(dict(batch))
    before = row_counts("completion")
    with patched(parts=("completion",)):
        got = strat.tokenize_prompt(dict(batch))
    assert_same(want, got)
    assert counts("completion", before) == {"fallback: FASTAXO_TOKENIZER=hf": len(batch["text"])}


def test_switched_off_and_subclass_go_to_axolotl(tok):
    class Mine(CompletionPromptTokenizingStrategy):
        pass

    base = strategy("completion", tok, 64)
    sub = Mine(base.prompter, tok, False, 64, max_length=64 * 64)
    batch = {"text": ["one two", "three"]}
    before = row_counts("completion")
    with patched(parts=("completion",), completion=False):
        assert_same(base.tokenize_prompt.__wrapped__(base, dict(batch)),
                    base.tokenize_prompt(dict(batch)))
    assert counts("completion", before) == {}
    with patched(parts=("completion",)):
        got = sub.tokenize_prompt(dict(batch))
    assert counts("completion", before) == {
        "fallback: strategy Mine (fastaxo reproduces the completion strategy)": 2}
    assert_same(CompletionPromptTokenizingStrategy.tokenize_prompt(sub, dict(batch)), got)


def test_non_str_text_goes_to_axolotl(tok):
    strat = strategy("pretrain", tok, 64)
    before = row_counts("pretrain")
    with patched(parts=("completion",)), pytest.raises(Exception) as got:  # noqa: B017
        strat.tokenize_prompt({"text": ["a", None]})
    with pytest.raises(type(got.value)):
        strat.tokenize_prompt({"text": ["a", None]})
    assert counts("pretrain", before) == {"fallback: no text column, or a text that is not a str": 2}
    strat = strategy("completion", tok, 64)
    before = row_counts("completion")
    with patched(parts=("completion",)), pytest.raises(KeyError):  # Axolotl's own error
        strat.tokenize_prompt({"other": ["a"]})
    assert counts("completion", before) == {
        "fallback: no text column, or a text that is not a str": 1}


def test_tokenizer_changed_in_place_is_checked_again():
    """Tokens added after the first batch: the encoder is made again for the new tokenizer."""
    tok = chat_data.qwen3_tokenizer()
    strat = strategy("completion", tok, 64)
    batch = {"text": ["a<|my_token|>b and more", "plain"]}
    with patched(parts=("completion",)):
        strat.tokenize_prompt(dict(batch))
        tok.add_special_tokens({"additional_special_tokens": ["<|my_token|>"]})
        got = strat.tokenize_prompt(dict(batch))
    want = strat.tokenize_prompt(dict(batch))
    assert_same(want, got)
    assert tok.convert_tokens_to_ids("<|my_token|>") in got["input_ids"][0]


def test_axolotl_preprocess_with_plugin_identical(tmp_path):
    """A real `axolotl preprocess` of a `type: completion` JSONL dataset (Qwen3's tokenizer,
    rows longer than sequence_len, empty and special-token texts), without and with the
    plugin: the same prepared dataset, every row fastaxo's."""
    import json

    import axolotl_harness as ah

    tok = chat_data.qwen3_tokenizer()
    model = ah.make_model(tmp_path / "model", tok, hidden_size=16, intermediate_size=32,
                          num_attention_heads=2, num_key_value_heads=1)
    data = tmp_path / "text.jsonl"
    docs = texts(seed=21, n=150)
    data.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in docs))
    common = dict(model_dir=model, datasets=[{"path": str(data), "type": "completion"}],
                  sequence_len=256, sample_packing=False, pad_to_sequence_len=False,
                  dataset_num_proc=1, special_tokens={"pad_token": "<|endoftext|>"})
    report = tmp_path / "report.jsonl"
    base = ah.write_config(tmp_path / "base", **common)
    plug = ah.write_config(tmp_path / "plug", **common, **ah.plugin_overrides(report))
    for c in (base, plug):
        ah.run_axolotl("preprocess", c, timeout=900, check=True)
    want = ah.load_prepared(tmp_path / "base" / "prepared")
    got = ah.load_prepared(tmp_path / "plug" / "prepared")
    assert want.column_names == got.column_names and len(want) == len(got) > 150
    assert want.features == got.features
    for col in want.column_names:
        assert want[col] == got[col], col
    ev = ah.events(ah.read_report(report), "completion")
    assert ev and sum(e["fast"] for e in ev) == len(docs)
    assert all(e["fallbacks"] == {} for e in ev)
