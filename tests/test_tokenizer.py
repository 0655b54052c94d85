"""fastaxo.Tokenizer against HF tokenizers, id for id: real tokenizers (Qwen3, Llama 3.2 with
ignore_merges either way, GPT-2), real text, every code point,
Hypothesis over Unicode, added-token flags, threads, forks and hostile sizes; its character
offsets against HF's Encoding.offsets, span for span (NFC included)."""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import time
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
import tokenizer_data as data  # noqa: E402
import tokenizers  # noqa: E402

import fastaxo  # noqa: E402
from fastaxo.errors import InvalidInputError, InvalidTypeError  # noqa: E402
from fastaxo.tokenizer import Tokenizer, UnsupportedTokenizerError  # noqa: E402


def _ignore_merges(doc):
    doc["model"]["ignore_merges"] = True


@pytest.fixture(scope="module", params=["qwen3", "llama3", "llama3-ignore-merges", "gpt2"])
def pair(request, tmp_path_factory):
    """(fastaxo Tokenizer, HF Tokenizer) on the same tokenizer.json."""
    tmp = tmp_path_factory.mktemp("tok")
    path = {"qwen3": data.qwen3_json, "llama3": data.llama3_json,
            "llama3-ignore-merges": lambda: data.variant(data.llama3_json(), tmp / "t.json",
                                                         _ignore_merges),
            "gpt2": data.gpt2_json,
            }[request.param]()
    return Tokenizer.from_pretrained(path), tokenizers.Tokenizer.from_file(str(path))


def _check(pair, texts, add_special_tokens=True):
    """Every text's ids equal HF's; the first difference is shown."""
    ours, hf = pair
    got = ours.encode_batch(texts, add_special_tokens=add_special_tokens).to_pylist()
    want = [e.ids for e in hf.encode_batch_fast(list(texts),
                                                add_special_tokens=add_special_tokens)]
    bad = [i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b]
    if bad:
        i = bad[0]
        j = next((k for k, (a, b) in enumerate(zip(got[i], want[i])) if a != b),
                 min(len(got[i]), len(want[i])))
        raise AssertionError(
            f"{len(bad)} of {len(texts)} texts differ; text {i} {texts[i][:200]!r}: at id {j} "
            f"ours {got[i][max(0, j - 3):j + 4]} HF {want[i][max(0, j - 3):j + 4]} "
            f"({hf.decode(want[i][max(0, j - 3):j + 4])!r})")


# -- real text ----------------------------------------------------------------------------

# the main leg reads 1.5 MB per corpus; the quick legs (other Pythons, the floors) 0.3 MB
MB = int(float(os.environ.get("FASTAXO_TOKENIZER_TEST_MB", "0.3" if os.environ.get(
    "FASTAXO_SUITE") in ("quick", "compat") else "1.5")) * 1_000_000)


@pytest.mark.parametrize("kind", ["english", "code", "multi"])
def test_real_text_gives_hf_ids(pair, kind):
    _check(pair, list(data.corpus(kind, MB)))


def test_chat_templated_text_with_special_tokens(pair):
    ours, _ = pair
    specials = list(ours.added_tokens)[:12]
    docs = data.corpus("multi", 200_000, seed=3)
    texts = [f"{specials[i % len(specials)]}user\n{d[:400]}{specials[(i + 1) % len(specials)]}"
             f"\n{specials[i % len(specials)]}assistant\n{d[400:900]}"
             for i, d in enumerate(docs)]
    _check(pair, texts)
    _check(pair, texts, add_special_tokens=False)


# -- every code point ---------------------------------------------------------------------

# one per split pattern: ignore_merges changes no character class (the real-text and
# Hypothesis tests cover it)
@pytest.mark.parametrize("pair", ["qwen3", "llama3", "gpt2"], indirect=True)
def test_every_code_point_in_context(pair):
    """Each code point alone, between letters, between digits, after an apostrophe and
    a space, doubled: the probe that found Python 3.11's Unicode tables 120 code points off."""
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    probes = [f"a{ch}b 1{ch}2 '{ch} {ch} x{ch}{ch}\n{ch}" for ch in map(chr, cps)]
    # 16 probes per text (HF's per-text cost would dominate the run otherwise)
    _check(pair, ["\t".join(probes[i:i + 16]) for i in range(0, len(probes), 16)])


# -- Hypothesis over Unicode --------------------------------------------------------------

PIECES = ["'s", "'T", "'re", "'VE", "'m", "'LL", "'d", "'ſ", " ", "  ", "\t", "\n", "\r\n",
          "\u00a0", "\u3000", "\u2028", "\x0b", "\x0c", "\x85", "\u200b", "\u200d", "123",
          "٣٤", "१२", "①", "Ⅻ", "e\u0301", "\u0301", "👩\u200d💻", "🇫🇷", "日本", "한국어",
          "עברית", "عربى", "ไทย", "<|", "<think", "|>", "</think>", "<|im_end|>",
          "<|begin_of_text|>", "ﬁ", "ǅ", "ǲ", "K", "İ", "ß", "ᾳ"]


def _texts():
    piece = st.one_of(st.sampled_from(PIECES),
                      st.text(st.characters(exclude_categories=("Cs",)), max_size=8))
    return st.lists(st.lists(piece, max_size=30).map("".join), min_size=1, max_size=20)


@settings(max_examples=int(os.environ.get("FASTAXO_HYPOTHESIS_EXAMPLES", "300")),
          deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                HealthCheck.too_slow])
@given(texts=_texts())
def test_hypothesis_unicode(pair, texts):
    _check(pair, texts)


# -- runs, sizes, empties -----------------------------------------------------------------

def test_runs_and_empties(pair):
    texts = ["", " ", "\n", "a", *(c * n for c in (" ", "\n", "a", "1", "!", "\t", "é", "日")
                                   for n in (2, 3, 4, 63, 64, 65, 1000, 5000)),
             " " * 100 + "a", "\n \n \r\n  x", "'s's's", "a'sb", "ab'S 'Ll"]
    _check(pair, texts)
    ours, _ = pair
    assert ours.encode_batch([]).to_pylist() == []


