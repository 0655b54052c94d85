"""Axolotl's chat-template tokenization in plain Python (``type: chat_template``, Axolotl 0.21's
``ChatTemplateStrategy`` with a fast tokenizer, no tools, no per-message training fields).

:func:`chat_labels` is the twin of the compiled ``_pack.chat_labels`` (the tests compare them).
:func:`tokenize_conversation` is the whole algorithm as Axolotl runs it: per trainable turn two
more renders of the conversation with a placeholder in that turn's place, a character diff, a
bisect into the tokenizer's offsets and, where that fails, a re-tokenized prefix. It costs
O(turns x length); :mod:`fastaxo.chat` gets the same output in one pass and uses this function
for the rows it cannot prove (and the tests use it as an oracle).

``spec`` is a :class:`fastaxo.chat.ChatSpec` (duck-typed here: ``render``, ``tokenize``,
``roles_to_train``, ``train_on_inputs``, ``train_on_eos``, ``train_on_eot``, ``eot_ids``,
``eos_id``, ``skips_first_system``).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any

IGNORE = -100
SENTINELS = ("[[dummy_message]]", "zzdummymessagezz")  # Axolotl's placeholders


def chat_labels(ids: list[int], offsets: Any,
                spans: Sequence[tuple[int, int]], eot_ids: Sequence[int],
                eos_ids: Sequence[int], eot_mode: str | None, eos_mode: str | None
                ) -> tuple[list[int] | None, int]:
    """The labels of one conversation given each trainable turn's character span (see
    ``_pack.chat_labels``): Axolotl's loops, written as Axolotl writes them."""
    starts, ends = _starts_ends(offsets)
    labels = [IGNORE] * len(ids)
    last = {"EOT": -1, "EOS": -1}
    for k, (cs, ce) in enumerate(spans):
        start, end = -1, -1
        if ce > cs:
            start, end = bisect_right(ends, cs), bisect_left(starts, ce)
            if start >= len(ends) or end > len(ends):
                return None, k
            if end <= start:
                start, end = -1, -1
        if start != -1:
            labels[start:end] = ids[start:end]
        for kind, wanted, mode in (("EOT", eot_ids, eot_mode), ("EOS", eos_ids, eos_mode)):
            idx = _first(ids, wanted, end)
            if idx != -1 and abs(idx - end) <= 3:
                last[kind] = idx
                if mode in ("all", "turn"):
                    labels[idx] = ids[idx]
    for kind, mode in (("EOT", eot_mode), ("EOS", eos_mode)):
        if mode == "last" and last[kind] != -1:
            labels[last[kind]] = ids[last[kind]]
    return labels, -1


def _starts_ends(offsets: Any) -> tuple[list[int], list[int]]:
    pairs = getattr(offsets, "offsets", offsets)  # a tokenizers.Encoding holds them
    return [s for s, _ in pairs], [e for _, e in pairs]


def _first(ids: list[int], wanted: Sequence[int], start: int) -> int:
    for i in range(start, len(ids)):  # start may be -1: Python then looks at ids[-1] first
        if ids[i] in wanted:
            return i
    return -1


def diff_char_span(full: str, dummy: str) -> tuple[int, int]:
    """Axolotl's ``_diff_char_span``: the span of ``full`` that differs from ``dummy``."""
    limit = min(len(full), len(dummy))
    i = 0
    while i < limit and full[i] == dummy[i]:
        i += 1
    j = 0
    while j < limit - i and full[-1 - j] == dummy[-1 - j]:
        j += 1
    return i, len(full) - j


def tokenize_conversation(turns: list[dict[str, Any]], spec: Any) -> dict[str, list[int]]:
    """``input_ids``, ``labels`` and ``attention_mask`` of one conversation, as Axolotl's
    ``ChatTemplateStrategy._tokenize_single_prompt`` makes them (its default, role-masked path)."""
    full = spec.render([turns])[0]
    ids, offsets = spec.tokenize([full])[0]
    starts, ends = _starts_ends(offsets)
    labels = [IGNORE] * len(ids)
    eot = spec.eot_ids
    eos = () if spec.eos_id is None else (spec.eos_id,)
    last = {"EOT": -1, "EOS": -1}
    every = "all" in (spec.train_on_eos, spec.train_on_eot)
    for index, turn in enumerate(turns):
        should_train = spec.train_on_inputs or turn.get("role") in spec.roles_to_train
        if not should_train and not every:
            continue
        start, end = _find_turn(turns, index, spec, full, starts, ends)
        if should_train and start != -1 and end != -1:
            labels[start:end] = ids[start:end]
        for kind, wanted, mode in (("EOT", eot, spec.train_on_eot),
                                   ("EOS", eos, spec.train_on_eos)):
            idx = _first(ids, wanted, end)
            if idx != -1 and abs(idx - end) <= 3:
                last[kind] = idx
                if mode == "all" or (mode == "turn" and should_train):
                    labels[idx] = ids[idx]
    for kind, mode in (("EOT", spec.train_on_eot), ("EOS", spec.train_on_eos)):
        if mode == "last" and last[kind] != -1:
            labels[last[kind]] = ids[last[kind]]
    return {"input_ids": ids, "labels": labels, "attention_mask": [1] * len(ids)}


def _find_turn(turns: list[dict[str, Any]], index: int, spec: Any, full: str,
               starts: list[int], ends: list[int]) -> tuple[int, int]:
    if index == 0 and turns[0].get("role") == "system" and spec.skips_first_system:
        return -1, -1
    span = _span_from_text(turns, index, spec, full, starts, ends)
    if span is None:
        span = _span_from_tokens(turns, index, spec)
    if span is None:
        return -1, -1
    start, end = span
    if start == -1 or end == -1 or end <= start:
        return -1, -1
    return start, end


def _dummy(turns: list[dict[str, Any]], index: int, sentinel: str) -> dict[str, Any]:
    return {"role": turns[index].get("role"), "content": sentinel}


def _span_from_text(turns: list[dict[str, Any]], index: int, spec: Any, full: str,
                    starts: list[int], ends: list[int]) -> tuple[int, int] | None:
    spans = []
    for sentinel in SENTINELS:
        dummy = spec.render([turns[:index] + [_dummy(turns, index, sentinel)]
                             + turns[index + 1:]])[0]
        if not dummy:
            return None
        spans.append(diff_char_span(full, dummy))
    cs = min(s for s, _ in spans)
    ce = max(e for _, e in spans)
    if ce <= cs:
        return -1, -1
    start, end = bisect_right(ends, cs), bisect_left(starts, ce)
    if start >= len(ends) or end > len(ends):
        return None
    return start, end


def _span_from_tokens(turns: list[dict[str, Any]], index: int, spec: Any
                      ) -> tuple[int, int] | None:
    # Axolotl's fallback: the prefix up to the turn, with and without the placeholder
    last = len(turns) - 1
    extra = {"real_last_index": last} if last else {}
    texts = spec.render([turns[:index] + [_dummy(turns, index, SENTINELS[0])],
                         turns[: index + 1]], **extra)
    (dummy_ids, _), (full_ids, _) = spec.tokenize(texts)
    if not full_ids or not dummy_ids:
        return None
    m = min(len(dummy_ids), len(full_ids))
    start = next((i for i in range(m) if dummy_ids[i] != full_ids[i]), None)
    if start is None:
        return None
    end = next((len(full_ids) - i for i in range(m)
                if dummy_ids[len(dummy_ids) - 1 - i] != full_ids[len(full_ids) - 1 - i]), None)
    if end is None:
        return None
    return start, end
