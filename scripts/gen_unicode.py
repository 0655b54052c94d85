"""Generate csrc/fx_unicode_tables.h: the Unicode data of the BPE encoder (csrc/fx_unicode.c).

    python scripts/gen_unicode.py            # rewrite csrc/fx_unicode_tables.h
    python scripts/gen_unicode.py --check    # exit 1 when the committed file differs

The encoder must give the ids HF tokenizers 0.23.3 gives, so the data follows what that
release does, which is two different Unicode versions:

- Code point classes (\\p{L}, \\p{N}, \\p{M}, \\s) for the pre-tokenizer regexes: HF runs them
  on Oniguruma 6.9.10 (the onig crate), whose tables are Unicode 16.0. They come from
  ``unicodedata2`` pinned at 16.0.0 (this script refuses another version; Python 3.11's own
  ``unicodedata`` is 14.0 and classifies about 120 code points differently). ``\\s`` is the
  White_Space property (25 code points, WHITE_SPACE below; unicodedata has no property list).
- The word class (\\w) of HF's single_word added tokens: HF tests the character on each side
  of such a token with the regex crate's ``\\w`` (regex-syntax 0.8.11 in 0.23.3, whose tables
  are Unicode 16.0 too): Alphabetic, Mark, Decimal_Number, Connector_Punctuation and
  Join_Control (UTS #18 annex C). Alphabetic is L, Nl and Other_Alphabetic; outside the
  general categories already in the class, Other_Alphabetic (PropList.txt) holds only the
  enclosed Latin letters in OTHER_ALPHABETIC_SO below, and Join_Control is ZWNJ and ZWJ.
- NFC (the Qwen-style normalizer): HF runs the crate unicode-normalization-alignments 0.1.12,
  whose tables are Unicode 9.0.0 (its UNICODE_VERSION; tests/test_unicode_tables.py found it
  first: 120 marks of later versions are starters to HF). Normalization data of an assigned
  character never changes (Unicode's stability policy), so Unicode 9.0's NFC is 16.0's with
  every character assigned after 9.0 treated as unassigned (ccc 0, no decomposition, never
  composed). AFTER_9_0 lists those that have normalization data in 16.0 (a nonzero combining
  class or a canonical decomposition), from DerivedAge.txt; the script checks that each has
  such data, and the exhaustive test checks that nothing is missing. Should HF move to newer
  NFC data, AFTER_9_0 shrinks; from Unicode 16.0 on, mind fx_nfc's segment rule (asserted
  below): Tulu-Tigalari composites such as U+113C5 decompose to begin with a character that
  composes backward, so a Yes starter is no longer always a safe cut.

How the tables were checked: tests/test_unicode_tables.py compares them with HF itself, with
no stored expectations: the class of every code point (surrogates aside) against HF's Split
pre-tokenizer running each class regex over all code points at once, the word class against
an HF tokenizer with a single_word added token placed before and after every code point, and
fx_nfc against HF's
NFC normalizer on every code point alone, after 'a' and before U+0301, before marks of two
classes, every canonical decomposition's decomposed form, Hangul jamo sequences, scrambled
runs of marks and Hypothesis strings. 0 differences.

Layout (csrc/fx_unicode.h reads it):
- classes: one byte per code point below CLASS_LIMIT through a two-stage table (index of
  128-entry blocks, then the deduplicated blocks); above the limit only the variation
  selectors U+E0100..U+E01EF (\\p{M}, \\w) have a class, tested by range. Bits: L 1, N 2,
  WS 4, M 8, CRLF 16 (with WS), W 32 (\\w: with L, M, most of N, and a few others).
- NFC: one byte per code point below NFC_LIMIT, two-stage likewise: bits 7..2 the rank of the
  canonical combining class (order-preserving, 0 = ccc 0: reordering and blocking only compare
  classes), bit 0 a canonical decomposition, bit 1 NFC_QC is not Yes (with bit 0: No, else
  Maybe). Decompositions (one level; the C code recurses) and primary composites are one
  sorted uint64 array, cp << 42 | first << 21 | second, and an index of the composites sorted
  by (first, second). Hangul syllables are algorithmic (they are not in the arrays).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

UNICODEDATA2_VERSION = "16.0.0"
NFC_VERSION = "9.0.0"
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "csrc" / "fx_unicode_tables.h"
COMMAND = "python scripts/gen_unicode.py"

MAX_CP = 0x110000
L, N, WS, M, CRLF = 1, 2, 4, 8, 16  # and W (below)
# PropList.txt White_Space (unchanged since Unicode 6.3 dropped U+180E); what \s matches in HF.
WHITE_SPACE = (*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028,
               0x2029, 0x202F, 0x205F, 0x3000)
# PropList.txt 16.0 Other_Alphabetic ranges of general category So (the rest are marks) and
# Join_Control: with L, M, Nd, Nl and Pc, the regex crate's \w (HF's single_word test).
OTHER_ALPHABETIC_SO = ((0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169),
                       (0x1F170, 0x1F189))
JOIN_CONTROL = (0x200C, 0x200D)
W = 32
CLASS_SHIFT = 7
NFC_SHIFT = 6
CLASS_TAIL = (0xE0100, 0xE01EF, M | W)  # variation selectors supplement, the only class above

# Code points with a nonzero ccc or a canonical decomposition in Unicode 16.0 that were
# assigned after 9.0 (DerivedAge.txt), by the version that added them. Only whether a code
# point is here matters; a miss shows as a difference in tests/test_unicode_tables.py.
AFTER_9_0 = {
    "10.0": [(0x0D3B, 0x0D3C), (0x1DF6, 0x1DF9), (0x11A34, 0x11A34), (0x11A47, 0x11A47),
             (0x11A99, 0x11A99), (0x11D42, 0x11D42), (0x11D44, 0x11D45)],
    "11.0": [(0x07FD, 0x07FD), (0x08D3, 0x08D3), (0x09FE, 0x09FE), (0x10D24, 0x10D27),
             (0x10F46, 0x10F50), (0x1133B, 0x1133B), (0x1145E, 0x1145E), (0x11839, 0x1183A),
             (0x11D97, 0x11D97)],
    "12.0": [(0x0EBA, 0x0EBA), (0x119E0, 0x119E0), (0x1E130, 0x1E136), (0x1E2EC, 0x1E2EF)],
    "13.0": [(0x1ABF, 0x1AC0), (0xA82C, 0xA82C), (0x10EAB, 0x10EAC), (0x11938, 0x11938),
             (0x1193D, 0x1193E), (0x11943, 0x11943), (0x16FF0, 0x16FF1)],
    "14.0": [(0x0898, 0x089F), (0x08CA, 0x08D2),
             (0x0C3C, 0x0C3C), (0x1715, 0x1715), (0x1AC1, 0x1ACE), (0x1DFA, 0x1DFA),
             (0x10F82, 0x10F85), (0x11070, 0x11070), (0x1E2AE, 0x1E2AE)],
    "15.0": [(0x10EFD, 0x10EFF), (0x11F41, 0x11F42), (0x1E08F, 0x1E08F),
             (0x1E4EC, 0x1E4EF)],
    "16.0": [(0x0897, 0x0897), (0x105C9, 0x105C9), (0x105E4, 0x105E4), (0x10D69, 0x10D6D),
             (0x11383, 0x11383), (0x11385, 0x11385), (0x1138E, 0x1138E), (0x11391, 0x11391),
             (0x113C5, 0x113C5), (0x113C7, 0x113C8), (0x113CE, 0x113D0), (0x16121, 0x16128),
             (0x1612F, 0x1612F), (0x16D68, 0x16D6A), (0x1E5EE, 0x1E5EF)],
}

HANGUL_S, HANGUL_S_COUNT = 0xAC00, 11172
HANGUL_V, HANGUL_V_COUNT = 0x1161, 21
HANGUL_T, HANGUL_T_COUNT = 0x11A7, 28  # T index 0 (U+11A7 itself) is "no trailing consonant"

UNICODE_LICENSE = """\
UNICODE LICENSE V3

