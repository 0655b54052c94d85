"""fastaxo's chat-template tokenization against the real Axolotl 0.21: every row compared with
Axolotl's own ``ChatTemplateStrategy.tokenize_prompt`` on Qwen3's real tokenizer and template
and on Axolotl's built-in templates; the rows and configurations that go to Axolotl's code;
and a real ``axolotl preprocess`` with and without the plugin, compared row for row."""

from __future__ import annotations

import json
import random

import pytest
from conftest import main_leg_only

try:
    import axolotl  # noqa: F401
    from axolotl.prompt_strategies.chat_template import ChatTemplateStrategy, load
    from axolotl.utils.dict import DictDefault
    _MISSING = None
except ImportError as exc:  # pragma: no cover
    _MISSING = exc

main_leg_only(_MISSING, "axolotl")

import axolotl_harness as ah  # noqa: E402
import chat_data  # noqa: E402

from fastaxo.integrations.axolotl import chat as fx_chat  # noqa: E402
from fastaxo.integrations.axolotl import patched  # noqa: E402

pytestmark = pytest.mark.axolotl


def strategy(template: str = "tokenizer_default", tokenizer=None, **ds):
    tok = tokenizer if tokenizer is not None else chat_data.template_tokenizer(template)
    cfg = {"sequence_len": 1 << 20, "train_on_inputs": False, "chat_template": template}
    if template in chat_data.TEMPLATE_EOT:
        cfg["eot_tokens"] = chat_data.TEMPLATE_EOT[template]
    cfg.update(ds.pop("cfg", {}))
    return load(tok, DictDefault(cfg), {"type": "chat_template", "field_messages": "messages",
                                        "chat_template": template, **ds})


def compare(strat, rows: list[dict], chunk: int = 16) -> dict[str, int]:
    """Axolotl's tokenize_prompt and the patched one on the same batches: identical; returns the
    patched run's row counts (fast, fallback: <reason>)."""
    batches = [rows[i:i + chunk] for i in range(0, len(rows), chunk)]
    as_batch = [{k: [r.get(k) for r in b] for k in b[0]} for b in batches]
    want = [strat.tokenize_prompt(json.loads(json.dumps(b))) for b in as_batch]
    before = fx_chat.chat_counts()
    with patched(parts=("chat_template",)):
        got = [strat.tokenize_prompt(json.loads(json.dumps(b))) for b in as_batch]
    after = fx_chat.chat_counts()
    for w, g in zip(want, got, strict=True):
        assert list(g) == list(w)
        for key in w:
            assert len(g[key]) == len(w[key])
            for i, (a, b) in enumerate(zip(w[key], g[key], strict=True)):
                assert a == b, f"column {key} row {i} differs"
    return {k: after.get(k, 0) - before.get(k, 0) for k in after}


def rows(seed, n, turns, **kw):
    return [{"messages": c} for c in chat_data.conversations(seed, n, turns, **kw)]


@pytest.mark.parametrize("turns", [1, 2, 8, (2, 40)])
def test_qwen3_identical_no_fallback(turns):
    counts = compare(strategy(), rows(seed=1, n=24, turns=turns, hi=200))
    assert counts == {"fast": 24}


def test_qwen3_long_conversations():
    counts = compare(strategy(), rows(seed=2, n=2, turns=256, hi=60), chunk=2)
    assert counts == {"fast": 2}


# text Qwen3's NFC normalizer changes: decomposed accents, reordered and split marks, a
# singleton, Hangul jamo (fastaxo's character offsets, not HF's, place these rows' turns)
_NFC_BITS = ["cafe\u0301", "a\u0301\u0323", "e\u0301\u0323", "\u212b", "\u0344", "\u0f73",
             "\u1100\u1161\u11a8", "\u0301", "\U0001d15e", " \u0301\n"]


