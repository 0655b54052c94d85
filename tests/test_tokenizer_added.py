"""Added tokens with every flag HF has (single_word, normalized or not, lstrip, rstrip,
special) on fastaxo's encoder against HF tokenizers 0.23.3, id for id and span for span: Qwen3
(NFC), Llama 3.2 and GPT-2 with tokens added the ways users add them (``add_tokens`` of a
string: normalized; ``AddedToken(..., single_word=True)``; mixed flags), tokens that overlap
and are prefixes of each other, a normalized token whose NFC differs from its raw form, and
Hypothesis texts of words, digits, underscores, marks, ZWJ/ZWNJ, CJK, emoji, whitespace and
NFD around them. The rules (tokenizers' added_vocabulary.rs, checked here):

- two passes: the tokens that are not normalized on the raw text, then the normalized ones on
  each piece left, after the normalizer (their pattern: their normalized content);
- leftmost-longest within a pass; a single_word match with a word character (the regex
  crate's \\w) just before or after it, in the text of its pass, is dropped and the search
  resumes after it;
- lstrip/rstrip swallow whitespace within the pass's text, lstrip not past the last token.
"""

from __future__ import annotations

import os
import sys
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
import tokenizer_data as data  # noqa: E402
import tokenizers  # noqa: E402
from tokenizers import AddedToken  # noqa: E402

from fastaxo.tokenizer import Tokenizer, UnsupportedTokenizerError  # noqa: E402

# every kind of token: normalized (add_tokens' default) or not, single_word, strip flags;
# "ab" a prefix of "abc", "abc" overlapping "bcd" (one pass), "abcd" in the other pass;
# "xy1" and "wor" (single_word) overlapping "y12" and "ore" (one pass each);
# "\u00e9te\u0301" NFC-normalizes to "\u00e9t\u00e9" (Qwen matches that)
TOKENS = [
    "<custom>", "word",
    AddedToken("<sw>", single_word=True, normalized=False),
    AddedToken("ab", single_word=True, normalized=False),
    AddedToken("abc", normalized=False),
    AddedToken("bcd", normalized=False, special=True),
    AddedToken("abcd", normalized=True, single_word=True),
    AddedToken("wor", normalized=True, single_word=True), "ore",
    AddedToken("xy1", single_word=True, normalized=False), AddedToken("y12", normalized=False),
    AddedToken("\u00e9te\u0301", normalized=True),
    AddedToken("_x1", single_word=True, lstrip=True, rstrip=True),
    AddedToken("\u65e5\u672c", single_word=True, normalized=False),
    AddedToken("\U0001f642x", single_word=True),
    AddedToken("end", lstrip=True),
    AddedToken("<r>", rstrip=True, normalized=False),
    AddedToken("o\u0308", normalized=True, single_word=True),
]
RAW = [t if isinstance(t, str) else t.content for t in TOKENS]

# what may touch a token: word characters of every kind (letters, Lt, Nd of two scripts, Nl,
# Pc, marks, ZWJ and ZWNJ, an enclosed letter that is Other_Alphabetic) and what is not (No,
# symbols, punctuation, whitespace of several kinds)
AROUND = ["a", "Z", "\u01c5", "1", "\u0663", "\u216b", "_", "\u0301", "\u0308", "\u200d",
          "\u200c", "\u24b6", "\u2460", "\U0001f642", "\U0001f469\u200d\U0001f4bb", "\u65e5",
          "\uac00", "!", "<", ">", "'s", " ", "  ", "\n", "\t", "\u3000", "\u00a0", "e\u0301",
          "\u00e9", "\u0915\u094d", "\u0e01\u0e49"]


def _build(path):
    hf = tokenizers.Tokenizer.from_file(str(path))
    hf.add_tokens(TOKENS)
    return Tokenizer.from_hf(hf), hf


@pytest.fixture(scope="module", params=["qwen3", "llama3", "gpt2"])
def pair(request):
    path = {"qwen3": data.qwen3_json, "llama3": data.llama3_json,
            "gpt2": data.gpt2_json}[request.param]()
    return _build(path)


