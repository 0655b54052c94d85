"""Chat-template tokenization in one pass: Axolotl's ``input_ids``, ``labels`` and
``attention_mask`` for whole batches of conversations, in time linear in their length.

Axolotl finds each trainable turn by rendering the whole conversation twice more with a
placeholder in the turn's place and diffing the texts (O(turns x length) per conversation).
Here each conversation is rendered once whatever its length (text 1, the text that is
tokenized; where the template's path for the conversation's structure was recorded,
:mod:`fastaxo.chat.paths` gives that text without Jinja), and once per sequence of roles with
every message's content replaced by each of Axolotl's two placeholders (:class:`_Frames`:
those renders depend on the roles alone); a row
text 1 does not read through that frame is rendered with every trainable message's content
replaced by each placeholder (three renders a row). The placeholder renders fix the template's
text around the contents (the frame), and text 1 must be that frame with each content written
as it is (or as one of the :data:`~fastaxo.chat.locate.VARIANTS` a template may make of it),
in exactly one way (:mod:`fastaxo.chat.locate` has the argument): then the template's output
does not depend on those contents, and Axolotl's diff of text 1 against a render with one
placeholder is computed from the positions alone (:func:`_placeholder_span`).

A row that this does not prove takes the marker rounds (:class:`~fastaxo.chat.locate.RowState`):
renders with each content between two marker characters of its own, which say where each is;
a turn whose markers come out wrong tries the next variant in the next render, and after the
last one keeps its content unmarked and is placed as Axolotl places it, by two renders of its
own (counted in :attr:`ChatEngine.turn_counts`): a template that rewrites one message costs two
renders, not a quadratic row. The placeholder renders are then compared with text 1 with the
placeholders spliced over the proven contents; the turns around a difference go to their own
renders too.

The texts are tokenized as one batch (fastaxo's encoder where it gives HF's ids,
:attr:`ChatSpec.encoder`, else HF's fast tokenizer; their threads), and each conversation's
spans become labels in ``_pack.chat_rows_bytes`` (fastaxo's ids, a batch at a time, the GIL
released) / ``chat_labels_bytes`` (token boundaries from the ids' bytes) or, for text the byte
rule cannot place (NFC changes it, or the ids do not spell it), ``chat_row_offsets`` (bisect
into fastaxo's character offsets, HF's exactly) / ``chat_labels`` (bisect into HF's offsets),
with the end-of-turn search.
A row that fails a check is not guessed at: :meth:`ChatEngine.run` returns a :class:`Fallback`
with the reason, and the caller hands the row to Axolotl's code (or the reference
:func:`fastaxo._reference.chat.tokenize_conversation`).

Every render is bounded (:mod:`fastaxo.chat.render`): a template past its step bound raises
:class:`~fastaxo.errors.TemplateLimitError` from :meth:`ChatEngine.run` (Axolotl's own code
would not stop); a conversation whose text is larger than ``max_row_bytes`` is a
:class:`Fallback` carrying a :class:`~fastaxo.errors.RowTooLargeError`.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from fastaxo._core import backend
from fastaxo._core.threads import resolve_num_threads
from fastaxo._reference import chat as ref
from fastaxo.chat.locate import (
    MARK_RE,
    MAX_TRAINABLE_TURNS,
    VARIANTS,
    RowState,
    common_prefix,
    common_suffix,
    frame,
)
from fastaxo.chat.parts import Pending, Scratch, chunks, part_ranges, utf8_of
from fastaxo.chat.render import OutputTooLarge
from fastaxo.chat.spec import ChatSpec, encode_threads
from fastaxo.chat.utf8rows import as_str, utf8_texts
from fastaxo.errors import (
    ChatTemplateError,
    InvalidInputError,
    RowTooLargeError,
    TemplateLimitError,
)

__all__ = ["ChatEngine", "Fallback", "MAX_TRAINABLE_TURNS"]

# Placeholder comparisons that run past the message into the template (a content that is a
# prefix of a placeholder, or repeats around it) are not followed further than this.
_SCAN_CAP = 256
_MODES = {"turn": 1, "all": 2, "last": 3}
_OVERLAP = "a message's text overlaps Axolotl's placeholder"


class Fallback(NamedTuple):
    """A row the one-pass path does not produce, and why; ``error`` is what the caller should
    raise instead of tokenizing the row another way (the template's own error, or a
    :class:`~fastaxo.errors.RowTooLargeError`), else None."""

    reason: str
    error: Exception | None = None


Row = dict[str, Any]  # lists of ints, or int32 arrays (ChatEngine(arrays=True))


class ChatEngine:
    """Tokenizes conversations (lists of ``{"role", "content"}`` dicts, after Axolotl's
    message mapping) for one :class:`ChatSpec`. :attr:`turn_counts` counts, by reason, the
    turns of produced rows that were placed by their own renders (Axolotl's diff) because the
    template rewrites them; :attr:`encoder_counts` the rows tokenized, by the encoder that
    made their ids (``"fastaxo"``: fastaxo's C encoder, ``"hf"``: HF's tokenizers; see
    :attr:`ChatSpec.encoder`). With ``arrays``, the rows fastaxo's encoder makes hold int32
    NumPy arrays (no ``attention_mask``) instead of lists: no Python object per token, for
    callers that write columns (``prepare``); other rows keep lists."""

    def __init__(self, spec: ChatSpec, *, arrays: bool = False):
        problem = spec.problem()
        if problem is not None:
            raise InvalidInputError(f"spec: the one-pass chat path cannot run this "
                                    f"configuration: {problem}")
        self.spec = spec
        self.arrays = bool(arrays)
        self._eot = np.asarray(spec.eot_ids, np.int64)
        self._eos = np.asarray(() if spec.eos_id is None else (spec.eos_id,), np.int64)
        self._modes = (_MODES.get(spec.train_on_eot or "", 0),
                       _MODES.get(spec.train_on_eos or "", 0))
        self._taken = frozenset(MARK_RE.findall(spec.chat_template))
        self.turn_counts: Counter[str] = Counter()
        self.encoder_counts: Counter[str] = Counter()
        self._frames: _Frames = spec.__dict__.setdefault("_frames", _Frames())

    # -- the pass ---------------------------------------------------------------------------
    def run(self, conversations: Sequence[list[dict[str, Any]]],
            on_rows: Callable[[int], None] | None = None) -> list[Row | Fallback]:
        """One result per conversation: ``{"input_ids", "labels", "attention_mask"}`` or a
        :class:`Fallback`. Raises :class:`~fastaxo.errors.TemplateLimitError` (naming the
        row, 0-based in ``conversations``) for a template past its bounds.

        Rows go in parts of :data:`~fastaxo.chat.parts.PART_ROWS` (the first a quarter of
        that: the encoder waits for it): while one part's texts are tokenized (C, no GIL, the
        encoder's threads) on a thread of its own, the next part is rendered and placed; the
        thread is joined before the next part's tokenization starts. The last part is
        tokenized here.
        ``on_rows(k)`` is told each part's rows as the part is done (prepare's progress)."""
        out: list[Row | Fallback | None] = [None] * len(conversations)
        parts = part_ranges(len(out))
        if len(parts) > 1:  # not built by two threads at once
            self.spec.build_tables()
        pending: Pending | None = None
        last = 0  # rows of the part being tokenized on its thread
        scratch = Scratch()  # (one part is tokenized at a time)
        try:
            for part in parts:
                work = self._front(conversations, part, out)
                if pending is not None:
                    pending.wait()
                    pending = None
                    if on_rows is not None:
                        on_rows(last)
                if part is parts[-1]:  # nothing left to render: every thread encodes
                    self._tokenize(*work, out, scratch=scratch)
                    if on_rows is not None:
                        on_rows(len(part))
                else:  # the encoder's threads, beside the render of the next part (from
                    # recorded paths it takes a fraction of a core; one encoder thread left
                    # the other core idle half the time)
                    pending = Pending(self._tokenize, *work, out, scratch=scratch)
                    last = len(part)
        finally:
            if pending is not None:
                pending.join()
        done = [r for r in out if r is not None]
        if len(done) != len(out):  # pragma: no cover - every row gets a result or a reason
            raise AssertionError("ChatEngine.run left a row without a result")
        return done

    def _front(self, conversations: Sequence[list[dict[str, Any]]], part: range,
               out: list[Row | Fallback | None]
               ) -> tuple[dict[int, str], dict[int, np.ndarray], dict[int, list[int]]]:
        """Rows ``part`` (indices into ``conversations`` and ``out``) rendered and placed:
        their texts, trainable turns' spans and trainable turns; a row that cannot be is a
        Fallback in ``out``."""
        spec = self.spec
        fast: tuple[dict[int, bytes], dict[int, np.ndarray], dict[int, list[int]]] = (
            {}, {}, {})
        table = None
        if hasattr(conversations, "utf8_rows"):  # (rows from Arrow; lists never are)
            try:  # rows that stay UTF-8: the labels read bytes, so fastaxo's ids only
                table, enc = self._byte_path()
            except InvalidInputError:  # (FASTAXO_TOKENIZER=fastaxo refused: _tokenize says)
                table = None
        if table is not None and enc == "fastaxo":
            fast = utf8_texts(spec, conversations, part, _SCAN_CAP)
        rows = []
        for i in part:
            if i in fast[0]:
                continue
            problem = row_problem(conversations[i])
            if problem is not None:
                out[i] = Fallback(problem)
            else:
                rows.append(i)
        trainable = {i: [j for j, t in enumerate(conversations[i])
                         if spec.train_on_inputs or t["role"] in spec.roles_to_train]
                     for i in rows}
        texts, placed = self._texts(conversations, rows, trainable, out)
        state = {i: RowState(conversations[i], trainable[i]) for i in texts}
        for i, where in placed.items():  # placed by the path their text came from
            state[i].place(where)
        self._prove(texts, state, out)
        for i, st in state.items():
            if not st.settled and not st.assign_markers(self._taken):
                out[i] = Fallback(f"more than {MAX_TRAINABLE_TURNS:,} trainable messages")
        self._locate(conversations, texts, state, out)
        self._check_placeholders(conversations, texts, state, out)
        spans: dict[int, np.ndarray] = {}
        for i in texts:
            if out[i] is None:
                spans[i] = self._good_spans(conversations[i], texts[i], state[i])
        self._per_turn_spans(conversations, texts, state, spans, out)
        if not fast[0]:
            return texts, spans, {i: trainable[i] for i in texts}
        trainable.update(fast[2])
        spans.update(fast[1])
        mixed: dict[int, Any] = {**texts, **fast[0]}
        return ({i: mixed[i] for i in part if i in mixed}, spans,
                {i: trainable[i] for i in part if i in mixed})

    def _byte_path(self) -> tuple[tuple[np.ndarray, np.ndarray, bool] | None, str]:
        """The byte table labels are made from (None: the offsets path for every row) and the
        encoder of the ids (``"fastaxo"`` or ``"hf"``)."""
        table = self.spec.byte_tokens() if backend.pack_ext is not None else None
        return table, self.spec.encoder if table is not None else "hf"

    # -- steps ------------------------------------------------------------------------------
    def _texts(self, conversations: Sequence[list[dict[str, Any]]], rows: list[int],
               trainable: dict[int, list[int]], out: list[Row | Fallback | None]
               ) -> tuple[dict[int, str], dict[int, list[tuple[int, int]]]]:
        """Text 1 of each row, and the rows whose text came from a recorded path that places
        their trainable contents (:meth:`Paths.placed`: each one's ``(start, length)``); a
        row the template refuses, renders to nothing or renders too big is a Fallback."""
        limit = self.spec.max_row_bytes
        got = {}
        placed: dict[int, list[tuple[int, int]]] = {}
        paths = self.spec.paths()
        render = None
        if paths is not None:
            def render(c: list[dict[str, Any]], i: int) -> str:
                text, where = paths.placed(c, tuple(trainable[i]), ref.SENTINELS)
                if where:
                    placed[i] = where
                return text

        for i, t in zip(rows, self._render_each([conversations[i] for i in rows], rows,
                                                render), strict=True):
            if isinstance(t, OutputTooLarge):
                out[i] = _too_large(i, t.chars, limit)
            elif isinstance(t, BaseException):
                out[i] = Fallback("the template raised an error", t)  # type: ignore[arg-type]
            elif not t:
                out[i] = Fallback(NO_TEXT)
            elif len(t) * 4 > limit and len(t.encode("utf-8", "surrogatepass")) > limit:
                out[i] = _too_large(i, len(t.encode("utf-8", "surrogatepass")), limit)
            else:
                got[i] = t
        return got, {i: w for i, w in placed.items() if i in got}

    def _render_each(self, convs: list[list[dict[str, Any]]], rows: list[int],
                     render: Callable[[list[dict[str, Any]], int], str] | None = None
                     ) -> list[Any]:
        """Each conversation rendered (or by ``render(conversation, row)``), or the exception
        its render raised; a template past its step bound stops the pass (naming the row)."""
        got: list[Any] = []
        if render is None:
            spec = self.spec

            def render(c: list[dict[str, Any]], i: int) -> str:
                return spec.render([c])[0]

        for c, i in zip(convs, rows, strict=True):
            try:
                got.append(render(c, i))
            except TemplateLimitError as e:
                raise TemplateLimitError(f"row {i}: {e}") from None
            except (ChatTemplateError, OutputTooLarge) as e:
                got.append(e)
            except Exception as e:  # noqa: BLE001 - the HF path raises the template's own
                got.append(e)
        return got

    def _prove(self, texts: dict[int, str], state: dict[int, RowState],
               out: list[Row | Fallback | None]) -> None:
        """The two placeholder renders of every row with trainable turns, and the rows they
        place (:meth:`RowState.prove`). A render that fails in any way (even past the step
        bound) leaves its row to the marker rounds, which render what they need themselves:
        a row raises or falls back there exactly as it would have without this pass."""
        todo = [i for i in texts if out[i] is None and not state[i].settled
                and not self._prove_whole(texts[i], state[i])]
        if not todo:
            return
        got = [self._render_quiet([state[i].with_placeholder(s) for i in todo])
               for s in ref.SENTINELS]
        for i, d1, d2 in zip(todo, *got, strict=True):
            if isinstance(d1, str) and isinstance(d2, str):
                state[i].prove(texts[i], d1, d2)

    def _prove_whole(self, text: str, st: RowState) -> bool:
        """:meth:`RowState.prove_whole` with the frame of this row's roles: the two renders
        with every content a placeholder depend on the roles alone, so they are made once per
        sequence of roles and kept on the spec (:class:`_Frames`)."""
        frames = self._frames
        roles = tuple([t["role"] for t in st.turns])
        got = frames.get(roles)
        if got is None:
            if not frames.worth_trying():
                return False
            d1, d2 = self._render_quiet([[{"role": r, "content": s} for r in roles]
                                         for s in ref.SENTINELS])
            got = (frame(d1, d2, len(roles)) if isinstance(d1, str) and isinstance(d2, str)
                   else None) or []
            frames.put(roles, got)
        ok = bool(got) and st.prove_whole(text, got)
        frames.count(ok)
        return ok

    def _render_quiet(self, convs: list[list[dict[str, Any]]]) -> list[Any]:
        """Each conversation rendered, or None where its render raised (anything)."""
        got: list[Any] = []
        render = self.spec.render
        for c in convs:
            try:
                got.append(render([c])[0])
            except Exception:  # noqa: BLE001 - the marker rounds render it again, and say
                got.append(None)
        return got

    def _locate(self, conversations: Sequence[list[dict[str, Any]]], texts: dict[int, str],
                state: dict[int, RowState], out: list[Row | Fallback | None]) -> None:
        """Rounds of marked renders until every row's marked turns are proven (or given to
        their own renders); a row still unsettled after the last round is a Fallback."""
        for _ in range(len(VARIANTS) + 3):
            todo = [i for i in texts if out[i] is None and not state[i].settled]
            if not todo:
                return
            marked = self._render_each([state[i].marked() for i in todo], todo)
            for i, m in zip(todo, marked, strict=True):
                if not state[i].update(texts[i], m):
                    out[i] = Fallback("the template rewrites message text")
        for i in texts:
            if out[i] is None and not state[i].settled:
                out[i] = Fallback("the template rewrites message text")

    def _check_placeholders(self, conversations: Sequence[list[dict[str, Any]]],
                            texts: dict[int, str], state: dict[int, RowState],
                            out: list[Row | Fallback | None]) -> None:
        """Renders with every proven content replaced by each placeholder must be text 1 with
        the placeholder spliced in. Where one is not, the proven turns from the first
        difference to the last go to their own renders and the row is checked again."""
        checked = {i for i in texts if state[i].checked}
        for _ in range(3):
            todo = [i for i in texts if out[i] is None and i not in checked and state[i].proven()]
            if not todo:
                return
            failed: dict[int, list[int]] = {}
            for sentinel in ref.SENTINELS:
                rendered = self._render_each(
                    [state[i].with_placeholder(sentinel) for i in todo], todo)
                for i, got in zip(todo, rendered, strict=True):
                    if i in failed:
                        continue
                    want = _spliced(texts[i], state[i].proven_segments(), sentinel)
                    if got != want:
                        failed[i] = (state[i].placeholder_suspects(got, want, sentinel)
                                     if isinstance(got, str) else [])
            for i in todo:
                if i not in failed:
                    checked.add(i)
                elif failed[i]:
                    for k in failed[i]:
                        state[i].give_up_turn(k, "the template's output depends on message text")
                else:
                    out[i] = Fallback("the template's output depends on message text")
        for i in texts:
            if out[i] is None and i not in checked and state[i].proven():
                out[i] = Fallback("the template's output depends on message text")

    def _good_spans(self, turns: list[dict[str, Any]], text: str, st: RowState
                    ) -> np.ndarray:
        """Each trainable turn's character span as Axolotl's placeholder diffs give it, for the
        proven turns; the others (and proven turns whose text runs into a placeholder) are
        left to :meth:`_per_turn_spans`."""
        skip = bool(st.trainable) and st.trainable[0] == 0 and self.spec.skips_first_system \
            and turns[0]["role"] == "system"
        if backend.pack_ext is not None:  # the same scans in C
            spans, failed = backend.pack_ext.placeholder_spans(text, st.segments, ref.SENTINELS,
                                                               _SCAN_CAP, skip)
            for k in failed:
                st.give_up_turn(k, _OVERLAP)
            return spans
        spans = np.full((len(st.trainable), 2), -1, np.int64)
        for k, seg in enumerate(st.segments):
            if k == 0 and skip:
                spans[k] = (0, 0)
                continue
            if seg is None:
                continue
            union: tuple[int, int] | None = None
            for sentinel in ref.SENTINELS:
                span = _placeholder_span(text, seg[0], seg[1] - seg[0], sentinel)
                if span is None:
                    st.give_up_turn(k, _OVERLAP)
                    union = None
                    break
                union = span if union is None else (min(union[0], span[0]),
                                                    max(union[1], span[1]))
            if union is not None:
                spans[k] = union
        return spans

    def _per_turn_spans(self, conversations: Sequence[list[dict[str, Any]]],
                        texts: dict[int, str], state: dict[int, RowState],
                        spans: dict[int, np.ndarray], out: list[Row | Fallback | None]
                        ) -> None:
        """Axolotl's own diff for the turns the proofs left: text 1 against a render with a
        placeholder in that turn alone, for each placeholder."""
        todo = [(i, k) for i in spans for k in state[i].per_turn()
                if tuple(spans[i][k]) == (-1, -1)]
        if not todo:
            return
        for i, k in todo:
            self.turn_counts[state[i].why[k]] += 1
        found: dict[tuple[int, int], tuple[int, int]] = {}
        for sentinel in ref.SENTINELS:
            convs = [_one_placeholder(conversations[i], state[i].trainable[k], sentinel)
                     for i, k in todo]
            dummies = self._render_each(convs, [i for i, _ in todo])
            for (i, k), dummy in zip(todo, dummies, strict=True):
                if out[i] is not None:
                    continue
                if not isinstance(dummy, str) or not dummy:
                    # Axolotl then re-tokenizes the turn's prefix: that is the reference's
                    out[i] = Fallback("a turn's placeholder render gives no text")
                    continue
                cs, ce = _diff_span(texts[i], dummy)
                prev = found.get((i, k))
                found[(i, k)] = (cs, ce) if prev is None else (min(prev[0], cs),
                                                               max(prev[1], ce))
        for (i, k), span in found.items():
            if out[i] is None:
                spans[i][k] = span

    def _tokenize(self, texts: dict[int, str], spans: dict[int, np.ndarray],
                  trainable: dict[int, list[int]], out: list[Row | Fallback | None],
                  threads: int | None = None, scratch: Scratch | None = None) -> None:
        """Ids and labels of the rows still open. Byte-level tokenizers: ids alone (fastaxo's
        encoder or HF's, :attr:`ChatSpec.encoder`) and labels from their bytes; the rows that
        cannot (text an NFC tokenizer would change, ids that do not spell the text) take ids
        and character offsets from the same encoder (fastaxo's gives HF's offsets exactly)."""
        table, enc = self._byte_path()
        ready = [i for i in spans if out[i] is None]
        for chunk in chunks(ready, texts, utf8=enc == "fastaxo"):
            need = chunk
            if table is not None:
                by_bytes: list[int] = []
                need = []
                for i in chunk:  # an NFC tokenizer's offsets follow the normalizer's changes
                    # (fastaxo's ids spell the normalized text: chat_rows_bytes finds a change)
                    ok = (not table[2] or enc == "fastaxo"
                          or unicodedata.is_normalized("NFC", texts[i]))
                    (by_bytes if ok else need).append(i)
                if enc == "fastaxo":
                    done = self._rows_fastaxo(texts, by_bytes, spans, trainable, table, out,
                                              threads, scratch)
                else:
                    done = self._rows_hf_ids(texts, by_bytes, spans, trainable, table, out)
                need.extend(i for i in by_bytes if i not in done)
                self.encoder_counts[enc] += len(done)
                if enc == "fastaxo":
                    as_str(texts, spans, need)  # (UTF-8 rows: the offsets read characters)
                    self._rows_fastaxo_offsets(texts, need, spans, trainable, table, out,
                                               threads)
                    self.encoder_counts[enc] += len(need)
                    continue
            for i, (ids, offsets) in zip(need, self.spec.tokenize([texts[i] for i in need]),
                                         strict=True):
                out[i] = self._labels(ids, offsets, spans[i], trainable[i])
                self.encoder_counts["hf"] += 1

    def _rows_hf_ids(self, texts: dict[int, str], rows: list[int], spans: dict[int, np.ndarray],
                     trainable: dict[int, list[int]], table: tuple[np.ndarray, np.ndarray, bool],
                     out: list[Row | Fallback | None]) -> set[int]:
        """The rows made from HF's ids alone; the others are left for the offsets."""
        done = set()
        ids_list = self.spec.tokenize_ids([texts[i] for i in rows]) or []
        for i, ids in zip(rows, ids_list, strict=True):
            r = self._labels_bytes(texts[i], ids, spans[i], trainable[i], table)
            if r is not None:
                out[i] = r
                done.add(i)
        return done

    def _rows_fastaxo(self, texts: dict[int, str], rows: list[int],
                      spans: dict[int, np.ndarray], trainable: dict[int, list[int]],
                      table: tuple[np.ndarray, np.ndarray, bool],
                      out: list[Row | Fallback | None], threads: int | None = None,
                      scratch: Scratch | None = None) -> set[int]:
        """The rows made from fastaxo's ids: the texts' UTF-8 (:func:`_utf8_of`, made on this
        thread) read by the encoder and the label kernel alike, ids as int32 until the row is
        proven."""
        import pyarrow as pa

        done: set[int] = set()
        if not rows:
            return done
        data, offsets, chars = utf8_of([texts[i] for i in rows], scratch)
        arr = pa.LargeStringArray.from_buffers(len(rows), pa.py_buffer(offsets),
                                               pa.py_buffer(data))
        vals, id_off = self.spec.fastaxo_ids(arr, threads, validate=False)  # (str.encode's)
        span_rows = [spans[i] for i in rows]
        span_off = np.zeros(len(rows) + 1, np.int64)
        np.cumsum([len(s) for s in span_rows], out=span_off[1:])
        tok_off, tok_bytes, _ = table
        # every row at once, the GIL released: the other thread renders meanwhile
        labels, status = backend.pack_ext.chat_rows_bytes(  # type: ignore[union-attr]
            vals, id_off, data, offsets, chars,
            np.concatenate(span_rows), span_off, tok_off, tok_bytes, self._eot, self._eos,
            self._modes[0], self._modes[1],
            resolve_num_threads(threads or encode_threads()))  # (the encoder's count)
        id_at = id_off.tolist()
        pool = None if self.arrays else _int_pool(len(tok_off) - 1)
        pooled = backend.pack_ext.pooled_list  # type: ignore[union-attr]
        for k, (i, bad) in enumerate(zip(rows, status.tolist(), strict=True)):
            if bad < -1:
                continue  # not spelled (NFC changed the text), or no ids: the offsets path
            a, b = id_at[k], id_at[k + 1]
            if bad >= 0:
                out[i] = self._row(None, None, bad, trainable[i])
            elif pool is None:  # views of the batch's buffers
                out[i] = {"input_ids": vals[a:b], "labels": labels[a:b]}
            else:
                ids = pooled(vals[a:b], pool)
                out[i] = {"input_ids": ids, "labels": pooled(labels[a:b], pool),
                          "attention_mask": [1] * (b - a)}
            done.add(i)
        return done

    def _rows_fastaxo_offsets(self, texts: dict[int, str], rows: list[int],
                              spans: dict[int, np.ndarray], trainable: dict[int, list[int]],
                              table: tuple[np.ndarray, np.ndarray, bool],
                              out: list[Row | Fallback | None], threads: int | None = None
                              ) -> None:
        """The rows made from fastaxo's ids and its character offsets (HF's ``offsets``,
        exactly: :meth:`ChatSpec.fastaxo_offsets`), bisected as Axolotl bisects HF's."""
        if not rows:
            return
        vals, id_off, pairs = self.spec.fastaxo_offsets([texts[i] for i in rows], threads)
        at = id_off.tolist()
        kernel = backend.pack_ext.chat_row_offsets  # type: ignore[union-attr]
        pool = _int_pool(len(table[0]) - 1)
        for k, i in enumerate(rows):
            a, b = at[k], at[k + 1]
            if a == b:
                out[i] = Fallback(NO_TOKENS)
                continue
            ids, labels, bad = kernel(vals[a:b], pairs[a:b], spans[i], self._eot, self._eos,
                                      self._modes[0], self._modes[1], pool, self.arrays)
            out[i] = self._row(ids, labels, bad, trainable[i])

    def _labels(self, ids: list[int], offsets: Any, spans: np.ndarray, trainable: list[int]
                ) -> Row | Fallback:
        if not ids:
            return Fallback(NO_TOKENS)
        labels, bad = _chat_labels(ids, offsets, spans, self._eot, self._eos, self._modes)
        return self._row(ids, labels, bad, trainable)

    def _labels_bytes(self, text: str, ids: list[int], spans: np.ndarray, trainable: list[int],
                      table: tuple[np.ndarray, np.ndarray, bool]) -> Row | Fallback | None:
        """The labels from the ids alone (byte-level tokenizers); None: use the offsets."""
        offsets, blob, _ = table
        if not ids or backend.pack_ext is None:
            return None
        data = text.encode("utf-8")
        labels, bad = backend.pack_ext.chat_labels_bytes(
            ids, data, offsets, blob, _byte_spans(text, spans), self._eot, self._eos,
            self._modes[0], self._modes[1])
        if bad == -2:
            return None
        return self._row(ids, labels, bad, trainable)

    @staticmethod
    def _row(ids: Any, labels: Any, bad: int, trainable: list[int]) -> Row | Fallback:
        if labels is None:
            return Fallback(f"turn {trainable[bad]} starts after the last token (Axolotl "
                            "re-tokenizes it)")
        if isinstance(ids, np.ndarray):  # ChatEngine(arrays=True): no mask list per row
            return {"input_ids": ids, "labels": labels}
        return {"input_ids": ids, "labels": labels, "attention_mask": [1] * len(ids)}


class _Frames:
    """Per sequence of roles, the frame of the renders with every content a placeholder
    (:func:`~fastaxo.chat.locate.frame`; ``[]``: the renders failed or are not one frame),
    for :meth:`ChatEngine._prove_whole`. At most :data:`FRAME_KEYS` sequences are kept (all
    are dropped when full: datasets hold a few dozen). Where that proof fails on most rows
    (a template that rewrites what the users write, say), new sequences stop being rendered
    for it: those two renders would come on top of the row's own placeholder renders."""

    __slots__ = ("bad", "good", "known")

    def __init__(self) -> None:
        self.known: dict[tuple[str, ...], list[str]] = {}
        self.good = self.bad = 0

    def get(self, roles: tuple[str, ...]) -> list[str] | None:
        return self.known.get(roles)

    def put(self, roles: tuple[str, ...], frames: list[str]) -> None:
        if len(self.known) >= FRAME_KEYS:
            self.known.clear()
        self.known[roles] = frames

    def worth_trying(self) -> bool:
        return self.bad < 32 or self.good * 4 >= self.bad

    def count(self, ok: bool) -> None:
        if ok:
            self.good += 1
        else:
            self.bad += 1


FRAME_KEYS = 4096

# the Fallback reason (and ChatResult.empty key) of a conversation over max_row_bytes
TOO_LARGE = "the conversation is larger than max_row_bytes"
# the Fallback reasons of a row that has no tokens
NO_TEXT = "the conversation renders to no text"
NO_TOKENS = "the conversation renders to no tokens"


def _too_large(row: int, size: int, limit: int) -> Fallback:
    err = RowTooLargeError(
        f"conversation {row} (0-based) renders to {size:,}+ bytes of text, more than "
        f"max_row_bytes ({limit:,}); drop it (overflow='drop'), raise max_row_bytes, or split "
        "the conversation", row, size, limit)
    return Fallback(TOO_LARGE, err)



# the ints 0..n-1 that rows' ids are made of (one object per token id, shared by every row:
# a row's list takes references, no int is allocated per token); replaced whole, never
# changed, so a thread holding one keeps a valid one
_ints: list[list[int]] = [[]]


def _int_pool(n: int) -> list[int]:
    pool = _ints[0]
    if len(pool) < n:
        pool = list(range(n))
        _ints[0] = pool
    return pool




def _diff_span(full: str, dummy: str) -> tuple[int, int]:
    """Axolotl's ``_diff_char_span`` (:func:`fastaxo._reference.chat.diff_char_span`), by
    bisection over slices."""
    i = common_prefix(full, dummy)
    j = common_suffix(full, dummy, min(len(full), len(dummy)) - i)
    return i, len(full) - j


def _one_placeholder(turns: list[dict[str, Any]], j: int, sentinel: str
                     ) -> list[dict[str, Any]]:
    new = list(turns)
    new[j] = {"role": turns[j]["role"], "content": sentinel}
    return new


def _byte_spans(utf8: Any, spans: np.ndarray) -> np.ndarray:
    """Character spans as UTF-8 byte positions: ``utf8`` is the text's UTF-8 (a uint8 array,
    or the str itself), read once: where each character starts, and the end."""
    if isinstance(utf8, str):
        if utf8.isascii():
            return spans
        utf8 = np.frombuffer(utf8.encode("utf-8"), np.uint8)
    starts = np.ones(len(utf8) + 1, bool)
    np.not_equal(utf8 & 0xC0, 0x80, out=starts[:-1])
    at = np.flatnonzero(starts)
    return np.where(spans < 0, spans, at[np.maximum(spans, 0)])


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
        if not isinstance(t["content"], str) or not isinstance(t["role"], str):
            return "a message whose role or content is not a string"
    return None



def _spliced(text: str, segments: list[tuple[int, int]], sentinel: str) -> str:
    parts, at = [], 0
    for a, b in segments:
        parts.append(text[at:a])
        parts.append(sentinel)
        at = b
    parts.append(text[at:])
    return "".join(parts)


def _placeholder_span(full: str, p: int, length: int, sentinel: str, cap: int = _SCAN_CAP
                      ) -> tuple[int, int] | None:
    """Axolotl's ``_diff_char_span(full, dummy)`` where ``dummy`` is ``full`` with
    ``full[p:p + length]`` replaced by ``sentinel`` (proven by the placeholder renders), without
    building ``dummy``: both scans start where the texts are known to agree (and run at most
    ``cap`` characters, else None)."""
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
        if i - p > cap:
            return None
    bound = limit - i
    j0 = min(n - p - length, bound)  # the text after the message agrees by construction
    j = j0
    while j < bound and full[n - 1 - j] == dummy_at(nd - 1 - j):
        j += 1
        if j - j0 > cap:
            return None
    return i, n - j
