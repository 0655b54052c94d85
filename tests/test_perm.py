"""csrc/fx_perm (torch's CPU randperm replayed) against the NumPy reference and NumPy's MT19937.

torch itself is compared in tests/test_axolotl_inprocess.py (the plugin's sampler path)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastaxo
from fastaxo._core import backend as _backend
from fastaxo._reference import packing as _reference_pack

pk = _backend.pack_ext
pytestmark = pytest.mark.skipif(pk is None, reason="the compiled extension is not loaded (FASTAXO_PURE_PYTHON)")


@pytest.mark.parametrize("seed", [0, 1, 5489, 2**32 - 1, 2**32 + 7, 2**63 - 1])
def test_mt19937_stream_is_numpys_legacy_seeding(seed):
    k = 2000  # more than three 624-word blocks
    want = np.random.RandomState(seed & 0xFFFFFFFF).randint(0, 2**32, size=k, dtype=np.uint32)
    assert np.array_equal(pk.mt19937_fill(seed, k), want)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**64 - 1), n=st.integers(1, 3000), mult=st.floats(0, 3.5))
def test_randperm_matches_reference(seed, n, mult):
    count = int(n * mult)
    got = pk.randperm_mt19937(seed, n, count)
    assert got.dtype == np.int64 and got.shape == (count,)
    assert np.array_equal(got, _reference_pack.randperm_mt19937(seed, n, count))


def test_randperm_whole_permutations_and_prefix():
    n = 100_000
    full = pk.randperm_mt19937(42, n, 2 * n)
    for part in (full[:n], full[n:]):
        assert np.array_equal(np.sort(part), np.arange(n))
    assert not np.array_equal(full[:n], full[n:])
    # a partial last permutation is the prefix of what the whole one would have been
    assert np.array_equal(pk.randperm_mt19937(42, n, n + 777)[n:], full[n:n + 777])
    assert np.array_equal(pk.randperm_mt19937(42, n, 0), np.zeros(0, dtype=np.int64))


@pytest.mark.parametrize("n,count", [(0, 5), (-1, 1), (pk.RANDPERM_MAX_N if pk else 1, 1), (5, -1)])
def test_randperm_bad_arguments(n, count):
    with pytest.raises(ValueError, match="randperm_mt19937: n must be"):
        pk.randperm_mt19937(1, n, count)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**64 - 1), n=st.integers(1, 2500), mult=st.floats(0, 2.5),
       group=st.sampled_from([1, 7, 600, 10**6]), threads=st.sampled_from([1, 2]), cap=st.integers(50, 900),
       bin_size=st.sampled_from([1, 3, 200]), data=st.data())
def test_ff_in_order_equals_shuffle_then_pack(seed, n, mult, group, threads, cap, bin_size, data):
    """ff_in_order: first fit through an order, with the shuffle replayed from a seed (one group
    and 2 threads: the shuffle runs beside the packer, csrc/fx_sync.h) or an index given; the
    bins of pack_bins(lengths[order], 'ff'), with row ids out. Over-long rows isolated."""
    count = int(n * mult)
    lengths = np.array(data.draw(st.lists(st.integers(0, cap + 40), min_size=n, max_size=n)), np.int32)
    order = _reference_pack.randperm_mt19937(seed, n, count)
    want = fastaxo.pack_bins(lengths[order].astype(np.int64), cap, strategy="ff", group_size=group,
                             max_rows_per_bin=bin_size, overflow="isolate", num_threads=threads)
    for index in (None, order):
        st_, bad, ids, offs = pk.ff_in_order(lengths, index, seed, count, cap, bin_size, True, group, 0, threads)
        assert st_ == pk.OK and bad == -1
        assert np.array_equal(ids, order[want.indices]) and np.array_equal(offs, want.offsets)


def test_ff_in_order_pipelined_many_times_and_overlong_error():
    """The shuffle-beside-packer path on a large input, repeatedly (a publication bug would show
    as a wrong length read), and an over-long row without isolation stops at its position."""
    n = 200_000
    lengths = np.random.default_rng(3).integers(1, 2048, n).astype(np.int32)
    for seed in range(12):
        order = pk.randperm_mt19937(seed, n, n)
        want = fastaxo.pack_bins(lengths[order].astype(np.int64), 2048, strategy="ff", max_rows_per_bin=200)
        st_, _, ids, offs = pk.ff_in_order(lengths, None, seed, n, 2048, 200, False, 10**6, 30_000, 2)
        assert st_ == pk.OK
        assert np.array_equal(ids, order[want.indices]) and np.array_equal(offs, want.offsets)
    lengths[5] = 4000
    order = pk.randperm_mt19937(7, n, n)
    st_, bad, ids, offs = pk.ff_in_order(lengths, None, 7, n, 2048, 200, False, 10**6, 0, 2)
    assert st_ == pk.EOVERLONG and order[bad] == 5 and ids is None and offs is None
    with pytest.raises(ValueError, match="ff_in_order: the shuffle needs"):
        pk.ff_in_order(np.zeros(0, np.int32), None, 1, 3, 10, 2, True, 10, 0, 2)