COPYRIGHT AND PERMISSION NOTICE

Copyright \u00a9 1991-2024 Unicode, Inc.

NOTICE TO USER: Carefully read the following legal agreement. BY
DOWNLOADING, INSTALLING, COPYING OR OTHERWISE USING DATA FILES, AND/OR
SOFTWARE, YOU UNEQUIVOCALLY ACCEPT, AND AGREE TO BE BOUND BY, ALL OF THE
TERMS AND CONDITIONS OF THIS AGREEMENT. IF YOU DO NOT AGREE, DO NOT
DOWNLOAD, INSTALL, COPY, DISTRIBUTE OR USE THE DATA FILES OR SOFTWARE.

Permission is hereby granted, free of charge, to any person obtaining a
copy of data files and any associated documentation (the "Data Files") or
software and any associated documentation (the "Software") to deal in the
Data Files or Software without restriction, including without limitation
the rights to use, copy, modify, merge, publish, distribute, and/or sell
copies of the Data Files or Software, and to permit persons to whom the
Data Files or Software are furnished to do so, provided that either (a)
this copyright and permission notice appear with all copies of the Data
Files or Software, or (b) this copyright and permission notice appear in
associated Documentation.

THE DATA FILES AND SOFTWARE ARE PROVIDED "AS IS", WITHOUT WARRANTY OF ANY
KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF
MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT OF
THIRD PARTY RIGHTS.

