"""The chat label kernels (_pack.chat_labels, chat_labels_bytes, chat_rows_bytes,
chat_row_offsets) against their plain-Python twin (fastaxo._reference.chat.chat_labels) and
each other, and the C twins of the engine's per-turn reading (locate_parse, locate_ways,
placeholder_spans) against fastaxo.chat's Python functions, with Hypothesis: ragged ids and
offsets, offsets out of order, characters split across byte tokens, empty conversations and a
huge row, frames that recur. No transformers needed (this file also
runs under the sanitizers, scripts/sanitize.sh)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastaxo._core import backend
from fastaxo._reference import chat as ref
from fastaxo.chat import engine as engine_mod
from fastaxo.chat.locate import VARIANTS, RowState, _parse, parse

S1, S2 = ref.SENTINELS

MODES = ["turn", "all", "last", None, "none"]
CODES = {"turn": 1, "all": 2, "last": 3}
needs_ext = pytest.mark.skipif(backend.pack_ext is None, reason="compiled extension not loaded")


# -- the kernels ----------------------------------------------------------------------------

@st.composite
def label_case(draw):
    n = draw(st.integers(0, 60))
    ids = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    widths = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    offsets, at = [], 0
    for w in widths:
        back = draw(st.integers(0, 1)) if at else 0  # a char split across two tokens
        offsets.append((at - back, at + w))
        at += w
    if draw(st.booleans()) and n:  # unsorted offsets: the bisect must probe the same places
        i = draw(st.integers(0, n - 1))
        offsets[i] = (draw(st.integers(0, at + 2)), draw(st.integers(0, at + 2)))
    spans = draw(st.lists(st.tuples(st.integers(0, at + 3), st.integers(0, at + 3)),
                          max_size=8))
    eot = draw(st.lists(st.integers(0, 6), max_size=2, unique=True))
    eos = draw(st.lists(st.integers(0, 6), max_size=1))
    return ids, offsets, spans, eot, eos, draw(st.sampled_from(MODES)), draw(st.sampled_from(MODES))


@needs_ext
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(label_case())
def test_chat_labels_kernel_matches_reference(case):
    ids, offsets, spans, eot, eos, eot_mode, eos_mode = case
    want = _outcome(ref.chat_labels, ids, offsets, spans, eot, eos, eot_mode, eos_mode)
    got = _outcome(backend.pack_ext.chat_labels,
                   list(ids), list(offsets), np.array(spans, np.int64).reshape(-1, 2),
                   np.array(eot, np.int64), np.array(eos, np.int64), CODES.get(eot_mode, 0),
                   CODES.get(eos_mode, 0))
    assert got == want


def _outcome(fn, *args):
    try:
        return fn(*args)
    except IndexError:  # Axolotl's own: a turn not found in a conversation with no tokens
        return IndexError


def _byte_row(draw, table):
    """A text cut into byte tokens anywhere (even inside a character, as byte-level BPE does),
    its tokens' character offsets as tokenizers reports them, and turn spans at characters;
    ``table`` (bytes -> id) is shared by the rows of a batch."""
    chars = draw(st.lists(st.sampled_from(list("ab \n") + ["é", "数", "🙂"]), max_size=40))
    text = "".join(chars)
    data = text.encode()
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(data) - 1)), max_size=20)))
                  | {len(data)}) if data else []
    char_of = []  # byte -> char index
    for c, ch in enumerate(text):
        char_of += [c] * len(ch.encode())
    ids, offsets, start = [], [], 0
    for end in cuts:
        piece = data[start:end]
        ids.append(table.setdefault(piece, len(table)))
        offsets.append((char_of[start], char_of[end - 1] + 1))
        start = end
    spans = draw(st.lists(st.tuples(st.integers(0, len(text)), st.integers(0, len(text))),
                          max_size=6))
    return text, ids, offsets, spans


@st.composite
def byte_case(draw):
    table = {}
    text, ids, offsets, spans = _byte_row(draw, table)
    tok_bytes = sorted(table, key=table.get)
    eot = draw(st.lists(st.integers(0, max(0, len(table) - 1)), max_size=2, unique=True))
    return text, ids, offsets, tok_bytes, spans, eot, draw(st.sampled_from(MODES))


@st.composite
def byte_batch(draw):
    """Rows for chat_rows_bytes: one token table, some rows whose ids do not spell their text
    (a token dropped or swapped), some with no ids."""
    table = {}
    rows = []
    for _ in range(draw(st.integers(0, 5))):
        text, ids, offsets, spans = _byte_row(draw, table)
        if ids and draw(st.integers(0, 5)) == 0:  # ids that do not spell the text
            ids = ids[1:] if draw(st.booleans()) else [*ids[1:], ids[0]]
        rows.append((text, ids, offsets, spans))
    tok_bytes = sorted(table, key=table.get)
    eot = draw(st.lists(st.integers(0, max(0, len(table) - 1)), max_size=2, unique=True))
    eos = draw(st.lists(st.integers(0, max(0, len(table) - 1)), max_size=1))
    return rows, tok_bytes, eot, eos, draw(st.sampled_from(MODES)), draw(st.sampled_from(MODES))


def _token_table(tok_bytes):
    lens = np.array([len(b) for b in tok_bytes], np.int64)
    toff = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    blob = np.frombuffer(b"".join(tok_bytes), np.uint8) if tok_bytes else np.zeros(0, np.uint8)
    return toff, blob


def _byte_spans(text, spans):
    byte_at = [len(text[:c].encode()) for c in range(len(text) + 1)]
    return np.array([(byte_at[a], byte_at[b]) for a, b in spans], np.int64).reshape(-1, 2)


def _rows_bytes(rows, toff, blob, eot, eos, eot_mode, eos_mode):
    """chat_rows_bytes on ``rows`` ((text, ids, spans) each): per row ``(labels list, -1)``,
    ``(None, status)``."""
    data = [t.encode() for t, _, _ in rows]
    cum = np.cumsum([0] + [len(d) for d in data]).astype(np.int64)
    id_off = np.cumsum([0] + [len(i) for _, i, _ in rows]).astype(np.int64)
    span_off = np.cumsum([0] + [len(s) for _, _, s in rows]).astype(np.int64)
    spans = np.array([s for _, _, ss in rows for s in ss], np.int64).reshape(-1, 2)
    ids = np.array([v for _, i, _ in rows for v in i], np.int32)
    labels, status = backend.pack_ext.chat_rows_bytes(
        ids, id_off, np.frombuffer(b"".join(data), np.uint8), cum,
        np.array([len(t) for t, _, _ in rows], np.int64), spans, span_off, toff, blob,
        np.array(eot, np.int64), np.array(eos, np.int64), CODES.get(eot_mode, 0),
        CODES.get(eos_mode, 0))
    assert labels.dtype == np.int32 and len(labels) == len(ids) and len(status) == len(rows)
    return [(labels[id_off[r]:id_off[r + 1]].tolist(), -1) if s == -1 else (None, s)
            for r, s in enumerate(status.tolist())]


@needs_ext
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(byte_batch())
def test_batch_byte_kernel_equals_the_row_kernel(case):
    """chat_rows_bytes (a batch, the GIL released) gives each row chat_labels_bytes' answer:
    its labels, the turn past the last token, -2 where the ids do not spell the text; and -3
    for a row with no ids (which chat_labels_bytes answers with IndexError or no labels)."""
    rows, tok_bytes, eot, eos, eot_mode, eos_mode = case
    toff, blob = _token_table(tok_bytes)
    got = _rows_bytes([(t, i, s) for t, i, _, s in rows], toff, blob, eot, eos, eot_mode,
                      eos_mode)
    for (text, ids, _, spans), (labels, status) in zip(rows, got, strict=True):
        if not ids:
            assert status == -3
            continue
        want = _outcome(backend.pack_ext.chat_labels_bytes, list(ids), text.encode(), toff,
                        blob, _byte_spans(text, spans), np.array(eot, np.int64),
                        np.array(eos, np.int64), CODES.get(eot_mode, 0),
                        CODES.get(eos_mode, 0))
        assert (labels, status) == want


@needs_ext
@pytest.mark.parametrize("order", ["in order", "reversed"])
def test_batch_byte_kernel_on_long_rows_with_many_turns(order):
    """Rows of thousands of characters (1 to 4 bytes each) cut into tokens of 1 to 12 bytes,
    with 40 turns: the batch kernel finds the turns' bytes by skipping whole words when the
    turns are in order, by a table of character starts when not, and compares tokens of up
    to 8 bytes as words; each row equals the row kernel's answer (byte spans made in
    Python), and a token swapped anywhere is -2."""
    rng = np.random.default_rng(11)
    alphabet = list("abc \n") + ["é", "数", "🙂", "ß"]
    rows, table = [], {}
    for r in range(6):
        text = "".join(rng.choice(alphabet, int(rng.integers(2000, 6000))))
        data = text.encode()
        cuts, at = [], 0
        while at < len(data):
            at = min(len(data), at + int(rng.integers(1, 13)))
            cuts.append(at)
        ids, start = [], 0
        for end in cuts:
            ids.append(table.setdefault(data[start:end], len(table)))
            start = end
        marks = np.sort(rng.choice(len(text) + 1, 80, replace=False))
        spans = [(int(a), int(b)) for a, b in marks.reshape(-1, 2)]
        if order == "reversed":
            spans = spans[::-1]
        if r == 5:  # one token swapped: the ids do not spell the text
            k = len(ids) // 2
            ids[k], ids[k + 1] = ids[k + 1], ids[k]
        rows.append((text, ids, spans))
    toff, blob = _token_table(sorted(table, key=table.get))
    eot = [table.setdefault(b"\n", len(table))] if b"\n" in table else []
    got = _rows_bytes(rows, toff, blob, eot, [], "turn", None)
    for (text, ids, spans), (labels, status) in zip(rows, got, strict=True):
        want = _outcome(backend.pack_ext.chat_labels_bytes, list(ids), text.encode(), toff,
                        blob, _byte_spans(text, spans), np.array(eot, np.int64),
                        np.zeros(0, np.int64), CODES["turn"], 0)
        assert (labels, status) == want
    assert [s for _, s in got] == [-1] * 5 + [-2]


@needs_ext
def test_batch_byte_kernel_checks_its_arrays():
    toff, blob = _token_table([b"a", b"b", "é".encode()])
    ok = [("ab", [0, 1], [(0, 1)]), ("é", [2], [(0, 1)])]
    assert _rows_bytes(ok, toff, blob, [], [], "turn", None) == [([0, -100], -1), ([2], -1)]
    k = backend.pack_ext.chat_rows_bytes
    e = np.zeros(0, np.int64)
    ids, text = np.array([0, 1], np.int32), np.frombuffer(b"ab", np.uint8)
    two, one = np.array([0, 2], np.int64), np.array([0, 1], np.int64)
    sp = np.array([[0, 1]], np.int64)
    with pytest.raises(ValueError, match=r"expected 2 entries \(rows \+ 1\)"):
        k(ids, two[:1], text, two, np.array([2], np.int64), sp, one, toff, blob, e, e, 1, 0)
    with pytest.raises(ValueError, match=r"id_offsets: expected offsets from 0 to at most 2"):
        k(ids, np.array([0, 3], np.int64), text, two, np.array([2], np.int64), sp, one, toff,
          blob, e, e, 1, 0)
    with pytest.raises(ValueError, match=r"text_offsets: decreasing"):
        k(ids[:0], np.array([0, 0, 0], np.int64), text, np.array([0, 2, 1], np.int64),
          np.array([1, 0], np.int64), sp[:0], np.zeros(3, np.int64), toff, blob, e, e, 1, 0)
    with pytest.raises(ValueError, match=r"spans: row 0 has a span at 3, outside \[-1, 2\]"):
        k(ids, two, text, two, np.array([2], np.int64), np.array([[0, 3]], np.int64), one,
          toff, blob, e, e, 1, 0)
    with pytest.raises(ValueError, match=r"chars: row 0 holds 3 characters in 2 bytes"):
        k(ids, two, text, two, np.array([3], np.int64), sp, one, toff, blob, e, e, 1, 0)
    acute = np.frombuffer("é".encode(), np.uint8)  # two bytes, one character, not 0
    with pytest.raises(ValueError, match=r"chars: row 0 does not hold 0 characters"):
        k(np.array([2], np.int32), one, acute, two, np.array([0], np.int64), sp[:0],
          np.zeros(2, np.int64), toff, blob, e, e, 1, 0)
    with pytest.raises(ValueError, match=r"token_offsets: expected offsets from 0 to at most 1"):
        k(ids, two, text, two, np.array([2], np.int64), sp, one, toff, blob[:1], e, e, 1, 0)


@needs_ext
def test_pooled_list_shares_the_pool():
    pool = [0, 10**6]
    got = backend.pack_ext.pooled_list(np.array([1, -100, 0, 1], np.int32), pool)
    assert got == [10**6, -100, 0, 10**6] and got[0] is pool[1] and got[3] is pool[1]
    with pytest.raises(ValueError, match=r"values: 2 at 1 is outside \[0, 2\) and not -100"):
        backend.pack_ext.pooled_list(np.array([1, 2], np.int32), pool)
    with pytest.raises(ValueError, match=r"values: -1 at 0"):
        backend.pack_ext.pooled_list(np.array([-1], np.int32), pool)
    assert backend.pack_ext.pooled_list(np.zeros(0, np.int32), []) == []


@needs_ext
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(byte_case())
def test_byte_kernel_equals_offsets_kernel(case):
    text, ids, offsets, tok_bytes, spans, eot, mode = case
    toff, blob = _token_table(tok_bytes)
    eot_a = np.array(eot, np.int64)
    got = _outcome(backend.pack_ext.chat_labels_bytes, list(ids), text.encode(), toff, blob,
                   _byte_spans(text, spans), eot_a, eot_a[:0], CODES.get(mode, 0), 0)
    want = _outcome(ref.chat_labels, ids, offsets, spans, eot, [], mode, None)
    assert got == want


@needs_ext
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(label_case())
def test_row_offsets_kernel_equals_list_kernel(case):
    """chat_row_offsets (int32 ids, an (n, 2) offsets array: fastaxo's character offsets) gives
    chat_labels' labels, offsets out of order included (the same probes)."""
    ids, offsets, spans, eot, eos, eot_mode, eos_mode = case
    args = (np.array(spans, np.int64).reshape(-1, 2), np.array(eot, np.int64),
            np.array(eos, np.int64), CODES.get(eot_mode, 0), CODES.get(eos_mode, 0))
    want = _outcome(backend.pack_ext.chat_labels, list(ids), list(offsets), *args)
    pairs = np.array(offsets, np.int64).reshape(-1, 2)
    for pool in (None, list(range(7))):
        got = _outcome(backend.pack_ext.chat_row_offsets, np.array(ids, np.int32), pairs, *args,
                       pool)
        assert got == (want if want is IndexError else (ids, *want))
    arr = _outcome(backend.pack_ext.chat_row_offsets, np.array(ids, np.int32), pairs, *args,
                   None, True)
    _assert_arrays(arr, want if want is IndexError else (ids, *want))


def _assert_arrays(got, want):
    """A kernel's arrays=True result is its list result as int32 arrays."""
    if want is IndexError:
        assert got is IndexError
        return
    ids, labels, bad = got
    if want[0] is None:  # the ids do not spell the text
        assert got == want
        return
    assert isinstance(ids, np.ndarray) and ids.dtype == np.int32
    assert ids.tolist() == want[0] and bad == want[2]
    if want[1] is None:
        assert labels is None
    else:
        assert isinstance(labels, np.ndarray) and labels.dtype == np.int32
        assert labels.tolist() == want[1]


@needs_ext
def test_row_offsets_kernel_checks_its_arrays():
    row = backend.pack_ext.chat_row_offsets
    e = np.zeros(0, np.int64)
    spans = np.array([[0, 1]], np.int64)
    ok = np.array([[0, 1], [1, 2]], np.int64)
    assert row(np.array([0, 1], np.int32), ok, spans, e, e, 1, 1, [0, 1]) == ([0, 1], [0, -100],
                                                                             -1)
    with pytest.raises(ValueError, match=r"offsets: expected shape \(2, 2\)"):
        row(np.array([0, 1], np.int32), ok[:1], spans, e, e, 1, 1, None)
    with pytest.raises(ValueError, match=r"ids: id 5 at 1 is outside \[0, 2\)"):
        row(np.array([0, 5], np.int32), ok, spans, e, e, 1, 1, [0, 1])
    with pytest.raises(ValueError, match=r"ids: id -1 at 0"):
        row(np.array([-1, 0], np.int32), ok, spans, e, e, 1, 1, None)
    assert row(np.array([0, 1], np.int32), ok, np.array([[5, 6]], np.int64), e, e, 1, 1,
               None) == ([0, 1], None, 0)


@needs_ext
def test_batch_kernel_refuses_what_the_list_kernel_refuses():
    toff, blob = _token_table([b"a", b"b"])
    rows = [("ab", [0, 1], [])]
    for ids, text in (([0, 0], "ab"), ([0], "ab"), ([0, 1, 1], "ab"), ([5], "a"), ([-1], "a"),
                      ([2**31 - 1], "a")):
        rows.append((text, ids, []))
    assert _rows_bytes(rows, toff, blob, [], [], "turn", "turn") == [([-100, -100], -1)] + [
        (None, -2)] * 6


@needs_ext
def test_byte_kernel_refuses_ids_that_do_not_spell_the_text():
    toff = np.array([0, 1, 2], np.int64)
    blob = np.frombuffer(b"ab", np.uint8)
    spans = np.zeros((0, 2), np.int64)
    e = np.zeros(0, np.int64)
    assert backend.pack_ext.chat_labels_bytes([0, 1], b"ab", toff, blob, spans, e, e, 1, 1)[1] == -1
    for ids, text in (([0, 0], b"ab"), ([0], b"ab"), ([0, 1, 1], b"ab"), ([5], b"a"), ([-1], b"a")):
        assert backend.pack_ext.chat_labels_bytes(ids, text, toff, blob, spans, e, e, 1, 1) == (
            None, -2)


def test_empty_conversation_kernel_and_huge_row():
    ids = list(range(200_000))
    offsets = [(i, i + 1) for i in ids]
    want = ref.chat_labels(ids, offsets, [(10, 150_000)], [5], [], "turn", None)
    if backend.pack_ext is not None:
        got = backend.pack_ext.chat_labels(ids, offsets, np.array([[10, 150_000]], np.int64),
                                           np.array([5], np.int64), np.zeros(0, np.int64), 1, 0)
        assert got == want
        assert backend.pack_ext.chat_labels([], [], np.zeros((0, 2), np.int64),
                                            np.zeros(0, np.int64), np.zeros(0, np.int64),
                                            1, 1) == ([], -1)
    assert want[0][10:150_000] == ids[10:150_000] and want[0][150_000] == -100


# -- the engine's per-turn reading in C ------------------------------------------------------

@st.composite
def reading(draw):
    """A text read through a frame: few letters (so frames recur, contents repeat, ends fall
    within reach and many ways share a length), each turn written one of its ways, sometimes
    another turn's, sometimes a text of letters alone."""
    letters = st.text(alphabet="ab<|", max_size=4)
    n = draw(st.integers(0, 7))
    frames = [draw(letters) for _ in range(n + 1)]
    written = []
    for _ in range(n):
        ways = []
        for w in draw(st.lists(letters, min_size=1, max_size=3)):
            if all(w != x for _, x in ways):
                ways.append((len(ways) + draw(st.integers(0, 1)), w))
        written.append(ways)
    if draw(st.integers(0, 9)) == 0:
        text = draw(st.text(alphabet="ab<|", max_size=30))
    else:
        parts = [frames[0]]
        for k in range(n):
            src = written[draw(st.integers(0, n - 1))] if draw(st.integers(0, 5)) == 0 else (
                written[k])
            parts += [draw(st.sampled_from(src))[1], frames[k + 1]]
        text = "".join(parts)
    return text, frames, written


@needs_ext
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reading())
def test_the_c_parse_reads_as_parse(case):
    text, frames, written = case
    assert _parse(text, frames, written) == parse(text, frames, written)  # (C: the extension)


