"""prepare's options, checked once: :func:`check_prepare_options` makes the frozen
:class:`PrepareOptions` that the one-machine driver (``pipeline/prepare.py``) and the Ray
driver (``integrations/ray/driver.py``) both start from, so an option means the same and fails
the same way in both (errors name the argument)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import pyarrow as pa

from fastaxo._core.checks import MAX_ROW_BYTES, choice, int_arg, positive_int
from fastaxo._core.choices import ATTENTION, OVERFLOW_MODES, PREPARE_LAYOUTS, PREPARE_STRATEGIES
from fastaxo.errors import InvalidInputError, InvalidTypeError
from fastaxo.pipeline.columns import chat_tokenizer, is_tokenizer_object, text_tokenizer

__all__ = ["ATTENTION_LAYOUTS", "DEFAULT_PACK_WINDOW", "OVERFLOW", "PrepareOptions",
           "check_prepare_options", "options_of_call"]

ATTENTION_LAYOUTS = (*ATTENTION, "none")  # pack's values, and "none" for no column
ATTENTION_AUTO = "auto"  # the layout's own: "segments" for "axolotl", none for "standard"
OVERFLOW = tuple(m for m in OVERFLOW_MODES if m != "isolate")  # (a bin over max_length)

DEFAULT_PACK_WINDOW = 100_000  # Axolotl's pack_parallel group size


@dataclass(frozen=True)
class PrepareOptions:
    """What a prepare run was asked for, checked. ``attention`` is ``"none"`` for no column
    (always with the standard layout); ``dedupe_columns`` None for the default key (the
    output's columns)."""

    max_length: int
    strategy: str
    overflow: str
    layout: str
    attention: str
    dedupe: bool
    dedupe_columns: tuple[str, ...] | None
    pack_window: int
    batch_rows: int
    tokenizer: str | None
    text_column: str
    messages_column: str | None
    chat: Mapping[str, Any] | None
    add_special_tokens: bool
    append_eos: bool
    eos_token: str | None
    max_row_bytes: int
    pad_token_id: int | None = None

    @property
    def chat_asked(self) -> bool:
        """Chat data asked for by name (``messages_column`` or ``chat``)."""
        return self.messages_column is not None or self.chat is not None

    def chat_mode(self, schema: pa.Schema) -> bool:
        """Whether the input is chat data: asked for (:attr:`chat_asked`), or a tokenizer was
        given and the first input's schema has ``messages`` but no ``text_column``."""
        if self.chat_asked:
            return True
        return (self.tokenizer is not None and self.text_column not in schema.names
                and "messages" in schema.names)

    def column(self, chat_mode: bool) -> str:
        """The column to tokenize: the messages column for chat data, else ``text_column``."""
        return (self.messages_column or "messages") if chat_mode else self.text_column

    def make_tokenizer(self, chat_mode: bool, path: str | None = None,
                       num_threads: int | None = None) -> Any:
        """The tokenizer of ``path`` (default: ``tokenizer``) for this data, None without one:
        a :class:`ChatTokenizer` for chat data, else a text tokenizer. Built before any work,
        so a bad tokenizer or option fails first."""
        path = self.tokenizer if path is None else path
        kw: dict[str, Any] = dict(add_special_tokens=self.add_special_tokens,
                                  append_eos=self.append_eos, eos_token=self.eos_token,
                                  max_row_bytes=self.max_row_bytes)
        if chat_mode:
            assert path is not None  # (check_prepare_options: chat needs a tokenizer)
            return chat_tokenizer(path, self.chat, **kw)
        return text_tokenizer(path, num_threads=num_threads, **kw)

    def schema_options(self, key_cols: list[str]) -> dict[str, Any]:
        """The options recorded in the output's metadata."""
        return {"max_length": self.max_length, "strategy": self.strategy,
                "overflow": self.overflow, "attention": self.attention, "dedupe": self.dedupe,
                "dedupe_columns": key_cols if self.dedupe else None,
                "pack_window": self.pack_window, "layout": self.layout,
                "pad_token_id": self.pad_token_id}


def check_prepare_options(*, max_length: Any, strategy: Any = "bfd", overflow: Any = "error",
                          layout: Any = "standard", attention: Any = ATTENTION_AUTO,
                          dedupe: Any = True,
                          dedupe_columns: Sequence[str] | None = None,
                          pack_window: Any = DEFAULT_PACK_WINDOW, batch_rows: Any = 8192,
                          tokenizer: Any = None, text_column: str = "text",
                          messages_column: str | None = None,
                          chat: Mapping[str, Any] | None = None, add_special_tokens: bool = True,
                          append_eos: bool = False, eos_token: str | None = None,
                          max_row_bytes: Any = MAX_ROW_BYTES,
                          pad_token_id: Any = None) -> PrepareOptions:
    """The options of :func:`fastaxo.prepare` and of its Ray form, checked (an error names the
    argument, what it expects and what came)."""
    if dedupe_columns is not None:
        if (isinstance(dedupe_columns, str) or not dedupe_columns
                or not all(isinstance(c, str) for c in dedupe_columns)):
            raise InvalidInputError("dedupe_columns must be a non-empty list of column names, got "
                                    f"{dedupe_columns!r}")
        dedupe_columns = tuple(dedupe_columns)
    strategy = choice(strategy, "strategy", PREPARE_STRATEGIES)
    overflow = choice(overflow, "overflow", OVERFLOW)
    if strategy == "wrapped":  # every document is cut at max_length: "split" is what happens
        if overflow not in ("error", "split"):
            raise InvalidInputError(
                f"overflow: strategy 'wrapped' cuts every document at max_length (as "
                f"overflow='split'); overflow={overflow!r} does not apply to it")
        overflow = "split"
    if not (tokenizer is None or isinstance(tokenizer, (str, os.PathLike))
            or is_tokenizer_object(tokenizer)):
        raise InvalidTypeError(
            "tokenizer: expected a tokenizer directory or tokenizer.json (a path), a "
            "tokenizers.Tokenizer or a transformers fast tokenizer, got "
            f"{type(tokenizer).__name__}")
    if isinstance(tokenizer, os.PathLike):
        tokenizer = os.fspath(tokenizer)
    if pad_token_id is not None:
        pad_token_id = int_arg(pad_token_id, "pad_token_id", lo=-(2**31), hi=2**31 - 1)
        if tokenizer is not None:
            raise InvalidInputError(
                "pad_token_id: it names the padding of tokenized input (input_ids); text and "
                "chat data are tokenized here, without padding")
    for name, flag in (("add_special_tokens", add_special_tokens), ("append_eos", append_eos)):
        if not isinstance(flag, bool):  # ("False", a string, would read as True)
            raise InvalidTypeError(f"{name}: expected True or False, got "
                                   f"{type(flag).__name__} {flag!r:.40}")
    layout = choice(layout, "layout", PREPARE_LAYOUTS)
    attention = _attention(layout, attention)
    if (messages_column is not None or chat is not None) and tokenizer is None:
        raise InvalidInputError("messages_column / chat: chat data needs tokenizer= (a tokenizer "
                                "directory with its chat template)")
    return PrepareOptions(
        max_length=positive_int(max_length, "max_length"),
        strategy=strategy, overflow=overflow, layout=layout, attention=attention,
        dedupe=bool(dedupe), dedupe_columns=dedupe_columns,
        pack_window=positive_int(pack_window, "pack_window"),
        batch_rows=positive_int(batch_rows, "batch_rows"), tokenizer=tokenizer,
        text_column=text_column, messages_column=messages_column, chat=chat,
        add_special_tokens=add_special_tokens, append_eos=append_eos, eos_token=eos_token,
        max_row_bytes=max_row_bytes, pad_token_id=pad_token_id)


def _attention(layout: str, attention: Any) -> str:
    """The attention_mask column of ``layout``: "segments", "ones" or "none". The standard
    layout has none: a stock model reads any attention_mask as padding, so segment ids there
    would let every sequence of a row attend to the others."""
    if attention == ATTENTION_AUTO:
        return "segments" if layout == "axolotl" else "none"
    attention = "none" if attention is None else choice(attention, "attention",
                                                        (*ATTENTION_LAYOUTS, ATTENTION_AUTO))
    if layout == "standard" and attention != "none":
        raise InvalidInputError(
            f"attention: the standard layout has no attention_mask (a stock model would read "
            f"{attention!r} as 'attend across the whole row'; sequences are told apart by "
            "position_ids and seq_lengths); pass layout='axolotl' (--layout axolotl) for "
            f"Axolotl's attention_mask, got attention={attention!r}")
    return attention


def options_of_call(arguments: Mapping[str, Any]) -> PrepareOptions:
    """:func:`check_prepare_options` of a driver's own arguments (its ``locals()`` before any
    other name is bound): each driver takes every option under the checker's name, so both
    forward the same set, and one added to the checker must be added to both."""
    return check_prepare_options(**{f.name: arguments[f.name] for f in fields(PrepareOptions)})
