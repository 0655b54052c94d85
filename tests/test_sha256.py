"""The SHA-256 kernel, every path the CPU supports, against NIST CAVP vectors and hashlib."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from conftest import EXT
from hypothesis import given
from hypothesis import strategies as st

import fastaxo

cryptography_vectors = pytest.importorskip("cryptography_vectors")  # a test dependency, always installed in CI


def _rsp(name: str) -> list[dict[str, str]]:
    path = Path(cryptography_vectors.__file__).parent / "hashes" / "SHA2" / name
    records, cur = [], {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("["):
            if cur:
                records.append(cur)
                cur = {}
            continue
        k, _, v = line.partition("=")
        cur[k.strip()] = v.strip()
    if cur:
        records.append(cur)
    return records


def _msgs(name: str) -> list[tuple[bytes, str]]:
    out = []
    for rec in _rsp(name):
        if "Len" not in rec:
            continue
        n = int(rec["Len"]) // 8
        out.append((bytes.fromhex(rec["Msg"])[:n], rec["MD"].lower()))
    return out


@pytest.mark.parametrize("name", ["SHA256ShortMsg.rsp", "SHA256LongMsg.rsp"])
def test_nist_message_vectors(sha_path, name):
    vectors = _msgs(name)
    assert len(vectors) >= 64
    msgs = [m for m, _ in vectors]
    assert fastaxo.hash_rows(msgs, hex=True, num_threads=1) == [md for _, md in vectors]
    # The same messages through the Arrow offsets path and the table (streaming) path.
    import pyarrow as pa

    assert fastaxo.hash_rows(pa.array(msgs, pa.binary()), hex=True, num_threads=2) == [md for _, md in vectors]


def test_nist_monte_carlo(sha_path):
    recs = _rsp("SHA256Monte.rsp")
    seed = bytes.fromhex(next(r["Seed"] for r in recs if "Seed" in r))
    expected = [r["MD"].lower() for r in recs if "COUNT" in r]
    assert len(expected) == 100
    for j in range(len(expected)):
        md = [seed, seed, seed]
        for _i in range(3, 1003):
            md.append(bytes(fastaxo.hash_rows([md[-3] + md[-2] + md[-1]], num_threads=1)[0]))
            md.pop(0)
        seed = md[-1]
        assert seed.hex() == expected[j], f"Monte Carlo checkpoint {j}"


def test_padding_boundaries(sha_path):
    lengths = sorted({n + d for n in (0, 55, 56, 63, 64, 119, 120, 127, 128, 1024, 4096) for d in (-1, 0, 1) if n + d >= 0})
    rng = np.random.default_rng(1)
    msgs = [rng.bytes(n) for n in lengths]
    assert fastaxo.hash_rows(msgs, hex=True) == [hashlib.sha256(m).hexdigest() for m in msgs]


@given(st.lists(st.one_of(st.binary(max_size=200), st.integers(0, 3 * 2**20)), max_size=12))
def test_random_lengths_up_to_several_mb(sha_path, items):
    rng = np.random.default_rng(len(items))
    msgs = [x if isinstance(x, bytes) else rng.bytes(x) for x in items]
    assert fastaxo.hash_rows(msgs, hex=True, num_threads=2) == [hashlib.sha256(m).hexdigest() for m in msgs]


@pytest.mark.skipif(EXT is None, reason="needs the compiled extension")
def test_every_compiled_path_passes_its_selftest_and_unsupported_paths_refuse():
    names = []
    for name, compiled, supported in EXT.sha256_impls():
        names.append(name)
        if supported:
            assert EXT.sha256_selftest(name)
        else:
            before = EXT.sha256_current()
            with pytest.raises(RuntimeError, match="not supported"):
                EXT.sha256_select(name)
            assert EXT.sha256_current() == before
    assert names == ["portable", "sha-ni", "armv8-crypto"]
    with pytest.raises(ValueError, match="unknown SHA-256 path"):
        EXT.sha256_select("sha1")


@pytest.mark.skipif(EXT is None, reason="needs the compiled extension")
def test_auto_selects_the_accelerated_path_when_the_cpu_has_it():
    supported = [n for n, _c, s in EXT.sha256_impls() if s]
    before = EXT.sha256_current()
    try:
        chosen = EXT.sha256_select("auto")
    finally:
        EXT.sha256_select(before)
    expected = next((n for n in ("sha-ni", "armv8-crypto") if n in supported), "portable")
    assert chosen == expected
