"""Tokenizer snapshots (fastaxo.chat.snapshot): a repeated prepare on chat data replays what
the chat path asked of the transformers tokenizer and never imports transformers; the files are
the same as with the real tokenizer; a record that does not match is a miss, never trusted; a
need the record lacks loads the real tokenizer; fastaxo's copy of transformers' Jinja
environment is used only where the record says it was proven equal."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fastaxo._core import backend, cache

pytest.importorskip("transformers")
import chat_data  # noqa: E402
import tokenizer_data  # noqa: E402

import fastaxo  # noqa: E402
from fastaxo.chat import environment, recorded, snapshot  # noqa: E402

pytestmark = pytest.mark.skipif(backend.tok_ext is None or backend.pack_ext is None,
                                reason="the chat path's encoder needs the compiled extension")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(fastaxo.__file__)))
# prepare in a child process: what it reports and whether transformers was imported
CHILD = f"""
import json, sys
sys.path.insert(0, {ROOT!r})
import fastaxo
rep = fastaxo.prepare(sys.argv[1], sys.argv[2], 4096, tokenizer=sys.argv[3], overflow="split",
                      chat=json.loads(sys.argv[4]), progress=False)
s = rep.tokenizer_settings
print(json.dumps({{"transformers": "transformers" in sys.modules, "pandas": "pandas" in sys.modules,
                  "tokenizers": "tokenizers" in sys.modules,
                  "snapshot": s["tokenizer_snapshot"], "detail": s["tokenizer_snapshot_detail"],
                  "encoder": s["encoder"], "turns": s["fallback_turns"]}}))
