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
import packed_io
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
    """The packed sequences of prepare's output (tests/packed_io.py checks the layout)."""
    return [list(ids) for ids, _ in packed_io.sequences(path)[1]]


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


# -- fastaxo's C encoder (issue 28): the same files as HF's ---------------------------------

sys.path.insert(0, os.path.dirname(__file__))
import chat_data  # noqa: E402
import tokenizer_data  # noqa: E402

from fastaxo.pipeline.columns import load_tokenizer  # noqa: E402


def _real_dir(name: str) -> str:
    if name == "qwen3":
        return str(chat_data.qwen3_dir())
    return str(tokenizer_data.llama3_json().parent)


@pytest.fixture(scope="module")
def real_text(tmp_path_factory):
    """JSON Lines of English, code and text in many languages, with empty texts, exact
    duplicates and rows over 70,000 bytes (a few at the edges of the batches)."""
    docs = [*tokenizer_data.corpus("english", 150_000), *tokenizer_data.corpus("code", 100_000),
            *tokenizer_data.corpus("multi", 150_000)]
    rng = np.random.default_rng(28)
    docs = [docs[int(i)] for i in rng.permutation(len(docs))]
    docs += docs[:20]  # duplicates
    big = "".join(docs[:12])
    assert len(big.encode()) > 70_000
    for at in (0, 7, len(docs) // 2, len(docs)):
        docs.insert(at, big + str(at))
    for at in (1, 2, 50, len(docs)):
        docs.insert(at, "")
    p = tmp_path_factory.mktemp("text") / "text.jsonl"
    with open(p, "w", encoding="utf-8") as fh:
        for d in docs:
            fh.write(json.dumps({"text": d}) + "\n")
    return p, docs


def _prepare_with(monkeypatch, mode, src, out, **kw):
    monkeypatch.setenv("FASTAXO_TOKENIZER", mode)
    return prepare(src, out, 2048, dedupe=True, progress=False, batch_rows=16, **kw)


_COUNTS = ("rows_in", "tokens_in", "empty_rows", "rows_too_large", "eos_appended", "duplicates",
           "overlong", "split_pieces", "dropped", "bins", "tokens_out", "sequences_out")


@pytest.mark.parametrize("name", ["qwen3", "llama3"])
@pytest.mark.parametrize("opts", [
    {"overflow": "split"},
    {"overflow": "split", "append_eos": True},
    {"overflow": "split", "add_special_tokens": False, "append_eos": True},
    {"overflow": "drop", "max_row_bytes": 70_000},
    {"overflow": "drop", "max_row_bytes": 70_000, "append_eos": True,
     "add_special_tokens": False},
], ids=["plain", "eos", "nospecial-eos", "drop-big", "drop-big-eos"])
def test_fastaxo_encoder_writes_the_files_hf_writes(tmp_path, monkeypatch, real_text, name, opts):
    src, docs = real_text
    tok = _real_dir(name)
    fx = _prepare_with(monkeypatch, "auto", src, tmp_path / "fx.parquet", tokenizer=tok, **opts)
    hf = _prepare_with(monkeypatch, "hf", src, tmp_path / "hf.parquet", tokenizer=tok, **opts)
    assert fx.tokenizer_settings["encoder"] == "fastaxo"
    assert fx.tokenizer_settings["encoder_reason"] is None
    assert hf.tokenizer_settings["encoder"] == "hf"
    assert hf.tokenizer_settings["encoder_reason"] == "FASTAXO_TOKENIZER=hf"
    got, want = pq.read_table(tmp_path / "fx.parquet"), pq.read_table(tmp_path / "hf.parquet")
    assert got.schema == want.schema and got.num_rows == want.num_rows > 0
    for c in want.column_names:
        assert got.column(c).equals(want.column(c)), c
    assert (tmp_path / "fx.parquet").read_bytes() == (tmp_path / "hf.parquet").read_bytes()
    for k in _COUNTS:
        assert getattr(fx, k) == getattr(hf, k), k
    bos = name == "llama3" and opts.get("add_special_tokens", True)  # Qwen3 adds no BOS
    assert fx.rows_in == len(docs) and fx.empty_rows == (0 if opts.get("append_eos") or bos
                                                         else 4)
    if opts["overflow"] == "drop":
        assert fx.rows_too_large == sum(len(d.encode()) > 70_000 for d in docs) >= 4
    if opts.get("append_eos"):
        assert fx.eos_appended == len(docs) - fx.rows_too_large  # a dropped row gets no EOS
    assert "encoder            fastaxo (C, pattern " in str(fx)
    assert "encoder            HF tokenizers (FASTAXO_TOKENIZER=hf)" in str(hf)


def test_a_stored_truncation_still_takes_fastaxos_encoder(tmp_path, monkeypatch, real_text):
    """tokenizer.json with a truncation and padding (prepare switches them off): fastaxo's
    encoder is built from the tokenizer as prepare uses it, and gives the same file."""
    import shutil

    src, _ = real_text
    d = tmp_path / "qwen"
    shutil.copytree(_real_dir("qwen3"), d)
    doc = json.loads((d / "tokenizer.json").read_text(encoding="utf-8"))
    doc["truncation"] = {"direction": "Right", "max_length": 16, "strategy": "LongestFirst",
                         "stride": 0}
    doc["padding"] = {"strategy": {"Fixed": 32}, "direction": "Right", "pad_to_multiple_of": None,
                      "pad_id": 151643, "pad_type_id": 0, "pad_token": "<|endoftext|>"}
    (d / "tokenizer.json").write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    fx = _prepare_with(monkeypatch, "auto", src, tmp_path / "fx.parquet", tokenizer=str(d),
                       overflow="split")
    hf = _prepare_with(monkeypatch, "hf", src, tmp_path / "hf.parquet", tokenizer=str(d),
                       overflow="split")
    assert fx.tokenizer_settings["encoder"] == "fastaxo"
    assert "truncation (max_length 16)" in fx.tokenizer_settings["ignored_from_file"]
    assert (tmp_path / "fx.parquet").read_bytes() == (tmp_path / "hf.parquet").read_bytes()
    assert fx.tokens_in == hf.tokens_in


def test_an_unsupported_tokenizer_takes_hf_and_says_why(tmp_path, monkeypatch, data):
    src, _ = data
    tok = _tokenizer_dir(tmp_path / "tok")
    monkeypatch.delenv("FASTAXO_TOKENIZER", raising=False)
    rep = prepare(src, tmp_path / "o.parquet", 64, tokenizer=tok, dedupe=False)
    s = rep.tokenizer_settings
    assert s["encoder"] == "hf" and s["encoder_reason"]
    assert s["encoder_detail"].startswith("HF tokenizers (") and "\n" not in s["encoder_detail"]
    assert "encoder            HF tokenizers (" in str(rep)
    rep.to_json(str(tmp_path / "r.json"))
    assert json.loads((tmp_path / "r.json").read_text())["tokenizer_settings"]["encoder"] == "hf"
    monkeypatch.setenv("FASTAXO_TOKENIZER", "fastaxo")
    with pytest.raises(InvalidInputError, match="FASTAXO_TOKENIZER=fastaxo"):
        prepare(src, tmp_path / "o2.parquet", 64, tokenizer=tok)


def test_the_encoder_can_be_forced(monkeypatch):
    """What the Ray workers get from the driver: its choice, whatever their environment."""
    tok = _real_dir("qwen3")
    monkeypatch.setenv("FASTAXO_TOKENIZER", "hf")
    assert load_tokenizer(tok).encoder == "hf"
    assert load_tokenizer(tok, encoder="fastaxo").encoder == "fastaxo"
    monkeypatch.delenv("FASTAXO_TOKENIZER")
    assert load_tokenizer(tok).encoder == "fastaxo"
    assert load_tokenizer(tok, encoder="hf").encoder == "hf"
    with pytest.raises(InvalidInputError, match="encoder: expected one of"):
        load_tokenizer(tok, encoder="tiktoken")


@pytest.mark.parametrize("mode", ["auto", "hf"])
def test_text_that_is_not_utf8_is_refused_naming_the_row(tmp_path, monkeypatch, mode):
    """An Arrow IPC file is read without a UTF-8 check: such a row is one error naming it, with
    either encoder (fastaxo's would otherwise make ids HF never makes)."""
    import pyarrow.feather as feather

    body = b"hello" + b"world" + b"ab\xffcd" + b"x"
    offs = np.array([0, 5, 10, 15, 16], np.int32)
    arr = pa.Array.from_buffers(pa.string(), 4, [None, pa.py_buffer(offs.tobytes()),
                                                 pa.py_buffer(body)])
    p = tmp_path / "bad.arrow"
    feather.write_feather(pa.table({"text": arr}), p, compression="uncompressed")
    monkeypatch.setenv("FASTAXO_TOKENIZER", mode)
    with pytest.raises(InvalidInputError, match=r"bad\.arrow row 2 \(0-based\): text is not "
                                                r"UTF-8 text \(byte 0xff at offset 2\)"):
        prepare(p, tmp_path / "o.parquet", 64, tokenizer=_real_dir("qwen3"), progress=False)


@pytest.mark.parametrize("mode", ["auto", "hf"])
def test_a_batch_that_starts_with_an_empty_text(tmp_path, monkeypatch, mode):
    """HF's path once crashed (IndexError) on a batch whose first text was empty."""
    p = tmp_path / "t.jsonl"
    texts = ["", "hello world", "", "w1"]
    p.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    monkeypatch.setenv("FASTAXO_TOKENIZER", mode)
    rep = prepare(p, tmp_path / "o.parquet", 64, tokenizer=_real_dir("qwen3"), progress=False,
                  append_eos=True, batch_rows=2, dedupe=False)
    assert rep.rows_in == 4 and rep.empty_rows == 0 and rep.eos_appended == 4
    assert rep.tokenizer_settings["encoder"] == ("hf" if mode == "hf" else "fastaxo")
    eos = rep.tokenizer_settings["eos_id"]  # <|im_end|>, Qwen3's tokenizer_config.json
    assert sorted(_sequences(tmp_path / "o.parquet")) == sorted(
        [[eos], [14990, 1879, eos], [eos], [86, 16, eos]])


def test_cli_info_names_the_encoder(tmp_path):
    tok = _real_dir("qwen3")
    env = {k: v for k, v in os.environ.items() if k != "FASTAXO_TOKENIZER"}
    r = subprocess.run([sys.executable, "-m", "fastaxo", "info", "--tokenizer", tok],
                       capture_output=True, text=True, cwd="/", env=env)
    assert r.returncode == 0, r.stderr
    assert "text encoder   : fastaxo (C, pattern qwen2, NFC)" in r.stdout
    assert "tokenizer        : auto (FASTAXO_TOKENIZER" in r.stdout
    r = subprocess.run([sys.executable, "-m", "fastaxo", "info", "--tokenizer",
                        _tokenizer_dir(tmp_path / "wl")], capture_output=True, text=True, cwd="/",
                       env=env)
    assert r.returncode == 0, r.stderr
    assert "text encoder   : HF tokenizers (" in r.stdout
    r = subprocess.run([sys.executable, "-m", "fastaxo", "info", "--tokenizer", tok],
                       capture_output=True, text=True, cwd="/",
                       env={**env, "FASTAXO_TOKENIZER": "hf"})
    assert r.returncode == 0 and "text encoder   : HF tokenizers (FASTAXO_TOKENIZER=hf)" in r.stdout
    r = subprocess.run([sys.executable, "-m", "fastaxo", "info", "--tokenizer", str(tmp_path)],
                       capture_output=True, text=True, cwd="/", env=env)
    assert r.returncode == 1 and "holds no vocabulary" in r.stderr