def _check(pair, texts, add_special_tokens=True):
    """Ids and character offsets equal HF's, text for text; byte spans tile each text and,
    for added tokens where the normalizer leaves the text alone, are HF's offsets in bytes."""
    ours, hf = pair
    added = set(ours.added_tokens.values())
    want = hf.encode_batch(list(texts), add_special_tokens=add_special_tokens)
    ids, offs = ours.encode_batch_offsets(texts, add_special_tokens=add_special_tokens,
                                          unit="chars")
    _, spans = ours.encode_batch_offsets(texts, add_special_tokens=add_special_tokens,
                                         unit="bytes")
    for i, (text, e, got, got_off, span) in enumerate(zip(
            texts, want, ids.to_pylist(), offs.to_pylist(), spans.to_pylist(), strict=True)):
        assert got == e.ids, (i, text, _diff(hf, got, e.ids))
        assert [tuple(x) for x in got_off] == e.offsets, (i, text)
        raw = text.encode("utf-8")
        real = [s for s in span if s[1] > s[0]]
        assert [s[1] for s in real[:-1]] == [s[0] for s in real[1:]], (i, text)
        assert not real or (real[0][0], real[-1][1]) == (0, len(raw)), (i, text)
        # an added token's byte span is its characters, as HF's offsets (whole characters:
        # a token never holds part of one)
        for k, (a, b) in enumerate(span):
            if got[k] in added and (not ours.nfc or unicodedata.is_normalized("NFC", text)):
                assert (len(raw[:a].decode()), len(raw[:b].decode())) == e.offsets[k], (i, text)


def _diff(hf, got, want):
    j = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    return (j, got[max(0, j - 3):j + 4], want[max(0, j - 3):j + 4],
            hf.decode(want[max(0, j - 3):j + 4], skip_special_tokens=False))


# -- fixed cases --------------------------------------------------------------------------

def test_single_word_tokens_at_the_edges_and_between_word_characters(pair):
    """Each single_word token alone, at the start and end of the text, and with every kind of
    character on either side of it."""
    sw = [c for t, c in zip(TOKENS, RAW, strict=True)
          if isinstance(t, AddedToken) and t.single_word]
    texts = [t for c in sw for t in (c, f"{c} x", f"x {c}", f"{c}{c}", f"{c} {c}")]
    texts += [f"{a}{c}{b}" for c in sw for a in AROUND for b in ("", " ", "a", "\u0301")]
    texts += [f"{b}{c}{a}" for c in sw for a in AROUND for b in ("", " ", "_", "\u200d")]
    _check(pair, texts)
    _check(pair, texts, add_special_tokens=False)


def test_a_dropped_match_resumes_after_itself(pair):
    """HF's matcher resumes after a single_word match it drops: "y12" inside a dropped "xy1"
    (and "ore" inside "wor") is never seen; "abc" wins over its prefix "ab" (leftmost-longest
    first, single_word only then)."""
    _check(pair, ["axy12", "xy12", "xy1 2", "a xy1", "xwore", "wore", "wor e", "ore",
                  "xabcd", "abcd", "abc d", " abc", "xabc bcd", "ab bcd", "ab_bcd", "abab",
                  "ab", "xab", "ab\u0301", "ab\u200dcd", "\u24b6ab", "\u2460ab", "wor word",
                  "words", "wor_", "abcdabcd", "x abcd!", "abcd\u0663"])


def test_normalized_tokens_match_the_normalized_text(pair):
    """The normalized pass sees NFC text (Qwen): a token written decomposed matches its
    composed form and the reverse; raw-pass tokens win where both could match; word
    characters are judged in the text of each pass (a raw token's neighbour does not exist
    for the normalized pass)."""
    ete = "\u00e9te\u0301"
    texts = [ete, unicodedata.normalize("NFC", ete), unicodedata.normalize("NFD", ete),
             f"x{ete}y", "o\u0308", "\u00f6", "o\u0308\u0301", "\u00f6x", "x \u00f6 y",
             "abcabcd", "<sw>word", "<r>   word", "abcword", "bcdabcd", "wordabc", "endend",
             "a  end", "<custom>  end  ", "<sw><sw>", "\u65e5\u672c\u65e5\u672c",
             "\u65e5\u672c \u65e5\u672c", "\U0001f642x \U0001f642xx", " _x1 ", "a _x1 b",
             "__x1", "\u3000_x1\u3000\u3000", "<r>\u3000 x", "<r>end", "x<r>  _x1  y"]
    _check(pair, texts)
    _check(pair, [unicodedata.normalize("NFD", t) for t in texts], add_special_tokens=False)


# -- Hypothesis ---------------------------------------------------------------------------

def _texts():
    piece = st.one_of(st.sampled_from(RAW), st.sampled_from(AROUND),
                      st.sampled_from(RAW).map(lambda t: unicodedata.normalize("NFD", t)),
                      st.text(st.characters(exclude_categories=("Cs",)), max_size=4))
    text = st.lists(piece, max_size=16).map("".join)
    return st.lists(st.one_of(text, text.map(lambda t: unicodedata.normalize("NFD", t))),
                    min_size=1, max_size=12)


@settings(max_examples=int(os.environ.get("FASTAXO_HYPOTHESIS_EXAMPLES", "300")),
          deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                HealthCheck.too_slow])
@given(texts=_texts(), specials=st.booleans())
def test_hypothesis_texts_around_added_tokens(pair, texts, specials):
    _check(pair, texts, specials)


