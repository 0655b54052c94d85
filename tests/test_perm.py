"""csrc/fx_perm (torch's CPU randperm replayed) against the NumPy reference and NumPy's MT19937.

torch itself is compared in tests/test_axolotl_inprocess.py (the plugin's sampler path)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fastaxo import _backend, _reference_pack

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