"""


def _child(tmp_path, src, out, tok_dir, chat=None, **env):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    r = subprocess.run([sys.executable, str(script), str(src), str(out), str(tok_dir),
                        json.dumps(chat or {})], capture_output=True, text=True, timeout=600,
                       cwd="/", env=backend.child_env({**os.environ, **env}))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _prepare(src, out, tok_dir, chat=None):
    rep = fastaxo.prepare(str(src), str(out), 4096, tokenizer=str(tok_dir), overflow="split",
                          chat=chat, progress=False)
    return rep.tokenizer_settings


def _table(path):
    import pyarrow.parquet as pq

    return pq.read_table(path)


def _convs():
    convs = chat_data.conversations(seed=31, n=20, turns=(2, 8), hi=60)
    # text an NFC tokenizer changes: the offsets path
    convs.append([{"role": "user", "content": "cafe\u0301?"},
                  {"role": "assistant", "content": "cafe\u0301 ok"}])
    convs.append([{"role": "system", "content": "  s "}, {"role": "user", "content": "q\n"},
                  {"role": "assistant", "content": "\n secret a  "}])
    return convs


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    src = tmp_path_factory.mktemp("snap") / "chat.jsonl"
    with open(src, "w", encoding="utf-8") as fh:
        for c in _convs():
            fh.write(json.dumps({"messages": c}, ensure_ascii=False) + "\n")
    return src


def _llama_dir(dest: Path) -> Path:
    """Llama 3.2's tokenizer with its Instruct template (which renders today's date)."""
    try:
        src = tokenizer_data.llama3_json().parent
    except FileNotFoundError as e:
        pytest.skip(str(e))
    dest.mkdir()
    shutil.copy(src / "tokenizer.json", dest / "tokenizer.json")
    cfg = json.loads((src / "tokenizer_config.json").read_text())
    cfg["chat_template"] = chat_data.LLAMA32_TEMPLATE
    (dest / "tokenizer_config.json").write_text(json.dumps(cfg))
    return dest


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return _llama_dir(tmp_path_factory.mktemp("llama") / "llama3.2")


def _read_record(path):
    """A record file as a dict (any key), its backend read back and checked."""
    return snapshot._decode_record(path.read_bytes(), None)


def _records(cache):
    return sorted(f for f in (Path(cache) / "tokenizers").glob("*.json")
                  if not f.name.startswith("."))


# -- a repeated prepare replays, with the same files -------------------------------------------

@pytest.mark.parametrize("mode", ["auto", "hf"])
@pytest.mark.parametrize("which", ["qwen3", "llama3.2"])
def test_second_prepare_does_not_import_transformers(tmp_path, data, llama_dir, monkeypatch,
                                                     which, mode):
    tok_dir = chat_data.qwen3_dir() if which == "qwen3" else llama_dir
    chat = {"eot_tokens": ["<|eot_id|>"]} if which == "llama3.2" else None
    cache = tmp_path / "cache"
    monkeypatch.setenv("FASTAXO_TOKENIZER", mode)
    monkeypatch.setenv("FASTAXO_CACHE_DIR", "off")
    off = _prepare(data, tmp_path / "off.parquet", tok_dir, chat)
    assert off["tokenizer_snapshot"] == "off" and not (tmp_path / "cache").exists()
    monkeypatch.setenv("FASTAXO_CACHE_DIR", str(cache))
    if which == "qwen3" and mode == "auto":  # the first run in a child of its own too
        first = _child(tmp_path, data, tmp_path / "1.parquet", tok_dir, chat)
        assert first["transformers"] and first["snapshot"] == "miss"
    else:
        first = _prepare(data, tmp_path / "1.parquet", tok_dir, chat)
        assert first["tokenizer_snapshot"] == "miss"
    (record,) = _records(cache)
    assert oct(record.stat().st_mode & 0o777) == "0o600"
    second = _child(tmp_path, data, tmp_path / "2.parquet", tok_dir, chat)
    assert second["snapshot"] == "hit", second
    assert second["transformers"] is False, second
    assert second["pandas"] is False  # (pa.array and Array.to_numpy import it)
    assert second["encoder"] == ("fastaxo" if mode == "auto" else "hf")
    # fastaxo's encoder: the checks' answers about HF's backend are replayed, so the backend
    # (from_str of tokenizer.json, ~0.8 s for Qwen3's) is never built
    assert second["tokenizers"] is (mode == "hf"), second
    assert second["turns"] == off["fallback_turns"]
    want = _table(tmp_path / "off.parquet")
    assert _table(tmp_path / "1.parquet").equals(want)
    assert _table(tmp_path / "2.parquet").equals(want)
    rec = _read_record(record)
    renders = [v for k, v in rec["calls"].items() if k.startswith('["apply_chat_template"')]
    assert renders and rec["environment"] == {
        "equal": True, "differences": [],
        "variant": environment.closest_variant(environment.transformers_environment())[0]}
    # Llama's template renders the date: its renders hold for today only
    assert all((v["date"] is not None) == (which == "llama3.2") for v in renders)


# -- what misses ----------------------------------------------------------------------------

def _qwen_copy(tmp_path):
    d = tmp_path / "qwen3"
    shutil.copytree(chat_data.qwen3_dir(), d)
    return d


def _open(path, loads):
    from transformers import AutoTokenizer

    def loader(p):
        loads.append(p)
        return AutoTokenizer.from_pretrained(p, local_files_only=True)

    return snapshot.open_tokenizer(str(path), loader)


def _record_once(path):
    from fastaxo.pipeline.columns import ChatTokenizer

    ct = ChatTokenizer(str(path))
    return snapshot.status(ct.spec.tokenizer)


def test_one_byte_of_the_template_changed_misses(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTAXO_CACHE_DIR", str(tmp_path / "cache"))
    d = _qwen_copy(tmp_path)
    assert _record_once(d)["state"] == "miss"
    assert _record_once(d)["state"] == "hit"
    cfg = d / "tokenizer_config.json"
    text = cfg.read_text()
    assert "<|im_start|>assistant" in text
    cfg.write_text(text.replace("<|im_start|>assistant", "<|im_start|>assistent", 1))
    loads: list = []
    tok, info = _open(d, loads)
    assert info["state"] == "miss" and info["why"] == "no snapshot yet" and loads
    assert "assistent" in tok.chat_template
    # a file in a subdirectory counts too (additional_chat_templates/)
    before = snapshot.snapshot_key(str(d))
    (d / "additional_chat_templates").mkdir()
    (d / "additional_chat_templates" / "x.jinja").write_text("{{ 1 }}")
    assert snapshot.snapshot_key(str(d)) != before


def test_a_replayed_backend_gives_fastaxo_its_recorded_bytes(tmp_path, monkeypatch):
    """fastaxo's encoder built from a replay takes the record's tokenizer.json bytes as they
    are (checked against their SHA-256): the same encoder as from the real tokenizer, and
    the real backend is never loaded; bytes that are not the record's are not taken."""
    import fastaxo

    monkeypatch.setenv("FASTAXO_CACHE_DIR", str(tmp_path / "cache"))
    d = _qwen_copy(tmp_path)
    assert _record_once(d)["state"] == "miss"
    loads: list = []
    tok, info = _open(d, loads)
    assert info["state"] == "hit"
    backend = tok.backend_tokenizer
    raw = backend.to_str_utf8()
    assert raw is not None and not loads
    from transformers import AutoTokenizer

    live = AutoTokenizer.from_pretrained(str(d), local_files_only=True)
    assert raw == live.backend_tokenizer.to_str().encode("utf-8")
    assert fastaxo.Tokenizer.from_hf(tok).sha256 == fastaxo.Tokenizer.from_hf(live).sha256
    assert not loads
    rec = tok._fx.rec["backend"]
    rec.sha256 = "0" * 64  # damaged: not the bytes the record names
    assert backend.to_str_utf8() is None


