"""Chat-template tokenization in one pass: Axolotl's ``input_ids``, ``labels`` and
``attention_mask`` for whole batches of conversations, in time linear in their length.

Axolotl finds each trainable turn by rendering the whole conversation twice more with a
placeholder in the turn's place and diffing the texts (O(turns x length) per conversation).
Here each conversation is rendered four times whatever its length:

1. as it is (the text that is tokenized);
2. with every trainable message's content wrapped in two private-use marker characters. Taking
   the markers out must give text 1 exactly and each pair must wrap exactly that message's
   content: then the template writes the content verbatim and the markers say where;
3. and 4. with every trainable content replaced by each of Axolotl's two placeholders. Each
   must equal text 1 with the contents cut out and the placeholder spliced in: then the
   template's output does not depend on those contents, and Axolotl's diff of text 1 against a
   render with one placeholder is computed from the positions alone (:func:`_placeholder_span`).

The texts are tokenized as one batch (the fast tokenizer's threads), and each conversation's
spans become labels in ``_pack.chat_labels`` (bisect into the offsets, end-of-turn search).
A row that fails a check is not guessed at: :meth:`ChatEngine.run` returns a :class:`Fallback`
with the reason, and the caller hands the row to Axolotl's code (or the reference
:func:`fastaxo._reference.chat.tokenize_conversation`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from fastaxo._core import backend
from fastaxo._reference import chat as ref
from fastaxo.chat.spec import ChatSpec
from fastaxo.errors import InvalidInputError

__all__ = ["ChatEngine", "Fallback", "MARKERS"]

MARKERS = ("\ue000", "\ue001")
_OPEN, _CLOSE = MARKERS
# Placeholder comparisons that run past the message into the template (a content that is a
# prefix of a placeholder, or repeats around it) are not followed further than this.
_SCAN_CAP = 256
# Characters per tokenizer call: bounds the Python lists of ids and offsets held at once.
_BATCH_CHARS = 4 << 20
_MODES = {"turn": 1, "all": 2, "last": 3}


class Fallback(NamedTuple):
    """A row the one-pass path does not produce, and why."""

    reason: str


Row = dict[str, list[int]]


class ChatEngine:
    """Tokenizes conversations (lists of ``{"role", "content"}`` dicts, after Axolotl's
    message mapping) for one :class:`ChatSpec`."""

    def __init__(self, spec: ChatSpec):
        problem = spec.problem()
        if problem is not None:
            raise InvalidInputError(f"spec: the one-pass chat path cannot run this "
                                    f"configuration: {problem}")
        self.spec = spec
        self._eot = np.asarray(spec.eot_ids, np.int64)
        self._eos = np.asarray(() if spec.eos_id is None else (spec.eos_id,), np.int64)
        self._modes = (_MODES.get(spec.train_on_eot or "", 0),
                       _MODES.get(spec.train_on_eos or "", 0))

    # -- the pass ---------------------------------------------------------------------------
    def run(self, conversations: Sequence[list[dict[str, Any]]]) -> list[Row | Fallback]:
        """One result per conversation: ``{"input_ids", "labels", "attention_mask"}`` or a
        :class:`Fallback`."""
        spec = self.spec
        out: list[Row | Fallback | None] = [None] * len(conversations)
        rows = []
        for i, turns in enumerate(conversations):
            problem = row_problem(turns)
            if problem is not None:
                out[i] = Fallback(problem)
            else:
                rows.append(i)
        texts = self._render(conversations, rows, None, out)
        located: dict[int, list[tuple[int, int]]] = {}
        trainable = {i: [j for j, t in enumerate(conversations[i])
                         if spec.train_on_inputs or t["role"] in spec.roles_to_train]
                     for i in texts}
        for i in texts:
            if not trainable[i]:
                located[i] = []  # nothing to place: the text is all there is
        for variant in _VARIANTS:
            todo = [i for i in texts if i not in located and out[i] is None
                    and (variant is _VARIANTS[0] or _changes(variant, conversations[i],
                                                            trainable[i]))]
            if not todo:
                continue
            marked = self._render(conversations, todo, (variant, trainable), out, keep=True)
            for i in todo:
                got = _locate(texts[i], marked.get(i), conversations[i], trainable[i], variant)
                if got is not None:
                    located[i] = got
        for i in texts:
            if out[i] is None and i not in located:
                out[i] = Fallback("the template rewrites message text")
        self._check_placeholders(conversations, texts, trainable, located, out)
        spans: dict[int, np.ndarray] = {}
        for i in texts:
            if out[i] is None:
                made = self._char_spans(conversations[i], texts[i], trainable[i], located[i])
                if isinstance(made, Fallback):
                    out[i] = made
                else:
                    spans[i] = made
        table = spec.byte_tokens()
        for chunk in _chunks(list(spans), texts):
            need = chunk
            if table is not None:
                need = []
                ids_list = spec.tokenize_ids([texts[i] for i in chunk]) or []
                for i, ids in zip(chunk, ids_list, strict=True):
                    r = self._labels_bytes(texts[i], ids, spans[i], trainable[i], table)
                    if r is None:
                        need.append(i)
                    else:
                        out[i] = r
            for i, (ids, offsets) in zip(need, spec.tokenize([texts[i] for i in need]),
                                         strict=True):
                out[i] = self._labels(ids, offsets, spans[i], trainable[i])
        done = [r for r in out if r is not None]
        if len(done) != len(out):  # pragma: no cover - every row gets a result or a reason
            raise AssertionError("ChatEngine.run left a row without a result")
        return done

    # -- steps ------------------------------------------------------------------------------
    def _render(self, conversations: Sequence[list[dict[str, Any]]], rows: list[int],
                replace: tuple[Any, dict[int, list[int]]] | None,
                out: list[Row | Fallback | None], keep: bool = False) -> dict[int, str]:
        convs = [conversations[i] if replace is None
                 else _replaced(conversations[i], replace[1][i], replace[0]) for i in rows]
        texts = _render_each(self.spec, convs)
        got = {}
        for i, t in zip(rows, texts, strict=True):
            if isinstance(t, str) and (keep or (t and _OPEN not in t and _CLOSE not in t)):
                got[i] = t
            elif not keep:
                out[i] = Fallback("the template raised an error" if isinstance(t, BaseException)
                                  else "the template gives no text")
        return got

    def _check_placeholders(self, conversations: Sequence[list[dict[str, Any]]],
                            texts: dict[int, str], trainable: dict[int, list[int]],
                            located: dict[int, list[tuple[int, int]]],
                            out: list[Row | Fallback | None]) -> None:
        todo = [i for i in texts if out[i] is None and trainable[i]]
        for sentinel in ref.SENTINELS:
            rendered = _render_each(self.spec, [
                _with_placeholder(conversations[i], trainable[i], sentinel) for i in todo])
            for i, got in zip(todo, rendered, strict=True):
                if out[i] is None and got != _spliced(texts[i], located[i], sentinel):
                    out[i] = Fallback("the template's output depends on message text")

    def _char_spans(self, turns: list[dict[str, Any]], text: str, trainable: list[int],
                    segments: list[tuple[int, int]]) -> np.ndarray | Fallback:
        """Each trainable turn's character span as Axolotl's placeholder diffs give it."""
        spans = np.empty((len(trainable), 2), np.int64)
        for k, (j, (p, end)) in enumerate(zip(trainable, segments, strict=True)):
            if j == 0 and self.spec.skips_first_system and turns[0]["role"] == "system":
                spans[k] = (0, 0)
                continue
            union: tuple[int, int] | None = None
            for sentinel in ref.SENTINELS:
                span = _placeholder_span(text, p, end - p, sentinel)
                if span is None:
                    return Fallback("a message's text overlaps Axolotl's placeholder")
                union = span if union is None else (min(union[0], span[0]),
                                                    max(union[1], span[1]))
            spans[k] = union  # type: ignore[assignment]  # set by the loop
        return spans

    def _labels(self, ids: list[int], offsets: Any, spans: np.ndarray, trainable: list[int]
                ) -> Row | Fallback:
        if not ids:
            return Fallback("the conversation renders to no tokens")
        labels, bad = _chat_labels(ids, offsets, spans, self._eot, self._eos, self._modes)
        return self._row(ids, labels, bad, trainable)

    def _labels_bytes(self, text: str, ids: list[int], spans: np.ndarray, trainable: list[int],
                      table: tuple[np.ndarray, np.ndarray, bool]) -> Row | Fallback | None:
        """The labels from the ids alone (byte-level tokenizers); None: use the offsets."""
        offsets, blob, nfc = table
        if not ids or backend.pack_ext is None or (nfc and not unicodedata.is_normalized(
                "NFC", text)):
            return None
        data = text.encode("utf-8")
        labels, bad = backend.pack_ext.chat_labels_bytes(
            ids, data, offsets, blob, _byte_spans(text, spans), self._eot, self._eos,
            self._modes[0], self._modes[1])
        if bad == -2:
            return None
        return self._row(ids, labels, bad, trainable)

    @staticmethod
    def _row(ids: list[int], labels: list[int] | None, bad: int, trainable: list[int]
             ) -> Row | Fallback:
        if labels is None:
            return Fallback(f"turn {trainable[bad]} starts after the last token (Axolotl "
                            "re-tokenizes it)")
        return {"input_ids": ids, "labels": labels, "attention_mask": [1] * len(ids)}


def _byte_spans(text: str, spans: np.ndarray) -> np.ndarray:
    """Character spans as UTF-8 byte positions (one pass over the text)."""
    if text.isascii():
        return spans
    out = np.empty_like(spans)
    at_char = at_byte = 0
    order = np.argsort(spans, axis=None, kind="stable")
    flat = spans.reshape(-1)
    dst = out.reshape(-1)
    for k in order.tolist():
        c = int(flat[k])
        if c < 0:
            dst[k] = c
            continue
        at_byte += len(text[at_char:c].encode("utf-8"))
        at_char = c
        dst[k] = at_byte
    return out


def _chat_labels(ids: list[int], offsets: list[tuple[int, int]], spans: np.ndarray,
                 eot: np.ndarray, eos: np.ndarray, modes: tuple[int, int]
                 ) -> tuple[list[int] | None, int]:
    if backend.pack_ext is not None:
        return backend.pack_ext.chat_labels(ids, offsets, spans, eot, eos, modes[0], modes[1])
    names = {v: k for k, v in _MODES.items()}
    return ref.chat_labels(ids, offsets, [tuple(s) for s in spans.tolist()], eot.tolist(),
                           eos.tolist(), names.get(modes[0]), names.get(modes[1]))


# -- rows ----------------------------------------------------------------------------------

def row_problem(turns: Any) -> str | None:
    """Why a conversation (after Axolotl's message mapping) is not for the one-pass path."""
    if not isinstance(turns, list) or not turns:
        return "an empty conversation"
    for t in turns:
        if type(t) is not dict:
            return "a message that is not a dict"
        if len(t) != 2 or "role" not in t or "content" not in t:
            extra = sorted(set(t) - {"role", "content"})
            return f"message field {extra[0]!r}" if extra else "a message without content"
        content = t["content"]
        if not isinstance(content, str) or not isinstance(t["role"], str):
            return "a message whose role or content is not a string"
        if _OPEN in content or _CLOSE in content:
            return "private-use marker characters U+E000/U+E001 in a message"
    return None


def _identity(content: str, after_last_user: bool) -> str:
    return content


def _lstrip_after_last_user(content: str, after_last_user: bool) -> str:
    # templates (Qwen3's) that strip leading newlines from the answer after the last question
    return content.lstrip("\n") if after_last_user else content


def _strip(content: str, after_last_user: bool) -> str:
    # templates that write `message['content'] | trim` (Llama 3's, Gemma's)
    return content.strip()


def _last_user(turns: list[dict[str, Any]]) -> int:
    """The index of the last user turn (-1: none), once per row: a variant gets ``j > it``."""
    return max((k for k, t in enumerate(turns) if t["role"] == "user"), default=-1)


# How the template may write a content (each tried in turn, each proven by the marker check).
_VARIANTS: tuple[Callable[[str, bool], str], ...] = (
    _identity, _lstrip_after_last_user, _strip)


def _changes(variant: Any, turns: list[dict[str, Any]], trainable: list[int]) -> bool:
    last = _last_user(turns)
    return any(variant(turns[j]["content"], j > last) != turns[j]["content"] for j in trainable)


def _replaced(turns: list[dict[str, Any]], trainable: list[int], variant: Any
              ) -> list[dict[str, Any]]:
    new = list(turns)
    last = _last_user(turns)
    for j in trainable:
        t = turns[j]
        new[j] = {"role": t["role"], "content": _OPEN + variant(t["content"], j > last) + _CLOSE}
    return new


def _with_placeholder(turns: list[dict[str, Any]], trainable: list[int], sentinel: str
                      ) -> list[dict[str, Any]]:
    new = list(turns)
    for j in trainable:
        new[j] = {"role": turns[j]["role"], "content": sentinel}
    return new


def _locate(text: str, marked: str | None, turns: list[dict[str, Any]], trainable: list[int],
            variant: Any) -> list[tuple[int, int]] | None:
    """Each trainable content's ``(start, end)`` in ``text``, from the marked render."""
    if marked is None:
        return None
    if not trainable:
        return [] if marked == text else None
    if marked.count(_OPEN) != len(trainable) or marked.count(_CLOSE) != len(trainable):
        return None
    segments = []
    at = 0
    last = _last_user(turns)
    for k, j in enumerate(trainable):
        a = marked.find(_OPEN, at)
        b = marked.find(_CLOSE, a + 1)
        if a < 0 or b < 0 or marked.find(_CLOSE, at, a) >= 0:
            return None
        content = variant(turns[j]["content"], j > last)
        if b - a - 1 != len(content) or marked[a + 1:b] != content:
            return None
        start = a - 2 * k
        segments.append((start, start + len(content)))
        at = b + 1
    if marked.replace(_OPEN, "").replace(_CLOSE, "") != text:
        return None
    return segments


def _spliced(text: str, segments: list[tuple[int, int]], sentinel: str) -> str:
    parts, at = [], 0
    for a, b in segments:
        parts.append(text[at:a])
        parts.append(sentinel)
        at = b
    parts.append(text[at:])
    return "".join(parts)


def _placeholder_span(full: str, p: int, length: int, sentinel: str) -> tuple[int, int] | None:
    """Axolotl's ``_diff_char_span(full, dummy)`` where ``dummy`` is ``full`` with
    ``full[p:p + length]`` replaced by ``sentinel`` (proven by the placeholder renders), without
    building ``dummy``: both scans start where the texts are known to agree."""
    n, x = len(full), len(sentinel)
    nd = n - length + x
    limit = min(n, nd)

    def dummy_at(i: int) -> str:
        if i < p:
            return full[i]
        if i < p + x:
            return sentinel[i - p]
        return full[i - x + length]

    i = p
    while i < limit and full[i] == dummy_at(i):
        i += 1
        if i - p > _SCAN_CAP:
            return None
    bound = limit - i
    j0 = min(n - p - length, bound)  # the text after the message agrees by construction
    j = j0
    while j < bound and full[n - 1 - j] == dummy_at(nd - 1 - j):
        j += 1
        if j - j0 > _SCAN_CAP:
            return None
    return i, n - j


def _render_each(spec: ChatSpec, convs: list[list[dict[str, Any]]]) -> list[str | BaseException]:
    """Render a batch; if the template raises, render one by one to find the rows it raises on."""
    if not convs:
        return []
    try:
        return list(spec.render(convs))
    except Exception:  # noqa: BLE001 - templates raise anything (raise_exception, TypeError)
        pass
    got: list[str | BaseException] = []
    for c in convs:
        try:
            got.append(spec.render([c])[0])
        except Exception as exc:  # noqa: BLE001
            got.append(exc)
    return got


def _chunks(rows: list[int], texts: dict[int, str]) -> list[list[int]]:
    chunks: list[list[int]] = []
    size = _BATCH_CHARS
    for i in rows:
        if size + len(texts[i]) > _BATCH_CHARS and (not chunks or chunks[-1]):
            chunks.append([])
            size = 0
        chunks[-1].append(i)
        size += len(texts[i])
    return chunks