def test_a_long_word_takes_linear_time(pair):
    """A word of 4 MB without spaces (one piece) merges through the heap: ~4x the time of
    1 MB, not 16x."""
    ours, hf = pair
    import random

    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    small = "".join(rng.choice(letters) for _ in range(250_000))
    assert ours.encode(small).tolist() == hf.encode(small).ids
    t = []
    for n in (1, 4):
        word = small * n
        t0 = time.process_time()
        ours.encode(word)
        t.append(time.process_time() - t0)
    assert t[1] < 8 * t[0] + 0.5, t


def test_word_caches_warm_and_evicted(pair):
    """Many distinct words, encoded twice by one new tokenizer (the second time from its word
    caches, after evictions): words of 2 to 24 bytes that are no token, words of more than 8
    ids, words of 25 to 160 bytes and longer ones, in scripts of 1 to 3 bytes a letter."""
    import random

    _, hf = pair
    ours = Tokenizer.from_hf(hf)
    rng = random.Random(11)
    alphabets = ["abcdefghijklmnopqrstuvwxyz", "абвгдежзийклмнопрстуфхцчшщъыьэюя",
                 "αβγδεζηθικλμνξοπρστυφχψω", "ᚠᚢᚦᚨᚱᚲᚷᚹᚺᚾᛁᛃ", "ㄅㄆㄇㄈㄉㄊㄋㄌㄍㄎㄏㄐ"]
    words = []
    for i in range(16_000):
        n = rng.choice((2, 3, 4, 5, 6, 8, 10, 12, 14, 20, 30, 45, 60, 90))
        words.append("".join(rng.choice(alphabets[i % 5]) for _ in range(n)))
    texts = [" ".join(words[i:i + 250]) for i in range(0, len(words), 250)]
    want = [e.ids for e in hf.encode_batch_fast(texts)]
    for _ in range(2):
        assert ours.encode_batch(texts).to_pylist() == want


@functools.lru_cache(maxsize=1)
def _many_words() -> list[str]:
    """Texts of more distinct words than a new word cache holds: 122,544 of 4 to 24 bytes
    (syllables: a few ids each, the word slots hold up to 8) and 9,000 of 28 to 40 bytes (two
    bytes a letter: the long-piece slots)."""
    import random

    rng = random.Random(13)
    syllables = [c + v for c in "bdgklmnprstvz" for v in "aeiou"]
    words = list(dict.fromkeys("".join(rng.choice(syllables) for _ in range(rng.randint(2, 6)))
                               for _ in range(150_000)))
    cyrillic = [c + v for c in "бвгдклмнпрст" for v in "аеиоу"]
    words += ["".join(rng.choice(cyrillic) for _ in range(rng.randint(7, 10)))
              for _ in range(9_000)]
    rng.shuffle(words)
    return [" ".join(words[i:i + 500]) for i in range(0, len(words), 500)]


@pytest.mark.parametrize("which", ["qwen3", "llama3"])
def test_word_caches_grow_when_the_words_do_not_fit(which):
    """More distinct words than a new word cache holds: the cache grows once, in the middle of
    the first pass (both of its tables), every id is HF's on that pass and on later ones from
    the grown cache, and from the third pass on the cache holds nearly every word: a piece
    whose home set is full goes to its other set (with one set a piece, a fifth of the words
    pushed each other out on every pass)."""
    path = data.qwen3_json() if which == "qwen3" else data.llama3_json()
    texts = _many_words()
    words = sum(len(t.split()) for t in texts)
    want = [e.ids for e in tokenizers.Tokenizer.from_file(str(path)).encode_batch_fast(texts)]
    ours = Tokenizer.from_pretrained(path)
    assert ours._model._cache_stats() == []
    merged = []
    for _ in range(3):
        assert ours.encode_batch(texts, num_threads=1).to_pylist() == want
        [(bits, long_bits, total)] = ours._model._cache_stats()
        assert (bits, long_bits) == (18, 14)
        merged.append(total - sum(merged))
    assert merged[0] > words * 0.99  # a cold pass merges each word (not one token) once
    assert merged[2] < words * 0.02, merged


def test_long_pieces_of_many_ids_are_cached_when_they_fit():
    """A long piece is kept with its bytes and its ids in one 256-byte slot, so a short key
    leaves room for many ids (a word of three-byte letters that hardly merges). Random Thai
    words of 10 to 90 letters, one a line, through Llama 3.2 twice: the ids are HF's both
    times, and the second pass merges exactly the words whose bytes and ids do not fit a slot
    (the rule of fx_long_put: bytes up to 240, ids from the next multiple of 4, 244 in all)."""
    import random

    rng = random.Random(29)
    letters = [chr(c) for c in range(0x0E01, 0x0E2F)]
    words = list(dict.fromkeys("".join(rng.choice(letters) for _ in range(rng.randint(10, 90)))
                               for _ in range(1_000)))
    path = data.llama3_json()
    hf = tokenizers.Tokenizer.from_file(str(path))
    ids = [e.ids for e in hf.encode_batch_fast(words, add_special_tokens=False)]

    def fits(word, n_ids):
        n = len(word.encode())
        return n <= 240 and (n + 3) // 4 * 4 + 4 * n_ids <= 244

    cannot = sum(not fits(w, len(i)) for w, i in zip(words, ids) if len(i) > 1)
    assert 100 < cannot < len(words) - 100  # both kinds
    assert sum(fits(w, len(i)) and len(i) > 21 for w, i in zip(words, ids)) > 100
    texts = ["\n".join(words[i:i + 50]) for i in range(0, len(words), 50)]
    want = [e.ids for e in hf.encode_batch_fast(texts)]
    ours = Tokenizer.from_pretrained(path)
    assert ours.encode_batch(texts, num_threads=1).to_pylist() == want
    [(_, _, first)] = ours._model._cache_stats()
    assert ours.encode_batch(texts, num_threads=1).to_pylist() == want
    [(_, _, total)] = ours._model._cache_stats()
    assert total - first == cannot, (total - first, cannot)


