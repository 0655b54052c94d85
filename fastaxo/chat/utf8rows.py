"""The chat engine's rows made from UTF-8: a conversation read from Arrow (``prepare``'s
messages column) whose text 1 a recorded path gives, with its trainable contents placed
(:meth:`fastaxo.chat.paths.Paths.placed_utf8`), never becomes Python ``str`` objects. Its
contents stay the bytes Arrow holds, the path's guards ask the bytes, the text is those
bytes joined with the template's text, and the placeholder diffs and the labels read byte
positions. Per row that saves decoding the contents (four bytes a character in a text
with one emoji), building text 1 as a str and encoding it back to UTF-8 for the encoder.

A row it cannot make this way (no path fits, a scan past its bound, a text empty or too
large, a content that is not UTF-8) is left to the engine's other steps, which give the
same row from str objects; the rows are the same either way
(``tests/test_chat_utf8rows.py`` runs both)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fastaxo._core import backend
from fastaxo._reference import chat as ref

__all__ = ["SENTINELS_UTF8", "as_str", "utf8_texts"]

# Axolotl's two placeholders, in UTF-8 (ASCII)
SENTINELS_UTF8 = tuple(s.encode() for s in ref.SENTINELS)


def utf8_texts(spec: Any, conversations: Sequence[Any], part: range, scan_cap: int
               ) -> tuple[dict[int, bytes], dict[int, np.ndarray], dict[int, list[int]]]:
    """Rows of ``part`` made from UTF-8: text 1 (``bytes``), the trainable turns' spans in
    bytes (Axolotl's placeholder diffs, as ``ChatEngine._good_spans`` gives them in
    characters) and the trainable turns. ``conversations`` must read rows as UTF-8
    (``utf8_rows``, :class:`fastaxo.pipeline.messages.ArrowTurns`); else no row."""
    read = getattr(conversations, "utf8_rows", None)
    paths = spec.paths() if read is not None and len(part) else None
    if read is None or paths is None or backend.pack_ext is None:
        return {}, {}, {}
    got = read(part.start, part.stop)
    if got is None:
        return {}, {}, {}
    texts: dict[int, bytes] = {}
    spans: dict[int, np.ndarray] = {}
    trainable: dict[int, list[int]] = {}
    limit, every, train = spec.max_row_bytes, spec.train_on_inputs, spec.roles_to_train
    skips = spec.skips_first_system
    scan = backend.pack_ext.placeholder_spans
    for i, roles, contents in zip(part, *got, strict=True):
        mine = [j for j, r in enumerate(roles) if every or r in train]
        placed = paths.placed_utf8(roles, contents, tuple(mine), ref.SENTINELS)
        if placed is None or not placed[0] or len(placed[0]) > limit:
            continue
        text, where = placed
        skip = bool(mine) and mine[0] == 0 and skips and roles[0] == "system"
        got_spans, failed = scan(text, [(a, a + n) for a, n in where], SENTINELS_UTF8,
                                 scan_cap, skip)
        if failed:
            continue
        texts[i], spans[i], trainable[i] = text, got_spans, mine
    return texts, spans, trainable


def as_str(texts: dict[int, Any], spans: dict[int, np.ndarray], rows: list[int]) -> None:
    """The rows ``rows`` of UTF-8 (bytes) texts and byte spans made str and character spans,
    in place (the steps that read characters: the offsets path)."""
    for i in rows:
        text = texts[i]
        if type(text) is not bytes:
            continue
        utf8 = np.frombuffer(text, np.uint8)
        chars = np.zeros(len(utf8) + 1, np.int64)  # characters before each byte
        np.cumsum((utf8 & 0xC0) != 0x80, out=chars[1:])
        s = spans[i]
        spans[i] = np.where(s < 0, s, chars[np.maximum(s, 0)])
        texts[i] = text.decode()
