"""Axolotl's ``type: chat_template`` tokenization on fastaxo's one-pass path.

``ChatTemplateStrategy.tokenize_prompt`` is replaced (a class attribute: every strategy Axolotl
builds, in this process and in its forked tokenization workers, gets it). A batch's rows go
through :class:`fastaxo.chat.ChatEngine`; a row it cannot prove (tools, reasoning or other
message fields, a template that rewrites or depends on the message text, ...) is handed to
Axolotl's own ``_tokenize_single_prompt``, counted, and its reason said once in the log. A
configuration the engine cannot reproduce (a processor, a slow tokenizer, Axolotl's legacy
masking, per-message training fields, ``train_on_eos: all``, a subclass such as Mistral's) is
left wholly to Axolotl, said once.
"""

from __future__ import annotations

import copy
import logging
import threading
import weakref
from collections import Counter, defaultdict
from typing import Any

from fastaxo.chat import ChatEngine, ChatSpec, Fallback
from fastaxo.integrations.axolotl.settings import current, report, say_once

__all__ = ["chat_counts", "engine_for", "make_tokenize_prompt", "options", "tokenize_prompt"]

# strategy -> (the options its engine was made for, the engine or None: Axolotl's), beside the
# strategy rather than on it, so the strategy's state (what datasets hashes for its fingerprint,
# what a spawned worker unpickles) stays Axolotl's
_engines: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], ChatEngine | None]] = \
    weakref.WeakKeyDictionary()
_counts: Counter[str] = Counter()
_lock = threading.Lock()


def chat_counts() -> dict[str, int]:
    """Rows tokenized in this process so far: ``fast``, and ``fallback: <reason>`` per reason."""
    with _lock:
        return dict(_counts)


def engine_for(strategy: Any) -> ChatEngine | None:
    """The strategy's engine for its options as they are now, or None when fastaxo leaves this
    strategy to Axolotl (said once, with the reason).

    Axolotl reads the strategy's options, its prompter's template and the tokenizer's EOS at
    every ``tokenize_prompt`` call, so the engine is kept only while :func:`options` gives the
    same key (checked per batch: a few attribute reads); a change makes a new one."""
    if not isinstance(strategy, _strategy_class()):
        return None
    key = options(strategy)
    got = _engines.get(strategy)
    if got is not None and got[0] == key:
        return got[1]
    engine = None
    problem = _strategy_problem(strategy)
    if problem is None:
        spec = ChatSpec.from_strategy(strategy)
        problem = spec.problem()
        if problem is None:
            engine = ChatEngine(spec)
    if problem is not None:
        say_once(f"chat-config-{problem}", f"chat_template: Axolotl's own tokenization stays "
                 f"for this dataset ({problem})", logging.WARNING)
    _engines[strategy] = (key, engine)
    return engine


def options(strategy: Any) -> tuple[Any, ...]:
    """Everything of ``strategy`` that Axolotl 0.21's ``tokenize_prompt`` reads at each call and
    the engine takes as fixed: the strategy's and prompter's classes and masking options, the
    template and its kwargs (a copy: a dict changed in place must compare unequal), the EOT ids,
    and of the tokenizer: the object, its special tokens (the template's ``eos_token``, ...),
    EOS id, size (added tokens), name (Axolotl's mistral check) and stored truncation/padding
    (which decide whether the engine may call the backend directly)."""
    # getattr throughout: a subclass or another Axolotl may lack a name (its problem is said
    # when the engine is made). Objects by id: an engine's spec holds them, so their ids stay
    # theirs; without an engine a reused id can only keep Axolotl's own path.
    p = getattr(strategy, "prompter", None)
    tok = getattr(strategy, "tokenizer", None)
    backend = getattr(tok, "_tokenizer", None)
    kwargs = getattr(p, "chat_template_kwargs", None)
    try:
        kwargs = copy.deepcopy(kwargs)
    except Exception:  # noqa: BLE001 - an uncopyable value: compared as the object it is
        pass
    eot = getattr(strategy, "_eot_token_ids", None)
    return (type(strategy), type(p), id(getattr(p, "tokenizer", None)),
            getattr(p, "processor", None) is not None, getattr(p, "message_field_training", None),
            getattr(p, "message_field_training_detail", None), getattr(p, "chat_template", None),
            kwargs, tuple(getattr(strategy, "roles_to_train", None) or ()),
            getattr(strategy, "train_on_inputs", None), getattr(strategy, "train_on_eos", None),
            getattr(strategy, "train_on_eot", None), None if eot is None else frozenset(eot),
            id(tok), getattr(tok, "eos_token_id", None), _special_tokens(tok), _size(tok),
            getattr(tok, "name_or_path", None), getattr(tok, "is_fast", False),
            getattr(tok, "split_special_tokens", False), id(backend),
            getattr(backend, "truncation", None), getattr(backend, "padding", None))


