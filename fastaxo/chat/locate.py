"""Where each trainable message's content sits in a conversation's rendered text (text 1), for
:class:`fastaxo.chat.ChatEngine`: proven from the two placeholder renders where it can be, else
by marker rounds.

**From the placeholder renders** (:meth:`RowState.prove`: three renders a row, text 1 and the
two Axolotl's diff needs anyway). ``D1`` and ``D2`` are the conversation with every trainable
content replaced by Axolotl's placeholders ``S1`` / ``S2``.

1. There is at most one frame ``f`` (the n + 1 strings around the contents) with
   ``D1 = f0 S1 f1 ... S1 fn`` and ``D2 = f0 S2 f1 ... S2 fn``: in two such frames, take the
   first placeholder whose offset in the frame differs; there one decomposition reads
   ``S[0]``, the other a character of its frame, the same one for S1 and S2, and ``S1[0] !=
   S2[0]``. :func:`frame` finds it (each common prefix of D1 and D2 ends where the
   placeholders start) or says there is none.
2. Text 1 must read ``f0 X0 f1 X1 ... fn``, each ``X_k`` written as turn k's content is (as it
   is, or one of :data:`VARIANTS`), and (:func:`parse`) that reading must be the only one even
   when a slot may hold any trainable turn's content written any way: so no other turn, and
   no other way of writing it, can sit where turn k is read (this is what the marker
   characters, one pair per turn, proved about order and place).

:meth:`RowState.prove_whole` reads text 1 the same way through the frame of ``D1`` / ``D2``
made with every message's content replaced, trained or not: those renders depend on the
sequence of roles alone (the engine makes them once per sequence), and text 1 must then hold
every content, the users' too, in its slot.

Then the template writes the same text around the real contents and around both placeholders,
and each content in its own place, as is: the equations the marker rounds check
(``D == text 1 with the placeholder spliced over each proven content``) hold by construction,
and any placement the marker render proves is such a reading, so it is this one. The marker
render itself is not an input of Axolotl's. A template that rewrites, drops, duplicates or
reorders a content, that writes other text around a placeholder than around the content
(``'secret' in content``, ``</think>``), or a text that reads two ways (a frame that recurs
within reach) fails a check, and the row takes the marker rounds as before.

**By markers** (the rows the above does not prove): text 1 is rendered again with each
trainable content wrapped in two private-use characters the row and the template do not hold;
taking them out must give text 1 and each pair must wrap exactly the content as written; a
turn whose markers come out wrong tries the next variant in the next round, and after the last
one goes to its own renders (Axolotl's diff). The engine then checks the placeholder renders
against text 1 (``ChatEngine._check_placeholders``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fastaxo._core import backend
from fastaxo._reference.chat import SENTINELS

__all__ = ["MARK_RE", "MAX_TRAINABLE_TURNS", "PER_TURN", "RowState", "VARIANTS",
           "common_prefix", "common_suffix", "frame", "parse"]

# Markers: Supplementary Private Use Areas A and B, two per trainable turn, skipping any the
# row or the template holds.
_MARK_FIRST, _MARK_LAST = 0xF0000, 0x10FFFD
MARK_RE = re.compile("[\U000F0000-\U0010FFFD]")
MAX_TRAINABLE_TURNS = (_MARK_LAST - _MARK_FIRST + 1 - 2 * 2) // 2 - 512
PER_TURN = -1  # a turn placed by its own renders (Axolotl's diff)
# places a frame is looked for after a content: more means a frame that recurs (the row takes
# the marker rounds)
_MAX_ENDS = 16


class RowState:
    """One row's turns: per trainable turn its variant (an index into :data:`VARIANTS`, or
    ``PER_TURN``), its markers and, once proven, its segment. ``settled``: every turn is
    proven or given to its own renders; ``checked``: the placeholder renders agree with the
    proven turns (:meth:`prove` does both)."""

    __slots__ = ("checked", "close", "last", "open", "segments", "settled", "trainable",
                 "turns", "var", "why")

    def __init__(self, turns: list[dict[str, Any]], trainable: list[int]):
        self.turns, self.trainable = turns, trainable
        self.last = last_user(turns)
        self.var = [0] * len(trainable)
        self.why = [""] * len(trainable)
        self.segments: list[tuple[int, int] | None] = [None] * len(trainable)
        self.open: list[str] = []
        self.close: list[str] = []
        self.settled = not trainable
        self.checked = False

    def prove(self, text: str, d1: str, d2: str) -> bool:
        """Place every trainable content from text 1 and the placeholder renders ``d1`` /
        ``d2`` (every trainable content replaced by each of :data:`SENTINELS`), as the module
        docstring says; False (nothing changed): the row takes the marker rounds."""
        frames = frame(d1, d2, len(self.trainable))
        if frames is None:
            return False
        got = _parse(text, frames, [self.written(k) for k in range(len(self.trainable))])
        return got is not None and self._place(got)

    def prove_whole(self, text: str, frames: list[str]) -> bool:
        """As :meth:`prove`, from the frame of the placeholder renders of this row's roles with
        every content replaced, trained or not (the engine renders those once per sequence of
        roles): text 1 must read as that frame with every message's content in its slot, in
        one way only; the trainable turns' segments are taken from that reading."""
        if len(frames) != len(self.turns) + 1:
            return False
        ways = ([self._ways(j) for j in range(len(self.turns))] if backend.pack_ext is None
                else backend.pack_ext.locate_ways(self.turns, self.last, VARIANTS))
        got = _parse(text, frames, ways)
        return got is not None and self._place([got[j] for j in self.trainable])

    def place(self, where: list[tuple[int, int]]) -> None:
        """Every trainable turn placed by the recorded path text 1 came from
        (:meth:`fastaxo.chat.paths.Path.places` proves what :meth:`prove` would): ``(start,
        length)`` each, as the template wrote it."""
        self._place([(start, 0, length) for start, length in where])

    def _place(self, got: list[tuple[int, int, int]]) -> bool:
        """Every trainable turn placed from a proven reading, ``(start, variant, length)``."""
        for k, (start, v, length) in enumerate(got):
            self.var[k] = v
            self.segments[k] = (start, start + length)
        self.settled = self.checked = True
        return True

    def written(self, k: int) -> list[tuple[int, str]]:
        """The distinct ways the template may write turn k's content: (variant, text)."""
        return self._ways(self.trainable[k])

    def _ways(self, j: int) -> list[tuple[int, str]]:
        """The distinct ways the template may write message j's content: (variant, text)."""
        content, after = self.turns[j]["content"], j > self.last
        if (not content or not (content[0].isspace() or content[-1].isspace())) and (
                "</think>" not in content):
            return [(0, content)]  # every variant writes it as it is
        got = [(0, content)]
        for v in range(1, len(VARIANTS)):
            w = VARIANTS[v](content, after)
            if all(w != x for _, x in got):
                got.append((v, w))
        return got

    def assign_markers(self, taken: frozenset[str]) -> bool:
        n = len(self.trainable)
        if n > MAX_TRAINABLE_TURNS:
            return False
        # one regex scan in C (max() over a str makes an object per character)
        found = MARK_RE.findall("".join([t["content"] for t in self.turns]))
        if found:
            taken = taken | frozenset(found)
        pool = _marker_pool(2 * n, taken)
        self.open, self.close = pool[0::2], pool[1::2]
        return True

    def content(self, k: int) -> str:
        j = self.trainable[k]
        return VARIANTS[self.var[k]](self.turns[j]["content"], j > self.last)

    def marked(self) -> list[dict[str, Any]]:
        new = list(self.turns)
        for k, j in enumerate(self.trainable):
            if self.var[k] != PER_TURN:
                new[j] = {"role": self.turns[j]["role"],
                          "content": self.open[k] + self.content(k) + self.close[k]}
        return new

    def update(self, text: str, marked: Any) -> bool:
        """Read one marked render; False: the row cannot be settled this way."""
        live = [k for k in range(len(self.trainable)) if self.var[k] != PER_TURN]
        if not isinstance(marked, str):
            return self._advance(live)
        which = {c: (k, 0) for k, c in enumerate(self.open)}
        which.update({c: (k, 1) for k, c in enumerate(self.close)})
        where: list[list[int]] = [[] for _ in range(2 * len(self.trainable))]
        hits: list[int] = []
        for m in MARK_RE.finditer(marked):
            kk = which.get(m.group())
            if kk is not None:
                where[2 * kk[0] + kk[1]].append(len(hits))
                hits.append(m.start())
        bad = []
        for k in live:
            o, c = where[2 * k], where[2 * k + 1]
            if (len(o) != 1 or len(c) != 1 or hits[o[0]] > hits[c[0]]
                    or marked[hits[o[0]] + 1:hits[c[0]]] != self.content(k)):
                bad.append(k)
        if bad:
            return self._advance(bad)
        pieces, at = [], 0
        for p in hits:
            pieces.append(marked[at:p])
            at = p + 1
        pieces.append(marked[at:])
        stripped = "".join(pieces)
        starts = {k: hits[where[2 * k][0]] - where[2 * k][0] for k in live}
        if stripped == text:
            for k in live:
                self.segments[k] = (starts[k], starts[k] + len(self.content(k)))
            self.settled = True
            return True
        # the template wrote something else around a turn whose markers came out right: the
        # turns from the first difference to the last are suspects
        first = common_prefix(stripped, text)
        last = len(stripped) - common_suffix(stripped, text, len(stripped) - first)
        suspects, prev_end = [], 0
        for k in live:
            end = starts[k] + len(self.content(k))
            if end >= first and prev_end <= last:
                suspects.append(k)
            prev_end = end
        if not suspects and live:
            suspects = [live[-1]]
        return self._advance(suspects) if suspects else False

    def _advance(self, ks: list[int]) -> bool:
        """The next variant that changes the turn's content, else the turn's own renders."""
        for k in ks:
            j = self.trainable[k]
            original = self.turns[j]["content"]
            v = self.var[k] + 1
            while v < len(VARIANTS) and VARIANTS[v](original, j > self.last) == original:
                v += 1
            if v < len(VARIANTS):
                self.var[k] = v
            else:
                self.give_up_turn(k, "the template rewrites message text")
        if all(v == PER_TURN for v in self.var):
            self.settled = True
        return True

    def give_up_turn(self, k: int, why: str) -> None:
        self.var[k] = PER_TURN
        self.segments[k] = None
        self.why[k] = why

    def proven(self) -> list[int]:
        return [k for k, v in enumerate(self.var) if v != PER_TURN]

    def per_turn(self) -> list[int]:
        return [k for k, v in enumerate(self.var) if v == PER_TURN]

    def proven_segments(self) -> list[tuple[int, int]]:
        return [self.segments[k] for k in self.proven()]  # type: ignore[misc]

    def placeholder_suspects(self, got: str, want: str, sentinel: str) -> list[int]:
        """The proven turns from the first difference between a placeholder render (``got``)
        and text 1 spliced (``want``) to the last."""
        first = common_prefix(got, want)
        last = len(want) - common_suffix(got, want, len(want) - first)
        suspects, shift, prev_end = [], 0, 0
        for k in self.proven():
            a, b = self.segments[k]  # type: ignore[misc]
            start = a + shift
            end = start + len(sentinel)
            shift += len(sentinel) - (b - a)
            if end >= first and prev_end <= last:
                suspects.append(k)
            prev_end = end
        return suspects

    def with_placeholder(self, sentinel: str) -> list[dict[str, Any]]:
        new = list(self.turns)
        for k in self.proven():
            j = self.trainable[k]
            new[j] = {"role": self.turns[j]["role"], "content": sentinel}
        return new



