"""The chat engine on fastaxo's own encoder (fastaxo.Tokenizer) against the same engine on HF's
tokenizers (FASTAXO_TOKENIZER=hf): identical rows, row for row, on Qwen3's real tokenizer and
template and on Llama 3.2's tokenizer with Llama 3's template, NFC-unstable text (fastaxo's
character offsets) included; which encoder a spec uses and why; the cases that must stay on
HF's.

The rows on HF's encoder are Axolotl's (tests/test_chat.py, tests/test_chat_axolotl.py), so
equal rows here are Axolotl's rows too."""

from __future__ import annotations

import json
import unicodedata

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fastaxo._core import backend
from fastaxo._reference import chat as ref

pytest.importorskip("transformers")
import chat_data  # noqa: E402
import tokenizer_data  # noqa: E402

from fastaxo.chat import ChatEngine, ChatSpec, Fallback, tokenize_chat  # noqa: E402
from fastaxo.errors import InvalidInputError  # noqa: E402

pytestmark = pytest.mark.skipif(backend.tok_ext is None or backend.pack_ext is None,
                                reason="fastaxo's encoder needs the compiled extension")

ENV = "FASTAXO_TOKENIZER"

# Meta's Llama 3 Instruct template (Llama 3.2's tokenizer_config.json here has none)
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}")


@pytest.fixture(scope="module")
def llama():
    from transformers import AutoTokenizer

    try:
        path = tokenizer_data.llama3_json().parent
    except FileNotFoundError as e:
        pytest.skip(str(e))
    tok = AutoTokenizer.from_pretrained(str(path))
    tok.chat_template = LLAMA3_TEMPLATE
    return tok


@pytest.fixture(scope="module")
def llama_spec(llama):
    return ChatSpec.create(llama, eot_tokens=["<|eot_id|>"])


def _plain(rows):
    return [r if isinstance(r, dict) else ("fallback", r.reason) for r in rows]


def _run(spec, convs, mode, monkeypatch, arrays=False):
    """The engine's rows with FASTAXO_TOKENIZER=mode, and its rows per encoder."""
    monkeypatch.setenv(ENV, mode)
    engine = ChatEngine(spec, arrays=arrays)
    return _plain(engine.run(convs)), dict(engine.encoder_counts)


def _same_rows(spec, convs, monkeypatch):
    """Rows on fastaxo's encoder equal rows on HF's, and its int32-array rows (prepare's,
    ``ChatEngine(arrays=True)``) equal its lists; returns the fastaxo run's counts."""
    fx, counts = _run(spec, convs, "auto", monkeypatch)
    hf, hf_counts = _run(spec, convs, "hf", monkeypatch)
    arr, arr_counts = _run(spec, convs, "auto", monkeypatch, arrays=True)
    assert "fastaxo" not in hf_counts and arr_counts == counts
    for c, a, b, d in zip(convs, fx, hf, arr, strict=True):
        assert a == b, c
        assert _as_lists(d) == a, c
    return counts


def _as_lists(row):
    """An arrays=True row as the list row it stands for (fastaxo's rows: int32 arrays, no
    mask); other rows unchanged."""
    if not isinstance(row, dict) or not isinstance(row["input_ids"], np.ndarray):
        return row
    assert row["input_ids"].dtype == np.int32 and row["labels"].dtype == np.int32
    assert "attention_mask" not in row
    ids = row["input_ids"].tolist()
    return {"input_ids": ids, "labels": row["labels"].tolist(), "attention_mask": [1] * len(ids)}


# -- which encoder ---------------------------------------------------------------------------

