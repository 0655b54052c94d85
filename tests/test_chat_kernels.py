"""The chat label kernels (_pack.chat_labels, chat_labels_bytes, chat_row_bytes,
chat_row_offsets) against their plain-Python twin (fastaxo._reference.chat.chat_labels) and
each other, with Hypothesis: ragged ids and offsets, offsets out of order, characters split
across byte tokens, empty conversations and a huge row. No transformers needed (this file also
runs under the sanitizers, scripts/sanitize.sh)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastaxo._core import backend
from fastaxo._reference import chat as ref

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


@st.composite
def byte_case(draw):
    """A text cut into byte tokens anywhere (even inside a character, as byte-level BPE does),
    its tokens' character offsets as tokenizers reports them, and turn spans at characters."""
    chars = draw(st.lists(st.sampled_from(list("ab \n") + ["é", "数", "🙂"]), max_size=40))
    text = "".join(chars)
    data = text.encode()
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(data) - 1)), max_size=20)))
                  | {len(data)}) if data else []
    char_of = []  # byte -> char index
    for c, ch in enumerate(text):
        char_of += [c] * len(ch.encode())
    table, ids, offsets, start = {}, [], [], 0
    for end in cuts:
        piece = data[start:end]
        ids.append(table.setdefault(piece, len(table)))
        offsets.append((char_of[start], char_of[end - 1] + 1))
        start = end
    tok_bytes = sorted(table, key=table.get)
    spans = draw(st.lists(st.tuples(st.integers(0, len(text)), st.integers(0, len(text))),
                          max_size=6))
    eot = draw(st.lists(st.integers(0, max(0, len(table) - 1)), max_size=2, unique=True))
    return text, ids, offsets, tok_bytes, spans, eot, draw(st.sampled_from(MODES))


@needs_ext
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(byte_case())
def test_byte_kernel_equals_offsets_kernel(case):
    text, ids, offsets, tok_bytes, spans, eot, mode = case
    lens = np.array([len(b) for b in tok_bytes], np.int64)
    toff = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    blob = np.frombuffer(b"".join(tok_bytes), np.uint8) if tok_bytes else np.zeros(0, np.uint8)
    byte_at = [len(text[:c].encode()) for c in range(len(text) + 1)]
    bspans = np.array([(byte_at[a], byte_at[b]) for a, b in spans], np.int64).reshape(-1, 2)
    eot_a = np.array(eot, np.int64)
    got = _outcome(backend.pack_ext.chat_labels_bytes, list(ids), text.encode(), toff, blob,
                   bspans, eot_a, eot_a[:0], CODES.get(mode, 0), 0)
    want = _outcome(ref.chat_labels, ids, offsets, spans, eot, [], mode, None)
    assert got == want
    # the int32 twin (fastaxo's encoder): the same labels, the ids as a list, pooled or not
    ids32 = np.array(ids, np.int32)
    for pool in (None, list(range(len(tok_bytes))), list(range(len(tok_bytes) + 7))):
        row = _outcome(backend.pack_ext.chat_row_bytes, ids32, text.encode(), toff, blob,
                       bspans, eot_a, eot_a[:0], CODES.get(mode, 0), 0, pool)
        if want is IndexError:
            assert row is IndexError
        else:
            assert row == (ids, *want)
            assert all(type(v) is int for v in row[0])
    # arrays=True (prepare's columns): the same ids and labels as int32 arrays
    arr = _outcome(backend.pack_ext.chat_row_bytes, ids32, text.encode(), toff, blob, bspans,
                   eot_a, eot_a[:0], CODES.get(mode, 0), 0, None, True)
    _assert_arrays(arr, want if want is IndexError else (ids, *want))


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
def test_row_kernel_refuses_what_the_list_kernel_refuses():
    toff = np.array([0, 1, 2], np.int64)
    blob = np.frombuffer(b"ab", np.uint8)
    spans = np.zeros((0, 2), np.int64)
    e = np.zeros(0, np.int64)
    row = backend.pack_ext.chat_row_bytes
    assert row(np.array([0, 1], np.int32), b"ab", toff, blob, spans, e, e, 1, 1, [0, 1]) == (
        [0, 1], [-100, -100], -1)
    for ids, text in (([0, 0], b"ab"), ([0], b"ab"), ([0, 1, 1], b"ab"), ([5], b"a"),
                      ([-1], b"a"), ([2**31 - 1], b"a")):
        for pool in (None, [0, 1]):
            assert row(np.array(ids, np.int32), text, toff, blob, spans, e, e, 1, 1, pool) == (
                None, None, -2)
    with pytest.raises(ValueError, match="pool: expected at least 2"):
        row(np.array([0], np.int32), b"a", toff, blob, spans, e, e, 1, 1, [0])
    with pytest.raises(ValueError):  # int32 ids only
        row(np.array([0], np.int64), b"a", toff, blob, spans, e, e, 1, 1, None)
    # a pooled row shares the pool's objects, and is an ordinary list
    pool = [0, 10**6]
    ids, _, _ = row(np.array([1, 1], np.int32), b"bb", toff, blob, spans, e, e, 1, 1, pool)
    assert ids == [10**6, 10**6] and ids[0] is pool[1]
    ids[0] = 7
    assert pool == [0, 10**6]


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