IN NO EVENT SHALL THE COPYRIGHT HOLDER OR HOLDERS INCLUDED IN THIS NOTICE
BE LIABLE FOR ANY CLAIM, OR ANY SPECIAL INDIRECT OR CONSEQUENTIAL DAMAGES,
OR ANY DAMAGES WHATSOEVER RESULTING FROM LOSS OF USE, DATA OR PROFITS,
WHETHER IN AN ACTION OF CONTRACT, NEGLIGENCE OR OTHER TORTIOUS ACTION,
ARISING OUT OF OR IN CONNECTION WITH THE USE OR PERFORMANCE OF THE DATA
FILES OR SOFTWARE.

Except as contained in this notice, the name of a copyright holder shall
not be used in advertising or otherwise to promote the sale, use or other
dealings in these Data Files or Software without prior written
authorization of the copyright holder.
"""


def load_unicodedata():
    try:
        import unicodedata2
    except ImportError:
        sys.exit(f"gen_unicode: needs unicodedata2=={UNICODEDATA2_VERSION} (pip install it)")
    if unicodedata2.unidata_version != UNICODEDATA2_VERSION:
        sys.exit(f"gen_unicode: unicodedata2 has Unicode {unicodedata2.unidata_version}; these "
                 f"tables are pinned to {UNICODEDATA2_VERSION} (HF's Oniguruma): "
                 f"pip install unicodedata2=={UNICODEDATA2_VERSION}")
    return unicodedata2


def code_points():
    """Every scalar value (surrogates have no data: class 0, NFC inert)."""
    return (c for c in range(MAX_CP) if not 0xD800 <= c < 0xE000)


def classes(ud) -> bytearray:
    ws = set(WHITE_SPACE)
    word = {*JOIN_CONTROL, *(c for a, b in OTHER_ALPHABETIC_SO for c in range(a, b + 1))}
    for a, b in OTHER_ALPHABETIC_SO:
        assert {ud.category(chr(c)) for c in range(a, b + 1)} == {"So"}, hex(a)
    out = bytearray(MAX_CP)
    for c in code_points():
        cat = ud.category(chr(c))
        v = {"L": L, "N": N, "M": M}.get(cat[0], 0)
        if c in ws:
            assert v == 0, hex(c)
            v = WS | (CRLF if c in (0x0A, 0x0D) else 0)
        if cat[0] in "LM" or cat in ("Nd", "Nl", "Pc") or c in word:
            v |= W
        out[c] = v
    return out


def canonical_decomposition(ud, c: int) -> tuple[int, ...]:
    d = ud.decomposition(chr(c))
    if not d or d.startswith("<"):
        return ()
    return tuple(int(x, 16) for x in d.split())


def nfc_data(ud):
    """(NFC byte per code point, one-level decompositions, primary composites, the length of
    the longest full decomposition)."""
    newer = {c for ranges in AFTER_9_0.values() for a, b in ranges for c in range(a, b + 1)}
    for c in sorted(newer):
        assert ud.combining(chr(c)) or canonical_decomposition(ud, c), hex(c)
    ccc = {c: 0 if c in newer else ud.combining(chr(c)) for c in code_points()}
    decomp = {}
    for c in code_points():
        d = () if c in newer else canonical_decomposition(ud, c)
        if d and not HANGUL_S <= c < HANGUL_S + HANGUL_S_COUNT:
            assert len(d) in (1, 2) and not newer.intersection(d), hex(c)
            decomp[c] = d
    # A primary composite is what NFC gives back from itself: not a singleton, not a
    # composition exclusion, not a non-starter decomposition (stable for assigned characters).
    primary = {c: d for c, d in decomp.items()
               if len(d) == 2 and ud.normalize("NFC", chr(c)) == chr(c)}
    seconds = {d[1] for d in primary.values()}
    seconds.update(range(HANGUL_V, HANGUL_V + HANGUL_V_COUNT))
    seconds.update(range(HANGUL_T + 1, HANGUL_T + HANGUL_T_COUNT))
    ranks = sorted(set(ccc.values()))
    assert len(ranks) <= 64
    rank = {v: i for i, v in enumerate(ranks)}

    def full(c: int) -> tuple[int, ...]:
        return tuple(x for d in decomp[c] for x in full(d)) if c in decomp else (c,)

    table = bytearray(MAX_CP)
    for c, k in ccc.items():
        has = c in decomp or HANGUL_S <= c < HANGUL_S + HANGUL_S_COUNT
        no = c in decomp and c not in primary
        maybe = c in seconds
        assert not (maybe and has), hex(c)  # a second element never decomposes
        table[c] = rank[k] << 2 | (2 if no or maybe else 0) | (1 if has else 0)
        if k == 0 and c in primary:
            # fx_nfc cuts the text before each Yes starter: its decomposition must start with
            # a starter that never composes backward, or a cut there would split a composition
            f = full(c)[0]
            assert ccc[f] == 0 and f not in seconds, hex(c)
    longest = max(3, *(len(full(c)) for c in decomp))  # 3: a Hangul LVT syllable
    return table, decomp, primary, longest


def two_stage(data: bytes, shift: int, limit: int) -> tuple[list[int], list[bytes]]:
    size = 1 << shift
    blocks: dict[bytes, int] = {}
    index = [blocks.setdefault(bytes(data[i:i + size]), len(blocks)) for i in range(0, limit, size)]
    assert len(blocks) <= 256, "stage-1 entries are bytes"
    return index, list(blocks)


def limit_of(data: bytes, shift: int, skip: range = range(0)) -> int:
    """The first multiple of the block size past the last nonzero entry outside `skip`."""
    last = max(c for c in range(MAX_CP) if data[c] and c not in skip)
    return ((last >> shift) + 1) << shift


def c_array(ctype: str, name: str, values, per_line: int, fmt: str) -> str:
    values = list(values)
    rows = [", ".join(fmt.format(v) for v in values[i:i + per_line])
            for i in range(0, len(values), per_line)]
    body = ",\n".join("    " + r for r in rows)
    return f"const {ctype} {name}[{len(values)}] = {{\n{body}\n}};\n"


def render() -> str:
    ud = load_unicodedata()
    cls = classes(ud)
    tail_lo, tail_hi, tail_val = CLASS_TAIL
    assert all(cls[c] == tail_val for c in range(tail_lo, tail_hi + 1))
    class_limit = limit_of(cls, CLASS_SHIFT, range(tail_lo, tail_hi + 1))
    assert class_limit <= tail_lo
    c_index, c_blocks = two_stage(cls, CLASS_SHIFT, class_limit)

    nfc, decomp, primary, longest = nfc_data(ud)
    nfc_limit = limit_of(nfc, NFC_SHIFT)
    nfc_quick = min(c for c in range(MAX_CP) if nfc[c] & ~1)
    n_index, n_blocks = two_stage(nfc, NFC_SHIFT, nfc_limit)
    pairs = sorted(decomp)
    packed = [c << 42 | decomp[c][0] << 21 | (decomp[c] + (0,))[1] for c in pairs]
    at = {c: i for i, c in enumerate(pairs)}
    comp = sorted((primary[c], at[c]) for c in primary)
    assert len(pairs) < 65536

    size = (len(c_index) + sum(map(len, c_blocks)) + len(n_index) + sum(map(len, n_blocks))
            + 8 * len(packed) + 2 * len(comp))
    licence = "".join(f" * {line}".rstrip() + "\n" for line in UNICODE_LICENSE.splitlines())
    out = [f"""\
