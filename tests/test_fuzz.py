"""A fuzz of every public kernel with hostile arguments (issue 18): random ragged data in every
input form, offsets that are valid, wrapping, decreasing or out of range, capacities from 0 to
2**62, every strategy, overflow mode, layout and side. Each call either returns what the plain
NumPy reference returns, or raises a fastaxo error; it never crashes. The sanitizer leg
(scripts/sanitize.sh) runs this file under AddressSanitizer + UndefinedBehaviorSanitizer, where
a read or write out of bounds, a wrapped signed size or a use-after-free is a failed run."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
from hypothesis import assume, given
from hypothesis import strategies as st

import fastaxo
from fastaxo._reference import packing as ref
from fastaxo.errors import FastaxoError

DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
INT64 = np.iinfo(np.int64)


@st.composite
def ragged(draw, valid: bool | None = None):
    """(values, offsets, valid): row lengths with empty and huge rows; invalid offsets now and
    then (wrapping differences, decreasing, negative first, past the values)."""
    lengths = draw(st.lists(st.one_of(st.integers(0, 40), st.integers(0, 3), st.integers(2000, 9000)),
                            max_size=30))
    dt = np.dtype(draw(st.sampled_from(DTYPES)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    total = int(sum(lengths))
    info = np.iinfo(dt)
    values = rng.integers(max(info.min, -(2**31)), min(info.max, 2**31 - 1), total, dtype=dt, endpoint=True)
    odt = np.dtype(draw(st.sampled_from([np.int32, np.int64])))
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ok = True if valid is True else (draw(st.integers(0, 4)) != 0 if valid is None else False)
    if not ok and len(offsets):
        i = draw(st.integers(0, len(offsets) - 1))
        lim = np.iinfo(odt)
        bad = draw(st.sampled_from([int(lim.min), int(lim.max), -1, total + 1, int(lim.max) - 3,
                                    int(offsets[i]) - 1 if i else -5]))
        offsets[i] = bad
        ok = bool(offsets[0] >= 0 and offsets[-1] <= total and np.all(offsets[1:] >= offsets[:-1]))
    return values, offsets.astype(odt), ok


def _form(draw, values, offsets, ok):
    """The same rows as (values, offsets), an Arrow ListArray, or a list of NumPy rows."""
    form = draw(st.sampled_from(["tuple", "arrow", "rows"])) if ok else "tuple"
    if form == "tuple":
        return (values, offsets)
    if form == "arrow":
        cls = pa.LargeListArray if offsets.dtype == np.int64 else pa.ListArray
        return cls.from_arrays(pa.array(offsets), pa.array(values))
    return [values[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]


def _rows(values, offsets):
    return [values[offsets[i] : offsets[i + 1]].astype(np.int64) for i in range(len(offsets) - 1)]


def _fails_cleanly(call):
    """(result, None), or (None, the error) for a fastaxo error or a MemoryError (a size the
    machine cannot allocate is refused cleanly, not a crash)."""
    try:
        return call(), None
    except (FastaxoError, MemoryError) as e:
        return None, e


def _run_on(rag, data, call):
    """``call(src)`` on the rows of ``rag`` in a drawn input form: None when there is nothing to
    compare (a clean refusal; invalid offsets must be refused), else (rows as int64, result)."""
    values, offsets, ok = rag
    src = _form(data.draw, values, offsets, ok)
    out, err = _fails_cleanly(lambda: call(src))
    if not ok:
        assert err is not None, "invalid offsets were accepted"
        return None
    return None if out is None else (_rows(values, offsets), out)


threads = st.sampled_from([1, 2, None])


@given(ragged(), st.data(), st.sampled_from(["right", "left"]), st.one_of(st.none(), st.integers(0, 50),
       st.sampled_from([2**46, 2**62 + 1, INT64.max])), st.one_of(st.none(), st.integers(1, 16),
       st.sampled_from([2**46, 2**62])), st.booleans(), threads)
def test_fuzz_pad(rag, data, side, pad_to, multiple_of, truncate, nt):
    got = _run_on(rag, data, lambda src: fastaxo.pad(
        src, labels=src, max_length=pad_to, pad_to_multiple_of=multiple_of, side=side, truncate=truncate,
        num_threads=nt))
    if got is None:
        return
    rows, out = got
    width = out["input_ids"].shape[1]
    if rows and not truncate:
        assert width >= max(map(len, rows))
    want = ref.pad_rows(rows, width, side == "left", 0, False, np.dtype(np.int64))
    assert np.array_equal(out["input_ids"], want.reshape(out["input_ids"].shape))


@given(ragged(), st.data(), st.one_of(st.none(), st.integers(1, 40), st.sampled_from([2**62])),
       st.sampled_from(["right", "left"]), threads)
def test_fuzz_pad_batches(rag, data, pad_to, side, nt):
    values, offsets, ok = rag
    n = len(offsets) - 1
    cuts = sorted(data.draw(st.lists(st.integers(0, max(n, 0)), max_size=6)))
    boff = np.array([0, *cuts, max(n, 0)], np.int64)
    if data.draw(st.integers(0, 5)) == 0:  # a hostile batch_offsets
        boff[data.draw(st.integers(0, len(boff) - 1))] = data.draw(st.sampled_from([-1, n + 1, INT64.max, INT64.min]))
    good_b = bool(boff[0] == 0 and boff[-1] == n and np.all(np.diff(boff) >= 0)) if n >= 0 else False
    out, err = _fails_cleanly(lambda: fastaxo.pad_batches((values, offsets), boff, max_length=pad_to, side=side,
                                                           truncate=pad_to is not None, num_threads=nt))
    if not (ok and good_b):
        assert err is not None, "invalid offsets were accepted"
        return
    if out is None:
        return
    rows = _rows(values, offsets)
    for b in range(len(boff) - 1):
        got = out[b]["input_ids"]
        want = ref.pad_rows(rows[boff[b] : boff[b + 1]], got.shape[1], side == "left", 0, False, np.dtype(np.int64))
        assert np.array_equal(got, want.reshape(got.shape))


@given(st.lists(st.one_of(st.integers(0, 50), st.integers(-3, -1), st.integers(4000, 2**40)), max_size=40),
       st.one_of(st.integers(0, 200), st.sampled_from([2**31 + 7, 2**62])),
       st.sampled_from(["bfd", "ffd", "ff", "nf"]), st.sampled_from(["error", "truncate", "split", "drop", "isolate"]),
       st.one_of(st.none(), st.integers(1, 5)), threads)
def test_fuzz_pack_bins(lengths, capacity, strategy, overflow, max_rows, nt):
    arr = np.array(lengths, np.int64)
    if overflow == "split" and capacity >= 1 and (arr >= 0).all():
        # a split into 2**25 .. (memory / 48) pieces is a big input, not a hostile one: fastaxo
        # makes it (gigabytes); past that it refuses it (CapacityError, tested here)
        pieces = sum(-(-int(n) // capacity) for n in lengths)
        assume(pieces < 2**25 or pieces * 48 > 2**48)
    out, err = _fails_cleanly(lambda: fastaxo.pack_bins(arr, capacity, strategy=strategy, overflow=overflow,
                                                         max_rows_per_bin=max_rows, num_threads=nt))
    if out is None:
        return
    assert (arr >= 0).all() and capacity >= 1
    idx = np.asarray(out.indices)
    offs = np.asarray(out.offsets)
    assert offs[0] == 0 and offs[-1] == len(idx) and (np.diff(offs) >= 0).all()
    assert ((idx >= 0) & (idx < len(arr))).all()
    if overflow in ("error", "isolate"):
        assert sorted(idx.tolist()) == list(range(len(arr)))  # every row once
    if overflow == "error" and strategy in ("ff", "nf", "bfd", "ffd"):
        order, boffs = ref.assign(arr, capacity, max_rows or 2**62, strategy, False)
        assert idx.tolist() == list(order) and offs.tolist() == list(boffs)


PAD = -(2**40)  # outside every value drawn: what is not PAD is a token


@given(ragged(), st.data(), st.one_of(st.integers(0, 60), st.sampled_from([2**46, 2**62])),
       st.sampled_from(["bfd", "ffd", "ff", "nf"]), st.sampled_from(["error", "truncate", "split", "drop"]),
       st.sampled_from(["padded", "flat"]), st.sampled_from(["segments", "ones", None]), threads)
def test_fuzz_pack(rag, data, max_len, strategy, overflow, layout, attention, nt):
    got = _run_on(rag, data, lambda src: fastaxo.pack(
        src, max_len, labels=src, strategy=strategy, overflow=overflow, layout=layout,
        attention=attention, pad_id=PAD, num_threads=nt))
    if got is None:
        return
    rows, out = got
    ids = np.asarray(out["input_ids"]).reshape(-1)
    tokens = ids[ids != PAD]
    want = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    if layout == "padded":
        assert np.asarray(out["input_ids"]).shape[1] == max_len
    if overflow in ("error", "split"):  # every token once
        assert np.array_equal(np.sort(tokens), np.sort(want))
    else:  # truncate / drop: a sub-multiset of the input
        assert not Counter(tokens.tolist()) - Counter(want.tolist())


@given(st.lists(st.one_of(st.binary(max_size=50), st.text(max_size=20), st.binary(min_size=3000, max_size=9000)),
                max_size=40), threads)
def test_fuzz_hash_rows_and_dedupe(rows, nt):
    import hashlib

    d = fastaxo.hash_rows(rows, num_threads=nt)
    want = [hashlib.sha256(r.encode() if isinstance(r, str) else r).digest() for r in rows]
    assert [bytes(x) for x in d] == want
    res = fastaxo.dedupe(rows, num_threads=nt)
    first = {}
    for i, w in enumerate(want):
        first.setdefault(w, i)
    assert np.asarray(res.keep).tolist() == sorted(first.values())


@given(ragged(), st.sampled_from(["hash_rows", "dedupe", "pack", "pad"]), threads)
def test_fuzz_arrow_lists_built_without_validation(rag, kernel, nt):
    # an Arrow list array assembled from raw buffers (as a crafted file or a foreign library
    # hands it over): Arrow did not check its offsets, fastaxo must
    values, offsets, ok = rag
    odt = offsets.dtype
    vt = pa.from_numpy_dtype(values.dtype)
    t = pa.large_list(vt) if odt == np.int64 else pa.list_(vt)
    try:
        arr = pa.Array.from_buffers(t, len(offsets) - 1, [None, pa.py_buffer(offsets.tobytes())],
                                    children=[pa.array(values)])
    except pa.ArrowInvalid:  # pyarrow's own (partial) check caught it first
        assert not ok
        return
    call = {"hash_rows": lambda: fastaxo.hash_rows(arr, num_threads=nt),
            "dedupe": lambda: fastaxo.dedupe(arr, num_threads=nt),
            "pack": lambda: fastaxo.pack(arr, 64, overflow="split", num_threads=nt),
            "pad": lambda: fastaxo.pad(arr, num_threads=nt)}[kernel]
    out, err = _fails_cleanly(call)
    if not ok:
        # (an array of no rows is never read: its lone offset may be anything)
        assert err is not None or len(offsets) == 1, "invalid offsets were accepted"
        return
    if kernel == "hash_rows" and out is not None:
        import hashlib

        want = [hashlib.sha256(r.astype(values.dtype.newbyteorder("<")).tobytes()).digest()
                for r in _rows(values, offsets)]
        assert [bytes(x) for x in out] == want


# -------------------------------------------------- caller buffers changed between lazy steps
# (issue 27) iter_pack((values, offsets)) read the caller's offsets at every chunk: a caller that
# reused the buffer between chunks made the kernel read outside the values (a segfault). Every
# buffer a lazy API holds across a yield is now its own copy; each chunk must equal the chunk of
# the untouched input, whatever the caller writes meanwhile.
def _garbage(draw, a: np.ndarray) -> None:
    """Overwrite ``a`` in place: huge, negative, reversed, or other rows' plausible values."""
    kind = draw(st.sampled_from(["huge", "negative", "reversed", "plausible", "zeros"]))
    lim = np.iinfo(a.dtype)
    if kind == "huge":
        a[:] = lim.max
    elif kind == "negative":
        a[:] = lim.min if lim.min < 0 else lim.max
    elif kind == "reversed":
        a[:] = a[::-1].copy()
    elif kind == "plausible":  # in range and non-decreasing, but other rows
        a[:] = np.sort(np.random.default_rng(draw(st.integers(0, 99))).integers(0, max(int(a.max()), 1) + 1, len(a)))
    else:
        a[:] = 0