def test_the_key_follows_the_installed_packages(tmp_path, monkeypatch):
    """The key names each package's installed copy as importlib.metadata finds it (the first
    sys.path directory holding one; a directory listed twice, or by another name, is the
    same key: a child process may have site-packages twice): a package installed in front
    of the others, upgraded, or reinstalled changes it; a zip on sys.path (which the scan
    does not read) takes importlib.metadata's versions."""
    import importlib.metadata
    import os
    import sys
    import time

    names = snapshot._PACKAGES
    got = snapshot._installed(names)
    for n in names:  # (what importlib.metadata finds, the scan finds)
        assert bool(got[n]) == (snapshot._version(n) is not None), n
    twice = [p for p in sys.path for _ in (0, 1)] + [os.path.join(p, ".") for p in sys.path]
    monkeypatch.setattr(sys, "path", twice)
    assert snapshot._installed(names) == got
    monkeypatch.undo()
    d = Path(os.path.realpath(tmp_path)) / "site"
    info = d / "Jinja2-99.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: Jinja2\nVersion: 99.0\n")
    monkeypatch.setattr(sys, "path", [str(d), *sys.path])
    first = snapshot._installed(names)
    assert first["jinja2"][0][0] == str(info) and first != got
    assert importlib.metadata.version("jinja2") == "99.0"  # (the copy importlib would use)
    later = time.time_ns() + 5_000_000_000
    os.utime(info / "METADATA", ns=(later, later))  # reinstalled: same version, new files
    assert snapshot._installed(names) != first
    info.rename(d / "jinja2-100.0.dist-info")  # upgraded
    assert snapshot._installed(names)["jinja2"][0][0].endswith("jinja2-100.0.dist-info")
    (tmp_path / "z.zip").write_bytes(b"")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "z.zip"), *sys.path])
    assert snapshot._installed(names) == {"versions": {n: snapshot._version(n) for n in names}}


@pytest.mark.parametrize("damage", ["truncated", "the backend truncated", "not JSON",
                                    "another key", "a bad value", "a bad backend answer"])