/* fx_unicode_tables.h: GENERATED by `{COMMAND}` -- do not edit.
 *
 * Code point classes: Unicode {UNICODEDATA2_VERSION} (unicodedata2 {UNICODEDATA2_VERSION}), as
 * HF tokenizers 0.23.3's Oniguruma and regex crate (\\w). NFC: Unicode {NFC_VERSION}, as HF's
 * unicode-normalization-alignments 0.1.12 (Unicode {UNICODEDATA2_VERSION} data less the
 * characters assigned after {NFC_VERSION}). The layout and how the data was checked:
 * scripts/gen_unicode.py. {size} bytes of tables.
 *
 * Included by fx_unicode.h (declarations) and once by fx_unicode.c with FX_UC_DEFINE_TABLES
 * (definitions).
 *
 * The data is derived from the Unicode Character Database, under this notice:
 *
{licence} */
#ifndef FX_UNICODE_TABLES_H
#define FX_UNICODE_TABLES_H

#include <stdint.h>

#define FX_UC_VERSION "{UNICODEDATA2_VERSION}"
#define FX_UC_NFC_VERSION "{NFC_VERSION}"

#define FX_UC_CLASS_SHIFT {CLASS_SHIFT}
#define FX_UC_CLASS_LIMIT 0x{class_limit:X}u  /* no class from here on but the tail */
#define FX_UC_CLASS_TAIL_FIRST 0x{tail_lo:X}u
#define FX_UC_CLASS_TAIL_LAST 0x{tail_hi:X}u
#define FX_UC_CLASS_TAIL {tail_val}u

