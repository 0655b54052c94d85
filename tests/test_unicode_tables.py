"""The Unicode layer of the BPE encoder (csrc/fx_unicode.h) against HF tokenizers itself.

No expected data is stored: every case asks HF 0.23.3 (the release the encoder mirrors).
Classes: each class regex runs through HF's Split pre-tokenizer (Oniguruma) over one string of
every code point, and what it matched is compared with fx_uclass. NFC: HF's NFC normalizer
and fx_nfc on every code point alone and in contexts, every decomposition's decomposed form,
Hangul jamo, scrambled runs of marks and Hypothesis strings; many cases are joined by '\\n'
(a starter that never composes, so each case normalizes alone) into one call each.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import pytest
from conftest import REPO
from hypothesis import given
from hypothesis import strategies as st

tokenizers = pytest.importorskip("tokenizers")
ud = pytest.importorskip("unicodedata2")
tok = pytest.importorskip("fastaxo._tok")

HF_VERSION = "0.23.3"
if tokenizers.__version__ != HF_VERSION:
    pytest.skip(f"the tables mirror HF tokenizers {HF_VERSION}; {tokenizers.__version__} is "
                "installed", allow_module_level=True)
if ud.unidata_version != tok.UNICODE_VERSION:
    pytest.skip(f"unicodedata2 has Unicode {ud.unidata_version}, the tables "
                f"{tok.UNICODE_VERSION}", allow_module_level=True)

SEP = "\n"
SCALARS = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
HF_NFC = tokenizers.normalizers.NFC()
# every code point with normalization data in Unicode 16.0 (whatever HF's version knows)
MARKS = [c for c in SCALARS if ud.combining(chr(c))]


def canonical(c: int) -> tuple[int, ...]:
    d = ud.decomposition(chr(c))
    return () if not d or d.startswith("<") else tuple(int(x, 16) for x in d.split())


DECOMPOSABLE = [c for c in SCALARS if canonical(c)]
HANGUL_L = [chr(c) for c in range(0x1100, 0x1113)]
HANGUL_V = [chr(c) for c in range(0x1161, 0x1176)]
HANGUL_T = [chr(c) for c in range(0x11A6, 0x11C4)]  # with the edges U+11A6/7 and U+11C3


def hf_matches(pattern: str, text: str) -> bytearray:
    """1 for each code point of `text` that HF's Split matches with `pattern`."""
    split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(pattern), behavior="removed")
    hit = bytearray(b"\1") * len(text)
    for _piece, (a, b) in split.pre_tokenize_str(text):  # offsets in code points
        hit[a:b] = bytes(b - a)
    return hit


@pytest.fixture(scope="module")
def classes() -> bytes:
    return tok._uclass_all()


@pytest.mark.parametrize("pattern, bit", [
    (r"\p{L}", tok.UC_L), (r"\p{N}", tok.UC_N), (r"\s", tok.UC_WS), (r"\p{M}", tok.UC_M),
])
def test_class_of_every_code_point_is_onigurumas(classes, pattern, bit):
    hit = hf_matches(pattern, "".join(map(chr, SCALARS)))
    wrong = [f"U+{c:04X}" for c, h in zip(SCALARS, hit) if h != bool(classes[c] & bit)]
    assert wrong == [], f"{len(wrong)} code points differ from HF's {pattern}: {wrong[:20]}"


def test_word_class_of_every_code_point_is_hfs_single_word_test(classes):
    """UC_W is the \\w HF tests around a single_word added token (its regex crate's, not
    Oniguruma's): HF drops the token's match when a word character touches it. Every code point
    goes before the token in one text and after it in another, probes apart by a space; the
    matches HF keeps are the code points that are not word characters."""
    from tokenizers import AddedToken, Tokenizer, models

    hf = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    hf.add_tokens([AddedToken("<w>", single_word=True, normalized=False)])
    ours = [bool(classes[c] & tok.UC_W) for c in SCALARS]
    for before in (True, False):
        probes = [chr(c) + "<w>" if before else "<w>" + chr(c) for c in SCALARS]
        at = [i * 5 + (1 if before else 0) for i in range(len(SCALARS))]  # each probe's <w>
        e = hf.encode(" ".join(probes), add_special_tokens=False)
        kept = {a for i, (a, _) in zip(e.ids, e.offsets) if i == 1}
        theirs = [a not in kept for a in at]
        wrong = [f"U+{c:04X}" for c, x, y in zip(SCALARS, ours, theirs) if x != y]
        assert wrong == [], (f"{len(wrong)} code points {'before' if before else 'after'} the "
                             f"token differ from HF's \\w: {wrong[:20]}")
    assert sum(ours) > 100_000 and not ours[ord(" ")] and ours[ord("_")]


def test_crlf_and_surrogates(classes):
    assert [c for c in range(0x110000) if classes[c] & tok.UC_CRLF] == [0x0A, 0x0D]
    assert len(classes) == 0x110000
    assert set(classes[0xD800:0xE000]) == {0}