def test_a_damaged_record_is_ignored(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("FASTAXO_CACHE_DIR", str(tmp_path / "cache"))
    d = _qwen_copy(tmp_path)
    _record_once(d)
    (record,) = _records(tmp_path / "cache")
    data = record.read_bytes()
    rec = _read_record(record)
    if damage == "truncated":
        record.write_bytes(data[: len(data) // 2])
    elif damage == "the backend truncated":
        record.write_bytes(data[:-1])
    elif damage == "not JSON":
        record.write_bytes(b"\x80garbage")
    elif damage == "another key":
        rec["key"]["files"] = "0" * 64
        record.write_bytes(snapshot._encode_record(rec))
    elif damage == "a bad value":
        rec["attrs"]["eos_token"] = {"x": 1}
        record.write_bytes(snapshot._encode_record(rec))
    else:  # an Encoding with one offset too few
        calls = rec["backend_answers"]["calls"]
        calls[next(k for k in calls if k.startswith('["encode_batch"'))][0]["E"][1].pop()
        record.write_bytes(snapshot._encode_record(rec))
    loads: list = []
    tok, info = _open(d, loads)
    assert info["state"] == "miss" and info["why"].startswith("snapshot ignored"), info
    assert loads and tok.eos_token == "<|im_end|>"
    # the next run records afresh over it
    assert _record_once(d)["state"] == "miss"
    assert _record_once(d)["state"] == "hit"


def test_a_changed_backend_is_never_built_from(tmp_path, monkeypatch):
    """A record whose backend bytes changed (same size) still replays what it recorded (the
    backend is checked only where it is used); the backend itself then comes from the real
    tokenizer, not from the changed bytes."""
    from transformers import AutoTokenizer

    monkeypatch.setenv("FASTAXO_CACHE_DIR", str(tmp_path / "cache"))
    d = _qwen_copy(tmp_path)
    _record_once(d)
    (record,) = _records(tmp_path / "cache")
    data = record.read_bytes()
    at = data.rindex(b'"<|im_end|>"')  # (a token's text, in the backend's JSON)
    record.write_bytes(data[:at + 2] + b"X" + data[at + 3:])
    loads: list = []
    tok, info = _open(d, loads)
    assert info["state"] == "hit" and tok.eos_token == "<|im_end|>" and not loads
    real = AutoTokenizer.from_pretrained(str(d), local_files_only=True).backend_tokenizer
    assert tok.backend_tokenizer.to_str() == real.to_str()
    assert loads  # (the real tokenizer, for its backend)
    assert tok.backend_tokenizer.get_vocab() == real.get_vocab()


def test_an_unwritable_cache_still_prepares(tmp_path, monkeypatch, data):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("FASTAXO_CACHE_DIR", str(blocker))  # (root writes any directory)
    got = _prepare(data, tmp_path / "a.parquet", chat_data.qwen3_dir())
    assert got["tokenizer_snapshot"] == "miss"
    assert _prepare(data, tmp_path / "b.parquet", chat_data.qwen3_dir())[
        "tokenizer_snapshot"] == "miss"
    assert _table(tmp_path / "a.parquet").equals(_table(tmp_path / "b.parquet"))
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        (ro / "tokenizers").mkdir(parents=True)
        os.chmod(ro / "tokenizers", 0o500)
        monkeypatch.setenv("FASTAXO_CACHE_DIR", str(ro))
        assert _prepare(data, tmp_path / "c.parquet", chat_data.qwen3_dir())[
            "tokenizer_snapshot"] == "miss"
        assert not list((ro / "tokenizers").iterdir())


def test_off_writes_nothing(tmp_path, monkeypatch, data):
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    home.mkdir()
    xdg.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    monkeypatch.setenv("FASTAXO_CACHE_DIR", "off")
    assert _prepare(data, tmp_path / "a.parquet", chat_data.qwen3_dir())[
        "tokenizer_snapshot"] == "off"
    assert not list(home.iterdir()) and not list(xdg.iterdir())
    # unset: $XDG_CACHE_HOME/fastaxo, else ~/.cache/fastaxo
    monkeypatch.delenv("FASTAXO_CACHE_DIR")
    assert snapshot.cache_dir() == str(xdg / "fastaxo" / "tokenizers")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert snapshot.cache_dir() == str(home / ".cache" / "fastaxo" / "tokenizers")


# -- what the record lacks loads the real tokenizer ---------------------------------------------

# a template whose output depends on a message's text: those turns are placed by Axolotl's
# own diff (renders of their own)
CONTENT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{% if 'secret' in "
                    "m.content %}[hidden]{% endif %}{{ m.content }}<|im_end|>\n{% endfor %}")


def test_a_call_the_record_lacks_loads_transformers_and_gives_the_same_rows(tmp_path, data):
    cache = tmp_path / "cache"
    chat = {"chat_template": CONTENT_TEMPLATE}
    off = _child(tmp_path, data, tmp_path / "off.parquet", chat_data.qwen3_dir(), chat,
                 FASTAXO_CACHE_DIR="off")
    assert off["snapshot"] == "off"
    assert off["turns"] == {"the template's output depends on message text": 1}
    _child(tmp_path, data, tmp_path / "1.parquet", chat_data.qwen3_dir(), chat,
           FASTAXO_CACHE_DIR=str(cache))
    (record,) = _records(cache)
    rec = _read_record(record)
    rec["calls"] = {k: v for k, v in rec["calls"].items()
                    if not k.startswith('["apply_chat_template"')}
    record.write_bytes(snapshot._encode_record(rec))
    got = _child(tmp_path, data, tmp_path / "2.parquet", chat_data.qwen3_dir(), chat,
                 FASTAXO_CACHE_DIR=str(cache))
    assert got["snapshot"] == "hit" and got["transformers"] is True
    assert "transformers loaded for a call of apply_chat_template" in got["detail"]
    assert _table(tmp_path / "2.parquet").equals(_table(tmp_path / "off.parquet"))
    # the record grew back: the next run replays it all
    assert got["turns"] == off["turns"]
    again = _child(tmp_path, data, tmp_path / "3.parquet", chat_data.qwen3_dir(), chat,
                   FASTAXO_CACHE_DIR=str(cache))
    assert again["snapshot"] == "hit" and again["transformers"] is False, again
    assert again["turns"] == off["turns"]
    assert _table(tmp_path / "3.parquet").equals(_table(tmp_path / "off.parquet"))


def test_the_proxy_answers_as_the_real_tokenizer(tmp_path, monkeypatch, qwen):
    from fastaxo import Tokenizer
    from fastaxo.tokenizer.select import fast_tokenizer

    monkeypatch.setenv("FASTAXO_CACHE_DIR", str(tmp_path / "cache"))
    d = chat_data.qwen3_dir()
    _record_once(d)
    loads: list = []
    tok, info = _open(d, loads)
    assert info["state"] == "hit" and not loads
    assert type(tok).__name__ == type(qwen).__name__ and isinstance(tok, snapshot.TokenizerSnapshot)
    assert tok.backend_tokenizer is tok._tokenizer
    # the same encoder as the real tokenizer's, and the per-object cache holds for it
    mine, real = Tokenizer.from_hf(tok), Tokenizer.from_hf(qwen)
    assert (mine.sha256, mine.source, repr(mine)) == (real.sha256, real.source, repr(real))
    assert fast_tokenizer(tok)[0] is fast_tokenizer(tok)[0]
    # a replayed call gives tuples back as tuples
    probe = ["<probe> a\n\n b\u00e9 \u6570\u636e"]
    kw = dict(add_special_tokens=False, return_offsets_mapping=True, return_attention_mask=False)
    replayed = tok(probe, **kw)
    assert replayed["offset_mapping"] == qwen(probe, **kw)["offset_mapping"]
    assert type(replayed["offset_mapping"][0][0]) is tuple and not loads
    # anything else: the real tokenizer, loaded then, and the same answer
    assert tok.convert_ids_to_tokens([9707, 1879]) == qwen.convert_ids_to_tokens([9707, 1879])
    assert loads == [str(d)] and "transformers loaded for attribute 'convert_ids_to_tokens'" in \
        snapshot.status(tok)["why"]
    assert tok(probe, **kw)["offset_mapping"] == replayed["offset_mapping"]
    assert len(tok) == len(qwen)
    # pickled and copied as the real tokenizer
    import copy
    import pickle

    for again in (pickle.loads(pickle.dumps(tok)), copy.copy(tok), copy.deepcopy(tok)):
        assert type(again) is type(qwen) and again(probe, **kw) == qwen(probe, **kw)


def test_the_backend_answers_as_the_real_one(tmp_path, monkeypatch, qwen):
    """What the chat path's checks asked of the backend comes from the record; anything else
    (a new call, an attribute the record lacks, a part's state it did not keep) builds the real
    backend, which answers from then on."""
    monkeypatch.setenv("FASTAXO_CACHE_DIR", str(tmp_path / "cache"))
    d = chat_data.qwen3_dir()
    _record_once(d)
    (record,) = _records(tmp_path / "cache")
    recorded_calls = _read_record(record)["backend_answers"]["calls"]
    assert any(k.startswith('["encode_batch_fast"') for k in recorded_calls)
    loads: list = []
    tok, _ = _open(d, loads)
    view, real = tok.backend_tokenizer, qwen.backend_tokenizer
    st = tok._fx
    assert view is tok._tokenizer and st.backend is None
    assert (view.truncation, view.padding, view.encode_special_tokens) == (
        real.truncation, real.padding, real.encode_special_tokens)
    assert type(view.model).__name__ == "BPE"
    assert view.normalizer.__getstate__() == real.normalizer.__getstate__()
    assert view.get_vocab_size(with_added_tokens=True) == real.get_vocab_size(True)
    got, want = view.get_added_tokens_decoder(), real.get_added_tokens_decoder()

    def said(t):
        return (t.content, repr(t), str(t), t.special, t.lstrip, t.rstrip, t.single_word,
                t.normalized)

    assert {i: said(t) for i, t in got.items()} == {i: said(t) for i, t in want.items()}
    assert view.to_str() == real.to_str()
    probe = ["<probe> a\n\n b\u00e9 \u6570\u636e"]
    (e,), (w,) = view.encode_batch(probe, add_special_tokens=False), real.encode_batch(
        probe, add_special_tokens=False)
    assert (e.ids, e.offsets, len(e)) == (w.ids, w.offsets, len(w))
    assert [e.token_to_chars(i) for i in range(len(e))] == [
        w.token_to_chars(i) for i in range(len(w))]
    assert st.backend is None and not loads  # all of that from the record
    # an attribute the record lacks: the same call made on the real backend
    assert e.tokens == w.tokens and st.backend is not None and not loads
    assert got[151643] == want[151643] and hash(got[151643]) == hash(want[151643])
    # from then on the real backend answers, the record's calls included
    assert type(view.model).__name__ == "BPE" and view.model.__getstate__() == \
        real.model.__getstate__()
    assert view.encode_batch_fast(["new text"], add_special_tokens=False)[0].ids == \
        real.encode_batch_fast(["new text"], add_special_tokens=False)[0].ids
    assert not loads  # (from the recorded tokenizer.json, not transformers)
    # a call the record lacks on a fresh replay: the real backend, built for it; a batch of
    # texts (not a probe) is not even keyed (dumped as JSON) to look for it
    tok2, _ = _open(d, loads)
    dumped = []
    monkeypatch.setattr(recorded, "dumps", lambda v: dumped.append(v) or json.dumps(v))
    batch = ["x y " * 262_145]
    assert tok2.backend_tokenizer.encode_batch_fast(batch, add_special_tokens=False)[0].ids \
        == real.encode_batch_fast(batch, add_special_tokens=False)[0].ids
    assert tok2._fx.backend is not None and not loads and not dumped
    # two replayed added tokens compare as the real ones do
    tok3, _ = _open(d, loads)
    a, b = (tok3.backend_tokenizer.get_added_tokens_decoder() for _ in range(2))
    assert a[151643] is not b[151643] and a[151643] == b[151643] and a[151643] != b[151644]
    # pickled (or copied) as the real backend
    import pickle

    for b in (tok.backend_tokenizer, tok2.backend_tokenizer):
        assert pickle.loads(pickle.dumps(b)).to_str() == real.to_str()


def test_a_method_that_may_change_the_backend_ends_the_recording(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTAXO_CACHE_DIR", str(tmp_path / "cache"))
    loads: list = []
    tok, info = _open(_qwen_copy(tmp_path), loads)
    assert info["state"] == "miss"
    b = tok.backend_tokenizer
    b.get_vocab_size(with_added_tokens=True)
    assert tok._fx.recording
    b.add_tokens(["<zzz>"])  # not a read: what comes after is not the files' tokenizer
    assert not tok._fx.recording
    n = b.get_vocab_size(with_added_tokens=True)
    key = '["get_vocab_size",[],{"d":[["with_added_tokens",true]]}]'
    assert tok._fx.rec["backend_answers"]["calls"][key] == n - 1
    # a replay that loads transformers while it records: the live backend, recorded
    snapshot.seal(_open(tmp_path / "qwen3", loads)[0])
    tok, info = _open(tmp_path / "qwen3", loads)
    assert info["state"] == "hit" and tok.backend_tokenizer.get_vocab_size(True) == n - 1
    assert snapshot.go_live(tok, "a test") and tok._fx.recording
    b = tok.backend_tokenizer
    assert b.real is tok._fx.live.backend_tokenizer and b.get_vocab_size(True) == n - 1


def test_nondeterministic_templates(tmp_path, monkeypatch, qwen):
    from fastaxo.chat import ChatSpec

    monkeypatch.setenv("FASTAXO_CACHE_DIR", str(tmp_path / "cache"))
    d = chat_data.qwen3_dir()
    for tpl, dated in ((chat_data.LLAMA32_TEMPLATE, True),
                       ("{% for m in messages %}{{ m.content }}{{ [1, 2] | random }}"
                        "{% endfor %}", None)):
        tok, _ = _open(d, [])
        ChatSpec.create(tok, tpl)
        snapshot.seal(tok)
        renders = [v for k, v in tok._fx.rec["calls"].items()
                   if k.startswith('["apply_chat_template"')
                   and recorded.decode(json.loads(k)[2])["chat_template"] == tpl]
        if dated is None:  # random: never recorded
            assert renders == []
        else:
            assert renders and all(v["date"].startswith(time.strftime("%Y-%m-%d"))
                                   for v in renders)


# -- the environment's verdict ----------------------------------------------------------------

def test_a_false_verdict_uses_transformers_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTAXO_CACHE_DIR", str(tmp_path / "cache"))
    d = chat_data.qwen3_dir()
    _record_once(d)
    (record,) = _records(tmp_path / "cache")
    rec = _read_record(record)
    rec["environment"] = {"equal": False, "variant": "plain", "differences": ["trim_blocks"]}
    record.write_bytes(snapshot._encode_record(rec))
    tok, info = _open(d, [])
    assert info["state"] == "hit"
    assert snapshot.jinja_environment(tok) is environment.transformers_environment()
    for variant in environment.VARIANTS:  # the variant the verdict names
        rec["environment"] = {"equal": True, "variant": variant, "differences": []}
        record.write_bytes(snapshot._encode_record(rec))
        tok, info = _open(d, [])
        assert snapshot.jinja_environment(tok) is environment.fastaxo_environment(variant)
    rec["environment"] = {"equal": True, "variant": "newer", "differences": []}
    record.write_bytes(snapshot._encode_record(rec))
    tok, info = _open(d, [])
    assert info["state"] == "miss" and "verdict is malformed" in info["why"], info


def test_info_says_where_the_cache_is(tmp_path, monkeypatch, capsys):
    from fastaxo.__main__ import main

    monkeypatch.setenv("FASTAXO_CACHE_DIR", str(tmp_path / "c"))
    assert main(["info"]) == 0
    assert f"tokenizer cache  : {tmp_path / 'c' / 'tokenizers'} (FASTAXO_CACHE_DIR" in \
        capsys.readouterr().out
    monkeypatch.setenv("FASTAXO_CACHE_DIR", "off")
    assert main(["info"]) == 0
    assert "tokenizer cache  : off (FASTAXO_CACHE_DIR" in capsys.readouterr().out


# -- the cache's bounds -----------------------------------------------------------------------

def _old_records(folder, n, size=10):
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(n):  # older the higher i: 1 hour apart
        f = folder / f"{i:064x}.json"
        f.write_bytes(b"{}".ljust(size))
        t = time.time() - 3600 * (i + 1)
        os.utime(f, (t, t))
        files.append(f)
    return files


def test_the_cache_keeps_the_newest_records_and_drops_stale_temporaries(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTAXO_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "tokenizers"
    old = _old_records(folder, snapshot._KEEP_RECORDS + 8)
    stale, fresh = folder / ".tmp-stale.json", folder / ".tmp-fresh.json"
    for f in (stale, fresh):
        f.write_bytes(b"partial")
    t = time.time() - 2 * cache.STALE_TMP
    os.utime(stale, (t, t))
    d = _qwen_copy(tmp_path)
    assert _record_once(d)["state"] == "miss"
    new = set(_records(tmp_path / "cache")) - set(old)
    assert len(new) == 1
    # the new record and the 31 most recently used others
    assert [f.exists() for f in old] == [True] * (snapshot._KEEP_RECORDS - 1) + [False] * 9
    assert not stale.exists() and fresh.exists()
    # a replay marks its record used: it outlives older ones
    (record,) = new
    t = time.time() - 10 ** 6
    os.utime(record, (t, t))
    assert _record_once(d)["state"] == "hit"
    assert record.stat().st_mtime > time.time() - 600


def test_the_cache_keeps_within_its_size(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTAXO_CACHE_DIR", str(tmp_path / "cache"))
    old = _old_records(tmp_path / "cache" / "tokenizers", 4, size=1000)
    d = _qwen_copy(tmp_path)
    _record_once(d)
    (record,) = set(_records(tmp_path / "cache")) - set(old)
    monkeypatch.setattr(snapshot, "_MAX_CACHE", record.stat().st_size + 2500)
    snapshot._prune(str(record.parent), str(record))
    assert [f.exists() for f in old] == [True, True, False, False]
    assert record.exists()