def frame(d1: str, d2: str, n: int) -> list[str] | None:
    """The n + 1 strings ``f`` with ``d1 == f0 S1 f1 ... S1 fn`` and ``d2 == f0 S2 f1 ... fn``
    (S1, S2: :data:`SENTINELS`), or None. There is at most one such frame (S1 and S2 start
    with different characters), and each common prefix of the two texts ends where the
    placeholders start."""
    s1, s2 = SENTINELS
    frames = []
    a = b = 0
    for _ in range(n):
        # the next placeholders, found by search: where both are found at the same distance
        # behind the same text, that text is the common prefix (the characters after it
        # differ); else (a placeholder's text in the frame) the prefix is measured
        p, q = d1.find(s1, a), d2.find(s2, b)
        f = d1[a:p]
        if p < 0 or p - a != q - b or not d2.startswith(f, b):
            f = d1[a:a + _lcp_at(d1, a, d2, b)]
        frames.append(f)
        a, b = a + len(f), b + len(f)
        if not (d1.startswith(s1, a) and d2.startswith(s2, b)):
            return None
        a, b = a + len(s1), b + len(s2)
    if len(d1) - a != len(d2) - b or not d1.endswith(d2[b:]):
        return None
    frames.append(d1[a:])
    return frames


def parse(text: str, frames: list[str], written: list[list[tuple[int, str]]]
          ) -> list[tuple[int, int, int]] | None:
    """The one way to read ``text`` as ``frames[0] X0 frames[1] ... frames[n]`` with each
    ``X_k`` one of ``written[k]`` (``(variant, text)`` pairs): ``(start, variant, length)``
    per k; None unless that reading is the only one even when any ``X`` may be any turn's
    (so that no other turn could be written where turn k is read, in this or any other order).

    Turn by turn from the start: the k-th content starts where ``frames[k]`` ends, and ends
    where ``frames[k + 1]`` follows; every such end within reach of the longest way of writing
    a content, whose text is a way of writing some turn, is a candidate. One candidate, and it
    is turn k's alone: then any reading (any turn in any slot) reads the same there."""
    owner: dict[str, int] = {}  # a way of writing some turn -> that turn (-1: several turns)
    for k, ws in enumerate(written):
        for _, w in ws:
            owner[w] = k if owner.get(w, k) == k else -1
    if not text.startswith(frames[0]):
        return None
    # the ways of writing by length: a candidate end is compared in place (a slice of the
    # text and its hash cost more than the whole search)
    by_len: dict[int, list[str]] = {}
    for w in owner:
        by_len.setdefault(len(w), []).append(w)
    longest = max(by_len, default=0)
    pos, n, got = len(frames[0]), len(written), []
    budget = _scan_budget(text)
    hit: str | None
    for k in range(n):
        after = frames[k + 1]
        if k + 1 == n:  # the last frame ends the text
            found = len(text) - len(after)
            if found < pos or not text.endswith(after):
                return None
            hit = _written_at(text, pos, by_len.get(found - pos), owner)
        else:
            found, hi, tries, hit = -1, min(pos + longest + len(after), len(text)), 0, None
            p = text.find(after, pos, hi)
            while p >= 0:
                here = _written_at(text, pos, by_len.get(p - pos), owner)
                if here is not None:
                    if found >= 0:
                        return None
                    found, hit = p, here
                tries += 1
                if tries > _MAX_ENDS:  # a short frame that recurs: let the markers say
                    return None
                p = text.find(after, p + 1, hi)
            budget -= hi - pos
            if budget < 0:
                return None
        if hit is None or owner[hit] != k:
            return None
        got.append((pos, next(v for v, x in written[k] if x == hit), len(hit)))
        pos = found + len(after)
    if n == 0 and len(frames[0]) != len(text):
        return None
    return got