def check_nfc(cases: list[str], what: str) -> None:
    """fx_nfc == HF's NFC for every case (none holds SEP), all in one call each."""
    text = SEP.join(cases)
    ours, _ = tok._nfc_utf8(text.encode(), offsets=False)
    ours_s = ours.decode()
    hf = HF_NFC.normalize_str(text)
    if ours_s == hf:
        return
    mine, theirs = ours_s.split(SEP), hf.split(SEP)
    assert len(mine) == len(theirs) == len(cases)
    wrong = [(" ".join(f"{ord(ch):04X}" for ch in case), [f"{ord(ch):04X}" for ch in m],
              [f"{ord(ch):04X}" for ch in t])
             for case, m, t in zip(cases, mine, theirs) if m != t]
    pytest.fail(f"{what}: {len(wrong)} cases differ from HF (case, ours, HF): {wrong[:10]}")


@pytest.mark.parametrize("context", ["{}", "a{}\u0301", "{}\u0301\u0316"])
def test_nfc_of_every_code_point(context):
    """Alone: decompositions and exclusions. After 'a', before U+0301 (ccc 230, composes with
    'a'): whether the code point is a mark below 230, blocks, or composes. Before U+0301
    U+0316: as a starter, whether it composes after reordering."""
    check_nfc([context.format(chr(c)) for c in SCALARS if c != 0x0A], context)


def test_nfc_orders_every_mark_against_every_class():
    """Every mark of Unicode 16.0 (a starter to HF when newer than its data) on either side of
    one mark of each combining class: its class's place among all classes."""
    first = {}
    for c in MARKS:
        first.setdefault(ud.combining(chr(c)), chr(c))
    cases = [f"x{m}{chr(c)}" for m in first.values() for c in MARKS]
    cases += [f"x{chr(c)}{m}" for m in first.values() for c in MARKS]
    check_nfc(cases, "pairs of marks")


def test_nfc_of_every_decomposed_form():
    """Each canonical decomposition, fully and one level decomposed: composition pairs,
    exclusions, and what composes in HF's Unicode version."""
    cases = [ud.normalize("NFD", chr(c)) for c in DECOMPOSABLE]
    cases += ["".join(map(chr, canonical(c))) for c in DECOMPOSABLE]
    cases += [ud.normalize("NFD", chr(c)) + "\u0316" for c in DECOMPOSABLE]
    check_nfc(cases, "decomposed forms")


def test_nfc_of_hangul_jamo():
    cases = [lead + v + t for lead in HANGUL_L for v in HANGUL_V for t in ["", *HANGUL_T]]
    cases += [chr(s) + t for s in range(0xAC00, 0xD7A4, 28) for t in HANGUL_T]
    cases += [ud.normalize("NFD", chr(s)) for s in range(0xAC00, 0xD7A4)]
    cases += [lead + "\u0301" + v for lead in HANGUL_L for v in HANGUL_V]  # blocked
    check_nfc(cases, "hangul")


def test_nfc_of_scrambled_runs_of_marks():
    rng = random.Random(20261)
    marks = [chr(c) for c in MARKS]
    starters = ["a", "e", "o", "u", "\u0915", "\u05d0", "\u1100", "\u0627", "A", "\u03b1"]
    cases = []
    for _ in range(30000):
        run = [rng.choice(marks) for _ in range(rng.randint(2, 12))]
        cases.append(rng.choice(starters) + "".join(run))
        common = [chr(c) for c in (0x0301, 0x0300, 0x0308, 0x0316, 0x0323, 0x0327, 0x0345,
                                   0x0334, 0x05B0, 0x093C, 0x0E48, 0x3099)]
        cases.append(rng.choice(starters) + "".join(rng.choice(common) for _ in run))
    check_nfc(cases, "scrambled marks")


NORMALIZING = st.sampled_from(
    [chr(c) for c in MARKS] + [chr(c) for c in DECOMPOSABLE] + HANGUL_L + HANGUL_V + HANGUL_T
    + list("ae\n xA1") + ["\uac00", "\u0958", "\u00e9", "\u2126", "\U0001d15e"])


@given(st.lists(st.text(NORMALIZING, max_size=24), min_size=1, max_size=40))
def test_nfc_of_hypothesis_strings(parts):
    for s in parts:
        out, src = tok._nfc(s)
        assert out == HF_NFC.normalize_str(s), [f"{ord(c):04X}" for c in s]
        assert src == sorted(src) and all(0 <= i < len(s) for i in src)
        if tok._nfc_is_quick(s):
            assert out == s


def hf_alignment(s: str) -> list[tuple[int, int]]:
    """HF's NFC alignment of each code point of NFC(s): the span in s (code points) of the
    input its NormalizedString maps it back to (one split per normalized code point)."""
    p = tokenizers.PreTokenizedString(s)
    p.normalize(lambda n: n.nfc())
    p.split(lambda _, n: [n[k:k + 1] for k in range(len(str(n)))])
    return [o for _, o, _ in p.get_splits(offset_referential="original", offset_type="char")]


def fx_alignment(s: str) -> list[tuple[int, int]]:
    """The same from fx_nfc's src_of: each output code point covers its source code point."""
    out, src = tok._nfc(s)
    return [(i, i + 1) for i in src]