def test_qwen3_nfc_unstable_rows_identical_on_fastaxos_offsets():
    rng = random.Random(7)
    rs = rows(seed=4, n=24, turns=(2, 8), hi=60)
    for r in rs:
        for m in r["messages"]:
            words = m["content"].split(" ")
            for _ in range(rng.randint(1, 4)):
                words.insert(rng.randint(0, len(words)), rng.choice(_NFC_BITS))
            m["content"] = " ".join(words) if rng.random() < 0.8 else rng.choice(_NFC_BITS)
    strat = strategy()
    counts = compare(strat, rs)
    assert counts == {"fast": 24}
    engine = fx_chat.engine_for(strat)
    assert engine is not None and dict(engine.encoder_counts) == {"fastaxo": 24}


@pytest.mark.parametrize("template", ["chatml", "llama3"])
def test_builtin_templates_identical_no_fallback(template):
    counts = compare(strategy(template), rows(seed=3, n=24, turns=(1, 24), hi=150))
    assert counts == {"fast": 24}


@pytest.mark.parametrize("template", ["mistral_v1", "gemma", "phi_3", "qwen_25", "cohere"])
def test_more_builtin_templates_identical(template):
    system = 0.0 if template == "gemma" else 0.7
    counts = compare(strategy(template), rows(seed=4, n=16, turns=(2, 12), hi=80, system=system))
    assert sum(counts.values()) == 16


@pytest.mark.parametrize("opts", [
    {"roles_to_train": ["user", "assistant"]},
    {"train_on_eos": "last"},
    {"train_on_eos": "none"},
    {"cfg": {"train_on_inputs": True}},
    {"drop_system_message": True},
    {"cfg": {"chat_template_kwargs": {"enable_thinking": False}}},
    {"roles": {"user": ["human"], "assistant": ["gpt"]}},
])
def test_dataset_options_identical(opts):
    data = rows(seed=5, n=16, turns=(2, 10), hi=80)
    if "roles" in opts:
        for r in data:
            for m in r["messages"]:
                m["role"] = {"user": "human", "assistant": "gpt"}.get(m["role"], m["role"])
    counts = compare(strategy(**opts), data)
    assert counts == {"fast": 16}


def test_rows_with_tools_reasoning_or_odd_fields_go_to_axolotl():
    data = rows(seed=6, n=12, turns=(2, 6), hi=40)
    data[1]["tools"] = [{"type": "function", "function": {"name": "f", "description": "d",
                                                          "parameters": {"type": "object"}}}]
    data[2]["messages"][-1]["reasoning_content"] = "thinking hard"
    data[3]["messages"][-1]["tool_calls"] = [{"type": "function", "function": {
        "name": "f", "arguments": {"x": 1}}}]
    data[4]["messages"][1]["content"] = "has a private \ue000 marker"
    data[5]["messages"][-1]["content"] = "<think>\nplan\n</think>\n\nanswer"
    for r in data:
        r.setdefault("tools", None)
    counts = compare(strategy(), data, chunk=12)
    assert sum(counts.values()) == 12
    # the marker character and Qwen3's </think> stay on the one-pass path (equal to Axolotl's
    # rows: compare checks every row); tools, reasoning_content and tool_calls go to Axolotl
    assert counts["fast"] == 9
    assert counts.get("fallback: tools") == 1
    assert sum(v for k, v in counts.items() if k.startswith("fallback")) == 3


@pytest.mark.parametrize("opts", [
    {"train_on_eos": "all"},
    {"roles_to_train": [], "train_on_eos": None},
    {"message_field_training": "train"},
])
def test_configs_fastaxo_cannot_reproduce_stay_axolotls(opts):
    data = rows(seed=7, n=6, turns=(2, 6), hi=40)
    counts = compare(strategy(**opts), data)
    assert counts.get("fast", 0) == 0


def test_subclass_and_switch_off_stay_axolotls():
    class Mine(ChatTemplateStrategy):
        pass

    s = strategy()
    s.__class__ = Mine
    assert compare(s, rows(seed=8, n=4, turns=4, hi=30)).get("fast", 0) == 0
    s = strategy()
    data = [{k: [r[k]] for k in r} for r in rows(seed=9, n=1, turns=4, hi=30)]
    before = fx_chat.chat_counts().get("fast", 0)
    with patched(parts=("chat_template",), chat_template=False):
        s.tokenize_prompt(data[0])
    assert fx_chat.chat_counts().get("fast", 0) == before


