"""fastaxo.chat without Axolotl: the one-pass engine against the plain port of Axolotl's
algorithm on Qwen3's real tokenizer and template, the checks that send a row to the slow path,
tokenize_chat's API, and prepare on chat data. The kernels: tests/test_chat_kernels.py.

The comparison with Axolotl itself is tests/test_chat_axolotl.py."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastaxo._core import backend
from fastaxo._reference import chat as ref

pytest.importorskip("transformers")
import chat_data  # noqa: E402

from fastaxo.chat import ChatEngine, ChatSpec, Fallback, tokenize_chat  # noqa: E402
from fastaxo.errors import (  # noqa: E402
    ChatTemplateError,
    InvalidInputError,
    InvalidTypeError,
)

# -- the engine against the plain port of Axolotl's algorithm --------------------------------

def _check_rows(spec, convs):
    got = ChatEngine(spec).run(convs)
    fallbacks = [g.reason for g in got if isinstance(g, Fallback)]
    for c, g in zip(convs, got, strict=True):
        if not isinstance(g, Fallback):
            assert g == ref.tokenize_conversation(c, spec)
    return fallbacks


@pytest.mark.parametrize("turns", [1, 2, 3, 8, (2, 16)])
def test_engine_equals_reference_qwen3(spec, turns):
    convs = chat_data.conversations(seed=11, n=12, turns=turns, hi=120)
    assert _check_rows(spec, convs) == []


def test_engine_options_equal_reference(qwen):
    convs = chat_data.conversations(seed=3, n=8, turns=(2, 9), hi=60)
    for opts in (dict(train_on_inputs=True), dict(roles_to_train=["user", "assistant"]),
                 dict(train_on_eos="last"), dict(train_on_eos="none"),
                 dict(train_on_eos="turn", train_on_eot="last"),
                 dict(roles_to_train=["system"], train_on_eos="turn"),
                 dict(template_kwargs={"enable_thinking": False})):
        assert _check_rows(ChatSpec.create(qwen, **opts), convs) == [], opts


def test_engine_pure_python_labels_equal_compiled(spec, monkeypatch):
    convs = chat_data.conversations(seed=5, n=6, turns=(2, 8), hi=80)
    fast = ChatEngine(spec).run(convs)
    monkeypatch.setattr(backend, "pack_ext", None)
    assert ChatEngine(spec).run(convs) == fast


def test_offsets_path_equals_byte_path(qwen, spec):
    convs = chat_data.conversations(seed=6, n=10, turns=(2, 8), hi=80)
    assert spec.byte_tokens() is not None
    plain = ChatSpec.create(qwen)
    plain.__dict__.setdefault("_cache", {})["bytes"] = None  # force the offsets path
    assert ChatEngine(plain).run(convs) == ChatEngine(spec).run(convs)


def test_non_nfc_text_takes_the_offsets_path(spec):
    conv = [{"role": "user", "content": "cafe\u0301?"},
            {"role": "assistant", "content": "cafe\u0301 ok"}]
    (got,) = ChatEngine(spec).run([conv])
    assert got == ref.tokenize_conversation(conv, spec)


def test_edge_rows(spec):
    rows = [
        [{"role": "user", "content": ""}, {"role": "assistant", "content": ""}],
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "[[dummy"}],
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "zzdummymessagezz"}],
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "\n\nleading"}],
        [{"role": "assistant", "content": "alone"}],
        [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}],
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a <|im_end|> b"}],
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "x</think>y"}],
    ]
    got = ChatEngine(spec).run(rows)
    for r, g in zip(rows, got, strict=True):
        if not isinstance(g, Fallback):
            assert g == ref.tokenize_conversation(r, spec), r


def test_rows_the_engine_refuses(spec):
    rows = [[],
            [{"role": "user", "content": "q", "tool_calls": []}],
            [{"role": "user", "content": ["a", "b"]}],
            [{"role": "user"}]]
    got = ChatEngine(spec).run(rows)
    assert [type(g) for g in got] == [Fallback] * 4
    assert "tool_calls" in got[1].reason


def test_marker_characters_in_messages_stay_on_the_one_pass_path(spec):
    # the markers are chosen per row among code points the row does not hold
    pua = "".join(chr(c) for c in (0xE000, 0xE001, 0xF0000, 0xF0001, 0xF0002, 0x10FFFD))
    rows = [[{"role": "user", "content": f"q {pua}"}, {"role": "assistant", "content": pua},
             {"role": "user", "content": "q2"}, {"role": "assistant", "content": f"x{pua}y"}]]
    engine = ChatEngine(spec)
    (got,) = engine.run(rows)
    assert not isinstance(got, Fallback) and not engine.turn_counts
    assert got == ref.tokenize_conversation(rows[0], spec)


def test_template_that_depends_on_content_places_that_turn_by_its_own_renders(qwen):
    tpl = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{% if 'secret' in m.content %}"
           "[hidden]{% endif %}{{ m.content }}<|im_end|>\n{% endfor %}")
    spec = ChatSpec.create(qwen, chat_template=tpl)
    rows = [[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a secret"},
             {"role": "user", "content": "q"}, {"role": "assistant", "content": "plain"}],
            [{"role": "user", "content": "q"}, {"role": "assistant", "content": "plain"}]]
    engine = ChatEngine(spec)
    got = engine.run(rows)
    assert got == [ref.tokenize_conversation(r, spec) for r in rows]
    # the placeholder render drops '[hidden]': that turn alone is placed by Axolotl's diff
    assert engine.turn_counts == {"the template's output depends on message text": 1}


def test_template_that_rewrites_text_places_those_turns_by_their_own_renders(qwen):
    tpl = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | upper }}<|im_end|>{% endfor %}"
    spec = ChatSpec.create(qwen, chat_template=tpl)
    rows = [[{"role": "user", "content": "q"}, {"role": "assistant", "content": "abc"},
             {"role": "user", "content": "r"}, {"role": "assistant", "content": "ABC"}]]
    res = tokenize_chat(rows, spec=spec)
    assert res.fallbacks == {}  # the row is made in one pass ...
    # ... but for the one turn the template rewrites, placed by Axolotl's own diff
    # (and 'ABC' is written as is, but its placeholder is not: the output depends on it)
    assert res.turn_fallbacks == {"the template rewrites message text": 1,
                                  "the template's output depends on message text": 1}
    assert res.to_dict() == {k: [v] for k, v in ref.tokenize_conversation(rows[0], spec).items()}


def test_template_error_falls_back_and_tokenize_chat_names_the_row(qwen):
    tpl = "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}{% endif %}{{ m.content }}<|im_end|>{% endfor %}"
    spec = ChatSpec.create(qwen, chat_template=tpl)
    rows = [[{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}],
            [{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}]]
    got = ChatEngine(spec).run(rows)
    # the plugin hands the row to Axolotl, which raises its own error
    assert not isinstance(got[0], Fallback) and isinstance(got[1], Fallback)
    assert "no system" in str(got[1].error)
    with pytest.raises(ChatTemplateError, match=r"^messages: row 1: chat_template: no system$"):
        tokenize_chat(rows, spec=spec)


# -- tokenize_chat's API --------------------------------------------------------------------

def test_tokenize_chat_messages_forms(qwen):
    conv = [{"role": "human", "content": "hi"}, {"role": "gpt", "content": "hello"}]
    import json

    a = tokenize_chat([conv], qwen)
    b = tokenize_chat([json.dumps(conv)], qwen)
    c = tokenize_chat([[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello",
                                                             "name": None}]], qwen)
    assert a.to_dict() == b.to_dict() == c.to_dict() and a.fallbacks == {}
    assert len(a) == 1 and any(x != -100 for x in a.labels[0])


def test_tokenize_chat_errors_name_the_argument(qwen):
    with pytest.raises(InvalidInputError, match=r"messages: row 1 message 0 has field 'tools'"):
        tokenize_chat([[{"role": "user", "content": "a"}],
                       [{"role": "user", "content": "a", "tools": [1]}]], qwen)
    with pytest.raises(InvalidTypeError, match=r"messages: row 0 message 0: expected string role"):
        tokenize_chat([[{"role": "user", "content": 3}]], qwen)
    with pytest.raises(InvalidInputError, match=r"messages: row 0: expected a non-empty list"):
        tokenize_chat([[]], qwen)
    with pytest.raises(InvalidInputError, match="not JSON"):
        tokenize_chat(["[{"], qwen)
    with pytest.raises(InvalidTypeError, match="tokenizer: expected a transformers tokenizer"):
        tokenize_chat([], "not a tokenizer")
    with pytest.raises(InvalidInputError, match="eot_tokens: expected tokens that encode to one"):
        ChatSpec.create(qwen, eot_tokens=["<|im_end|>", "hello world"],
                        chat_template="hello world <|im_end|>")
    with pytest.raises(InvalidInputError, match="spec: give either"):
        tokenize_chat([], qwen, spec=ChatSpec.create(qwen))


def test_spec_problems(qwen):
    assert ChatSpec.create(qwen, train_on_eos="all").problem() == "train_on_eos/train_on_eot 'all'"
    assert "legacy" in ChatSpec.create(qwen, roles_to_train=[], train_on_eos=None).problem()
    assert "add_generation_prompt" in ChatSpec.create(
        qwen, template_kwargs={"add_generation_prompt": True}).problem()
    with pytest.raises(InvalidInputError, match="cannot run this configuration"):
        ChatEngine(ChatSpec.create(qwen, train_on_eos="all"))
    # tokenize_chat still gives Axolotl's rows, by the reference
    res = tokenize_chat([[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]],
                        qwen, train_on_eos="all")
    assert res.fallbacks == {"train_on_eos/train_on_eot 'all'": 1}


def test_quick_renderer_equals_apply_chat_template(spec):
    convs = chat_data.conversations(seed=9, n=20, turns=(1, 12), hi=40)
    assert spec.render(convs) == spec._render_hf(convs)
    assert spec._fast_render() is not None


# -- prepare on chat data ---------------------------------------------------------------------

def _write_chat(path, convs, fmt="jsonl"):
    import json

    if fmt == "jsonl":
        with open(path, "w", encoding="utf-8") as fh:
            for c in convs:
                fh.write(json.dumps({"messages": c, "id": 1}, ensure_ascii=False) + "\n")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"messages": convs}), path)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_prepare_chat_rows_are_tokenize_chats(tmp_path, qwen, fmt):
    from collections import Counter

    import fastaxo

    convs = chat_data.conversations(seed=21, n=40, turns=(1, 10), hi=60)
    convs.append(convs[0])  # a duplicate: dropped by dedupe
    src = tmp_path / f"chat.{fmt}"
    _write_chat(src, convs, fmt)
    out = tmp_path / "packed.parquet"
    rep = fastaxo.prepare(str(src), str(out), 4096, tokenizer=str(chat_data.qwen3_dir()),
                          batch_rows=16)
    want = tokenize_chat(convs[:-1], qwen)
    assert Counter(chat_data.packed_sequences(out)) == Counter(zip(map(tuple, want.input_ids),
                                                     map(tuple, want.labels), strict=True))
    assert rep.rows_in == 41 and rep.duplicates == 1 and rep.labels
    assert rep.tokenizer_settings["fallback_rows"] == {}
    assert rep.tokenizer_settings["one_pass"] is True
    # the report names the encoder of the ids, as on the text path
    assert rep.tokenizer_settings["encoder"] == "fastaxo"
    assert f"encoder            {rep.tokenizer_settings['encoder_detail']}" in str(rep)


def test_prepare_chat_options_and_cli(tmp_path, qwen):
    import subprocess

    from fastaxo._core.backend import child_argv, child_env

    convs = chat_data.conversations(seed=22, n=12, turns=(2, 6), hi=40)
    src = tmp_path / "c.jsonl"
    _write_chat(src, [[{"role": m["role"], "content": m["content"]} for m in c] for c in convs])
    import json

    src2 = tmp_path / "c2.jsonl"
    with open(src2, "w") as fh:
        for c in convs:
            fh.write(json.dumps({"conv": json.dumps(c)}) + "\n")
    out = tmp_path / "o.parquet"
    # child_argv: the child imports this same fastaxo, not the source tree of the cwd
    r = subprocess.run(child_argv("fastaxo", "prepare", str(src2), "-o", str(out),
                                  "--max-length", "4096", "--tokenizer", str(chat_data.qwen3_dir()),
                                  "--messages-column", "conv", "--roles-to-train",
                                  "user,assistant", "--train-on-eos", "last", "--no-dedupe",
                                  "-q"),
                       capture_output=True, text=True, env=child_env(), timeout=600, cwd="/")
    assert r.returncode == 0, r.stderr
    want = tokenize_chat(convs, qwen, roles_to_train=["user", "assistant"], train_on_eos="last")
    from collections import Counter

    assert Counter(chat_data.packed_sequences(out)) == Counter(zip(map(tuple, want.input_ids),
                                                     map(tuple, want.labels), strict=True))


@pytest.mark.parametrize("fmt", ["parquet", "jsonl-text"])
def test_sharegpt_rows_are_their_openai_rows(tmp_path, qwen, fmt):
    """ShareGPT rows (``from`` / ``value``, roles human / gpt) with Axolotl's mapping keys
    give the file their OpenAI form gives: through prepare()'s ``chat`` (a Parquet list of
    structs, renamed without a Python object a row) and the CLI's --message-field-* (JSON text
    in a column)."""
    import json
    import subprocess

    import pyarrow as pa
    import pyarrow.parquet as pq

    import fastaxo
    from fastaxo._core.backend import child_argv, child_env

    convs = chat_data.conversations(seed=23, n=30, turns=(1, 8), hi=50)
    names = {"user": "human", "assistant": "gpt", "system": "system"}
    share = [[{"from": names[m["role"]], "value": m["content"]} for m in c] for c in convs]
    tok = str(chat_data.qwen3_dir())
    pq.write_table(pa.table({"messages": convs}), tmp_path / "openai.parquet")
    fastaxo.prepare(str(tmp_path / "openai.parquet"), str(tmp_path / "want.parquet"), 4096,
                    tokenizer=tok, progress=False)
    want = pq.read_table(tmp_path / "want.parquet").select(["input_ids", "labels"])
    out = tmp_path / "got.parquet"
    if fmt == "parquet":
        pq.write_table(pa.table({"conversations": share}), tmp_path / "share.parquet")
        rep = fastaxo.prepare(str(tmp_path / "share.parquet"), str(out), 4096, tokenizer=tok,
                              messages_column="conversations", progress=False,
                              chat={"message_property_mappings": {"role": "from",
                                                                  "content": "value"}})
        assert rep.tokenizer_settings["message_property_mappings"] == {"role": "from",
                                                                       "content": "value"}
    else:
        with open(tmp_path / "share.jsonl", "w") as fh:
            for c in share:
                fh.write(json.dumps({"conversations": json.dumps(c)}) + "\n")
        r = subprocess.run(child_argv("fastaxo", "prepare", str(tmp_path / "share.jsonl"), "-o",
                                      str(out), "--max-length", "4096", "--tokenizer", tok,
                                      "--messages-column", "conversations",
                                      "--message-field-role", "from",
                                      "--message-field-content", "value", "-q"),
                           capture_output=True, text=True, env=child_env(), timeout=600, cwd="/")
        assert r.returncode == 0, r.stderr
    assert pq.read_table(out).select(["input_ids", "labels"]).equals(want)


def test_sharegpt_json_text_fails_as_its_openai_form(tmp_path):
    """Hostile JSON text under a mapping (a row that is not JSON, a lone surrogate escaped in
    a message) fails as the same rows in OpenAI form do, naming the row: the renaming leaves
    what it cannot read to the chat path and writes escapes back as escapes."""
    import json

    import fastaxo

    tok = str(chat_data.qwen3_dir())
    good = [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]
    for bad_share, bad_openai in (("not json", "not json"),
                                  ('[{"from": "human", "value": "\\ud800"}]',
                                   '[{"role": "user", "content": "\\ud800"}]')):
        errors = []
        for name, bad, chat in (
                ("q1", bad_share, {"message_field_role": "from",
                                   "message_field_content": "value"}),
                ("q2", bad_openai, None)):
            rows = [json.dumps(good if chat else [{"role": "user", "content": "hi"},
                                                  {"role": "assistant", "content": "yo"}]),
                    bad]
            src = tmp_path / f"{name}.jsonl"
            src.write_text("".join(json.dumps({"conv": r}) + "\n" for r in rows))
            with pytest.raises(fastaxo.errors.FastaxoError) as e:
                fastaxo.prepare(str(src), str(tmp_path / "o.parquet"), 512, tokenizer=tok,
                                messages_column="conv", chat=chat, progress=False)
            errors.append((type(e.value), str(e.value).replace(f"{name}.jsonl", "X")))
        assert errors[0] == errors[1] and "row 1 (0-based)" in errors[0][1], errors


def test_messages_that_are_not_utf8_or_nest_too_deep_name_the_row(tmp_path):
    """A byte that is not UTF-8 inside a message (Arrow's JSON reader keeps it) was a
    UnicodeDecodeError traceback from pyarrow naming no file or row; JSON text nested 100,000
    deep was a RecursionError. Both are one line naming the row (and the message and field),
    with no output; a slice of the column names its own rows."""
    import json

    import pyarrow as pa

    import fastaxo
    from fastaxo.pipeline.columns import _check_messages_utf8

    tok = str(chat_data.qwen3_dir())
    good = json.dumps({"messages": [{"role": "user", "content": "hi"},
                                    {"role": "assistant", "content": "yo"}]}).encode()
    bad_content = good.replace(b'"yo"', b'"y\xffo"')
    bad_role = good.replace(b'"user"', b'"us\xc3"')
    deep = json.dumps({"messages": "[" * 100_000 + "]" * 100_000}).encode()
    for rows, says in (([good, good, bad_content], "row 2 (0-based): messages message 1 content "
                        "is not UTF-8 text (byte 0xff at offset 1)"),
                       ([good, bad_role], "row 1 (0-based): messages message 0 role is not UTF-8"),
                       ([json.dumps({"messages": json.dumps(json.loads(good)["messages"])}).encode(),
                         deep], "row 1 (0-based): messages is JSON nested too deep")):
        src = tmp_path / "in.jsonl"
        src.write_bytes(b"\n".join(rows) + b"\n")
        out = tmp_path / "out" / "o.parquet"
        out.parent.mkdir(exist_ok=True)
        with pytest.raises(fastaxo.errors.InvalidInputError, match=re.escape(says)):
            fastaxo.prepare(str(src), str(out), 512, tokenizer=tok, progress=False)
        assert not list(out.parent.iterdir())
    # a slice of a column: its rows and messages counted from the slice
    # (the type given: pyarrow 15 orders the fields it infers from dicts otherwise)
    item = pa.struct([("role", pa.string()), ("content", pa.string())])
    col = pa.array([[{"role": "user", "content": "ok"}]] * 3 + [[
        {"role": "user", "content": "ok"}, {"role": "assistant", "content": "x"}]],
        type=pa.list_(item))
    flat = col.flatten()
    data = bytearray(flat.field("content").buffers()[2].to_pybytes())
    data[-1] = 0xFF
    content = pa.Array.from_buffers(pa.string(), len(flat), [
        None, flat.field("content").buffers()[1], pa.py_buffer(bytes(data))])
    broken = pa.ListArray.from_arrays(col.offsets, pa.StructArray.from_arrays(
        [flat.field("role"), content], fields=list(item)))
    with pytest.raises(fastaxo.errors.InvalidInputError,
                       match=re.escape("f row 2 (0-based): m message 1 content is not UTF-8")):
        _check_messages_utf8(broken.slice(1), "m", "f", 0)
    _check_messages_utf8(broken.slice(0, 3), "m", "f", 0)  # its rows are all UTF-8


def test_sharegpt_mapping_errors(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    import fastaxo
    from fastaxo.errors import ColumnNotFoundError, InvalidInputError

    pq.write_table(pa.table({"messages": [[{"from": "human", "value": "hi"}]]}),
                   tmp_path / "s.parquet")
    tok = str(chat_data.qwen3_dir())
    cases = [({"message_property_mappings": {"role": "speaker", "content": "value"}},
              ColumnNotFoundError, "names 'speaker', which they lack"),
             ({"message_property_mappings": {"role": "from", "tool_calls": "calls"}},
              InvalidInputError, "takes role and content only"),
             ({"message_property_mappings": {"role": "value", "content": "value"}},
              InvalidInputError, "maps one field twice"),
             ({"message_field_role": ""}, InvalidInputError, "message_field_role: expected")]
    for chat, exc, words in cases:
        with pytest.raises(exc, match=words):
            fastaxo.prepare(str(tmp_path / "s.parquet"), str(tmp_path / "o.parquet"), 512,
                            tokenizer=tok, chat=chat, progress=False)


def test_prepare_chat_errors(tmp_path):
    import fastaxo

    src = tmp_path / "c.jsonl"
    src.write_text('{"messages": [{"role": "user", "content": "a", "tool_calls": [1]}]}\n')
    with pytest.raises(InvalidInputError, match=r"c.jsonl row 0 \(0-based\): "
                                                r"messages message 0 has field 'tool_calls'"):
        fastaxo.prepare(str(src), str(tmp_path / "o.parquet"), 256,
                        tokenizer=str(chat_data.qwen3_dir()))
    with pytest.raises(InvalidInputError, match="chat data gets its special tokens"):
        fastaxo.prepare(str(src), str(tmp_path / "o.parquet"), 256, append_eos=True,
                        tokenizer=str(chat_data.qwen3_dir()), messages_column="messages")
    with pytest.raises(InvalidInputError, match="chat data needs tokenizer="):
        fastaxo.prepare(str(src), str(tmp_path / "o.parquet"), 256, messages_column="messages")
    with pytest.raises(InvalidInputError, match="is not a directory"):
        fastaxo.prepare(str(src), str(tmp_path / "o.parquet"), 256,
                        tokenizer=str(chat_data.qwen3_dir() / "tokenizer.json"),
                        messages_column="messages")
    assert not (tmp_path / "o.parquet").exists()


# -- Hypothesis: contents that share characters with the placeholders and the template -------

_TRICKY = list("[]zd_ma\n \t") + ["[[", "]]", "zz", "dummy", "<|im_end|>", "<think>", "</think>",
                                  "é", "数", "🙂", "\r\n", "message",
                                  # the engine's marker characters (private use)
                                  "\ue000", "\ue001", "\U000f0000", "\U000f0001", "\U0010fffd"]


@st.composite
def tricky_conversation(draw):
    n = draw(st.integers(1, 5))
    roles = draw(st.lists(st.sampled_from(["system", "user", "assistant"]), min_size=n,
                          max_size=n))
    contents = draw(st.lists(st.lists(st.sampled_from(_TRICKY), max_size=6).map("".join),
                             min_size=n, max_size=n))
    return [{"role": r, "content": c} for r, c in zip(roles, contents, strict=True)]


_SPECS: dict[str, ChatSpec] = {}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv=tricky_conversation(), eos=st.sampled_from(["turn", "last", "none"]))
def test_engine_equals_reference_on_tricky_contents(qwen, conv, eos):
    spec = _SPECS.get(eos) or _SPECS.setdefault(eos, ChatSpec.create(qwen, train_on_eos=eos))
    (got,) = ChatEngine(spec).run([conv])
    try:
        want = ref.tokenize_conversation(conv, spec)
    except Exception as exc:  # noqa: BLE001 - Axolotl's algorithm raises: so must fastaxo's row
        assert isinstance(got, Fallback), (conv, exc)
        return
    if not isinstance(got, Fallback):
        assert got == want, conv


def test_tricky_contents_take_the_one_pass_path(spec):
    """The Hypothesis test above holds for the rows the engine makes; here, that it makes them
    all: where the template rewrites a message's text ('</think>' in an answer, leading
    newlines Qwen3 strips from a non-final answer, ...) that turn alone is placed by its own
    renders, and marker characters in the text are avoided."""
    import random

    rng = random.Random(0)
    convs = []
    for _ in range(300):
        n = rng.randint(1, 5)
        convs.append([{"role": rng.choice(["system", "user", "assistant"]),
                       "content": "".join(rng.choice(_TRICKY) for _ in range(rng.randint(0, 6)))}
                      for _ in range(n)])
    engine = ChatEngine(spec)
    got = engine.run(convs)
    assert not [g for g in got if isinstance(g, Fallback)]
    for c, g in zip(convs, got, strict=True):
        assert g == ref.tokenize_conversation(c, spec), c
    turns = sum(len(c) for c in convs)
    assert 0 < sum(engine.turn_counts.values()) < 0.02 * turns


def test_slow_tokenizer_is_refused_by_name(qwen):
    class Slow:
        is_fast = False
        eos_token = "<|im_end|>"
        eos_token_id = 151645
        chat_template = qwen.chat_template
        name_or_path = "slow"

        def apply_chat_template(self, *a, **k):  # pragma: no cover - never reached
            raise AssertionError

        def encode(self, text, add_special_tokens=False):
            return qwen.encode(text, add_special_tokens=add_special_tokens)

    spec = ChatSpec.create(Slow())
    assert "not a fast tokenizer" in spec.problem()
    with pytest.raises(InvalidTypeError, match="tokenizer: expected a fast tokenizer"):
        tokenize_chat([[{"role": "user", "content": "q"}]], Slow())


def test_prepare_reads_a_clean_messages_column_without_a_python_object_per_field(monkeypatch):
    """A list<struct<role, content>> column becomes conversations from its two flat columns
    (no per-row normalize_messages); the tokens are those of the row-by-row path (the same
    rows as JSON text), and a column that is not plainly that shape still takes it (and its
    errors)."""
    import json

    import pyarrow as pa

    from fastaxo.chat import tokenize as chat_tokenize_mod
    from fastaxo.errors import InvalidInputError as Invalid
    from fastaxo.pipeline.columns import chat_tokenize, chat_tokenizer

    ct = chat_tokenizer(str(chat_data.qwen3_dir()), None)
    convs = chat_data.conversations(seed=8, n=6, turns=(2, 6), hi=40)
    convs[0][0]["role"] = "human"  # Axolotl's role names are mapped
    convs[1][-1]["role"] = "gpt"
    as_json = pa.array([json.dumps(c) for c in convs])
    want = chat_tokenize(ct, as_json, "messages", "f", 0)
    monkeypatch.setattr(chat_tokenize_mod, "normalize_messages", _no_rows)
    arr = pa.array(convs)
    for got, rows in ((chat_tokenize(ct, arr, "messages", "f", 0), slice(0, 6)),
                      (chat_tokenize(ct, arr.slice(2, 3), "messages", "f", 2), slice(2, 5))):
        assert [x.to_pylist() for x in got[:2]] == [w.to_pylist()[rows] for w in want[:2]]
    monkeypatch.undo()
    bad = [[{"role": "user", "content": "q", "tool_calls": "x"}]]
    with pytest.raises(Invalid, match="f row 0 .*message 0 has field 'tool_calls'"):
        chat_tokenize(ct, pa.array(convs[:1] + bad), "messages", "f", -1)


def _no_rows(*a, **k):
    raise AssertionError("normalize_messages called")


_message = st.one_of(
    st.none(),
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                           "content": st.one_of(st.none(), st.text(max_size=12))}))


@settings(max_examples=200, deadline=None)
@given(convs=st.lists(st.lists(_message, max_size=5), max_size=12), data=st.data(),
       large=st.booleans())
def test_content_bytes_from_arrow_are_the_messages_utf8(convs, data, large):
    """The conversations' content sizes prepare reads from the Arrow buffers (its
    max_row_bytes check, before any Python object): each row's contents' UTF-8 bytes, a null
    message or content holding none, on slices and on large lists and strings."""
    import pyarrow as pa

    from fastaxo.pipeline.messages import content_bytes

    text = pa.large_string() if large else pa.string()
    typ = pa.struct([("role", text), ("content", text)])
    arr = pa.array(convs, type=pa.large_list(typ) if large else pa.list_(typ))
    # Nulls on the messages themselves, over children that hold text (as other writers
    # leave them): such a message holds no bytes either.
    flat = [m for c in convs for m in c]
    hide = data.draw(st.lists(st.booleans(), min_size=len(flat), max_size=len(flat)))
    if any(hide):
        roles = pa.array([m["role"] if m else "user" for m in flat], text)
        contents = pa.array(["xyz" if h else m and m["content"] for h, m in zip(hide, flat)],
                            text)
        arr = type(arr).from_arrays(arr.offsets, pa.StructArray.from_arrays(
            [roles, contents], fields=list(typ),
            mask=pa.array([h or m is None for h, m in zip(hide, flat)])))
        convs = [[None if hide[i] else m for i, m in enumerate(flat[o:o + len(c)], o)]
                 for c, o in zip(convs, itertools.accumulate([0] + [len(c) for c in convs]))]
    a = data.draw(st.integers(0, len(convs)))
    b = data.draw(st.integers(a, len(convs)))
    want = [sum(len(m["content"].encode("utf-8", "surrogatepass"))
                for m in c if m is not None and m["content"] is not None) for c in convs[a:b]]
    assert content_bytes(arr.slice(a, b - a)).tolist() == want


def test_arrow_turns_are_made_block_by_block_and_read_as_the_rows():
    """prepare's conversations from a clean messages column (ArrowTurns): each row equals
    what normalize_messages makes of it (Axolotl's role names mapped), whatever the block
    boundaries; a block is made when one of its rows is first read, and only then; indexing
    behaves as a list's (negative indices, slices, IndexError past the end)."""
    import pyarrow as pa

    from fastaxo.chat.tokenize import normalize_messages
    from fastaxo.pipeline.messages import ArrowTurns, arrow_turns

    convs = chat_data.conversations(seed=5, n=150, turns=(1, 7), hi=30)
    convs[3][0]["role"] = "human"
    convs[70][-1]["role"] = "gpt"
    arr = pa.array(convs).slice(1, 149)  # (a slice: offsets that do not start at 0)
    turns = arrow_turns(arr)
    assert isinstance(turns, ArrowTurns) and len(turns) == 149
    assert turns[69] == normalize_messages(convs[70], 70) and set(turns._blocks) == {1}
    want = [normalize_messages(c, i) for i, c in enumerate(convs[1:])]
    assert [turns[i] for i in range(len(turns))] == want and set(turns._blocks) == {0, 1, 2}
    assert turns[-1] == want[-1] and turns[60:70] == want[60:70] and turns[::50] == want[::50]
    with pytest.raises(IndexError):
        turns[149]
    with pytest.raises(IndexError):
        turns[-150]


def test_tokenize_turns_reads_each_block_once(qwen, monkeypatch):
    """prepare's pass over ArrowTurns makes each block of conversations at most once: the
    engine reads part by part, and the result loop does not read a row's turns again (they would be made
    again once their block went); the rows equal tokenize_chat's of the same messages."""
    import pyarrow as pa

    from fastaxo.chat import parts
    from fastaxo.chat.tokenize import tokenize_turns
    from fastaxo.pipeline.messages import ArrowTurns, arrow_turns

    monkeypatch.setattr(parts, "PART_ROWS", 8)  # parts of 8 rows (the first 2), as prepare's
    monkeypatch.setattr(ArrowTurns, "BLOCK", 4)  # 256 over blocks of 64, 8 kept
    monkeypatch.setattr(ArrowTurns, "KEEP", 3)
    convs = chat_data.conversations(seed=11, n=30, turns=(2, 4), hi=30)
    made = []
    real_make = ArrowTurns._make
    monkeypatch.setattr(ArrowTurns, "_make", lambda self, a, b: made.append(a) or real_make(
        self, a, b))
    spec = ChatSpec.create(qwen)
    got = tokenize_turns(arrow_turns(pa.array(convs)), spec, sized=True)
    # (once each, in order; rows made from UTF-8, fastaxo.chat.utf8rows, make no block)
    assert made == sorted(set(made)) and set(made) <= set(range(0, 30, 4)), made
    want = tokenize_chat(convs, spec=spec)
    assert got.input_ids == want.input_ids and got.labels == want.labels


def test_arrow_turns_keep_only_the_last_blocks_and_remake_the_rest(monkeypatch):
    """ArrowTurns holds at most KEEP blocks (the oldest made goes first), so a pass over many
    rows does not keep every conversation's Python objects; a row read again after its block
    went is made again, equal; the engine's part fits in the blocks kept."""
    import pyarrow as pa

    from fastaxo.chat import parts
    from fastaxo.chat.tokenize import normalize_messages
    from fastaxo.pipeline.messages import ArrowTurns, arrow_turns

    assert ArrowTurns.KEEP * ArrowTurns.BLOCK >= parts.PART_ROWS + ArrowTurns.BLOCK
    monkeypatch.setattr(ArrowTurns, "BLOCK", 4)
    monkeypatch.setattr(ArrowTurns, "KEEP", 3)
    convs = chat_data.conversations(seed=9, n=40, turns=(1, 4), hi=30)
    turns = arrow_turns(pa.array(convs))
    want = [normalize_messages(c, i) for i, c in enumerate(convs)]
    made = []
    real_make = ArrowTurns._make
    monkeypatch.setattr(ArrowTurns, "_make", lambda self, a, b: made.append(a) or real_make(
        self, a, b))
    assert [turns[i] for i in range(40)] == want
    assert made == list(range(0, 40, 4)) and list(turns._blocks) == [7, 8, 9]
    assert turns[5] == want[5] and made[-1] == 4 and list(turns._blocks) == [8, 9, 1]
    assert turns[39] == want[39] and turns[6] == want[6] and len(made) == 11