def test_qwen3_and_llama3_use_fastaxos_encoder(spec, llama_spec, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    for s in (spec, llama_spec):
        assert (s.encoder, s.encoder_reason) == ("fastaxo", None)
    monkeypatch.setenv(ENV, "hf")
    assert (spec.encoder, spec.encoder_reason) == ("hf", f"{ENV}=hf")
    monkeypatch.setenv(ENV, "fastaxo")
    assert spec.encoder == "fastaxo"


def test_tokenize_chat_counts_the_encoder(spec, monkeypatch):
    convs = chat_data.conversations(seed=21, n=6, turns=(2, 6), hi=60)
    monkeypatch.delenv(ENV, raising=False)
    fx = tokenize_chat(convs, spec=spec)
    assert fx.encoders == {"fastaxo": 6}
    monkeypatch.setenv(ENV, "hf")
    hf = tokenize_chat(convs, spec=spec)
    assert hf.encoders == {"hf": 6}
    assert fx.to_dict() == hf.to_dict()


def test_rows_that_need_offsets_take_fastaxos(spec, monkeypatch):
    """Text an NFC tokenizer changes needs HF's character offsets: fastaxo's encoder gives
    them (Tokenizer.encode_batch_offsets), so no row is HF's; FASTAXO_TOKENIZER=hf still
    makes every row HF's."""
    convs = [[{"role": "user", "content": "cafe\u0301?"},
              {"role": "assistant", "content": "cafe\u0301 ok"}],
             [{"role": "user", "content": "caf\u00e9?"},
              {"role": "assistant", "content": "caf\u00e9 ok"}],
             # composed to its first source, reordered marks, a singleton, a split character,
             # Hangul jamo: in the trainable turn and around its edges
             [{"role": "user", "content": "a\u0301\u0323 \u212b"},
              {"role": "assistant", "content": "\u0344x e\u0301\u0323\u1100\u1161\u11a8 \u0f73"}],
             [{"role": "user", "content": "\u1100\u1161"},
              {"role": "assistant", "content": "\u0301tail e\u0301"}]]
    counts = _same_rows(spec, convs, monkeypatch)
    assert counts == {"fastaxo": 4}
    monkeypatch.setenv(ENV, "hf")
    engine = ChatEngine(spec)
    engine.run(convs)
    assert engine.encoder_counts == {"hf": 4}
    monkeypatch.setenv(ENV, "auto")
    got = ChatEngine(spec).run(convs)
    for c, row in zip(convs, got, strict=True):
        assert row == ref.tokenize_conversation(c, spec)


def test_unsupported_tokenizer_stays_on_hf(tmp_path, monkeypatch):
    """A tokenizer fastaxo's encoder does not reproduce (here: an NFKC normalizer) is HF's,
    with the reason; FASTAXO_TOKENIZER=fastaxo refuses it."""
    from transformers import PreTrainedTokenizerFast

    qwen = chat_data.qwen3_tokenizer()
    path = tokenizer_data.variant(tokenizer_data.qwen3_json(), tmp_path / "tokenizer.json",
                                  lambda d: d.update(normalizer={"type": "NFKC"}))
    tok = PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token="<|im_end|>")
    tok.chat_template = qwen.chat_template
    monkeypatch.delenv(ENV, raising=False)
    s = ChatSpec.create(tok)
    assert s.encoder == "hf" and "normalizer" in s.encoder_reason
    convs = chat_data.conversations(seed=2, n=3, turns=3, hi=30)
    assert tokenize_chat(convs, spec=s).encoders == {"hf": 3}
    monkeypatch.setenv(ENV, "fastaxo")
    with pytest.raises(InvalidInputError, match=f"{ENV}=fastaxo"):
        ChatSpec.create(tok).encoder  # noqa: B018


def test_split_special_tokens_stays_on_hf(monkeypatch):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(chat_data.qwen3_dir()), split_special_tokens=True)
    monkeypatch.delenv(ENV, raising=False)
    s = ChatSpec.create(tok)
    assert s.encoder == "hf" and "split_special_tokens" in s.encoder_reason
    convs = [[{"role": "user", "content": "q <|im_end|>"}, {"role": "assistant", "content": "a"}]]
    assert _same_rows(s, convs, monkeypatch) == {"hf": 1}


def test_tokens_added_after_the_encoder_was_made(monkeypatch):
    """fastaxo's encoder for an HF object is cached; tokens added to the object later are
    seen (the encoder is rebuilt from the object's current state)."""
    from fastaxo.tokenizer.select import fast_tokenizer

    monkeypatch.delenv(ENV, raising=False)
    tok = chat_data.qwen3_tokenizer()
    assert fast_tokenizer(tok)[0] is not None
    tok.add_special_tokens({"additional_special_tokens": ["<|fresh|>"]})
    s = ChatSpec.create(tok)
    assert s.encoder == "fastaxo"
    convs = [[{"role": "user", "content": "a<|fresh|>b"},
              {"role": "assistant", "content": "x <|fresh|> y"}]]
    assert _same_rows(s, convs, monkeypatch) == {"fastaxo": 1}
    ids = ChatEngine(s).run(convs)[0]["input_ids"]
    assert tok.convert_tokens_to_ids("<|fresh|>") in ids