def test_single_unbatched_prompt():
    s = strategy()
    row = rows(seed=10, n=1, turns=6, hi=50)[0]
    want = s.tokenize_prompt(json.loads(json.dumps(row)))
    with patched(parts=("chat_template",)):
        got = s.tokenize_prompt(json.loads(json.dumps(row)))
    assert got == want


def test_axolotl_error_is_axolotls():
    s = strategy("gemma")
    bad = {"messages": [[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]]}
    with pytest.raises(Exception) as want:
        s.tokenize_prompt(json.loads(json.dumps(bad)))
    with patched(parts=("chat_template",)), pytest.raises(type(want.value), match="System role"):
        s.tokenize_prompt(json.loads(json.dumps(bad)))


# -- the real CLI ----------------------------------------------------------------------------

def _chat_jsonl(path, n, seed):
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as fh:
        for _ in range(n):
            conv = chat_data.conversation(rng, rng.randint(2, 24), lo=10, hi=120)
            fh.write(json.dumps({"messages": conv}, ensure_ascii=False) + "\n")


@pytest.mark.slow
def test_axolotl_preprocess_with_plugin_identical(tmp_path):
    tok = chat_data.qwen3_tokenizer()
    model = ah.make_model(tmp_path / "model", tok, hidden_size=16, intermediate_size=32,
                          num_attention_heads=2, num_key_value_heads=1)
    data = tmp_path / "chat.jsonl"
    _chat_jsonl(data, 300, seed=11)
    ds = [{"path": str(data), "type": "chat_template", "field_messages": "messages",
           "chat_template": "tokenizer_default"}]
    common = dict(model_dir=model, datasets=ds, sequence_len=8192, sample_packing=False,
                  pad_to_sequence_len=False, dataset_num_proc=2,
                  special_tokens={"pad_token": "<|endoftext|>"})
    report = tmp_path / "report.jsonl"
    base = ah.write_config(tmp_path / "base", **common)
    plug = ah.write_config(tmp_path / "plug", **common, **ah.plugin_overrides(report))
    for cfg in (base, plug):
        ah.run_axolotl("preprocess", cfg, timeout=900, check=True)
    want = ah.load_prepared(tmp_path / "base" / "prepared")
    got = ah.load_prepared(tmp_path / "plug" / "prepared")
    assert want.column_names == got.column_names and len(want) == len(got) > 250
    assert want.features == got.features
    for col in want.column_names:
        assert want[col] == got[col], col
    ev = ah.events(ah.read_report(report), "chat_template")
    assert ev and sum(e["fast"] for e in ev) == 300
    assert all(e["fallbacks"] == {} for e in ev)
    assert len({e["pid"] for e in ev}) == 2  # the two tokenization workers


@pytest.mark.parametrize("template", ["tokenizer_default", "chatml"])
def test_fastaxo_prepare_matches_axolotl(tmp_path, template):
    """`fastaxo prepare` of raw chat JSONL gives Axolotl's rows (packed: compared as sequences)."""
    from collections import Counter

    import fastaxo

    data = rows(seed=12, n=40, turns=(1, 12), hi=80)
    src = tmp_path / "chat.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data))
    out = tmp_path / "packed.parquet"
    chat = None if template == "tokenizer_default" else {"chat_template": template}
    rep = fastaxo.prepare(str(src), str(out), 8192, tokenizer=str(chat_data.qwen3_dir()),
                          chat=chat, dedupe=False)
    s = strategy(template)
    want = s.tokenize_prompt({"messages": [r["messages"] for r in json.loads(json.dumps(data))]})
    got = chat_data.packed_sequences(out)
    assert Counter(got) == Counter(zip(map(tuple, want["input_ids"]), map(tuple, want["labels"]),
                                       strict=True))
    assert rep.tokenizer_settings["fallback_rows"] == {}
    assert "every row in one pass" in str(rep)


# -- the length filter --------------------------------------------------------------------

