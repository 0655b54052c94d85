"""Provenance (issue 30): every prepare output names the fastaxo version and build that wrote
it, the options, the tokenizer file's and template's SHA-256 and each input's size and mtime,
in its Parquet metadata and in the report; nothing of the run's clock, so the same inputs give
the same bytes."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import types
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import tokenizer_data as data

import fastaxo
from fastaxo.pipeline.provenance import KEY, provenance


def _meta(path) -> dict:
    md = pq.read_schema(path).metadata
    return {"provenance": json.loads(md[KEY.encode()]), "options": json.loads(md[b"fastaxo.prepare"])}


def _input(tmp_path, name="in.parquet", rows=None):
    f = tmp_path / name
    pq.write_table(pa.table({"input_ids": pa.array(rows or [[1, 2, 3], [4, 5], [1, 2, 3]],
                                                   pa.list_(pa.int32()))}), f)
    return f


def test_the_output_and_the_report_name_build_options_and_inputs(tmp_path):
    f = _input(tmp_path)
    rep = fastaxo.prepare(str(f), str(tmp_path / "out.parquet"), 8, progress=False)
    meta = _meta(tmp_path / "out.parquet")
    prov = meta["provenance"]
    assert rep.provenance == prov
    assert prov["build"]["fastaxo"] == fastaxo.__version__
    assert prov["build"]["extension"] is True and prov["build"]["openmp"] == fastaxo.config()["openmp"]
    assert prov["options"] == meta["options"] and prov["tokenizer"] is None
    st = os.stat(f)
    assert prov["inputs"] == [{"path": str(f.resolve()), "bytes": st.st_size,
                               "modified": datetime.fromtimestamp(st.st_mtime, timezone.utc).isoformat()}]
    assert "build              fastaxo" in str(rep) and "compiled extension" in str(rep)
    # no clock: the same inputs, the same bytes
    fastaxo.prepare(str(f), str(tmp_path / "again.parquet"), 8, progress=False)
    assert (tmp_path / "again.parquet").read_bytes() == (tmp_path / "out.parquet").read_bytes()
    # a changed input changes its fingerprint
    os.utime(f, (st.st_atime, st.st_mtime + 10))
    fastaxo.prepare(str(f), str(tmp_path / "later.parquet"), 8, progress=False)
    assert _meta(tmp_path / "later.parquet")["provenance"]["inputs"][0]["modified"] != \
        prov["inputs"][0]["modified"]


def test_a_changed_tokenizer_changes_the_fingerprint(tmp_path):
    """The tokenizer file's SHA-256 is the file's; edited (a byte appended, still the same
    tokenizer), the next output says so."""
    d = tmp_path / "tok"
    shutil.copytree(data.qwen3_json().parent, d)
    src = tmp_path / "text.jsonl"
    src.write_text("\n".join(json.dumps({"text": t}) for t in ("hello world", "more text")) + "\n")
    fastaxo.prepare(str(src), str(tmp_path / "a.parquet"), 64, tokenizer=str(d), progress=False)
    before = _meta(tmp_path / "a.parquet")["provenance"]["tokenizer"]
    assert before["file"] == str(d / "tokenizer.json")
    assert before["sha256"] == hashlib.sha256((d / "tokenizer.json").read_bytes()).hexdigest()
    with open(d / "tokenizer.json", "a") as fh:
        fh.write("\n")
    fastaxo.prepare(str(src), str(tmp_path / "b.parquet"), 64, tokenizer=str(d), progress=False)
    after = _meta(tmp_path / "b.parquet")["provenance"]["tokenizer"]
    assert after["sha256"] == hashlib.sha256((d / "tokenizer.json").read_bytes()).hexdigest()
    assert after["sha256"] != before["sha256"]


def test_the_fingerprint_is_the_encoders_own_hash(tmp_path, monkeypatch):
    """With fastaxo's encoder, the provenance takes the SHA-256 the encoder made of the file it
    read, rather than reading and hashing the file again (~11 MB for Qwen3); with HF's it
    hashes the file. Both are the file's digest."""
    from fastaxo.pipeline import provenance

    d = tmp_path / "tok"
    shutil.copytree(data.qwen3_json().parent, d)
    src = tmp_path / "text.jsonl"
    src.write_text(json.dumps({"text": "hello world"}) + "\n")
    want = hashlib.sha256((d / "tokenizer.json").read_bytes()).hexdigest()
    hashed = []
    real = provenance._sha256_file
    monkeypatch.setattr(provenance, "_sha256_file", lambda p: hashed.append(p) or real(p))
    for encoder, rehashed in (("fastaxo", 0), ("hf", 1)):
        monkeypatch.setenv("FASTAXO_TOKENIZER", encoder)
        hashed.clear()
        out = tmp_path / f"{encoder}.parquet"
        fastaxo.prepare(str(src), str(out), 64, tokenizer=str(d), progress=False)
        assert _meta(out)["provenance"]["tokenizer"]["sha256"] == want
        assert len(hashed) == rehashed, encoder


def test_a_chat_template_is_fingerprinted_by_its_text(tmp_path):
    """The template's SHA-256 is of the text the run used (given as a file, a string or the
    tokenizer's own: the same text, the same digest)."""
    tok_json = data.qwen3_json()
    a = types.SimpleNamespace(path=str(tok_json.parent), spec=types.SimpleNamespace(chat_template="{{ x }}"))
    b = types.SimpleNamespace(path=str(tok_json.parent), spec=types.SimpleNamespace(chat_template="{{ y }}"))
    pa_, pb = (provenance([], t, {})["tokenizer"] for t in (a, b))
    assert pa_["chat_template_sha256"] == hashlib.sha256(b"{{ x }}").hexdigest()
    assert pa_["chat_template_sha256"] != pb["chat_template_sha256"]
    assert pa_["sha256"] == pb["sha256"] == hashlib.sha256(tok_json.read_bytes()).hexdigest()


def test_a_pure_python_run_says_so(tmp_path):
    f = _input(tmp_path)
    env = {**os.environ, "FASTAXO_PURE_PYTHON": "1"}
    env.pop("FASTAXO_REQUIRE_EXTENSION", None)
    r = subprocess.run([sys.executable, "-m", "fastaxo", "prepare", str(f), "-o",
                        str(tmp_path / "out.parquet"), "--max-length", "8"],
                       capture_output=True, text=True, cwd="/", env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "PURE PYTHON fallback" in r.stdout
    build = _meta(tmp_path / "out.parquet")["provenance"]["build"]
    assert build["extension"] is False and build["sha256"] == "hashlib"