@pytest.mark.parametrize("which", ["qwen3", "llama3"])
def test_tokens_users_add_keep_fastaxos_encoder(which, monkeypatch):
    """A transformers tokenizer with tokens added the usual ways (``add_tokens`` of strings:
    normalized, next to the model's non-normalized specials; single_word; strip flags; a
    special token) takes fastaxo's encoder, and its rows are HF's: the tokens inside words,
    at turn edges, twice in a row, in NFD text."""
    import random

    from tokenizers import AddedToken
    from transformers import AutoTokenizer

    monkeypatch.delenv(ENV, raising=False)
    if which == "qwen3":
        tok = chat_data.qwen3_tokenizer()
    else:
        tok = AutoTokenizer.from_pretrained(str(tokenizer_data.llama3_json().parent))
        tok.chat_template = LLAMA3_TEMPLATE
    assert tok.add_tokens(["<custom>", "caf\u00e9", "e\u0301t\u00e9",
                           AddedToken("<sw>", single_word=True),
                           AddedToken("zz_tag", single_word=True, lstrip=True, rstrip=True)]) == 5
    tok.add_special_tokens({"additional_special_tokens": ["<|tool|>"]})
    kw = {"eot_tokens": ["<|eot_id|>"]} if which == "llama3" else {}
    s = ChatSpec.create(tok, **kw)
    assert (s.encoder, s.encoder_reason) == ("fastaxo", None)
    rng = random.Random(8)
    pieces = ["<custom>", "caf\u00e9", "cafe\u0301", "\u00e9t\u00e9", "<sw>", "zz_tag",
              "<|tool|>", " ", "\n", "x", "_", "1", "\u0301", "\u200d", "\u65e5", "!", "  "]
    convs = [[{"role": r, "content": "".join(rng.choice(pieces)
                                              for _ in range(rng.randint(0, 10)))}
              for r in ("system", "user", "assistant", "user", "assistant")[:rng.randint(2, 5)]]
             for _ in range(40)]
    counts = _same_rows(s, convs, monkeypatch)
    assert counts == {"fastaxo": 40}
    ids = [i for row in ChatEngine(s).run(convs) for i in row["input_ids"]]
    for t in ("<custom>", "<sw>", "zz_tag", "<|tool|>"):
        assert tok.convert_tokens_to_ids(t) in ids


def test_byte_table_from_fastaxos_arrays_equals_the_vocabulary_walk(spec, llama_spec,
                                                                   monkeypatch):
    """The chat path's token-bytes table made from fastaxo's encoder arrays is the one walked
    from HF's vocabulary: Qwen3, Llama 3.2, a token added past the vocabulary; an added token
    that reuses a vocabulary id makes the arrays decline (the walk then runs)."""
    from fastaxo.chat.spec import _table_of, byte_table
    from fastaxo.tokenizer import Tokenizer

    monkeypatch.delenv(ENV, raising=False)
    added = chat_data.qwen3_tokenizer()
    added.add_special_tokens({"additional_special_tokens": ["<|fresh|>"]})
    from tokenizers import AddedToken

    added.add_tokens([AddedToken("zq_new_token", normalized=False)])
    for tok in (spec.tokenizer, llama_spec.tokenizer, added):
        backend = tok.backend_tokenizer
        fast = Tokenizer.from_hf(tok)
        want, got = byte_table(backend), byte_table(backend, fast)
        assert got is not None and _table_of(fast) is not None
        assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
        assert want[2] == got[2]
    reused = chat_data.qwen3_tokenizer()
    # a vocabulary token made an added one
    reused.backend_tokenizer.add_tokens([AddedToken("hello", normalized=False)])
    fast = Tokenizer.from_hf(reused)
    assert _table_of(fast) is None
    want = byte_table(reused.backend_tokenizer)
    got = byte_table(reused.backend_tokenizer, fast)
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])