def _chunks_equal(got, want) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a), list(a)


@given(ragged(valid=True), st.data(),
       st.sampled_from(["offsets", "arrow offsets", "label offsets", "user bins", "it.bins"]),
       st.sampled_from(["padded", "flat"]), threads)
def test_iter_pack_is_safe_when_the_caller_reuses_its_buffers(rag, data, what, layout, nt):
    values, offsets, _ = rag
    if len(offsets) < 2:
        return
    kw = dict(chunk_bins=2, layout=layout, overflow="split", num_threads=nt)
    bins = fastaxo.pack_bins((values, offsets.copy()), 64, overflow="split")
    want = [dict(c) for c in fastaxo.iter_pack((values, offsets.copy()), 64, labels=(values, offsets.copy()),
                                               bins=bins, **kw)]
    offs, lab_offs = offsets.copy(), offsets.copy()
    if what == "arrow offsets":  # an Arrow array over the caller's NumPy memory (no copy)
        cls = pa.LargeListArray if offs.dtype == np.int64 else pa.ListArray
        src = cls.from_buffers(cls.from_arrays(pa.array(offs), pa.array(values)).type, len(offs) - 1,
                               [None, pa.py_buffer(offs)], children=[pa.array(values)])
        assert np.shares_memory(np.frombuffer(src.buffers()[1], offs.dtype), offs)
    else:
        src = (values, offs)
    mine = fastaxo.Bins(bins.indices.copy(), bins.offsets.copy(), bins.lengths.copy(),
                        None if not bins.has_starts else bins.starts.copy(), bins.max_length, bins.stats)
    it = fastaxo.iter_pack(src, 64, labels=(values, lab_offs), bins=mine, **kw)
    targets = {"offsets": [offs], "arrow offsets": [offs], "label offsets": [lab_offs],
               "user bins": [mine.indices, mine.offsets, mine.lengths],
               "it.bins": [it.bins.indices, it.bins.offsets, it.bins.lengths]}[what]
    got = []
    for chunk in it:
        got.append({k: v.copy() for k, v in chunk.items()})
        for a in targets:
            _garbage(data.draw, a)
    _chunks_equal(got, want)


