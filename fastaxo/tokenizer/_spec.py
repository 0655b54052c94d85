"""tokenizer.json -> the flat arrays of the C encoder (csrc/fx_bpe.h), or why it cannot be.

Only what is proven to give HF's ids is accepted: a byte-level BPE model with one of the
pre-tokenizer patterns the C scanner implements (compared as exact strings), at most the NFC
normalizer, added tokens with any of HF's flags (but for the two combinations in which HF's
own result is ambiguous: _added_arrays), and the post-processors that add nothing but a BOS.
Anything else is a reason string: the caller then uses HF and says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

# The Split patterns the C pre-tokenizer implements (fx_pretok.c), exactly as tokenizer.json
# spells them.
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
          r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
         r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
PRETOK_LLAMA3, PRETOK_QWEN2, PRETOK_GPT2 = 0, 1, 2
PATTERNS = {LLAMA3: PRETOK_LLAMA3, QWEN2: PRETOK_QWEN2}
PATTERN_NAMES = {PRETOK_LLAMA3: "llama3", PRETOK_QWEN2: "qwen2", PRETOK_GPT2: "gpt2"}

# csrc/fx_bpe.h FX_ADDED_*
ADDED_LSTRIP, ADDED_RSTRIP, ADDED_SPECIAL, ADDED_SINGLE_WORD, ADDED_NORMALIZED = 1, 2, 4, 8, 16
# Unicode's White_Space (PropList.txt, unchanged since 6.3; scripts/gen_unicode.py's
# WHITE_SPACE, fx_uclass FX_UC_WS): the \s that lstrip and rstrip swallow in HF
WHITE_SPACE = frozenset(map(chr, (*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680,
                                  *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F,
                                  0x3000)))


class Unsupported(Exception):
    """Why a tokenizer.json is not one the C encoder reproduces exactly."""


@dataclass(frozen=True)
class Spec:
    """fx_bpe_spec's arrays (see csrc/fx_bpe.h)."""

    tok_bytes: np.ndarray  # uint8
    tok_off: np.ndarray  # int64, n_vocab + 1
    merges: np.ndarray  # int32, 3 per merge
    added_bytes: np.ndarray
    added_off: np.ndarray
    added_ids: np.ndarray
    added_flags: np.ndarray
    pretok: int
    ignore_merges: bool
    nfc: bool
    bos_id: int
    added: dict[str, int]  # content -> id, for callers
    vocab: Mapping[str, int]  # the model's vocabulary as tokenizer.json spells it
    vocab_size: int  # ids the model can give: max(vocab, added) + 1


def byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet inverted: the character that stands for each byte."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\xa1"), ord("\xac") + 1),
            *range(ord("\xae"), ord("\xff") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return {c: b for b, c in chars.items()}


def _ragged(items: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    off = np.zeros(len(items) + 1, np.int64)
    np.cumsum([len(b) for b in items], out=off[1:])
    return np.frombuffer(b"".join(items), np.uint8).copy(), off


def _need(obj: Any, where: str, *fields: str, types: Any = None) -> dict[str, Any]:
    """``obj`` as a JSON object holding ``fields`` (of ``types`` when given): the fields HF's
    loader requires of it. A file without them does not load in HF (``missing field``), so
    it has no ids to reproduce: refused, not read with a default HF does not have."""
    if not isinstance(obj, dict):
        raise Unsupported(f"{where}: expected an object, got {type(obj).__name__}")
    for f in fields:
        if f not in obj:
            raise Unsupported(f"{where}: missing field {f!r} (HF's loader refuses the file)")
        if types is not None and not isinstance(obj[f], types):
            raise Unsupported(f"{where}: {f} is {obj[f]!r:.40}, expected "
                              f"{getattr(types, '__name__', types)}")
    return obj


def _byte_level(obj: Any, where: str) -> dict[str, Any]:
    """A ByteLevel step: HF requires add_prefix_space and trim_offsets; use_regex defaults to
    true when absent (HF's serde default)."""
    _need(obj, where, "add_prefix_space", "trim_offsets", types=bool)
    if not isinstance(obj.get("use_regex", True), bool):
        raise Unsupported(f"{where}: use_regex is {obj['use_regex']!r:.40}, expected bool")
    return obj


def _pretok(pre: Any) -> int:
    if not isinstance(pre, dict):
        raise Unsupported(f"pre_tokenizer {pre!r:.80}: expected ByteLevel or Split + "
                          "ByteLevel")
    kind = pre.get("type")
    if kind == "ByteLevel":
        _byte_level(pre, "pre_tokenizer ByteLevel")
        if pre["add_prefix_space"] or not pre.get("use_regex", True):
            raise Unsupported("ByteLevel pre_tokenizer with add_prefix_space, or without its "
                              "regex")
        return PRETOK_GPT2
    if kind != "Sequence":
        raise Unsupported(f"pre_tokenizer of type {kind!r}")
    steps = _need(pre, "pre_tokenizer Sequence", "pretokenizers", types=list)["pretokenizers"]
    if len(steps) != 2 or not all(isinstance(st, dict) for st in steps) or (
            steps[0].get("type") != "Split" or steps[1].get("type") != "ByteLevel"):
        raise Unsupported("pre_tokenizer: expected Sequence[Split, ByteLevel], got "
                          f"{[st.get('type') if isinstance(st, dict) else st for st in steps]}")
    split = _need(steps[0], "Split pre_tokenizer", "pattern", "behavior", "invert")
    level = _byte_level(steps[1], "ByteLevel after Split")
    pattern = split["pattern"].get("Regex") if isinstance(split["pattern"], dict) else None
    if split["behavior"] != "Isolated" or split["invert"] is not False:
        raise Unsupported("Split pre_tokenizer: expected behavior Isolated, not inverted")
    if pattern not in PATTERNS:
        raise Unsupported(f"Split pattern {pattern!r} is not one fastaxo implements (Llama 3, "
                          "Qwen2/3 or GPT-2's)")
    # (a ByteLevel without use_regex runs GPT-2's regex on each piece of the Split: HF's
    # default; the C scanner does the Split alone)
    if level["add_prefix_space"] or level.get("use_regex", True):
        raise Unsupported("ByteLevel after Split: expected add_prefix_space and use_regex off, "
                          f"got {level['add_prefix_space']} and "
                          + (str(level["use_regex"]) if "use_regex" in level else
                             "no use_regex (HF's default: true)"))
    return PATTERNS[pattern]


def _normalizer(norm: Any) -> bool:
    if norm is None:
        return False
    if not isinstance(norm, dict):
        raise Unsupported(f"normalizer: expected an object, got {type(norm).__name__}")
    if norm.get("type") == "NFC":
        return True
    if norm.get("type") == "Sequence":
        steps = _need(norm, "normalizer Sequence", "normalizers", types=list)["normalizers"]
        if [n.get("type") if isinstance(n, dict) else n for n in steps] in ([], ["NFC"]):
            return bool(steps)
    raise Unsupported(f"normalizer {norm.get('type')!r} (only NFC is implemented)")


def _bos(post: Any, added: dict[str, int]) -> int:
    """The id a post-processor puts before the text, -1 for none; anything else it does is
    Unsupported (ByteLevel moves offsets only: with trim_offsets off, not at all)."""
    if post is None:
        return -1
    if not isinstance(post, dict):
        raise Unsupported(f"post_processor: expected an object, got {type(post).__name__}")
    kind = post.get("type")
    if kind == "ByteLevel":
        if _byte_level(post, "post_processor ByteLevel")["trim_offsets"]:
            raise Unsupported("post_processor ByteLevel with trim_offsets (HF trims the spaces "
                              "out of the offsets; fastaxo's offsets do not)")
        return -1
    if kind == "Sequence":
        bos = -1
        for p in _need(post, "post_processor Sequence", "processors",
                       types=list)["processors"]:
            got = _bos(p, added)
            if got >= 0:
                if bos >= 0:
                    raise Unsupported("post_processor: two templates")
                bos = got
        return bos
    if kind != "TemplateProcessing":
        raise Unsupported(f"post_processor of type {kind!r}")
    where = "post_processor TemplateProcessing"
    _need(post, where, "single", "pair", types=list)
    specials = _need(post, where, "special_tokens", types=dict)["special_tokens"]
    single = post["single"]
    for piece in (*single, *post["pair"]):  # each a SpecialToken or a Sequence, as HF reads it
        if not (isinstance(piece, dict) and len(piece) == 1
                and next(iter(piece)) in ("SpecialToken", "Sequence")):
            raise Unsupported(f"{where}: a piece {piece!r:.60} is neither a SpecialToken nor a "
                              "Sequence")
        (part,) = piece.values()
        _need(part, f"{where} piece", "id", "type_id")
        if "SpecialToken" in piece and part["id"] not in specials:
            raise Unsupported(f"{where}: special token {part['id']!r:.40} is not in "
                              "special_tokens (HF's loader refuses the file)")
    for name, tok in specials.items():
        _need(tok, f"{where} special token {name!r:.40}", "id", "ids", "tokens")
    seq = [i for i, p in enumerate(single) if "Sequence" in p]
    if len(single) == 1 and seq == [0]:
        return -1
    if len(single) != 2 or seq != [1] or "SpecialToken" not in single[0]:
        raise Unsupported("TemplateProcessing: only a BOS before the text is implemented")
    name = single[0]["SpecialToken"]["id"]
    ids = specials[name]["ids"]
    if len(ids) != 1 or not _is_id(ids[0]):
        raise Unsupported(f"TemplateProcessing: special token {name!r} is not one id")
    return int(ids[0])


# ids are int32 in C; a hostile file must not make a list of 2**40 tokens either
MAX_ID = 2**31 - 2
# the C model packs a merge into 64 bits (csrc/fx_bpe_int.h): two ids of 21 bits, a rank of 22
MAX_VOCAB = 2**21
MAX_MERGES = 2**22 - 2


def _is_id(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= MAX_ID


def _vocab(vocab: Any) -> dict[str, int]:
    """model.vocab checked: the ids 0 .. len - 1, each once."""
    if not isinstance(vocab, dict) or not vocab:
        raise Unsupported("model.vocab: expected a non-empty object of token -> id")
    bad = next((t for t, i in vocab.items() if not _is_id(i)), None)
    if bad is not None:
        raise Unsupported(f"model.vocab: token {bad!r} has id {vocab[bad]!r}, expected an "
                          f"integer from 0 to {MAX_ID}")
    if len(set(vocab.values())) != len(vocab):
        raise Unsupported("model.vocab: two tokens share an id")
    if max(vocab.values()) != len(vocab) - 1:
        raise Unsupported(f"model.vocab: ids up to {max(vocab.values())} for {len(vocab)} "
                          f"tokens (expected ids from 0 without gaps)")
    if len(vocab) > MAX_VOCAB:
        raise Unsupported(f"model.vocab: {len(vocab):,} tokens (fastaxo's encoder holds up to "
                          f"{MAX_VOCAB:,})")
    return vocab


def _check_added_ids(added: list[dict[str, Any]], vocab: dict[str, int]) -> None:
    """HF does not read an added token's id from tokenizer.json: it gives a content the
    model's id if the vocabulary holds it, else the next id after the vocabulary and the
    added tokens so far (tokenizers' AddedVocabulary). A file whose ids disagree, or that
    adds one content twice, would get other ids than it says: refused, not guessed."""
    seen: dict[str, int] = {}
    for t in added:
        content = t["content"]
        if content in seen:
            raise Unsupported(f"added token {content!r} is listed twice")
        if content in vocab:
            want = vocab[content]
        else:
            top = max(seen.values(), default=-1)
            want = top + 1 if top >= len(vocab) else len(vocab)
        if t["id"] != want:
            raise Unsupported(f"added token {content!r} has id {t['id']} in tokenizer.json, "
                              f"but HF gives it {want}")
        seen[content] = want


def _added_tokens(added: Any) -> list[dict[str, Any]]:
    if added is None:
        return []
    if not isinstance(added, list) or not all(isinstance(t, dict) for t in added):
        raise Unsupported("added_tokens: expected a list of objects")
    for t in added:
        if not isinstance(t.get("content"), str) or not _is_id(t.get("id")):
            raise Unsupported(f"added token {t!r:.80}: expected a string content and an id "
                              f"from 0 to {MAX_ID}")
        _need(t, f"added token {t['content']!r:.40}", "single_word", "lstrip", "rstrip",
              "normalized", "special", types=bool)
    return added


def _hf_nfc(text: str) -> str:
    """HF's NFC of text: fx_nfc, whose Unicode 9.0 data is HF's (tests/test_unicode_tables.py
    compares them)."""
    if text.isascii():
        return text
    from fastaxo._core.backend import tok_ext

    if tok_ext is None:
        raise Unsupported(f"normalized added token {text!r}: its NFC needs fastaxo's compiled "
                          "extension")
    return bytes(tok_ext._nfc_utf8(text.encode("utf-8"), False)[0]).decode("utf-8")


def _added_arrays(added_tokens: list[dict[str, Any]], nfc: bool
                  ) -> tuple[list[bytes], list[int], list[int]]:
    """Each added token's bytes as HF matches them, id and FX_ADDED_* flags.

    HF matches the tokens in two passes (AddedVocabulary.extract_and_normalize): those not
    "normalized" on the raw text, then the normalized ones on each piece left, after the
    normalizer, as their own normalized content. Refused: two tokens of one pass that match
    the same text (HF builds its matcher from a hash map: which one wins changes from process
    to process), and an rstrip token with one that starts with whitespace in the same pass
    (HF's next match may then start inside the whitespace the first swallowed: overlapping or,
    with lstrip, crashing splits)."""
    contents, ids, flags = [], [], []
    seen: dict[tuple[bool, str], str] = {}
    for t in added_tokens:
        content, norm = t["content"], bool(t.get("normalized"))
        if not content:
            raise Unsupported("an added token is empty")
        matched = _hf_nfc(content) if norm and nfc else content
        other = seen.setdefault((norm, matched), content)
        if other != content:
            raise Unsupported(f"added tokens {other!r} and {content!r} both match {matched!r} "
                              "(HF picks one of them at random)")
        contents.append(matched.encode("utf-8"))
        ids.append(int(t["id"]))
        flags.append(ADDED_LSTRIP * bool(t.get("lstrip")) + ADDED_RSTRIP * bool(t.get("rstrip"))
                     + ADDED_SPECIAL * bool(t.get("special"))
                     + ADDED_SINGLE_WORD * bool(t.get("single_word"))
                     + ADDED_NORMALIZED * norm)
    for norm in (False, True):
        kind = [(c, f) for c, f in zip(contents, flags, strict=True)
                if bool(f & ADDED_NORMALIZED) == norm]
        rstrip = next((c for c, f in kind if f & ADDED_RSTRIP), None)
        spaced = next((c for c, _ in kind if c.decode("utf-8")[0] in WHITE_SPACE), None)
        if rstrip is not None and spaced is not None:
            raise Unsupported(f"added token {rstrip.decode()!r} is rstrip and "
                              f"{spaced.decode()!r} starts with whitespace (HF's splits of "
                              "them can overlap)")
    return contents, ids, flags


def build(doc: Any) -> Spec:
    """The C encoder's arrays for a parsed tokenizer.json; Unsupported says why not."""
    if not isinstance(doc, dict):
        raise Unsupported(f"tokenizer.json: expected an object, got {type(doc).__name__}")
    model = doc.get("model") or {}
    if not isinstance(model, dict):
        raise Unsupported(f"model: expected an object, got {type(model).__name__}")
    if model.get("type") != "BPE":
        raise Unsupported(f"model of type {model.get('type')!r} (byte-level BPE only)")
    _need(model, "model", "vocab", "merges")
    decoder = doc.get("decoder")  # not read, but HF's loader reads it: a broken one fails there
    if decoder is not None:
        _need(decoder, "decoder", "type")
        if decoder["type"] == "ByteLevel":
            _byte_level(decoder, "decoder ByteLevel")
    for key, ok in (("dropout", (None,)), ("continuing_subword_prefix", (None, "")),
                    ("end_of_word_suffix", (None, "")), ("byte_fallback", (False, None)),
                    ("fuse_unk", (False, None))):
        if model.get(key) not in ok:
            raise Unsupported(f"BPE model with {key}={model.get(key)!r}")
    if doc.get("truncation") is not None or doc.get("padding") is not None:
        raise Unsupported("truncation or padding is set on the tokenizer")
    nfc = _normalizer(doc.get("normalizer"))
    pretok = _pretok(doc.get("pre_tokenizer"))
    # each byte-level character to the Latin-1 character of its byte, any other below U+0100
    # deleted: str.translate and encode("latin-1") then decode a token in C, and a token with
    # a character outside the alphabet comes out shorter or does not encode
    table: dict[int, int | None] = dict.fromkeys(range(256))
    table.update({ord(c): b for c, b in byte_decoder().items()})
    added_tokens = _added_tokens(doc.get("added_tokens"))
    vocab = _vocab(model.get("vocab"))
    _check_added_ids(added_tokens, vocab)
    n_vocab = max(vocab.values()) + 1
    toks: list[bytes] = [b""] * n_vocab
    undecodable = set()
    for tok, i in vocab.items():
        got = tok.translate(table)
        try:
            if len(got) != len(tok):
                raise UnicodeEncodeError("latin-1", got, 0, 0, "outside the alphabet")
            toks[i] = got.encode("latin-1")
        except UnicodeEncodeError:
            undecodable.add(i)  # a token that is not byte-level text: BPE never makes it
    tok_bytes, tok_off = _ragged(toks)
    missing = [f"0x{b:02x}" for c, b in byte_decoder().items() if c not in vocab]
    if missing:
        raise Unsupported(f"model.vocab has no token for byte {missing[0]} "
                          f"({len(missing)} bytes without one)")
    raw = model.get("merges") or []
    if not isinstance(raw, list):
        raise Unsupported(f"model.merges: expected a list, got {type(raw).__name__}")
    if len(raw) > MAX_MERGES:
        raise Unsupported(f"model.merges: {len(raw):,} merges (fastaxo's encoder holds up to "
                          f"{MAX_MERGES:,})")
    pairs = [mg.split(" ") if isinstance(mg, str) else mg for mg in raw]
    try:
        merges = [(vocab[a], vocab[b], vocab[a + b]) for a, b in pairs]
    except (KeyError, ValueError, TypeError):
        bad = next(p for p in pairs if not isinstance(p, list) or len(p) != 2 or any(
            not isinstance(t, str) for t in p) or any(t not in vocab for t in (*p, p[0] + p[1])))
        raise Unsupported(f"merge {bad!r} names a token outside the vocabulary") from None
    if undecodable and any(set(mg) & undecodable for mg in merges):
        raise Unsupported("a merge names a token outside the byte-level vocabulary")
    contents, ids, flags = _added_arrays(added_tokens, nfc)
    added = {t["content"]: int(t["id"]) for t in added_tokens}
    added_bytes, added_off = _ragged(contents)
    return Spec(tok_bytes=tok_bytes, tok_off=tok_off,
                merges=np.asarray(merges, np.int32).reshape(-1),
                added_bytes=added_bytes, added_off=added_off,
                added_ids=np.asarray(ids, np.int32), added_flags=np.asarray(flags, np.uint8),
                pretok=pretok, ignore_merges=bool(model.get("ignore_merges")), nfc=nfc,
                bos_id=_bos(doc.get("post_processor"), added), added=added, vocab=vocab,
                vocab_size=max([n_vocab, *(i + 1 for i in ids)]))
