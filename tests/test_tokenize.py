"""prepare --tokenizer (issue 18, class 5): rows are tokenized whole whatever tokenizer.json
stores (a stored truncation once cut every row to 128 tokens and a stored padding filled the
packed output with [PAD], while the report said "0 over-long rows"); special tokens on or off,
an EOS per document, and the report says what was done."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fastaxo.errors import InvalidInputError
from fastaxo.pipeline import prepare

tokenizers = pytest.importorskip("tokenizers")

WORDS = [f"w{i}" for i in range(200)]
SPECIAL = ["[PAD]", "[UNK]", "[BOS]", "[EOS]"]


def _tokenizer_dir(d, *, truncation: int | None = 8, padding: int | None = 16,
                   eos_in_config: bool = True) -> str:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {t: i for i, t in enumerate(SPECIAL + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="[BOS] $A", special_tokens=[("[BOS]", 2)])
    if truncation:
        tok.enable_truncation(max_length=truncation)
    if padding:
        tok.enable_padding(length=padding, pad_id=0, pad_token="[PAD]")
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    cfg = {"eos_token": {"content": "[EOS]"}} if eos_in_config else {}
    with open(os.path.join(d, "tokenizer_config.json"), "w") as fh:
        json.dump(cfg, fh)
    return str(d)


def _texts(n: int = 300, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(WORDS[int(k)] for k in rng.integers(0, 200, int(m))) for m in rng.integers(1, 40, n)]


def _ids(text: str) -> list[int]:
    return [4 + int(w[1:]) for w in text.split()]


def _sequences(path) -> list[list[int]]:
    """The packed sequences of prepare's output (segments of attention_mask)."""
    t = pq.read_table(path)
    out = []
    for ids, att in zip(t.column("input_ids").to_pylist(), t.column("attention_mask").to_pylist()):
        for s in sorted(set(att)):
            out.append([i for i, a in zip(ids, att) if a == s])
    return out


@pytest.fixture
def data(tmp_path):
    texts = _texts()
    p = tmp_path / "text.parquet"
    pq.write_table(pa.table({"text": texts}), p)
    return p, texts


def test_stored_truncation_and_padding_are_not_applied(tmp_path, data):
    src, texts = data
    tok = _tokenizer_dir(tmp_path / "tok")
    out = tmp_path / "out.parquet"
    rep = prepare(src, out, 64, tokenizer=tok, dedupe=False)
    got = sorted(map(tuple, _sequences(out)))
    want = sorted((2, *_ids(t)) for t in texts)  # [BOS] + every word: whole rows
    assert got == want
    assert rep.tokens_in == sum(len(w) for w in want)
    s = rep.tokenizer_settings
    assert "truncation (max_length 8)" in s["ignored_from_file"] and "padding" in s["ignored_from_file"]
    assert "not applied from tokenizer.json" in str(rep)


def test_over_long_rows_go_through_overflow_and_are_counted(tmp_path, data):
    src, texts = data
    tok = _tokenizer_dir(tmp_path / "tok")
    n_over = sum(1 + len(t.split()) > 16 for t in texts)
    assert n_over > 0
    with pytest.raises(InvalidInputError, match="Pass --overflow"):
        prepare(src, tmp_path / "a.parquet", 16, tokenizer=tok, dedupe=False)
    rep = prepare(src, tmp_path / "b.parquet", 16, tokenizer=tok, dedupe=False, overflow="truncate")
    assert rep.overlong == rep.truncated == n_over


def test_special_tokens_off_and_eos_per_document(tmp_path, data):
    src, texts = data
    tok = _tokenizer_dir(tmp_path / "tok")
    out = tmp_path / "out.parquet"
    rep = prepare(src, out, 64, tokenizer=tok, dedupe=False, add_special_tokens=False,
                  append_eos=True)
    assert sorted(map(tuple, _sequences(out))) == sorted((*_ids(t), 3) for t in texts)
    assert rep.eos_appended == len(texts)
    assert rep.tokenizer_settings["eos_id"] == 3 and "EOS '[EOS]' appended to 300 rows" in str(rep)


def test_eos_needs_a_token(tmp_path, data):
    src, _ = data
    tok = _tokenizer_dir(tmp_path / "tok", eos_in_config=False)
    with pytest.raises(InvalidInputError, match="--eos-token"):
        prepare(src, tmp_path / "o.parquet", 64, tokenizer=tok, append_eos=True)
    rep = prepare(src, tmp_path / "o.parquet", 64, tokenizer=tok, eos_token="[EOS]", dedupe=False)
    assert rep.eos_appended == 300
    with pytest.raises(InvalidInputError, match="not in the vocabulary"):
        prepare(src, tmp_path / "o2.parquet", 64, tokenizer=tok, eos_token="</s>")
    with pytest.raises(InvalidInputError, match="pass tokenizer="):
        prepare(src, tmp_path / "o3.parquet", 64, append_eos=True)


def test_cli_flags(tmp_path, data):
    src, texts = data
    tok = _tokenizer_dir(tmp_path / "tok")
    out = tmp_path / "out.parquet"
    r = subprocess.run([sys.executable, "-m", "fastaxo", "prepare", str(src), "-o", str(out),
                        "--max-length", "64", "--tokenizer", tok, "--no-dedupe", "--no-special-tokens",
                        "--append-eos", "-q"], capture_output=True, text=True, cwd="/")
    assert r.returncode == 0, r.stderr
    assert "EOS '[EOS]' appended to 300 rows" in r.stdout and "special tokens off" in r.stdout
    assert sorted(map(tuple, _sequences(out))) == sorted((*_ids(t), 3) for t in texts)