def test_iter_pack_reused_offsets_buffer_regression():
    # the reported case, without Hypothesis: the offsets overwritten after the first chunk
    rng = np.random.default_rng(0)
    lens = rng.integers(1, 50, 2000)
    offs = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=offs[1:])
    vals = rng.integers(0, 1000, int(offs[-1])).astype(np.int32)
    want = [dict(c) for c in fastaxo.iter_pack((vals, offs.copy()), 64, chunk_bins=50)]
    got = []
    for chunk in fastaxo.iter_pack((vals, offs), 64, chunk_bins=50):
        got.append({k: v.copy() for k, v in chunk.items()})
        offs[:] = 1 << 40
    _chunks_equal(got, want)


def test_source_ptrs_refuses_entries_outside_the_values():
    # the door into C checks each entry's span as it reads the offsets (a second line behind
    # the copies above: whatever fastaxo hands it, nothing outside the values is addressed)
    from fastaxo._core.backend import pack_ext as ext

    if ext is None:
        return
    values = np.arange(10, dtype=np.int32)
    one = np.ones(1, np.int64)
    cases = [  # (offsets, row, start, length)
        (np.array([0, 4, 10]), 1, 0, 7),            # longer than its row's room
        (np.array([0, 2**40, 10]), 1, 0, 1),        # an offset past the values
        (np.array([0, -5, 10]), 1, 0, 1),           # a negative offset
        (np.array([0, 4, 10]), 1, 2**62, 1),        # a start past the values
        (np.array([0, 4, 10]), 1, 0, -1),           # a negative length
        (np.array([0, 4, 10], np.int32), 5, 0, 1),  # a row that does not exist
    ]
    for offs, row, start, length in cases:
        try:
            ext.source_ptrs(np.array([row]), 1, np.array([start]), one * length,
                            [(values, offs if offs.dtype == np.int32 else offs.astype(np.int64))],
                            np.array([0, 2], np.int64), 4, 1)
        except ValueError as e:
            assert "outside" in str(e)
        else:
            raise AssertionError(f"accepted {(offs.tolist(), row, start, length)}")
    ok = ext.source_ptrs(np.array([1]), 1, np.array([2]), one * 4, [(values, np.array([0, 4, 10]))],
                         np.array([0, 2], np.int64), 4, 1)
    assert int(ok[0]) == values.ctypes.data + 6 * 4