def _special_tokens(tok: Any) -> Any:
    try:
        return tuple(sorted((k, str(v)) for k, v in tok.special_tokens_map.items()))
    except Exception:  # noqa: BLE001 - not a transformers tokenizer: its problem is found later
        return None


def _size(tok: Any) -> int | None:
    try:
        return len(tok)
    except Exception:  # noqa: BLE001
        return None


def _strategy_class() -> type:
    from axolotl.prompt_strategies.chat_template import ChatTemplateStrategy

    return ChatTemplateStrategy


def _strategy_problem(strategy: Any) -> str | None:
    from axolotl.prompt_strategies.chat_template import (
        ChatTemplatePrompter,
        ChatTemplateStrategy,
    )

    if type(strategy) is not ChatTemplateStrategy:
        return f"strategy {type(strategy).__name__} (fastaxo reproduces ChatTemplateStrategy)"
    prompter = strategy.prompter
    if type(prompter) is not ChatTemplatePrompter:
        return f"prompter {type(prompter).__name__}"
    if prompter.processor is not None:
        return "a processor (multimodal)"
    if prompter.tokenizer is not strategy.tokenizer:
        return "the prompter's tokenizer is not the strategy's"
    if prompter.message_field_training or prompter.message_field_training_detail:
        return "per-message training fields (message_field_training)"
    return None


_original: dict[str, Any] = {}


def make_tokenize_prompt(original: Any) -> Any:
    """``ChatTemplateStrategy.tokenize_prompt`` on the one-pass path (``original``: Axolotl's).
    The replacement is a module-level function: datasets hashes the mapped function for its
    fingerprints, and a module function hashes by name (a closure would hash by value, with
    everything it reaches: the engines and their tokenizers)."""
    _original["tokenize_prompt"] = original
    tokenize_prompt.__wrapped__ = original  # type: ignore[attr-defined]
    tokenize_prompt.__doc__ = original.__doc__
    return tokenize_prompt


def tokenize_prompt(self: Any, prompt: dict[str, Any]) -> Any:
    original = _original["tokenize_prompt"]
    if not current().chat_template:
        return original(self, prompt)
    engine = engine_for(self)
    if engine is None:
        return original(self, prompt)
    from axolotl.utils.dict import remove_none_values

    prompt = remove_none_values(prompt)
    batched = self.is_prompt_batched(prompt) and self.supports_batched
    if batched:
        names = list(prompt.keys())
        rows = [dict(zip(names, r, strict=False)) for r in zip(*prompt.values(), strict=False)]
    else:
        rows = [prompt]
    results = _tokenize_rows(self, engine, rows)
    if not batched:
        return results[0]
    res: dict[str, list[Any]] = defaultdict(list)
    for r in results:
        for key, val in r.items():
            res[key].append(val)
    return dict(res) if res else {}


def _tokenize_rows(strategy: Any, engine: ChatEngine, rows: list[dict[str, Any]]
                   ) -> list[dict[str, Any]]:
    results: list[Any] = [None] * len(rows)
    convs, where = [], []
    for i, row in enumerate(rows):
        reason = None
        try:
            if strategy._get_tools(row):
                reason = "tools"
            else:
                convs.append(strategy.get_conversation_thread(row))
                where.append(i)
        except Exception:  # noqa: BLE001 - Axolotl's own code raises it again, its way
            reason = "Axolotl rejects the row"
        if reason is not None:
            results[i] = Fallback(reason)
    for i, got in zip(where, engine.run(convs), strict=True):
        results[i] = got
    fast = 0
    reasons: Counter[str] = Counter()
    for i, r in enumerate(results):
        if isinstance(r, Fallback):
            reasons[r.reason] += 1
            say_once(f"chat-row-{r.reason}", "chat_template: a row goes to Axolotl's own "
                     f"tokenization: {r.reason} (each such row is counted, see "
                     "fastaxo_report)", logging.WARNING)
            results[i] = strategy._tokenize_single_prompt(rows[i])
        else:
            fast += 1
    with _lock:
        _counts["fast"] += fast
        for reason, n in reasons.items():
            _counts[f"fallback: {reason}"] += n
    report("chat_template", rows=len(rows), fast=fast, fallbacks=dict(reasons))
    return results