def test_out_of_memory_for_the_encoders_tables():
    """The large tables' allocations failing (as out of memory would): a word cache that
    cannot grow keeps its table and every id is still HF's; once memory is back it grows on a
    later pass. A word cache or a model that cannot be made is a MemoryError saying which."""
    from fastaxo import _tok

    path = data.qwen3_json()
    texts = _many_words()
    hf = tokenizers.Tokenizer.from_file(str(path))
    want = [e.ids for e in hf.encode_batch_fast(texts)]
    ours = Tokenizer.from_pretrained(path)
    assert ours.encode_batch(["a cache first"], num_threads=1).to_pylist() == [
        e.ids for e in hf.encode_batch(["a cache first"])]
    assert [s[:2] for s in ours._model._cache_stats()] == [(16, 12)]
    assert _tok._fail_big_allocs(True) is False
    try:
        assert ours.encode_batch(texts, num_threads=1).to_pylist() == want
        assert [s[:2] for s in ours._model._cache_stats()] == [(16, 12)]
        ours._model.clear_cache()
        with pytest.raises(MemoryError, match="out of memory for a word cache"):
            ours.encode_batch(["x"], num_threads=1)
        # two threads' caches, made on the threads: neither kept, the model's lock released
        with pytest.raises(MemoryError, match="out of memory for a word cache"):
            ours.encode_batch(["x" * 1000] * 2000, num_threads=2)
        assert ours._model._cache_stats() == []
        with pytest.raises(MemoryError, match="out of memory building the BPE model"):
            Tokenizer.from_pretrained(path)
    finally:
        assert _tok._fail_big_allocs(False) is True
    assert ours.encode_batch(texts, num_threads=1).to_pylist() == want  # a new cache, grown
    assert [s[:2] for s in ours._model._cache_stats()] == [(18, 14)]


def test_a_cleared_cache_reuses_its_tables_empty():
    """A cleared word cache's tables (and a freed tokenizer's) are kept for the next of their
    size (csrc/fx_mem.c) and handed out zeroed: the same text encoded after clear_cache() merges
    as many pieces as the first time (a stale entry would be a hit), from a grown table too,
    and from a new tokenizer's; the ids are HF's every time."""
    path = data.qwen3_json()
    texts = _many_words()
    hf = tokenizers.Tokenizer.from_file(str(path))
    want = [e.ids for e in hf.encode_batch_fast(texts)]
    ours = Tokenizer.from_pretrained(path)
    assert ours.encode_batch(texts, num_threads=1).to_pylist() == want
    [first] = ours._model._cache_stats()
    assert first[:2] == (18, 14) and first[2] > 0  # grown: 16 MB and 4 MB tables
    for _ in range(3):
        ours._model.clear_cache()
        assert ours.encode_batch(texts, num_threads=1).to_pylist() == want
        assert ours._model._cache_stats() == [first]
    del ours
    other = Tokenizer.from_pretrained(path)
    assert other.encode_batch(texts, num_threads=1).to_pylist() == want
    assert other._model._cache_stats() == [first]