def test_pad_batches_cuts_with_its_own_boundaries():
    # the boundaries PaddedBatches shows are the caller's to change: its batches stay put
    rows = [np.arange(n, dtype=np.int64) for n in (3, 1, 4, 1, 5, 9, 2, 6)]
    pb = fastaxo.pad_batches(rows, np.array([0, 3, 5, 8]))
    want = [dict(b) for b in pb]
    pb.batch_offsets[:] = [0, 8, 1 << 40, -1]
    pb.widths[:] = 1 << 30
    pb.bases[:] = -7
    assert len(pb) == 3
    for got, w in zip(pb, want):
        assert all(np.array_equal(got[k], w[k]) for k in w)


def test_dedupe_hashes_its_own_list_of_rows_block_after_block():
    # dedupe hashes a list of str/bytes 65,536 rows at a time; code that runs between two
    # blocks (here a Seen subclass; in real life another thread) may empty the caller's list.
    # The old code then raised a bare ValueError from the kernel.
    import hashlib

    from fastaxo.hashing.rows import BLOCK

    rows = [b"%d" % (i % 70_000) for i in range(BLOCK + 9_000)]
    want = fastaxo.dedupe(list(rows)).keep

    class Vandal(fastaxo.Seen):
        def add(self, digests):
            rows.clear()
            return super().add(digests)

    res = fastaxo.dedupe(rows, seen=Vandal())
    assert np.array_equal(res.keep, want)
    assert len(res.seen) == 70_000 and hashlib.sha256(b"0").digest() in res.seen