def _ragged_dataset(seed, n=300, shuffle=False):
    import datasets
    import numpy as np

    rng = np.random.default_rng(seed)
    lens = rng.integers(0, 24, n)
    ids = [rng.integers(0, 1000, k).tolist() for k in lens]
    ds = datasets.Dataset.from_dict({"input_ids": ids, "labels": ids,
                                     "attention_mask": [[1] * k for k in lens]})
    return ds.shuffle(seed=seed) if shuffle else ds


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("min_len", [None, 5])
def test_length_filter_keeps_axolotls_rows(shuffle, min_len):
    from axolotl.utils.data.utils import handle_long_seq_in_dataset

    ds = _ragged_dataset(1, shuffle=shuffle)
    cfg = DictDefault({"excess_length_strategy": "drop", "min_sample_len": min_len,
                       "dataset_num_proc": 1, "is_preprocess": True})
    want = handle_long_seq_in_dataset(ds, 16, cfg)
    with patched(parts=("length_filter",)):
        got = handle_long_seq_in_dataset(ds, 16, cfg)
    assert len(got) < len(ds)
    assert got.flatten_indices().data.table.equals(want.flatten_indices().data.table)
    lo = min_len or 2
    everything = _ragged_dataset(2).filter(lambda r: lo <= len(r["input_ids"]) <= 16)
    with patched(parts=("length_filter",)):
        same = handle_long_seq_in_dataset(everything, 16, cfg)
    assert same.flatten_indices().data.table.equals(everything.flatten_indices().data.table)


def test_length_filter_raises_as_axolotl():
    from axolotl.utils.data.utils import handle_long_seq_in_dataset

    ds = _ragged_dataset(3)
    cfg = DictDefault({"excess_length_strategy": "raise", "dataset_num_proc": 1,
                       "is_preprocess": True})
    with pytest.raises(ValueError) as want:
        handle_long_seq_in_dataset(ds, 16, cfg)
    with patched(parts=("length_filter",)), pytest.raises(ValueError) as got:
        handle_long_seq_in_dataset(ds, 16, cfg)
    assert str(got.value) == str(want.value)
    ok = _ragged_dataset(4).filter(lambda r: len(r["input_ids"]) <= 16)
    want_ok = handle_long_seq_in_dataset(ok, 16, cfg)
    with patched(parts=("length_filter",)):
        got_ok = handle_long_seq_in_dataset(ok, 16, cfg)
    assert got_ok.flatten_indices().data.table.equals(want_ok.flatten_indices().data.table)


def test_fallbacks_reported_and_said_once(tmp_path, caplog):
    import logging

    s = strategy()
    data = rows(seed=13, n=6, turns=4, hi=30)
    data[0]["tools"] = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    for r in data:
        r.setdefault("tools", None)
    batch = {k: [r[k] for r in data] for k in data[0]}
    report_path = tmp_path / "r.jsonl"
    from fastaxo.integrations.axolotl import settings as fx_settings

    fx_settings._said.discard("chat-row-tools")  # an earlier test may have said it
    with caplog.at_level(logging.WARNING, logger="fastaxo.axolotl"), \
            patched(parts=("chat_template",), report=str(report_path)):
        s.tokenize_prompt(json.loads(json.dumps(batch)))
        s.tokenize_prompt(json.loads(json.dumps(batch)))
    ev = ah.events(ah.read_report(report_path), "chat_template")
    assert [(e["rows"], e["fast"], e["fallbacks"]) for e in ev] == [(6, 5, {"tools": 1})] * 2
    said = [r.getMessage() for r in caplog.records
            if r.name == "fastaxo.axolotl" and "tools" in r.getMessage()]
    assert said == ["fastaxo: chat_template: a row goes to Axolotl's own tokenization: tools "
                    "(each such row is counted, see fastaxo_report)"]  # once for two calls


# -- options changed between calls ----------------------------------------------------------

# A chatml-like template that also writes a template variable and the tokenizer's EOS after
# each answer, so the template kwargs and tokenizer.eos_token change the text, and the EOS (the
# tokenizer's, set below) is another token than the end of turn (<|im_end|>).
_OPTIONS_TEMPLATE = (
    "{%- if greeting is defined %}{{ greeting }}\n{% endif -%}"
    "{%- for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}{% endfor %}")


