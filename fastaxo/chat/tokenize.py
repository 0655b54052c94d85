"""``tokenize_chat``: chat conversations to Axolotl's ``input_ids`` / ``labels`` /
``attention_mask`` for scripts and ``fastaxo prepare``, without Axolotl installed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastaxo._reference import chat as ref
from fastaxo.chat.engine import NO_TEXT, NO_TOKENS, TOO_LARGE, ChatEngine, Fallback
from fastaxo.chat.render import OutputTooLarge
from fastaxo.chat.spec import ChatSpec
from fastaxo.errors import (
    ChatTemplateError,
    InvalidInputError,
    InvalidTypeError,
    RowTooLargeError,
    TemplateLimitError,
)

__all__ = ["ChatResult", "ROLE_NAMES", "normalize_messages", "tokenize_chat",
           "tokenize_turns"]

# Axolotl's default role names (ChatTemplatePrompter.roles)
ROLE_NAMES = {"human": "user", "user": "user", "assistant": "assistant", "gpt": "assistant",
              "system": "system", "tool": "tool"}


@dataclass
class ChatResult:
    """The tokenized conversations (one list per row, in input order) and how they were made.

    ``fallbacks`` counts, by reason, the rows the one-pass path could not prove and that were
    made by Axolotl's own algorithm (:func:`fastaxo._reference.chat.tokenize_conversation`);
    ``turn_fallbacks`` the turns of one-pass rows placed by their own renders (Axolotl's diff)
    because the template rewrites them; ``empty`` the rows given no tokens, by reason (a
    conversation the template renders to no text, or one larger than ``max_row_bytes`` with
    ``too_large="skip"``), and ``too_large`` the indices of the latter; ``encoders`` the
    one-pass rows by the encoder that made their ids (``"fastaxo"``, ``"hf"``: see
    :attr:`ChatSpec.encoder`)."""

    input_ids: list[list[int]] = field(default_factory=list)
    labels: list[list[int]] = field(default_factory=list)
    attention_mask: list[list[int]] = field(default_factory=list)
    fallbacks: Counter[str] = field(default_factory=Counter)
    turn_fallbacks: Counter[str] = field(default_factory=Counter)
    empty: Counter[str] = field(default_factory=Counter)
    too_large: list[int] = field(default_factory=list)
    encoders: Counter[str] = field(default_factory=Counter)

    def __len__(self) -> int:
        return len(self.input_ids)

    def to_dict(self) -> dict[str, list[list[int]]]:
        return {"input_ids": self.input_ids, "labels": self.labels,
                "attention_mask": self.attention_mask}


def normalize_messages(messages: Any, row: int) -> list[dict[str, Any]]:
    """One row's ``messages`` as Axolotl's default mapping gives them: ``role`` (mapped through
    :data:`ROLE_NAMES`) and ``content``; a JSON string is parsed first, null values dropped."""
    if isinstance(messages, str):
        import json

        try:
            messages = json.loads(messages)
        except ValueError as exc:
            raise InvalidInputError(f"messages: row {row} is a string but not JSON ({exc})"
                                    ) from None
        except RecursionError:  # (Python's parser recurses per level of nesting)
            raise InvalidInputError(f"messages: row {row} is JSON nested too deep to be a "
                                    "list of messages") from None
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)) or not messages:
        raise InvalidInputError(f"messages: row {row}: expected a non-empty list of "
                                f"{{'role', 'content'}} dicts, got {_kind(messages)}")
    turns = []
    for j, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise InvalidTypeError(f"messages: row {row} message {j}: expected a dict with "
                                   f"'role' and 'content', got {_kind(m)}")
        extra = sorted(k for k, v in m.items() if v is not None and k not in ("role", "content"))
        if extra:
            raise InvalidInputError(
                f"messages: row {row} message {j} has field {extra[0]!r}; fastaxo's chat path "
                "takes role and content only (tools, reasoning and per-message training are "
                "Axolotl's: run `axolotl preprocess` with the fastaxo plugin)")
        role, content = m.get("role"), m.get("content")
        if not isinstance(role, str) or not isinstance(content, str):
            raise InvalidTypeError(
                f"messages: row {row} message {j}: expected string role and content, got "
                f"role {_kind(role)}, content {_kind(content)}")
        for name, text in (("role", role), ("content", content)):
            if not text.isascii():
                _check_unicode(text, f"messages: row {row} message {j} {name}")
        turns.append({"role": ROLE_NAMES.get(role, role), "content": content})
    return turns


def content_bytes(turns: list[dict[str, Any]], limit: int) -> int:
    """The UTF-8 bytes of a normalized conversation's message contents where that decides
    ``limit``; the characters (a lower bound) where they alone decide it. Text is encoded only
    when its characters do not settle it."""
    chars = sum(len(t["content"]) for t in turns)
    return chars if chars > limit or chars * 4 <= limit else _utf8_bytes(turns)


def _utf8_bytes(turns: list[dict[str, Any]]) -> int:
    return sum(len(c) if c.isascii() else len(c.encode("utf-8", "surrogatepass"))
               for c in (t["content"] for t in turns))


def _check_unicode(text: str, where: str) -> None:
    """A lone surrogate (from JSON's ``\\ud800`` escapes, or a decode with surrogateescape) is
    not text: no tokenizer takes it (HF's raises a TypeError)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidInputError(
            f"{where} holds a lone surrogate U+{ord(text[e.start]):04X} at character {e.start:,}, "
            "which is not valid Unicode text; repair the data (e.g. decode it with "
            "errors='replace')") from None


def tokenize_chat(conversations: Iterable[Any], tokenizer: Any = None, *,
                  spec: ChatSpec | None = None, too_large: str = "error",
                  **options: Any) -> ChatResult:
    """Tokenize chat conversations as Axolotl's ``type: chat_template`` does.

    ``conversations``: rows of ``messages`` (lists of ``{"role", "content"}`` dicts, or their
    JSON text). Either ``tokenizer`` (a fast transformers tokenizer) with ``options`` for
    :meth:`ChatSpec.create` (``chat_template``, ``roles_to_train``, ``train_on_inputs``,
    ``train_on_eos``, ``train_on_eot``, ``eot_tokens``, ``template_kwargs``), or ``spec``.

    Every row is Axolotl's output for the same settings. Rows are made in one pass; a row the
    one-pass path cannot prove is made with Axolotl's own (slower) algorithm and counted in
    :attr:`ChatResult.fallbacks`. A conversation the template renders to no text gets no tokens
    (Axolotl's own code raises an IndexError on it), counted in :attr:`ChatResult.empty`.

    A conversation whose message contents (UTF-8 bytes), or whose rendered text, are larger
    than the spec's ``max_row_bytes`` never reaches the tokenizer (over-long contents are not
    rendered either): ``too_large="error"`` raises :class:`~fastaxo.errors.RowTooLargeError`,
    ``"skip"`` gives it no tokens and lists it in :attr:`ChatResult.too_large`. An error of the
    template (``raise_exception``, the sandbox, its step or size bounds) raises
    :class:`~fastaxo.errors.ChatTemplateError` naming the row.
    """
    if too_large not in ("error", "skip"):
        raise InvalidInputError(f"too_large: expected 'error' or 'skip', got {too_large!r}")
    if spec is None:
        if tokenizer is None:
            raise InvalidInputError("tokenizer: expected a transformers tokenizer or spec=, "
                                    "got neither")
        spec = ChatSpec.create(tokenizer, **options)
    elif tokenizer is not None or options:
        raise InvalidInputError("spec: give either spec= or a tokenizer with options, not both")
    if not getattr(spec.tokenizer, "is_fast", False):
        # Axolotl then re-tokenizes every turn's prefix; neither path here does that
        raise InvalidTypeError(
            f"tokenizer: expected a fast tokenizer (character offsets), got "
            f"{type(spec.tokenizer).__name__}; load it with AutoTokenizer.from_pretrained(..., "
            "use_fast=True), or let Axolotl tokenize this dataset")
    return tokenize_turns([normalize_messages(m, i) for i, m in enumerate(conversations)], spec,
                          too_large)


def tokenize_turns(turns: Sequence[list[dict[str, Any]]], spec: ChatSpec,
                   too_large: str = "error", *, arrays: bool = False,
                   sized: bool = False, on_rows: Any = None) -> ChatResult:
    """:func:`tokenize_chat` of conversations already as :func:`normalize_messages` gives them
    (``prepare`` makes them from Arrow columns), with a spec for a fast tokenizer. With
    ``arrays``, rows made by fastaxo's encoder hold int32 arrays and no attention mask
    (``ChatEngine(arrays=True)``; ``prepare`` writes columns from them). ``sized``: the
    caller found no conversation whose messages hold more than ``max_row_bytes`` (prepare
    reads that from the Arrow buffers), so they are not measured again (nor read before the
    engine reads them). ``on_rows(k)``: told as each part of ``k`` rows is done."""
    result = ChatResult()
    limit = spec.max_row_bytes
    # a conversation whose messages alone are over the bound is not rendered at all
    over = {} if sized else {i: n for i, t in enumerate(turns)
                             if (n := content_bytes(t, limit)) > limit}
    if over and too_large == "error":
        i, n = next(iter(over.items()))
        raise RowTooLargeError(
            f"messages: row {i} holds at least {n:,} bytes of message text, more than "
            f"max_row_bytes ({limit:,}); pass too_large='skip' to give it no tokens, or raise "
            "max_row_bytes", i, n, limit)
    todo = [[] if i in over else t for i, t in enumerate(turns)] if over else turns
    problem = spec.problem()
    rows: list[Any]
    if problem is None:
        engine = ChatEngine(spec, arrays=arrays)
        try:
            rows = engine.run(todo, on_rows=on_rows)
        except TemplateLimitError as e:
            raise TemplateLimitError(f"messages: {e}") from None
        result.turn_fallbacks.update(engine.turn_counts)
        result.encoders.update(engine.encoder_counts)
    else:
        rows = [Fallback(problem)] * len(turns)
    empty: dict[str, list[int]] = {"input_ids": [], "labels": [], "attention_mask": []}
    if len(rows) != len(turns):  # pragma: no cover - the engine gives one result a row
        raise AssertionError("tokenize_turns: a row without a result")
    for i, r in enumerate(rows):  # (a row's turns are read only for Axolotl's own path: they
        # may be made again from Arrow, ArrowTurns keeping only the blocks read last)
        if i in over:
            result.too_large.append(i)
            result.empty[TOO_LARGE] += 1
            r = empty
        elif isinstance(r, Fallback):
            if isinstance(r.error, RowTooLargeError):
                if too_large == "error":
                    big = r.error
                    raise RowTooLargeError(
                        f"messages: row {i} renders to at least {big.length:,} bytes of text, "
                        f"more than max_row_bytes ({big.max_row_bytes:,}); pass "
                        "too_large='skip' to give it no tokens, or raise max_row_bytes", i,
                        big.length, big.max_row_bytes)
                result.too_large.append(i)
                result.empty[r.reason] += 1
                r = empty
            elif r.error is not None:
                raise ChatTemplateError(f"messages: row {i}: {_one_line(r.error)}") from None
            elif r.reason in _EMPTY:
                result.empty[r.reason] += 1
                r = empty
            else:
                result.fallbacks[r.reason] += 1
                r = _reference_row(turns[i], i, spec)
        result.input_ids.append(r["input_ids"])
        result.labels.append(r["labels"])
        result.attention_mask.append(r.get("attention_mask"))
    return result


# reasons a row has no tokens (the engine's Fallback reasons)
_EMPTY = frozenset({NO_TEXT, NO_TOKENS})


def _reference_row(turns: list[dict[str, Any]], row: int, spec: ChatSpec) -> Any:
    """Axolotl's algorithm for one row (:func:`fastaxo._reference.chat.tokenize_conversation`),
    its errors as one line naming the row."""
    try:
        return ref.tokenize_conversation(turns, spec)
    except ChatTemplateError as e:
        raise type(e)(f"messages: row {row}: {e}") from None
    except OutputTooLarge as e:
        raise RowTooLargeError(
            f"messages: row {row} renders to {e.chars:,}+ characters, more than max_row_bytes "
            f"({spec.max_row_bytes:,})", row, e.chars, spec.max_row_bytes) from None


def _one_line(e: BaseException) -> str:
    text = " ".join(ln.strip() for ln in str(e).splitlines() if ln.strip())
    return text[:500] or type(e).__name__


def _kind(v: Any) -> str:
    return "None" if v is None else type(v).__name__