def test_calls_reuse_their_regions_and_concurrent_calls_never_share_them():
    """A call keeps its chunks' scratch regions for the next (first-touched memory is slow):
    calls of growing and shrinking sizes, with and without offsets, on one and two threads,
    give HF's ids; four Python threads encoding at once on one tokenizer (the GIL released)
    never write into one another's regions."""
    import threading

    path = data.qwen3_json()
    hf = tokenizers.Tokenizer.from_file(str(path))
    words = _many_words()
    sizes = [3, 40_000, 200, 131_544, 1, 9_000]
    batches = [[" ".join(words[k:k + 7]) for k in range(0, n, 1 + n // 997)] for n in sizes]
    want = [[e.ids for e in hf.encode_batch_fast(b)] for b in batches]
    spans = [[[list(x) for x in e.offsets] for e in hf.encode_batch(b)] for b in batches[:3]]
    ours = Tokenizer.from_pretrained(path)
    for nt in (1, 2, 1):
        for b, w in zip(batches, want):
            assert ours.encode_batch(b, num_threads=nt).to_pylist() == w
        for b, w, sp in zip(batches, want, spans):
            ids, got = ours.encode_batch_offsets(b, num_threads=nt)
            assert ids.to_pylist() == w and got.to_pylist() == sp
    failed = []

    def run(k: int) -> None:
        for r in range(6):
            i = (k + r) % len(batches)
            if ours.encode_batch(batches[i], num_threads=1 + r % 2).to_pylist() != want[i]:
                failed.append((k, r))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failed


def _has_avx2() -> bool:
    """Whether Linux says this processor has AVX2 (elsewhere: not known, False)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx2" in line for line in f)
    except OSError:
        return False


def test_merge_lookups_with_and_without_avx2(pair):
    """Each rank lookup, AVX2's bucket at once (where the processor has it) and the plain one
    other builds run (ARM's wheels), gives HF's ids on real text and on the cache test's long
    words (words of up to 90 letters merge through scans of every length)."""
    import platform
    import random

    from fastaxo import _tok

    _, hf = pair
    rng = random.Random(12)
    letters = "abcdefghijklmnopqrstuvwxyzабвгдежзийклмнопрстуфхцчшщαβγδεζηθικλμνξ"
    words = ["".join(rng.choice(letters) for _ in range(rng.choice((3, 9, 17, 33, 65, 90))))
             for _ in range(3000)]
    texts = [" ".join(words[i:i + 100]) for i in range(0, len(words), 100)]
    texts += list(data.corpus("multi", 200_000))
    seen = set()
    for level in (_tok.PROBE_PLAIN, _tok.PROBE_AVX2):
        ours = Tokenizer.from_hf(hf)
        got = ours._model._probe(level)
        assert got <= level
        seen.add(got)
        _check((ours, hf), texts)
    assert _tok.PROBE_PLAIN in seen
    if platform.machine() in ("x86_64", "AMD64") and _has_avx2():
        assert _tok.PROBE_AVX2 in seen


# -- API ----------------------------------------------------------------------------------

def test_encode_offsets_and_types(pair):
    ours, hf = pair
    text = "Hello wörld, 日本語! <|im_end|> it's 12345"
    ids, spans = ours.encode_offsets(text)
    assert ids.tolist() == hf.encode(text).ids and ids.dtype.name == "int32"
    raw = text.encode()
    # spans tile the text (the BOS spans nothing)
    real = [(a, b) for (a, b), i in zip(spans.tolist(), ids.tolist()) if b > a]
    assert real[0][0] == 0 and real[-1][1] == len(raw)
    assert all(x[1] == y[0] for x, y in zip(real, real[1:]))


def test_arguments_of_the_wrong_type_are_named(pair, tmp_path):
    """A careless argument is an error naming it, never a silent reading: ``"False"`` (a
    string) was taken as True and added the BOS; ``unit=None``, a 0-d array and a path that
    is not one were errors from deep inside."""
    import numpy as np

    ours, hf = pair
    for bad in ("False", "no", None, 0, 1.0):
        for call in (lambda b: ours.encode("hi", add_special_tokens=b),
                     lambda b: ours.encode_batch(["hi"], add_special_tokens=b),
                     lambda b: ours.encode_batch_offsets(["hi"], add_special_tokens=b),
                     lambda b: ours.encode_offsets("hi", add_special_tokens=b)):
            with pytest.raises(InvalidTypeError, match="add_special_tokens: expected a bool"):
                call(bad)
        with pytest.raises(TypeError):  # HF refuses them too
            hf.encode("hi", add_special_tokens=bad)
    assert ours.encode("hi", add_special_tokens=np.bool_(False)).tolist() == hf.encode(
        "hi", add_special_tokens=False).ids
    with pytest.raises(InvalidInputError, match="unit: expected 'bytes' or 'chars', got None"):
        ours.encode_batch_offsets(["hi"], unit=None)
    with pytest.raises(InvalidTypeError, match="texts: expected a list of str"):
        ours.encode_batch(np.array("abc"))
    with pytest.raises(InvalidTypeError, match="path: expected a directory"):
        Tokenizer.from_pretrained(5)
    assert "got int" in Tokenizer.supported(5)
    with pytest.raises(InvalidTypeError, match="add_special_tokens: expected True or False"):
        fastaxo.prepare(tmp_path / "x.jsonl", tmp_path / "o.parquet", 8,
                        tokenizer=data.qwen3_json(), add_special_tokens="False")


def test_arrow_input_and_threads(pair):
    import pyarrow as pa

    ours, _ = pair
    docs = list(data.corpus("english", 600_000, seed=5))
    one = ours.encode_batch(docs, num_threads=1)
    for arr in (pa.array(docs), pa.array(docs, pa.large_string()), pa.array(docs).slice(3)):
        got = ours.encode_batch(arr, num_threads=2)
        want = one if len(arr) == len(docs) else one.slice(3)
        assert got.to_pylist() == want.to_pylist()
    with pytest.raises(Exception, match="text 1 is null"):
        ours.encode_batch(pa.array(["a", None]))


def test_text_held_as_views_or_categories_and_iterables(pair):
    """Text as string_view (Polars', DuckDB's Arrow), as a dictionary of strings (pandas'
    categoricals; chunks with dictionaries of their own), in a chunked array of no chunks,
    or from a generator gives the ids of the plain list; None and bytes are refused naming
    the argument (before: string_view and dictionaries were refused, None raised
    "'NoneType' object is not iterable")."""
    import pyarrow as pa

    ours, _ = pair
    docs = ["a b c", "", "héllo wörld 日本", "a b c", "xyz"]
    want = ours.encode_batch(docs, num_threads=1).to_pylist()
    d1 = pa.array(docs[:2]).dictionary_encode()
    d2 = pa.array(docs[2:]).dictionary_encode()
    forms = [pa.array(docs).dictionary_encode(), pa.chunked_array([d1, d2]),
             (d for d in docs)]
    if hasattr(pa, "string_view"):  # (pyarrow 16 and later)
        forms += [pa.array(docs, pa.string_view()),
                  pa.chunked_array([pa.array(docs[:3], pa.string_view()),
                                    pa.array(docs[3:], pa.string_view())])]
        assert ours.encode_batch(pa.chunked_array([], pa.string_view())).to_pylist() == []
    for texts in forms:
        assert ours.encode_batch(texts, num_threads=2).to_pylist() == want
    assert ours.encode_batch(pa.chunked_array([], pa.string())).to_pylist() == []
    with pytest.raises(InvalidTypeError, match="texts: expected a list of str or a pyarrow "
                                               "string array, got NoneType"):
        ours.encode_batch(None)
    with pytest.raises(InvalidTypeError, match="texts: expected a string array, got binary"):
        ours.encode_batch(pa.array([b"a"]))


class _Str(str):
    pass


@settings(max_examples=int(os.environ.get("FASTAXO_HYPOTHESIS_EXAMPLES", "300")) // 3,
          deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                HealthCheck.too_slow])
@given(texts=_texts(), specials=st.booleans())
def test_str_input_equals_arrow_input(pair, texts, specials):
    """A list of str goes to C as the strings' own storage (ASCII, Latin-1, 2 and 4 bytes a
    code point), its UTF-8 made on the encoding threads: ids and spans equal Arrow's bytes,
    from a list, a tuple, a generator and str subclasses alike."""
    import pyarrow as pa

    ours, _ = pair
    arrow = pa.array(texts, pa.large_string())
    want = ours.encode_batch(arrow, specials).to_pylist()
    for given_ in (texts, tuple(texts), (t for t in texts), [_Str(t) for t in texts]):
        assert ours.encode_batch(given_, specials, num_threads=2).to_pylist() == want
    for unit in ("bytes", "chars"):
        ids, spans = ours.encode_batch_offsets(texts, specials, unit=unit)
        ids2, spans2 = ours.encode_batch_offsets(arrow, specials, unit=unit)
        assert ids.to_pylist() == ids2.to_pylist() and spans.to_pylist() == spans2.to_pylist()


def test_str_input_of_every_storage_kind_in_many_chunks(pair):
    ours, hf = pair
    kinds = ["plain ascii words " * 3000, "caf\u00e9 na\u00efve " * 3000,
             "\u65e5\u672c\u8a9e\u306e\u6587 " * 3000, "\U0001f600 emoji \U0001d11e " * 3000]
    texts = [kinds[i % 4][: 1000 + 37 * i] for i in range(400)]  # ~100 chunks of 256 KB
    want = [e.ids for e in hf.encode_batch(texts)]
    assert ours.encode_batch(texts, num_threads=2).to_pylist() == want
    assert ours.encode_batch(texts, num_threads=1).to_pylist() == want


def test_str_input_errors_name_the_text(pair):
    ours, _ = pair
    big = ["x" * 300_000, "\u00e9" * 200_000]  # the bad text in a later chunk
    with pytest.raises(InvalidTypeError, match=r"text 3 holds a lone surrogate U\+DC00 at "
                                               r"character 5"):
        ours.encode_batch([*big, "ok", "\u65e5abcd\udc00"], num_threads=2)
    with pytest.raises(InvalidTypeError, match=r"text 2 is bytes, expected str"):
        ours.encode_batch([*big, b"x"], num_threads=2)
    assert ours.encode_batch((), num_threads=2).to_pylist() == []


def test_lone_surrogates_are_refused_as_hf_does(pair):
    ours, hf = pair
    with pytest.raises(TypeError):
        hf.encode("a\ud800b")
    with pytest.raises(InvalidTypeError, match=r"text 1 holds a lone surrogate U\+D800"):
        ours.encode_batch(["ok", "a\ud800b"])


def test_fork_child_encodes(pair):
    ours, _ = pair
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    want = ours.encode_batch(["fork safe?"] * 1000, num_threads=2).to_pylist()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        ok = ours.encode_batch(["fork safe?"] * 1000, num_threads=2).to_pylist() == want
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_parent_and_forked_child_encode_at_once():
    """The scratch regions a call keeps for the next are private memory: after a fork the
    parent and the child encode different texts at the same time and each gets its own ids
    (a shared mapping would let each write into the other's regions)."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    ours = Tokenizer.from_pretrained(data.qwen3_json())
    a = [f"parent text {i} " * 40 for i in range(400)]
    b = ["子 process text " * 30 + str(i) for i in range(400)]
    want_a = ours.encode_batch(a, num_threads=1).to_pylist()
    want_b = ours.encode_batch(b, num_threads=1).to_pylist()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        ok = all(ours.encode_batch(b, num_threads=1).to_pylist() == want_b for _ in range(30))
        os._exit(0 if ok else 1)
    ok = all(ours.encode_batch(a, num_threads=1).to_pylist() == want_a for _ in range(30))
    _, status = os.waitpid(pid, 0)
    assert ok and os.waitstatus_to_exitcode(status) == 0


def test_from_hf_objects():
    hf = tokenizers.Tokenizer.from_file(str(data.qwen3_json()))
    tok = Tokenizer.from_hf(hf)
    assert tok.encode("hi there").tolist() == hf.encode("hi there").ids
    from transformers import AutoTokenizer

    tf = AutoTokenizer.from_pretrained(str(data.qwen3_json().parent))
    assert Tokenizer.from_hf(tf).encode("hi there").tolist() == tf("hi there")["input_ids"]


def _edit(key, value):
    def f(doc):
        d = doc
        *path, last = key
        for k in path:
            d = d[k]
        d[last] = value
    return f


@pytest.mark.parametrize("edit, says", [
    (_edit(("model", "type"), "WordPiece"), "model of type 'WordPiece'"),
    (_edit(("normalizer",), {"type": "Lowercase"}), "normalizer 'Lowercase'"),
    (_edit(("pre_tokenizer", "pretokenizers", 0, "pattern", "Regex"), r"\w+"),
     "is not one fastaxo implements"),
    (lambda d: (d["added_tokens"][0].update(rstrip=True), d["added_tokens"].append(
        {**d["added_tokens"][1], "id": 151669, "content": "\n\n<x>"})), "starts with whitespace"),
    (_edit(("model", "byte_fallback"), True), "byte_fallback"),
])
def test_unsupported_tokenizers_say_why(tmp_path, edit, says):
    path = data.variant(data.qwen3_json(), tmp_path / "tokenizer.json", edit)
    assert says in Tokenizer.supported(path)
    assert says in Tokenizer.supported(tmp_path)
    with pytest.raises(UnsupportedTokenizerError, match=says.replace("(", r"\(")):
        Tokenizer.from_pretrained(path)
    assert Tokenizer.supported(data.qwen3_json()) is None


def _mini(doc):
    """``doc`` (a real tokenizer.json) with a vocabulary of the 256 byte characters and a few
    merges, and its added tokens renumbered after them (those its post-processor names and two
    more): every other part as the real file has it, and HF loads it in milliseconds."""
    from fastaxo.tokenizer._spec import byte_decoder

    vocab = {c: i for i, c in enumerate(byte_decoder())}
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "Ġ")]
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    listed = isinstance(doc["model"]["merges"][0], list)
    doc["model"]["vocab"] = vocab
    doc["model"]["merges"] = [list(m) if listed else " ".join(m) for m in merges]
    post = json.dumps(doc.get("post_processor"))
    keep = [t for k, t in enumerate(doc["added_tokens"])
            if k < 2 or json.dumps(t["content"]) in post]
    new = {t["content"]: len(vocab) + k for k, t in enumerate(keep)}
    doc["added_tokens"] = [{**t, "id": new[t["content"]]} for t in keep]

    def renumber(p):
        if isinstance(p, dict):
            for t in (p.get("special_tokens") or {}).values():
                t["ids"] = [new[x] for x in t["tokens"]]
            for q in p.get("processors") or []:
                renumber(q)
    renumber(doc.get("post_processor"))
    return doc


def _fields(obj, at=()):
    """The paths of the fields of a tokenizer.json's parts (not the vocabulary's entries)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield (*at, k)
            if k not in ("vocab", "merges"):
                yield from _fields(v, (*at, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:3]):
            yield from _fields(v, (*at, i))


@pytest.mark.parametrize("which", ["qwen3", "llama3", "gpt2"])
def test_a_field_taken_out_gives_hf_or_a_reason(tmp_path, which):
    """Each field of a real tokenizer.json's parts taken out in turn (a careless edit, a
    tool that drops defaults): where HF's loader refuses the file, fastaxo does not claim
    it (the ids of a file HF cannot load are no one's); where HF loads it and fastaxo
    accepts it, the ids and offsets are HF's. (A ByteLevel after the Split without
    ``use_regex`` runs GPT-2's regex too, in HF: fastaxo claimed it and gave other ids.)"""
    import copy

    src = {"qwen3": data.qwen3_json, "llama3": data.llama3_json, "gpt2": data.gpt2_json}[which]
    base = _mini(json.loads(src().read_text(encoding="utf-8")))
    texts = ["Hello world the thin", "  x\n\n  y\tz 12345", "def f(x):\n    return x",
             "$hello 'S caf\u00e9 \u6570\u636e"]
    texts.append(base["added_tokens"][0]["content"] + texts[0])
    claimed = refused = 0
    for path in _fields(base):
        if path[0] in ("model",) and path[-1] in ("vocab", "type"):
            continue
        doc = copy.deepcopy(base)
        at = doc
        for k in path[:-1]:
            at = at[k]
        del at[path[-1]]
        f = tmp_path / "tokenizer.json"
        f.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
        try:
            hf = tokenizers.Tokenizer.from_file(str(f))
        except Exception:  # noqa: BLE001 - any refusal of HF's loader
            hf = None
        why = Tokenizer.supported(f)
        if hf is None:
            assert why is not None, (path, "HF refuses the file, fastaxo claimed it")
            refused += 1
            continue
        if why is None:
            claimed += 1
            ours = Tokenizer.from_pretrained(f)
            for specials in (True, False):
                want = hf.encode_batch(texts, add_special_tokens=specials)
                ids, offs = ours.encode_batch_offsets(texts, add_special_tokens=specials)
                assert ids.to_pylist() == [e.ids for e in want], (path, specials)
                assert offs.to_pylist() == [[list(o) for o in e.offsets] for e in want], path
    assert claimed and refused


def _added(*tokens):
    def edit(doc):
        doc["added_tokens"] = [{"id": i, "content": c, "single_word": False, "lstrip": False,
                                "rstrip": False, "normalized": False, "special": True}
                               for i, c in tokens]
    return edit


def _vocab_entry(token, value):
    return lambda doc: doc["model"]["vocab"].__setitem__(token, value)


@pytest.mark.parametrize("edit, says", [
    (lambda d: d["model"].update(vocab={}, merges=[]), "expected a non-empty object"),
    (_vocab_entry("zzzz", -5), "has id -5"),
    (_vocab_entry("zzzz", 5), "two tokens share an id"),
    (_vocab_entry("zzzz", 2**40), "has id 1099511627776"),  # not a list of 2**40 tokens
    (_vocab_entry("zzzz", 60_000), "without gaps"),
    (_vocab_entry("zzzz", "7"), "has id '7'"),
    (lambda d: d["model"]["vocab"].__setitem__("zzzz", d["model"]["vocab"].pop("\u0120")),
     "no token for byte 0x20"),
    (lambda d: d["model"]["merges"].__setitem__(0, 5), "merge 5"),
    (lambda d: d.__setitem__("added_tokens", {"a": 1}), "expected a list of objects"),
    (_added((2**31, "<|x|>")), "an id from 0 to"),
    # HF gives added tokens ids of its own (the model's, else the next free one)
    (_added((50256, "<|endoftext|>"), (50257, "<|endoftext|>")), "listed twice"),
    (_added((50256, "<|endoftext|>"), (50257, "Hello")), "HF gives it 15496"),
    (_added((50256, "<|endoftext|>"), (60000, "<|x|>")), "HF gives it 50257"),
    (lambda d: d.__setitem__("post_processor", {"type": "TemplateProcessing", "single": [
        {"SpecialToken": {"id": "B", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [], "special_tokens": {"B": {"id": "B", "ids": ["x"], "tokens": ["B"]}}}),
     "is not one id"),
    (lambda d: d["post_processor"].update(trim_offsets=True), "trim_offsets"),
    (lambda d: d["pre_tokenizer"].pop("add_prefix_space"), "missing field 'add_prefix_space'"),
    (lambda d: d.__setitem__("normalizer", [1]), "normalizer: expected an object, got list"),
])
def test_hostile_tokenizer_files_are_refused_with_a_reason(tmp_path, edit, says):
    """Malformed or lying tokenizer.json files: one line saying what is wrong, never a crash,
    a huge allocation or ids other than HF's."""
    path = data.variant(data.gpt2_json(), tmp_path / "tokenizer.json", edit)
    assert says in (Tokenizer.supported(path) or "")
    with pytest.raises(UnsupportedTokenizerError, match=re.escape(says)):
        Tokenizer.from_pretrained(path)


def test_vocabularies_past_the_packed_merge_table_are_refused():
    """The C model packs a merge into 64 bits (two 21-bit ids, a 22-bit rank): a larger
    vocabulary is unsupported, with the reason, at both layers, never built with ids that
    would alias in the table."""
    import json

    import numpy as np

    from fastaxo import _tok
    from fastaxo.tokenizer import _spec

    doc = json.loads(data.gpt2_json().read_text(encoding="utf-8"))
    vocab = doc["model"]["vocab"]
    vocab.update((f"zz{i}", i) for i in range(len(vocab), 2**21 + 1))
    with pytest.raises(_spec.Unsupported, match="2,097,153 tokens"):
        _spec.build(doc)
    n = 2**21 + 1
    off = np.zeros(n + 1, np.int64)
    off[1:257] = np.arange(1, 257)
    off[257:] = 256
    none8, none32, zero = np.zeros(0, np.uint8), np.zeros(0, np.int32), np.zeros(1, np.int64)
    with pytest.raises(ValueError, match="more than 2\\^21 vocabulary ids"):
        _tok.BPEModel(np.arange(256, dtype=np.uint8), off, none32, none8, zero, none32,
                      none8, 0, False, False, -1)


def test_added_token_ids_follow_hf_not_only_the_file(tmp_path):
    """Added tokens the vocabulary already holds take its ids, listed in any order, as HF
    gives them."""
    path = data.variant(data.gpt2_json(), tmp_path / "tokenizer.json", _added(
        (50257, "<|b|>"), (50258, "<|a|>"), (50256, "<|endoftext|>"), (15496, "Hello")))
    pair = (Tokenizer.from_pretrained(path), tokenizers.Tokenizer.from_file(str(path)))
    _check(pair, ["<|a|><|b|> Hello<|endoftext|>x", "a <|b|>  Hello <|a|>", "HelloHello"])


@pytest.mark.parametrize("flags", [{"lstrip": True}, {"rstrip": True},
                                   {"lstrip": True, "rstrip": True}])
def test_added_token_strip_flags(tmp_path, flags):
    def edit(doc):
        for t in doc["added_tokens"]:
            if t["content"] in ("<|im_end|>", "<think>"):
                t.update(flags)
    path = data.variant(data.qwen3_json(), tmp_path / "tokenizer.json", edit)
    pair = (Tokenizer.from_pretrained(path), tokenizers.Tokenizer.from_file(str(path)))
    texts = ["a <|im_end|> b", "a\n\n<|im_end|>\n\nb", "  <think>  x", "<|im_end|>   ",
             "x\u3000<|im_end|>\u3000y", "<|im_end|><|im_end|>  <|im_end|>"]
    _check(pair, texts)


def test_nfc_texts(pair):
    """Text that is not NFC (decomposed accents, Hangul jamo, reordered marks)."""
    texts = [unicodedata.normalize("NFD", d[:2000]) for d in data.corpus("multi", 300_000, 7)]
    texts += ["e\u0301", "\u1100\u1161\u11a8", "a\u0323\u0301\u0302", "\u0301" * 50,
              "A\u030a\u0301 Å"]
    _check(pair, texts)


# -- character offsets: HF's Encoding.offsets ----------------------------------------------

def _check_offsets(pair, texts, add_special_tokens=False):
    """Every text's ids and character offsets equal HF's encode_batch (offsets in code
    points), id for id and span for span; the first difference is shown."""
    ours, hf = pair
    ids, offs = ours.encode_batch_offsets(texts, add_special_tokens=add_special_tokens)
    got = list(zip(ids.to_pylist(), offs.to_pylist(), strict=True))
    want = [(e.ids, e.offsets) for e in hf.encode_batch(list(texts),
                                                        add_special_tokens=add_special_tokens)]
    for i, ((gi, go), (wi, wo)) in enumerate(zip(got, want, strict=True)):
        go = [tuple(x) for x in go]
        if gi != wi or go != wo:
            j = next((k for k, (a, b) in enumerate(zip(zip(gi, go), zip(wi, wo))) if a != b),
                     min(len(gi), len(wi)))
            raise AssertionError(
                f"text {i} {texts[i][:80]!r} ({[f'{ord(c):04X}' for c in texts[i][:12]]}): at id "
                f"{j} ours {list(zip(gi, go))[max(0, j - 2):j + 3]} HF "
                f"{list(zip(wi, wo))[max(0, j - 2):j + 3]}")


# what NFC changes, and where HF's alignments are positional: composites, decomposed forms,
# reordered and split marks, singletons, Hangul jamo, characters NFC splits
NFC_PIECES = ["e\u0301", "a\u0301\u0323", "e\u0301\u0323", "a\u0323\u0301\u0302",
              "\u0301\u0f73", "\u0344", "\u0f73", "\u0f75", "\u212b", "\u2126", "\u0958",
              "\u1100\u1161\u11a8", "\u1100\u1161", "\uac00\u11a8", "\U0001d15e",
              "\u0301", "\u0316\u0301", "A\u030a\u0301", "\u0345\u0301\u05b0"]


def _offset_texts():
    nfd = st.text(st.characters(exclude_categories=("Cs",)), max_size=8).map(
        lambda t: unicodedata.normalize("NFD", t))
    piece = st.one_of(st.sampled_from(PIECES), st.sampled_from(NFC_PIECES), nfd,
                      st.text(st.characters(exclude_categories=("Cs",)), max_size=8))
    return st.lists(st.lists(piece, max_size=30).map("".join), min_size=1, max_size=20)


@settings(max_examples=int(os.environ.get("FASTAXO_HYPOTHESIS_EXAMPLES", "300")),
          deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                HealthCheck.too_slow])
@given(texts=_offset_texts(), specials=st.booleans())
def test_hypothesis_char_offsets(pair, texts, specials):
    _check_offsets(pair, texts, specials)


def test_char_offsets_of_real_and_nfd_text(pair):
    docs = list(data.corpus("multi", 300_000, seed=11))
    _check_offsets(pair, docs)
    _check_offsets(pair, [unicodedata.normalize("NFD", d) for d in docs], True)
    _check_offsets(pair, ["", " ", "🙂", "👩\u200d💻 x", "a<|im_end|>e\u0301<|im_end|>",
                          "e\u0301<|endoftext|>\u0301", *NFC_PIECES])


@pytest.mark.parametrize("pair", ["qwen3", "llama3", "gpt2"], indirect=True)
def test_char_offsets_of_every_normalizing_code_point(pair):
    """Each code point with a decomposition or a combining class, alone, after a letter and
    between marks (classes from Python's Unicode: only which inputs are tried)."""
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF
           and (unicodedata.decomposition(chr(c)) or unicodedata.combining(chr(c)))]
    probes = [f"{ch} a{ch}\u0301 e\u0301{ch}\u0316 \u1100{ch}" for ch in map(chr, cps)]
    _check_offsets(pair, ["\t".join(probes[i:i + 16]) for i in range(0, len(probes), 16)])


def test_char_offsets_with_strip_flags(tmp_path):
    """lstrip/rstrip added tokens cover the whitespace they swallow, in characters."""
    def edit(doc):
        for t in doc["added_tokens"]:
            if t["content"] in ("<|im_end|>", "<think>"):
                t.update({"lstrip": True, "rstrip": True})
    path = data.variant(data.qwen3_json(), tmp_path / "tokenizer.json", edit)
    pair = (Tokenizer.from_pretrained(path), tokenizers.Tokenizer.from_file(str(path)))
    _check_offsets(pair, ["e\u0301 \u3000<|im_end|>\u3000 e\u0301", "  <think>  \u212b x",
                          "\u0301<|im_end|>\u0301", "日本 <|im_end|> 語"])


def test_char_offsets_api(pair):
    ours, hf = pair
    text = "h\u00e9llo e\u0301 日本 🙂"
    ids, spans = ours.encode_offsets(text, unit="chars")
    e = hf.encode(text)
    assert ids.tolist() == e.ids and [tuple(x) for x in spans.tolist()] == e.offsets
    assert spans.dtype.name == "int64" and spans.shape == (len(e.ids), 2)
    # bytes stay the default of encode_offsets
    assert ours.encode_offsets(text)[1].tolist() == ours.encode_offsets(text, unit="bytes")[
        1].tolist()
    import pyarrow as pa
    empty = hf.encode("")  # the BOS alone, where the tokenizer has one
    for texts in ([text, ""], pa.array([text, ""]), pa.chunked_array([[text], [""]])):
        a, b = ours.encode_batch_offsets(texts, add_special_tokens=True, num_threads=2)
        assert a.to_pylist() == [e.ids, empty.ids]
        assert b.to_pylist() == [[list(x) for x in e.offsets], [list(x) for x in empty.offsets]]
        assert b.type == pa.list_(pa.list_(pa.int64(), 2))
    with pytest.raises(InvalidInputError, match="unit: expected 'bytes' or 'chars'"):
        ours.encode_batch_offsets([text], unit="codepoints")
    with pytest.raises(InvalidTypeError, match=r"text 0 holds a lone surrogate"):
        ours.encode_batch_offsets(["a\ud800b"])


def test_nfc_that_outgrows_the_text(pair):
    """Text NFC makes longer than its UTF-8 (U+0F73: 3 bytes, two code points of 3; U+1D160:
    4 bytes, three of 4) can give more ids than bytes: alone, and among texts that make
    several chunks (threads), ids and offsets are HF's."""
    texts = ["\u0f73", "\u0f73\u0301", "\U0001d160" * 50, "\u0f73" * 100_000,
             "x" * 300_000, "e\u0301", "\u0344" * 1000]
    _check(pair, texts)
    _check(pair, texts, add_special_tokens=False)
    _check_offsets(pair, texts)
    ours, hf = pair
    ids, spans = ours.encode_offsets("\u0f73" * 3, add_special_tokens=False)
    assert ids.tolist() == hf.encode("\u0f73" * 3, add_special_tokens=False).ids
    assert spans.tolist()[-1][1] == 9


def test_tokenizer_files_that_are_not_json(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{nope")
    assert "not JSON" in Tokenizer.supported(tmp_path)
    # what HF's loader refuses (a byte-order mark, UTF-16), and a file nested deeper than
    # Python's json reads: a reason, not a claim or a RecursionError
    raw = data.qwen3_json().read_bytes()
    for text, says in ((b"\xef\xbb\xbf" + raw, "byte-order mark"),
                       (raw.decode("utf-8").encode("utf-16"), "is not UTF-8 (byte 0xff at offset 0"),
                       (b'{"model": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nests too deep")):
        (tmp_path / "tokenizer.json").write_bytes(text)
        assert says in (Tokenizer.supported(tmp_path) or ""), says
        with pytest.raises(UnsupportedTokenizerError, match=re.escape(says)):
            Tokenizer.from_pretrained(tmp_path)
        with pytest.raises(Exception):  # noqa: B017 - HF's loader refuses each
            tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert "holds no tokenizer.json" in Tokenizer.supported(Path(tmp_path) / "missing")


def test_arrow_text_that_is_not_utf8_is_refused(pair):
    import pyarrow as pa

    from fastaxo.tokenizer._spec import byte_decoder

    ours, hf = pair
    decoder = byte_decoder()
    good = pa.array(["fine", "also fine"])
    for bad in (b"\xff", b"a\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"abc\xe2\x82"):
        arr = pa.Array.from_buffers(pa.string(), 3, [None, pa.py_buffer(
            __import__("numpy").array([0, 4, 4 + len(bad), 13 + len(bad)], "int32").tobytes()),
            pa.py_buffer(b"fine" + bad + b"also fine")])
        with pytest.raises(Exception, match="text 1 is not valid UTF-8"):
            ours.encode_batch(arr)
        # unchecked (text the caller vouches for): no error; the other texts' ids are the
        # same, and text 1's ids spell its bytes, each invalid byte a token of its own
        got = ours.encode_batch(arr, False, validate=False).to_pylist()
        assert [got[0], got[2]] == ours.encode_batch(["fine", "also fine"], False).to_pylist()
        assert b"".join(bytes(decoder[c] for c in hf.id_to_token(i)) for i in got[1]) == bad
    assert ours.encode_batch(good).to_pylist() == ours.encode_batch(["fine", "also fine"]
                                                                    ).to_pylist()


def test_token_to_id_and_properties(pair):
    ours, hf = pair
    for token in [*list(ours.added_tokens)[:5], "Ġthe", "the", "Ċ", "no-such-token-here"]:
        assert ours.token_to_id(token) == hf.token_to_id(token), token
    assert ours.vocab_size == hf.get_vocab_size(with_added_tokens=True)
    assert ours.pattern in ("llama3", "qwen2", "gpt2") and isinstance(ours.nfc, bool)