@st.composite
def row_turns(draw):
    """Messages whose contents a variant may change: spaces and newlines at either end,
    ``</think>`` and ``<think>`` anywhere, other Unicode spaces; the index of the last user."""
    bits = st.sampled_from(["a", "b", " ", "\n", "\u3000", "\x1c", "</think>", "<think>",
                            "\t"])
    turns = [{"role": draw(st.sampled_from(["user", "assistant", "system"])),
              "content": "".join(draw(st.lists(bits, max_size=6)))}
             for _ in range(draw(st.integers(0, 6)))]
    return turns, draw(st.integers(-1, len(turns)))


@needs_ext
@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row_turns())
def test_the_c_ways_are_the_ways(case):
    turns, last = case
    state = RowState(turns, list(range(len(turns))))
    state.last = last
    assert backend.pack_ext.locate_ways(turns, last, VARIANTS) == [
        state._ways(j) for j in range(len(turns))]


@needs_ext
@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_c_placeholder_spans_are_the_diffs(data):
    """_pack.placeholder_spans against engine._placeholder_span per sentinel, united: texts
    around the segment that repeat the placeholders' letters (scans that run on, past a small
    cap), segments at either end, missing segments, the skipped first turn."""
    letters = "ab" + S1[:3] + S2[-3:]
    full = data.draw(st.text(alphabet=letters, max_size=40))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(full)), max_size=8)))
    segments = [None if data.draw(st.integers(0, 4)) == 0 else (a, b)
                for a, b in zip(cuts[0::2], cuts[1::2], strict=False)]
    cap = data.draw(st.sampled_from([0, 2, 256]))
    skip = data.draw(st.booleans())
    spans, failed = backend.pack_ext.placeholder_spans(full, segments, ref.SENTINELS, cap, skip)
    want, want_failed = [], []
    for k, seg in enumerate(segments):
        if k == 0 and skip:
            want.append([0, 0])
            continue
        got = None if seg is None else [
            engine_mod._placeholder_span(full, seg[0], seg[1] - seg[0], s, cap)
            for s in ref.SENTINELS]
        if got is not None and None in got:
            want_failed.append(k)
            got = None
        want.append([-1, -1] if got is None else [min(g[0] for g in got),
                                                   max(g[1] for g in got)])
    assert spans.tolist() == want and failed == want_failed