def test_the_encoder_cache_follows_the_hf_objects_state(monkeypatch):
    """fast_tokenizer caches fastaxo's encoder per HF object; an object changed in place (a
    token added, its post-processor or pre-tokenizer replaced) gets a new one with its ids."""
    from tokenizers import AddedToken, pre_tokenizers

    from fastaxo.tokenizer.select import fast_tokenizer

    monkeypatch.delenv(ENV, raising=False)
    tok = chat_data.qwen3_tokenizer()
    backend = tok.backend_tokenizer
    first = fast_tokenizer(tok)[0]
    assert first is not None and fast_tokenizer(tok)[0] is first  # cached while unchanged
    text = "a<|fresh|>b nouveau  mot 12345"
    tok.add_tokens([AddedToken("<|fresh|>", normalized=False)])
    again = fast_tokenizer(tok)[0]
    assert again is not None and again is not first
    assert again.encode(text).tolist() == backend.encode(text).ids
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok3 = fast_tokenizer(tok)[0]
    assert tok3 is not None and tok3 is not again and tok3.pattern == "gpt2"
    assert tok3.encode(text).tolist() == backend.encode(text).ids
    # two normalized tokens the same after NFC (HF picks one at random): HF's, not stale
    tok.add_tokens(["o\u0308x", "\u00f6x"])
    assert fast_tokenizer(tok) == (None, "tokenizer: added tokens 'o\u0308x' and '\u00f6x' both "
                                         "match '\u00f6x' (HF picks one of them at random)")


def test_one_thread_where_hf_would_run_one(spec, monkeypatch):
    from fastaxo.tokenizer import Tokenizer

    seen = []
    real = Tokenizer.encode_batch

    def spy(self, texts, add_special_tokens=True, num_threads=None, **kw):
        seen.append((add_special_tokens, num_threads, kw))
        return real(self, texts, add_special_tokens, num_threads, **kw)

    monkeypatch.setattr(Tokenizer, "encode_batch", spy)
    monkeypatch.delenv(ENV, raising=False)
    convs = chat_data.conversations(seed=1, n=2, turns=2, hi=20)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    ChatEngine(spec).run(convs)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    ChatEngine(spec).run(convs)
    # (the chat path's texts are str.encode's: not checked for UTF-8 again)
    assert seen == [(False, 1, {"validate": False}), (False, None, {"validate": False})]


# -- rows: fastaxo's encoder against HF's ------------------------------------------------------

@pytest.mark.parametrize("turns", [1, 2, 8, (2, 16)])
def test_rows_equal_hfs_qwen3(spec, turns, monkeypatch):
    convs = chat_data.conversations(seed=31, n=12, turns=turns, hi=150)
    assert _same_rows(spec, convs, monkeypatch) == {"fastaxo": 12}


@pytest.mark.parametrize("turns", [1, 2, 8])
def test_rows_equal_hfs_llama3(llama_spec, turns, monkeypatch):
    convs = chat_data.conversations(seed=32, n=12, turns=turns, hi=150)
    assert _same_rows(llama_spec, convs, monkeypatch) == {"fastaxo": 12}
    monkeypatch.setenv(ENV, "auto")
    for c, got in zip(convs, ChatEngine(llama_spec).run(convs), strict=True):
        assert got == ref.tokenize_conversation(c, llama_spec)


def test_rows_equal_hfs_qwen3_options(qwen, monkeypatch):
    convs = chat_data.conversations(seed=33, n=8, turns=(2, 9), hi=60)
    for opts in (dict(train_on_inputs=True), dict(train_on_eos="last"),
                 dict(roles_to_train=["user"], train_on_eos="none"),
                 dict(template_kwargs={"enable_thinking": False})):
        assert _same_rows(ChatSpec.create(qwen, **opts), convs, monkeypatch) == {"fastaxo": 8}


# Hypothesis: any Unicode (every category but lone surrogates), NFD text (Qwen3 normalizes to
# NFC), the templates' special tokens and Qwen3's think tags inside contents, whitespace runs
_SPECIALS = ["<|im_end|>", "<|im_start|>", "<|endoftext|>", "<think>", "</think>",
             "<tool_call>", "<|eot_id|>", "<|start_header_id|>", "<|begin_of_text|>",
             "<|end_header_id|>", "<|reserved_special_token_5|>"]
_BITS = ["\n", "\n\n", " ", "   ", "\t", "\r\n", "\u00a0", "\u3000", "é", "e\u0301", "한국어",
         "\u1112\u1161\u11ab", "🙂", "👩\u200d💻", "🇫🇷", "数据", "שלום", "مرحبا", "١٢٣", "'S",
         "'ll", "x=1;", "```py\n", "\U000f0000", "\ue000", "\ufeff", "\u0301"]
_ANY = st.characters(blacklist_categories=("Cs",))


def _nfd(s: str) -> str:
    return unicodedata.normalize("NFD", s)