#define FX_UC_NFC_SHIFT {NFC_SHIFT}
#define FX_UC_NFC_QUICK 0x{nfc_quick:X}u  /* everything below is ccc 0 and NFC_QC Yes */
#define FX_UC_NFC_LIMIT 0x{nfc_limit:X}u  /* from here on: ccc 0, Yes, no decomposition */
#define FX_UC_NDECOMP {len(packed)}
#define FX_UC_NCOMP {len(comp)}
#define FX_UC_DECOMP_MAX {longest}  /* code points in the longest full decomposition */
"""]
    decl = [
        ("uint8_t", "fx_uc_class_index", len(c_index)),
        ("uint8_t", "fx_uc_class_blocks", len(c_blocks) << CLASS_SHIFT),
        ("uint8_t", "fx_uc_nfc_index", len(n_index)),
        ("uint8_t", "fx_uc_nfc_blocks", len(n_blocks) << NFC_SHIFT),
        ("uint64_t", "fx_uc_decomp", len(packed)),
        ("uint16_t", "fx_uc_comp", len(comp)),
    ]
    out.append("\n#ifndef FX_UC_DEFINE_TABLES\n")
    out += [f"extern const {t} {n}[{k}];\n" for t, n, k in decl]
    out.append("#else\n")
    out.append(c_array("uint8_t", "fx_uc_class_index", c_index, 24, "{:3d}"))
    out.append(c_array("uint8_t", "fx_uc_class_blocks", b"".join(c_blocks), 32, "{:2d}"))
    out.append(c_array("uint8_t", "fx_uc_nfc_index", n_index, 24, "{:3d}"))
    out.append(c_array("uint8_t", "fx_uc_nfc_blocks", b"".join(n_blocks), 24, "{:3d}"))
    out.append("/* cp << 42 | first << 21 | second (0: a singleton), sorted by cp */\n")
    out.append(c_array("uint64_t", "fx_uc_decomp", packed, 4, "0x{:016X}u"))
    out.append("/* the primary composites (indexes into fx_uc_decomp), by (first, second) */\n")
    out.append(c_array("uint16_t", "fx_uc_comp", (i for _, i in comp), 12, "{:4d}"))
    out.append("#endif\n\n#endif\n")
    return "".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed file")
    args = ap.parse_args()
    text = render()
    if args.check:
        old = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if old != text:
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), text.splitlines(True), str(OUT), "generated", n=1))
            print(f"gen_unicode: {OUT.relative_to(ROOT)} is stale; run {COMMAND}")
            return 1
        print(f"gen_unicode: {OUT.relative_to(ROOT)} is up to date")
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"gen_unicode: wrote {OUT.relative_to(ROOT)} ({len(text)} characters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