@needs_ext
@pytest.mark.parametrize("call", [
    lambda p: _parse("ab", ["a", "b"], [[(0, 1)]]),              # a way that is not a str
    lambda p: _parse("ab", ["a", "b"], [[[0, "x"]]]),            # a way that is not a pair
    lambda p: _parse("ab", ["a", 7], [[(0, "x")]]),              # a frame that is not a str
    lambda p: p.locate_parse(None, ["a"], [], 16, 4096),
    lambda p: p.locate_ways([{"role": "user", "content": None}], 0, VARIANTS),
    lambda p: p.locate_ways([{"role": "user", "content": 5}], 0, VARIANTS),
    lambda p: p.placeholder_spans("abc", [[0, 1]], ref.SENTINELS, 3, False),
    lambda p: p.placeholder_spans("abc", [(0, 1)], ("x", None), 3, False),
])
def test_the_c_reading_refuses_other_types(call):
    """The C twins read str objects' storage: anything else is a TypeError, not a crash."""
    with pytest.raises(TypeError):
        call(backend.pack_ext)


@needs_ext
def test_placeholder_spans_refuses_a_segment_outside_the_text():
    with pytest.raises(ValueError, match=r"segments: \(2, 5\) is outside the text \(3\)"):
        backend.pack_ext.placeholder_spans("abc", [(2, 5)], ref.SENTINELS, 3, False)