def _parse(text: str, frames: list[str], written: list[list[tuple[int, str]]]
           ) -> list[tuple[int, int, int]] | None:
    """:func:`parse` in C where the extension is in use (_pack.locate_parse: the same steps)."""
    fast = backend.pack_ext
    if fast is None:
        return parse(text, frames, written)
    return fast.locate_parse(text, frames, written, _MAX_ENDS, _scan_budget(text))


def _scan_budget(text: str) -> int:
    """The characters parse's searches may scan: a row with one long content and many turns
    would scan that length per turn; past this the marker rounds (linear) place the row."""
    return 4 * len(text) + 4096


def _written_at(text: str, pos: int, ways: list[str] | None, owner: dict[str, int]
                ) -> str | None:
    """The way of writing (of one length) that ``text`` holds at ``pos``, or None: compared in
    place, or by one slice and hash where many share the length (bounded work per end)."""
    if not ways:
        return None
    if len(ways) <= 4:
        return next((w for w in ways if text.startswith(w, pos)), None)
    w = text[pos:pos + len(ways[0])]
    return w if w in owner else None


def _lcp_at(a: str, i: int, b: str, j: int) -> int:
    """The length of the common prefix of ``a[i:]`` and ``b[j:]``: slices of doubling size,
    then bisection (C speed, work in proportion to the prefix, not to the texts)."""
    n = min(len(a) - i, len(b) - j)
    lo, step = 0, 32
    while lo < n:
        hi = min(n, lo + step)
        if a[i + lo:i + hi] != b[j + lo:j + hi]:
            while lo + 1 < hi:  # a[i + lo] .. agree, the prefix ends before hi
                mid = (lo + hi) // 2
                if a[i + lo:i + mid] == b[j + lo:j + mid]:
                    lo = mid
                else:
                    hi = mid
            return lo
        lo, step = hi, step * 2
    return n


