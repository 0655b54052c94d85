"""The C encoder's arrays on disk (fastaxo.tokenizer._store): a new process loads a
tokenizer.json's arrays from the cache instead of parsing and building them; a record that is
damaged, for other code or another file is a miss (rebuilt, same ids), never trusted."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
import pytest
import tokenizer_data

from fastaxo._core import backend
from fastaxo.tokenizer import Tokenizer, _spec_of, _store

pytestmark = pytest.mark.skipif(backend.tok_ext is None, reason="needs the compiled extension")

TEXTS = ["Hello world, ünïcode 中文 <|im_end|>", "def f(x):\n    return x ** 2\n", ""]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTAXO_CACHE_DIR", str(tmp_path / "cache"))
    _spec_of.cache_clear()
    yield tmp_path / "cache" / "encoders"
    _spec_of.cache_clear()


def _fresh(path):
    """A Tokenizer as a new process gets it (the in-process cache cleared)."""
    _spec_of.cache_clear()
    return Tokenizer.from_pretrained(path)


def _same(a: Tokenizer, b: Tokenizer) -> None:
    assert a.encode_batch(TEXTS).to_pylist() == b.encode_batch(TEXTS).to_pylist()
    assert (a.vocab_size, a.pattern, a.nfc, a.added_tokens) == (
        b.vocab_size, b.pattern, b.nfc, b.added_tokens)
    for tok in ("Ġthe", "<|im_end|>", "Ċ", "not a token", "ĠĠĠ"):
        assert a.token_to_id(tok) == b.token_to_id(tok), tok
    sa, sb = a._spec, b._spec
    for name in ("tok_bytes", "tok_off", "merges", "added_bytes", "added_off", "added_ids",
                 "added_flags"):
        np.testing.assert_array_equal(getattr(sa, name), getattr(sb, name))
    assert dict(sa.vocab) == dict(sb.vocab)
    assert (sa.pretok, sa.ignore_merges, sa.bos_id) == (sb.pretok, sb.ignore_merges, sb.bos_id)


@pytest.mark.parametrize("which", ["qwen3", "llama3"])
def test_a_new_process_loads_the_arrays_it_stored(cache, monkeypatch, which):
    path = tokenizer_data.qwen3_json() if which == "qwen3" else tokenizer_data.llama3_json()
    built = _fresh(path)
    files = list(cache.glob("*.npz"))
    assert [f.name for f in files] == [f"{built.sha256}.npz"]

    def no_build(text):
        raise AssertionError("built again")

    monkeypatch.setattr("fastaxo.tokenizer._build", no_build)
    _same(_fresh(path), built)


def test_a_record_that_does_not_verify_is_rebuilt(cache, monkeypatch):
    path = tokenizer_data.qwen3_json()
    good = _fresh(path)
    (file,) = cache.glob("*.npz")
    original = file.read_bytes()
    builds = []
    real = __import__("fastaxo.tokenizer", fromlist=["_build"])._build
    monkeypatch.setattr("fastaxo.tokenizer._build", lambda text: builds.append(1) or real(text))

    def flip(data: bytes) -> bytes:  # one byte inside the merges array's data
        at = data.index(b"merges.npy") + 4096
        return data[:at] + bytes([data[at] ^ 0x40]) + data[at + 1:]

    def changed(data: bytes) -> bytes:  # a well-formed file whose arrays are not the meta's
        with np.load(io.BytesIO(data)) as z:
            arrays = {k: z[k] for k in z.files}
        arrays["merges"] = arrays["merges"].copy()
        arrays["merges"][:3] = arrays["merges"][3:6]
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        return buf.getvalue()

    damages = {"truncated": original[: len(original) // 2], "a flipped byte": flip(original),
               "not a zip": b"garbage", "empty": b"", "other arrays": changed(original)}
    for why, data in damages.items():
        file.write_bytes(data)
        _same(_fresh(path), good)
        assert file.read_bytes() == original, why  # written again, whole
    assert len(builds) == len(damages)
    # a record of other code, or filed under another tokenizer's name
    monkeypatch.setattr(_store, "_code_digest", lambda: "0" * 64)
    _same(_fresh(path), good)
    assert len(builds) == len(damages) + 1
    monkeypatch.undo()
    other = cache / ("f" * 64 + ".npz")
    other.write_bytes(original)
    assert _store.load("f" * 64) is None


def test_off_and_unwritable_caches_change_nothing(tmp_path, monkeypatch):
    path = tokenizer_data.qwen3_json()
    monkeypatch.setenv("FASTAXO_CACHE_DIR", "off")
    a = _fresh(path)
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "encoders").write_text("a file where the directory would be")
    monkeypatch.setenv("FASTAXO_CACHE_DIR", str(ro))
    _same(_fresh(path), a)
    assert not list(tmp_path.rglob("*.npz"))
    _spec_of.cache_clear()


def test_the_store_is_bounded(cache, monkeypatch):
    monkeypatch.setattr(_store, "_KEEP_RECORDS", 3)
    tok = _fresh(tokenizer_data.qwen3_json())
    for i in range(5):
        _store.save(f"{i:064x}", tok._spec)
    assert len(list(cache.glob("*.npz"))) == 3


def test_a_child_process_uses_the_record(cache, tmp_path):
    """What a user's second `prepare` sees: a new interpreter, the record there (run outside
    the source tree: `python -c` puts the working directory first on sys.path)."""
    path = tokenizer_data.qwen3_json()
    want = _fresh(path).encode_batch(TEXTS).to_pylist()
    code = ("import sys, fastaxo.tokenizer as t\n"
            "def no(text): raise SystemExit('built again')\n"
            "t._build = no\n"
            f"print(t.Tokenizer.from_pretrained({str(path)!r}).encode_batch({TEXTS!r})"
            ".to_pylist())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ}, cwd=tmp_path, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == repr(want)
