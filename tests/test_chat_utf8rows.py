"""Rows made from UTF-8 (fastaxo.chat.utf8rows): a conversation read from Arrow whose text a
recorded path gives stays bytes. Every row must be the one the str steps make from the same
conversation (the engine run on the rows as Python objects), and each UTF-8 step must answer
as its str twin: the guards' strips, the placeholder diffs, the split of Arrow's strings."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
import chat_data  # noqa: E402

from fastaxo._core import backend  # noqa: E402
from fastaxo.chat import ChatEngine, ChatSpec, Fallback, paths  # noqa: E402
from fastaxo.chat import engine as engine_mod  # noqa: E402
from fastaxo.errors import InvalidInputError  # noqa: E402
from fastaxo.pipeline.messages import arrow_turns  # noqa: E402

pytestmark = pytest.mark.skipif(backend.pack_ext is None or backend.tok_ext is None,
                                reason="the compiled extensions are not built")

# pieces of contents: every whitespace character at either end, text a guard asks about,
# Axolotl's placeholders and parts of them, non-ASCII of every UTF-8 length, text NFC changes
_PIECES = ("", "a", "hi", " ", "\n", "\t", "\x1c", "\x85", "\xa0", "\u1680", "\u2003",
           "\u2028", "\u3000", "\u205f", "<think>", "</think>", "<tool_response>",
           "</tool_response>", "[[dummy_message]]", "zzdummymessagezz", "dummy", "zz", "[[",
           "é", "e\u0301", "\u201c", "\u201d", "\u2014", "语", "\U0001f600", "\u200d", "x y")
contents = st.lists(st.sampled_from(_PIECES), max_size=5).map("".join)

_CHATML = "<|im_start|>{{ m.role }}\n"
TEMPLATES = {
    "qwen3": None,
    "trim": "{% for m in messages %}" + _CHATML + "{{ m.content | trim }}<|im_end|>\n"
            "{% endfor %}",
    "strips": "{% for m in messages %}" + _CHATML + "{{ m.content.lstrip().rstrip(' \u3000')"
              ".strip('\\n') }}<|im_end|>\n{% endfor %}",
    "guards": "{% for m in messages %}" + _CHATML
              + "{% if m.content.startswith(('<think>', '\u201c')) %}S{% endif %}"
              "{% if m.content.endswith('\U0001f600') %}E{% endif %}"
              "{% if '语' in m.content %}Y{% endif %}{% if m.content == 'hi' %}H{% endif %}"
              "{% if m.content %}{{ m.content }}{% else %}(empty){% endif %}<|im_end|>\n"
              "{% endfor %}",
}
_SPECS: dict[str, ChatSpec] = {}


def _spec(name):
    if name not in _SPECS:
        _SPECS[name] = ChatSpec.create(chat_data.qwen3_tokenizer(), TEMPLATES[name])
    return _SPECS[name]


def _same(a, b):
    if isinstance(a, Fallback) or isinstance(b, Fallback):
        return (isinstance(a, Fallback) and isinstance(b, Fallback)
                and a.reason == b.reason)
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def _both(spec, convs, monkeypatch):
    """The engine's rows from Arrow (UTF-8 rows where a path fits) and from the same rows as
    Python objects (str steps only), and how many rows were made from UTF-8."""
    made: list[int] = []
    real = engine_mod.utf8_texts

    def counted(*args, **kwargs):
        got = real(*args, **kwargs)
        made.append(len(got[0]))
        return got

    monkeypatch.setattr(engine_mod, "utf8_texts", counted)
    turns = arrow_turns(pa.array(convs))
    assert turns is not None
    objects = [turns[i] for i in range(len(turns))]
    want = ChatEngine(spec, arrays=True).run(objects)
    got = ChatEngine(spec, arrays=True).run(turns)
    return got, want, sum(made)


@st.composite
def conversation_runs(draw):
    shapes = draw(st.lists(st.lists(st.sampled_from(["user", "assistant", "system", "human"]),
                                    min_size=1, max_size=4), min_size=1, max_size=3))
    return [[{"role": r, "content": draw(contents)} for r in draw(st.sampled_from(shapes))]
            for _ in range(draw(st.integers(1, 10)))]


@pytest.mark.parametrize("name", sorted(TEMPLATES))
@given(runs=conversation_runs())
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_rows_from_utf8_are_the_rows_from_str(name, runs, monkeypatch):
    spec = _spec(name)
    got, want, _ = _both(spec, runs + runs, monkeypatch)  # (the second run takes the paths)
    for c, g, w in zip(runs + runs, got, want, strict=True):
        assert _same(g, w), c
        assert not (isinstance(w, Fallback) and "raised" in w.reason), (w, c)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_real_conversations_take_the_utf8_rows(name, monkeypatch):
    """Many rows, several parts (the pass's reused buffer, bytes rows and str rows mixed):
    the same rows, and most made from UTF-8."""
    from fastaxo.chat import parts as chat_parts

    convs = chat_data.conversations(seed=4, n=chat_parts.PART_ROWS + 80, turns=(2, 6), hi=80)
    convs[7][1]["content"] = "e\u0301 NFC changes this text"  # (the offsets path)
    convs[9][0]["content"] = ""
    convs[11][-1]["content"] = " \u3000[[dummy_message]]\u2028 "
    got, want, made = _both(_spec(name), convs, monkeypatch)
    for c, g, w in zip(convs, got, want, strict=True):
        assert _same(g, w), c
    assert made > len(convs) // 2, made


def test_small_encoder_calls_over_mixed_rows(monkeypatch):
    """A part's rows in many encoder calls (a small BATCH_BYTES), UTF-8 rows and str rows
    mixed in one call (a template whose paths place some rows only): the same rows."""
    from fastaxo.chat import parts as chat_parts

    monkeypatch.setattr(chat_parts, "BATCH_BYTES", 3000)
    convs = chat_data.conversations(seed=8, n=60, turns=(2, 4), hi=60)
    for k in range(0, 60, 3):  # (the guards template places no row holding 语)
        convs[k][-1]["content"] += " 语"
    got, want, made = _both(_spec("guards"), convs, monkeypatch)
    for c, g, w in zip(convs, got, want, strict=True):
        assert _same(g, w), c
    assert 0 < made < len(convs), made


def test_a_template_with_a_lone_surrogate_has_no_utf8_path(monkeypatch):
    """A template whose text holds a lone surrogate has no UTF-8: its paths have no UTF-8
    function (recording them must not fail), and its rows go the str way, as before."""
    template = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}\ud800"
                "<|im_end|>\n{% endfor %}")
    spec = ChatSpec.create(chat_data.qwen3_tokenizer(), template)
    convs = chat_data.conversations(seed=6, n=12, turns=(2, 4), hi=30)
    turns = arrow_turns(pa.array(convs))
    outcomes = []
    for rows in ([turns[i] for i in range(len(turns))], turns):
        try:
            got = ChatEngine(spec, arrays=True).run(rows)
            outcomes.append([g.reason if isinstance(g, Fallback) else g["input_ids"].tolist()
                             for g in got])
        except Exception as e:  # noqa: BLE001 - the same error either way
            outcomes.append(type(e).__name__)
    assert outcomes[0] == outcomes[1], outcomes
    p = spec.paths()
    assert p is not None and p.broken is None and p.recorded


def test_a_content_that_is_not_utf8_is_named_as_before():
    good = pa.array(["hi", "yo"]).buffers()
    data = b"hi\xff\xfe"
    contents = pa.Array.from_buffers(pa.string(), 2, [None, pa.py_buffer(
        np.array([0, 2, 4], np.int32).tobytes()), pa.py_buffer(data)])
    roles = pa.array(["user", "assistant"])
    msgs = pa.StructArray.from_arrays([roles, contents], names=["role", "content"])
    col = pa.ListArray.from_arrays(pa.array([0, 2], pa.int32()), msgs)
    turns = arrow_turns(col)
    assert turns is not None and good is not None
    assert turns.utf8_rows(0, 1) is None
    with pytest.raises(InvalidInputError, match="row 0 message 1 content is not UTF-8"):
        ChatEngine(_spec("qwen3")).run(turns)


@pytest.mark.parametrize("large", [False, True])
def test_utf8_rows_are_the_rows_of_a_sliced_or_large_column(large):
    """utf8_rows reads the buffers with the column's offset (a slice of a batch) and int64
    offsets (large types): the same roles and contents as the rows made as Python objects."""
    convs = chat_data.conversations(seed=2, n=40, turns=(1, 5), hi=40)
    convs[5][0]["role"] = "human"  # (Axolotl's name for it: user)
    arr = pa.array(convs)
    if large:
        # (the inferred field order: pyarrow 15 sorts the fields, later ones keep it)
        item = pa.struct([(f.name, pa.large_string()) for f in arr.type.value_type])
        arr = arr.cast(pa.large_list(item))
    for part in (arr, arr.slice(7, 20), arr.slice(39)):
        turns = arrow_turns(part)
        assert turns is not None
        n = len(turns)
        roles, contents = turns.utf8_rows(0, n)
        assert roles == [tuple(m["role"] for m in turns[i]) for i in range(n)]
        assert contents == [[m["content"].encode() for m in turns[i]] for i in range(n)]
        assert turns.utf8_rows(n // 2, n) == (roles[n // 2:], contents[n // 2:])


@given(st.lists(st.binary(max_size=12), max_size=20), st.data())
def test_utf8_split_is_bytes_and_strict_decode(items, data):
    offsets = np.zeros(len(items) + 1, np.int64)
    np.cumsum([len(b) for b in items], out=offsets[1:])
    buf = np.frombuffer(b"".join(items), np.uint8)
    first = data.draw(st.integers(0, len(items)))
    last = data.draw(st.integers(first, len(items)))
    got = backend.tok_ext.utf8_split(buf, offsets, first, last)
    bad = None
    for i in range(first, last):
        try:
            items[i].decode("utf-8")
        except UnicodeDecodeError:
            bad = i
            break
    assert got == (bad if bad is not None else items[first:last])
    with pytest.raises(ValueError, match="first, last"):
        backend.tok_ext.utf8_split(buf, offsets, 0, len(items) + 1)


def test_the_whitespace_list_is_str_isspace():
    assert paths.WHITESPACE == "".join(c for c in map(chr, range(0x110000)) if c.isspace())


texts = st.lists(st.sampled_from(_PIECES + tuple(paths.WHITESPACE)), max_size=8).map("".join)


@given(texts, st.sampled_from(["strip", "lstrip", "rstrip"]),
       st.one_of(st.none(), st.sampled_from(["", "\n", " a", "\u3000", "é\n", "\U0001f600"])))
def test_strips_over_utf8_are_the_str_methods(text, method, chars):
    got = paths._strip_utf8(text.encode(), method, chars)
    assert got == getattr(text, method)(chars).encode()


@given(texts, texts, texts, st.sampled_from([0, 1, 3, 256]))
# scans that stop inside a character: “ and ” share two bytes (the scan from the start), as
# do U+3000's and 😀's last bytes (the scan from the end)
@example("a", "[[dummy_message]]\u201c", "\u201d", 256)
@example("\U0001f600", "\u3000[[dummy_message]]", "b", 256)
@example("\U0001f600", "\u3000zzdummymessagezz", "", 256)
@example("a", "\U0001f600", "", 256)
def test_placeholder_spans_over_utf8_are_the_character_spans(before, content, after, cap):
    """The scans over bytes give the character spans, in bytes; where the str scans stay
    within ``cap`` characters the byte scans may stop (they count bytes), never differ."""
    from fastaxo.chat.utf8rows import as_str

    text = before + content + after
    seg = [(len(before), len(before) + len(content))]
    useg = [(len(before.encode()), len(before.encode()) + len(content.encode()))]
    from fastaxo._reference import chat as ref

    # each placeholder alone too, and placeholders that are not ASCII (with Axolotl's, a scan
    # from the end stops where the placeholder's ASCII matched: between characters)
    for sentinels in (ref.SENTINELS, ref.SENTINELS[:1], ref.SENTINELS[1:], ("\u3000",),
                      ("\u201cx", "\U0001f600")):
        want, wfail = backend.pack_ext.placeholder_spans(text, seg, sentinels, cap, False)
        got, gfail = backend.pack_ext.placeholder_spans(
            text.encode(), useg, tuple(x.encode() for x in sentinels), cap, False)
        if gfail:
            continue
        assert not wfail
        assert got.tolist() == [[len(text[:c].encode()) for c in s] for s in want.tolist()]
        texts_, spans = {0: text.encode()}, {0: got}
        as_str(texts_, spans, [0])  # (and back)
        assert texts_[0] == text and spans[0].tolist() == want.tolist()
