"""How :meth:`ChatEngine.run <fastaxo.chat.engine.ChatEngine.run>` cuts a pass and runs it:
rows in parts (one tokenized on a thread of its own while the next renders), a part's texts
in chunks per tokenizer call, and the memory a pass reuses from part to part."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from fastaxo._core import backend

__all__ = ["BATCH_BYTES", "BATCH_CHARS", "PART_ROWS", "Pending", "Scratch", "chunks", "part_ranges",
           "utf8_of"]

# Characters per tokenizer call: bounds the Python lists of ids and offsets held at once.
BATCH_CHARS = 4 << 20
# The same for fastaxo's encoder, in UTF-8 bytes (a str counts 4 a character: its most),
# whose ids are one int32 array (its scratch: 4 bytes a byte of text); a part of the bench's
# rows (~6 MB) is then one call, not two
BATCH_BYTES = 16 << 20

# Rows per part of ChatEngine.run: one part is tokenized while the next is rendered (~0.4 s of
# renders for 16-turn rows; a part's texts, ~6 MB, are the memory it adds)
PART_ROWS = 256


def part_ranges(n: int) -> list[range]:
    """Rows 0..n in parts: a quarter of :data:`PART_ROWS` first (nothing is tokenized while
    it renders), then :data:`PART_ROWS` each."""
    first = min(n, max(1, PART_ROWS // 4))
    return ([range(first)] if n else []) + [
        range(a, min(a + PART_ROWS, n)) for a in range(first, n, PART_ROWS)]


def chunks(rows: list[int], texts: dict[int, Any], utf8: bool = False) -> list[list[int]]:
    """``rows`` in order, cut into runs of at most :data:`BATCH_CHARS` characters of text, or
    with ``utf8`` (fastaxo's encoder) :data:`BATCH_BYTES` bytes of UTF-8, a str counting 4 a
    character (a longer text is a run of its own; a text of bytes counts its bytes)."""
    limit, per_char = (BATCH_BYTES, 4) if utf8 else (BATCH_CHARS, 1)
    got: list[list[int]] = []
    size = limit
    for i in rows:
        t = texts[i]
        n = len(t) if type(t) is bytes else per_char * len(t)
        if size + n > limit and (not got or got[-1]):
            got.append([])
            size = 0
        got[-1].append(i)
        size += n
    return got


def utf8_of(texts: list[Any], scratch: Scratch | None = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The UTF-8 of ``texts`` joined (a uint8 array), its int64 offsets and each text's
    characters: made in C with the GIL released (``_tok.utf8_join``: the encoder's thread
    makes it while the other thread renders), else by ``str.encode``, which raises for a lone
    surrogate as it should."""
    if any(type(t) is bytes for t in texts):  # UTF-8 rows (fastaxo.chat.utf8rows)
        return _joined(texts, scratch)
    if backend.tok_ext is None:
        got = None
    elif scratch is None:
        got = backend.tok_ext.utf8_join(texts)
    else:  # into the pass's buffer; a larger one made here is kept for the next part
        got = backend.tok_ext.utf8_join(texts, scratch.utf8)
        if got is not None and got[0].base is not scratch.utf8:
            scratch.utf8 = got[0].base if got[0].base is not None else got[0]
    if got is not None:
        return got
    encoded = [t.encode("utf-8") for t in texts]
    offsets = np.zeros(len(texts) + 1, np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return (np.frombuffer(b"".join(encoded), np.uint8), offsets,
            np.fromiter(map(len, texts), np.int64, count=len(texts)))


def _joined(texts: list[Any], scratch: Scratch | None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`utf8_of` where some texts are UTF-8 already (``bytes``): their "characters"
    are their bytes (their spans are byte positions: the label kernel reads a row whose
    characters are its bytes as ASCII)."""
    utf8 = [t if type(t) is bytes else t.encode("utf-8") for t in texts]
    offsets = np.zeros(len(texts) + 1, np.int64)
    np.cumsum([len(b) for b in utf8], out=offsets[1:])
    need = max(int(offsets[-1]), 1)
    data = scratch.utf8 if scratch is not None and scratch.utf8 is not None else None
    if data is None or len(data) < need:
        data = np.empty(need, np.uint8)
        if scratch is not None:
            scratch.utf8 = data
    for b, a in zip(utf8, offsets.tolist(), strict=False):
        data[a:a + len(b)] = np.frombuffer(b, np.uint8)
    chars = np.fromiter((len(t) for t in texts), np.int64, count=len(texts))
    return data[:offsets[-1]], offsets, chars


class Scratch:
    """Memory a pass reuses from part to part: the texts' UTF-8 (:func:`utf8_of`)."""

    __slots__ = ("utf8",)

    def __init__(self) -> None:
        self.utf8: np.ndarray | None = None


class Pending:
    """``fn(*args, **kwargs)`` on a thread of its own; :meth:`wait` joins it and raises what
    it raised."""

    def __init__(self, fn: Any, *args: Any, **kwargs: Any):
        self.error: BaseException | None = None

        def body() -> None:
            try:
                fn(*args, **kwargs)
            except BaseException as e:  # noqa: BLE001 - raised again by wait()
                self.error = e

        self.thread = threading.Thread(target=body, name="fastaxo-chat-tokenize", daemon=True)
        self.thread.start()

    def join(self) -> None:
        self.thread.join()

    def wait(self) -> None:
        self.thread.join()
        if self.error is not None:
            err, self.error = self.error, None
            raise err