def _new_eos(s):
    s.tokenizer.add_special_tokens({"eos_token": "<|fastaxo_new_eos|>"})


def _other_tokenizer(s):
    tok = chat_data.qwen3_tokenizer()
    tok.eos_token = "<|box_end|>"
    s.tokenizer = s.prompter.tokenizer = tok


# Each option Axolotl 0.21 reads at every tokenize_prompt call (ChatTemplateStrategy and its
# prompter, the tokenizer), changed after the first batch; "fast": the changed configuration
# still runs on fastaxo's path (False: one it leaves to Axolotl).
_CHANGES = [
    ("roles_to_train", lambda s: setattr(s, "roles_to_train", ["user", "assistant"]), True),
    ("train_on_inputs", lambda s: setattr(s, "train_on_inputs", True), True),
    ("train_on_eos", lambda s: setattr(s, "train_on_eos", "none"), True),
    ("train_on_eot", lambda s: setattr(s, "train_on_eot", "last"), True),
    ("train_on_eot all", lambda s: setattr(s, "train_on_eot", "all"), False),
    ("chat_template", lambda s: setattr(s.prompter, "chat_template",
                                        _OPTIONS_TEMPLATE.replace("<|im_end|>\n", "<|im_end|>")),
     True),
    ("template kwargs replaced", lambda s: setattr(s.prompter, "chat_template_kwargs",
                                                   {"greeting": "bye"}), True),
    ("template kwargs changed in place",
     lambda s: s.prompter.chat_template_kwargs.update(greeting="bye"), True),
    ("template kwargs with a render parameter",
     lambda s: s.prompter.chat_template_kwargs.update(continue_final_message=True), False),
    ("eot ids", lambda s: setattr(s, "_eot_token_ids", {s.tokenizer.eos_token_id}), True),
    ("tokenizer.eos_token", lambda s: setattr(s.tokenizer, "eos_token", "<|box_end|>"), True),
    ("tokenizer.eos_token_id", lambda s: setattr(s.tokenizer, "eos_token_id", 151649), True),
    ("a new EOS token added", _new_eos, True),
    ("another tokenizer", _other_tokenizer, True),
    ("a strategy subclass", lambda s: setattr(s, "__class__", type(
        "Sub", (ChatTemplateStrategy,), {"find_first_eot_token": lambda *a, **k: -1})), False),
]


@pytest.mark.parametrize("name, change, fast", _CHANGES, ids=[c[0] for c in _CHANGES])
def test_options_changed_between_calls_are_axolotls(name, change, fast):
    """Axolotl reads its options at every call: a batch tokenized after one changed is the
    changed configuration's, row for row, with fastaxo's path as with Axolotl's own."""
    tok = chat_data.qwen3_tokenizer()
    tok.eos_token = "<|endoftext|>"  # the EOS apart from the end of turn
    s = strategy("jinja", tokenizer=tok, chat_template_jinja=_OPTIONS_TEMPLATE,
                 cfg={"eot_tokens": ["<|im_end|>"],
                      "chat_template_kwargs": {"greeting": "hello"}})
    first, second = rows(seed=14, n=8, turns=(2, 6), hi=40), rows(seed=15, n=8, turns=(2, 6),
                                                                   hi=40)
    batch = {"messages": [r["messages"] for r in second]}
    before = s.tokenize_prompt(json.loads(json.dumps(batch)))
    with patched(parts=("chat_template",)):
        s.tokenize_prompt({"messages": [r["messages"] for r in json.loads(json.dumps(first))]})
        change(s)
        counts0 = fx_chat.chat_counts()
        got = s.tokenize_prompt(json.loads(json.dumps(batch)))
        counts1 = fx_chat.chat_counts()
    want = s.tokenize_prompt(json.loads(json.dumps(batch)))  # Axolotl's, after the change
    assert want != before, "the change must change Axolotl's rows (else the test is void)"
    assert list(got) == list(want)
    for key in want:
        for i, (a, b) in enumerate(zip(want[key], got[key], strict=True)):
            assert a == b, f"{name}: column {key} row {i} differs"
    assert counts1.get("fast", 0) - counts0.get("fast", 0) == (8 if fast else 0)