# characters whose alignment HF's transform walk makes positional: composites, reordered and
# split marks, singletons, Hangul
ALIGNING = st.sampled_from(
    ["e", "a", "A", "\u0301", "\u0323", "\u0316", "\u0302", "\u030a", "\u0345", "\u0344",
     "\u0f73", "\u0f75", "\u212b", "\u2126", "\u0958", "\u1100", "\u1161", "\u11a8",
     "\uac00", "\u00e9", "\u1ea1", "\U0001d15e", "\u0308", "\u0f71", " ", "x"])


@given(st.lists(st.one_of(st.text(ALIGNING, max_size=12), st.text(NORMALIZING, max_size=12)),
                min_size=1, max_size=30))
def test_nfc_offsets_are_hfs_alignments(parts):
    """src_of follows HF's alignments (unicode-normalization-alignments' changes through
    NormalizedString::transform), code point for code point."""
    for s in parts:
        assert fx_alignment(s) == hf_alignment(s), [f"{ord(c):04X}" for c in s]


@pytest.mark.parametrize("s, want", [
    ("e\u0301", [(0, 1)]),                      # a composite: its first source
    ("a\u0301\u0323", [(0, 1), (2, 3)]),        # reordered: the mark left takes a position
    ("e\u0301\u0323", [(0, 1), (2, 3)]),
    ("\u0301\u0f73", [(0, 1), (0, 1), (1, 2)]),  # a split character's second part: before
    ("\u0344", [(0, 1), (0, 1)]),
    ("x\u212bx", [(0, 1), (1, 2), (2, 3)]),       # a singleton
])
def test_nfc_offsets_known_cases(s, want):
    assert hf_alignment(s) == want
    assert fx_alignment(s) == want


def test_src_of_points_at_code_point_starts():
    s = "ae\u0301\u0316x\u0958\uac00\u11a8\u1100\u1161 \u00e9\u0301 \U0001d15e\u0300\u0316"
    b = s.encode()
    out, src = tok._nfc_utf8(b)
    assert len(src) == len(out) and src == sorted(src)
    assert all(b[i] & 0xC0 != 0x80 for i in src)
    text, cps = tok._nfc(s)
    assert text == HF_NFC.normalize_str(s)
    # a composite maps to its first code point; copied text to itself
    assert text[1] == "\u00e9" and cps[:3] == [0, 1, 3] and cps[3:5] == [4, 5]
    assert tok._nfc("abc") == ("abc", [0, 1, 2]) and tok._nfc("") == ("", [])


@pytest.mark.parametrize("unit", ["\u0301", "\u0316\u0301", "\u0334\u0345\u0301\u05b0",
                                  "\u0958", "\u1100\u1161\u11a8"])
def test_nfc_is_linear_in_long_runs(unit):
    """4x the text takes about 4x the CPU time (quadratic would be 16x); a ratio, the best of
    three, so that a busy machine or a sanitizer build does not decide it."""
    def cost(n_bytes):
        s = "a" + unit * (n_bytes // len(unit.encode()))
        b = s.encode()
        best = float("inf")
        for _ in range(3):
            t = time.process_time()
            out, _ = tok._nfc_utf8(b, offsets=False)
            best = min(best, time.process_time() - t)
        assert out.decode() == HF_NFC.normalize_str(s)
        return max(best, 1e-4)

    small, large = cost(250_000), cost(1_000_000)
    assert large < 10 * small, f"{unit!r}: 250 KB {small:.3f} s, 1 MB {large:.3f} s"


def test_quick_check():
    assert tok._nfc_is_quick("plain ASCII text, long enough for the word-at-a-time path.")
    assert tok._nfc_is_quick("\u00e9t\u00e9 \u4e2d\u6587 \uac00")
    assert not tok._nfc_is_quick("e\u0301")            # Maybe: may compose
    assert not tok._nfc_is_quick("a\u0301\u0316")      # marks out of order
    assert not tok._nfc_is_quick("\u0958")             # excluded from composition
    assert tok._nfc_is_quick("a\u0316\u0305")           # in order, neither composes
    for c in SCALARS[::97]:
        if tok._nfc_is_quick(chr(c)):
            assert HF_NFC.normalize_str(chr(c)) == chr(c)


def test_quick_check_finds_the_character_after_any_ascii_run():
    """The ASCII skip reads 16 and 8 bytes a step and finds the first non-ASCII byte of a word
    from its high bit: a character that is not quick, or a mark out of order, after an ASCII
    run of any length (and before one) is found at every offset."""
    for k in range(41):
        for m in (0, 1, 7, 8, 9, 17):
            for bad in ("e\u0301", "\u0958", "a\u0301\u0316", "\u00e9\u0301"):
                s = "x" * k + bad + "y" * m
                assert not tok._nfc_is_quick(s), (k, m, bad)
            good = "x" * k + "\u00e9\u4e2d" + "y" * m + "\uac00"
            assert tok._nfc_is_quick(good), (k, m)


def test_generated_tables_are_fresh():
    script = os.path.join(os.environ.get("FASTAXO_SOURCE_TREE", REPO), "scripts", "gen_unicode.py")
    run = subprocess.run([sys.executable, script, "--check"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