_PIECE = st.one_of(st.text(_ANY, max_size=10), st.text(_ANY, max_size=10).map(_nfd),
                   st.sampled_from(_SPECIALS), st.sampled_from(_BITS),
                   st.text(st.sampled_from("aé \n'1"), max_size=6))


@st.composite
def unicode_conversation(draw):
    n = draw(st.integers(1, 5))
    system = draw(st.booleans())
    out = []
    if system:
        out.append({"role": "system",
                    "content": draw(st.lists(_PIECE, max_size=5).map("".join))})
    for k in range(n):
        out.append({"role": "user" if k % 2 == 0 else "assistant",
                    "content": draw(st.lists(_PIECE, max_size=8).map("".join))})
    return out


_HYP = settings(max_examples=80, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])


@_HYP
@given(convs=st.lists(unicode_conversation(), min_size=1, max_size=4))
# the reasoning Qwen3's template leaves out held the only text NFC changes: the row's text is
# NFC-stable and takes fastaxo's ids although a message is not
@example(convs=[[{"role": "user", "content": ""}, {"role": "assistant", "content": "A\u0300</think>"},
                 {"role": "user", "content": ""}]])
def test_rows_equal_hfs_hypothesis_qwen3(spec, convs, monkeypatch):
    counts = _same_rows(spec, convs, monkeypatch)
    # every row has fastaxo's ids and offsets, NFC-stable or not (fallbacks aside)
    assert "hf" not in counts


@_HYP
@given(convs=st.lists(unicode_conversation(), min_size=1, max_size=4))
def test_rows_equal_hfs_hypothesis_llama3(llama_spec, convs, monkeypatch):
    counts = _same_rows(llama_spec, convs, monkeypatch)
    assert "hf" not in counts  # no normalizer, no lstrip/rstrip tokens: never HF's offsets


def test_hypothesis_texts_reach_fastaxos_encoder(spec, monkeypatch):
    """The rows above are not all fallbacks: seeded draws of the same strategy, counted."""
    import random

    rng = random.Random(5)
    pieces = _SPECIALS + _BITS + ["abc", " de", "ﬁ"]
    convs = [[{"role": r, "content": "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))}
              for r in ("system", "user", "assistant", "user", "assistant")[:rng.randint(2, 5)]]
             for _ in range(60)]
    counts = _same_rows(spec, convs, monkeypatch)
    unstable = sum(not unicodedata.is_normalized("NFC", spec.render([c])[0]) for c in convs)
    assert counts.get("fastaxo", 0) >= 20 and "hf" not in counts and unstable >= 5, counts


def test_json_round_trip_of_rows(spec, monkeypatch):
    """Rows are lists of Python ints on both encoders (not NumPy scalars)."""
    monkeypatch.delenv(ENV, raising=False)
    convs = chat_data.conversations(seed=4, n=2, turns=2, hi=20)
    (row, _) = ChatEngine(spec).run(convs)
    assert json.loads(json.dumps(row)) == row
    assert all(type(v) is int for col in row.values() for v in col)


def test_fallback_rows_keep_their_reason(spec, monkeypatch):
    convs = [[{"role": "user", "content": "q", "name": "x"}]]
    for mode in ("auto", "hf"):
        monkeypatch.setenv(ENV, mode)
        (got,) = ChatEngine(spec).run(convs)
        assert isinstance(got, Fallback) and "name" in got.reason


# -- fastaxo info --tokenizer ------------------------------------------------------------------

def test_info_names_the_encoder(capsys, monkeypatch, tmp_path):
    from fastaxo.__main__ import main

    qwen_dir = str(chat_data.qwen3_dir())
    monkeypatch.delenv(ENV, raising=False)
    assert main(["info", "--tokenizer", qwen_dir]) == 0
    out = capsys.readouterr().out
    assert f"auto ({ENV}" in out
    assert "text encoder   : fastaxo (C, pattern qwen2, NFC)" in out
    assert "chat encoder   : fastaxo" in out
    monkeypatch.setenv(ENV, "hf")
    assert main(["info", "--tokenizer", qwen_dir]) == 0
    out = capsys.readouterr().out
    assert f"text encoder   : HF tokenizers ({ENV}=hf)" in out
    assert f"chat encoder   : HF tokenizers ({ENV}=hf)" in out
    monkeypatch.delenv(ENV)
    assert main(["info", "--tokenizer", str(tmp_path / "missing")]) == 1
    assert "no such file or directory" in capsys.readouterr().out
    path = tokenizer_data.variant(tokenizer_data.qwen3_json(), tmp_path / "tokenizer.json",
                                  lambda d: d.update(normalizer={"type": "NFKC"}))
    assert main(["info", "--tokenizer", str(path)]) == 0
    assert "text encoder   : HF tokenizers (normalizer 'NFKC'" in (
        capsys.readouterr().out)


def test_info_reads_the_snapshot_and_says_when_there_is_no_template(tmp_path):
    """`fastaxo info --tokenizer DIR` loads the chat tokenizer as prepare does: from its
    snapshot once one is recorded, without importing transformers; a directory whose
    tokenizer has no chat template says so."""
    import os
    import shutil
    import subprocess
    import sys

    qwen_dir = chat_data.qwen3_dir()
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(qwen_dir / "tokenizer.json", bare / "tokenizer.json")
    cfg = json.loads((qwen_dir / "tokenizer_config.json").read_text())
    cfg.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(cfg))
    env = dict(os.environ, FASTAXO_CACHE_DIR=str(tmp_path / "cache"))
    env.pop(ENV, None)
    probe = ("import sys; from fastaxo.__main__ import main; rc = main(['info', '--tokenizer', "
             "sys.argv[1]]); print('transformers imported:', 'transformers' in sys.modules); "
             "sys.exit(rc)")
    # (cwd "/": `python -c` puts the working directory first on sys.path, and CI's is a source
    # tree without the compiled extensions, beside the installed wheel)
    runs = [subprocess.run([sys.executable, "-c", probe, str(d)], env=env, capture_output=True,
                           text=True, timeout=600, cwd="/") for d in (qwen_dir, qwen_dir, bare)]
    assert [r.returncode for r in runs] == [0, 0, 0], [r.stderr[-2000:] for r in runs]
    first, second, no_template = (r.stdout for r in runs)
    assert "chat encoder   : fastaxo" in first and "chat encoder   : fastaxo" in second
    assert "transformers imported: False" in second  # (the first run records the snapshot)
    assert "chat encoder   : none (the tokenizer has no chat template)" in no_template