_pool: list[str] = []


def _marker_pool(n: int, taken: frozenset[str]) -> list[str]:
    """``n`` marker characters, none of them in ``taken``."""
    if not taken:
        while len(_pool) < n:
            _pool.append(chr(_MARK_FIRST + len(_pool)))
        return _pool[:n]
    got: list[str] = []
    cp = _MARK_FIRST
    while len(got) < n:
        c = chr(cp)
        if c not in taken:
            got.append(c)
        cp += 1
    return got


def common_prefix(a: str, b: str) -> int:
    """The length of the common prefix of ``a`` and ``b`` (bisection over slices: C speed)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_suffix(a: str, b: str, limit: int) -> int:
    """The length of the common suffix of ``a`` and ``b``, at most ``limit``."""
    lo, hi = 0, min(len(a), len(b), max(limit, 0))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid:len(a) - lo] == b[len(b) - mid:len(b) - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _identity(content: str, after_last_user: bool) -> str:
    return content


def _lstrip_after_last_user(content: str, after_last_user: bool) -> str:
    # templates (Qwen3's) that strip leading newlines from the answer after the last question
    return content.lstrip("\n") if after_last_user else content


def _strip(content: str, after_last_user: bool) -> str:
    # templates that write `message['content'] | trim` (Llama 3's, Gemma's)
    return content.strip()


def _after_think(content: str, after_last_user: bool) -> str:
    # Qwen3's: an answer before the last question is written without its reasoning, the text
    # after the last </think> with its leading newlines stripped
    return content.split("</think>")[-1].lstrip("\n") if "</think>" in content else content


def last_user(turns: list[dict[str, Any]]) -> int:
    """The index of the last user turn (-1: none), once per row: a variant gets ``j > it``."""
    for k in range(len(turns) - 1, -1, -1):
        if turns[k]["role"] == "user":
            return k
    return -1


# How the template may write a content (each tried in turn, each proven by the marker check).
VARIANTS: tuple[Callable[[str, bool], str], ...] = (
    _identity, _lstrip_after_last_user, _strip, _after_think)