@needs_ext
def test_utf8_join_equals_str_encode():
    """_tok.utf8_join (the chat engine's encoder thread makes the texts' UTF-8 with it, the
    GIL released) gives str.encode's bytes, offsets and character counts, for every storage
    of a str (ASCII, Latin-1, 2 and 4 bytes a code point) and empty texts; None for what
    str.encode refuses (a lone surrogate) and for an item that is not a str."""
    texts = ["", "plain ascii " * 50, "caf\u00e9 \u00ff", "\u6570\u636e \u0100", "emoji \U0001f642",
             "", "x" * 7, "\u00e9" * 9 + "\U0001f680" * 3, "mixed a\u00e9\u6570\U0001f642z"]
    data, offsets, chars = backend.tok_ext.utf8_join(texts)
    assert data.dtype == np.uint8 and offsets.dtype == chars.dtype == np.int64
    assert bytes(data) == b"".join(t.encode("utf-8") for t in texts)
    assert offsets.tolist() == np.cumsum([0] + [len(t.encode()) for t in texts]).tolist()
    assert chars.tolist() == [len(t) for t in texts]
    assert backend.tok_ext.utf8_join(("a", "b")) is not None  # a tuple too
    empty = backend.tok_ext.utf8_join([])
    assert len(empty[0]) == 0 and empty[1].tolist() == [0] and len(empty[2]) == 0
    assert backend.tok_ext.utf8_join(["ok", "lone \ud800"]) is None
    assert backend.tok_ext.utf8_join(["ok", b"bytes"]) is None
    # into a given array when it has room for the bound (4 bytes a character here)
    room = np.full(4 * sum(map(len, texts)) + 1, 7, np.uint8)
    got, off2, _ = backend.tok_ext.utf8_join(texts, room)
    assert np.shares_memory(got, room) and bytes(got) == bytes(data)
    assert off2.tolist() == offsets.tolist()
    small = np.zeros(3, np.uint8)
    got, _, _ = backend.tok_ext.utf8_join(texts, small)
    assert not np.shares_memory(got, small) and bytes(got) == bytes(data)
    frozen = np.zeros(len(room), np.uint8)
    frozen.flags.writeable = False
    for bad in (np.zeros(8, np.int32), np.zeros((2, 4), np.uint8), room[::2], frozen, b"x"):
        with pytest.raises(ValueError, match="out: expected a writable"):
            backend.tok_ext.utf8_join(texts, bad)