@pytest.fixture(scope="module")
def small_nfc() -> str:
    """A small byte-level BPE tokenizer with Qwen's NFC normalizer (GPT-2's pre-tokenizer, a
    few merges): quick to build once per example."""
    from tokenizers import decoders, models, normalizers, pre_tokenizers

    from fastaxo.tokenizer._spec import byte_decoder

    alphabet = sorted(byte_decoder(), key=byte_decoder().__getitem__)
    vocab = {c: i for i, c in enumerate(alphabet)}
    merges = [("a", "b"), ("ab", "c"), ("b", "c"), ("\u0120", "a"), ("1", "1")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    tok = tokenizers.Tokenizer(models.BPE(vocab, merges))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken("<|s|>", special=True)])
    assert Tokenizer.supported(tok) is None
    return tok.to_str()


@settings(max_examples=int(os.environ.get("FASTAXO_HYPOTHESIS_EXAMPLES", "300")),
          deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                HealthCheck.function_scoped_fixture])
@given(flags=st.lists(st.tuples(st.sampled_from(["ab", "abc", "b", "bc", "c1", "_", "\u00e9",
                                                 "e\u0301", "x\u0308", "\u65e5"]),
                                st.booleans(), st.booleans(), st.booleans(), st.booleans()),
                      min_size=1, max_size=6, unique_by=lambda f: f[0]),
       texts=st.lists(st.lists(st.sampled_from(["ab", "abc", "b", "c", "1", "_", "\u00e9",
                                                "e\u0301", "\u0301", "x", "\u0308", "\u65e5",
                                                " ", "  ", "\n", "\u200d", "!", "<|s|>"]),
                               max_size=12).map("".join), min_size=1, max_size=8))
def test_hypothesis_flags_of_overlapping_tokens(small_nfc, flags, texts):
    """Random flags on tokens that overlap, nest and compose: HF's ids and offsets, or (for
    two normalized tokens equal after NFC: HF picks one at random) a refusal saying so."""
    hf = tokenizers.Tokenizer.from_str(small_nfc)
    hf.add_tokens([AddedToken(c, single_word=s, lstrip=lt, rstrip=rt, normalized=n)
                   for c, s, lt, rt, n in flags])
    why = Tokenizer.supported(hf)
    if why is not None:
        assert "HF picks one of them at random" in why
        return
    _check((Tokenizer.from_hf(hf), hf), texts)


# -- what stays refused ---------------------------------------------------------------------

def test_tokens_equal_after_nfc_are_refused():
    """Two normalized tokens whose NFC is the same text: HF builds its matcher from a hash
    map, and which one wins changes from process to process."""
    hf = tokenizers.Tokenizer.from_file(str(data.qwen3_json()))
    hf.add_tokens([AddedToken("o\u0308x", normalized=True), AddedToken("\u00f6x", normalized=True)])
    why = Tokenizer.supported(hf)
    assert why is not None and "both match '\u00f6x'" in why
    with pytest.raises(UnsupportedTokenizerError, match="HF picks one of them at random"):
        Tokenizer.from_hf(hf)
    # without a normalizer they are two texts: supported
    gpt2 = tokenizers.Tokenizer.from_file(str(data.gpt2_json()))
    gpt2.add_tokens([AddedToken("o\u0308x", normalized=True), AddedToken("\u00f6x", normalized=True)])
    _check((Tokenizer.from_hf(gpt2), gpt2), ["o\u0308x \u00f6x", "\u00f6xo\u0308x"])


def test_rstrip_with_a_token_that_starts_with_whitespace():
    """In one pass, HF's next match can start inside the whitespace an rstrip token swallowed
    (overlapping splits; with lstrip, a crash): refused. In different passes it cannot."""
    hf = tokenizers.Tokenizer.from_file(str(data.gpt2_json()))
    hf.add_tokens([AddedToken("<a>", rstrip=True, normalized=False),
                   AddedToken("  b", normalized=False)])
    assert hf.encode("<a>  b").offsets == [(0, 5), (3, 6)]  # HF's overlap
    why = Tokenizer.supported(hf)
    assert why is not None and "starts with whitespace" in why
    other = tokenizers.Tokenizer.from_file(str(data.gpt2_json()))
    other.add_tokens([AddedToken("<a>", rstrip=True, normalized=False),
                      AddedToken("  b", normalized=True)])
    _check((Tokenizer.from_hf(other), other), ["<a>  b", "<a>   b", "x  b<a>  b", "  b<a>"])


def test_the_spec_builders_whitespace_is_the_encoders():
    """The whitespace the refusal above tests is fx_uclass's (HF's \\s, White_Space)."""
    from fastaxo import _tok
    from fastaxo.tokenizer._spec import WHITE_SPACE

    classes = _tok._uclass_all()
    assert {chr(c) for c in range(0x110000) if classes[c] & _tok.UC_WS} == WHITE_SPACE