# -- parts: one part tokenized on a thread while the next renders --------------------------------

def test_rows_in_parts_equal_rows_in_one_part(spec, monkeypatch):
    """ChatEngine.run in parts of 3 rows (the encode of one on its own thread while the next
    renders) gives the rows of one part, fallbacks and NFC-unstable rows included; a row's
    error names its row among all; the thread's error reaches the caller; no thread is left."""
    import threading

    from fastaxo.chat import parts as parts_mod
    from fastaxo.errors import ChatTemplateError

    monkeypatch.delenv(ENV, raising=False)
    convs = chat_data.conversations(seed=41, n=11, turns=(1, 6), hi=40)
    convs[4] = [{"role": "user", "content": "q", "name": "x"}]  # a fallback
    convs[7] = [{"role": "user", "content": "e\u0301 q"},  # NFC-unstable: offsets path
                {"role": "assistant", "content": "A\u0300 a"}]
    whole = ChatEngine(spec, arrays=True)
    want = _plain(whole.run(convs))
    before = threading.active_count()
    monkeypatch.setattr(parts_mod, "PART_ROWS", 3)
    parted = ChatEngine(spec, arrays=True)
    got = _plain(parted.run(convs))
    assert threading.active_count() == before
    assert [_as_lists(r) for r in got] == [_as_lists(r) for r in want]
    assert parted.encoder_counts == whole.encoder_counts == {"fastaxo": 10}
    # the template's error on row 9 (in the fourth part) names row 9
    bad = ChatSpec.create(spec.tokenizer, "{% for m in messages %}{% if m.content == 'boom' %}"
                          "{{ raise_exception('no') }}{% endif %}{{ m.content }}{% endfor %}")
    rows = [_conv2("q", "a")] * 9 + [_conv2("boom", "a")] + [_conv2("q", "a")]
    with pytest.raises(ChatTemplateError, match=r"^messages: row 9: "):
        tokenize_chat(rows, spec=bad)
    # an error on the tokenizing thread is raised by run()
    def broken(*args, **kwargs):
        raise RuntimeError("encoder failed")

    monkeypatch.setattr(ChatSpec, "fastaxo_ids", broken)
    with pytest.raises(RuntimeError, match="encoder failed"):
        ChatEngine(spec).run(convs)
    assert threading.active_count() == before


def _conv2(q, a):
    return [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
