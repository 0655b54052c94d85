"""What a chat-template tokenization is: the tokenizer, the template and Axolotl's masking
options (:class:`ChatSpec`), built from arguments with Axolotl's defaults and checks, or from a
live Axolotl ``ChatTemplateStrategy`` (:meth:`ChatSpec.from_strategy`)."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastaxo._core import arrow
from fastaxo._core.checks import MAX_ROW_BYTES, positive_int
from fastaxo._core.choices import TRAIN_OPTIONS
from fastaxo.chat.render import (
    DEFAULT_MAX_STEPS,
    OutputTooLarge,
    compile_renderer,
)
from fastaxo.errors import (
    ChatTemplateError,
    InvalidInputError,
    InvalidTypeError,
    TemplateLimitError,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = ["TRAIN_OPTIONS", "ChatSpec", "encode_threads"]

LOG = logging.getLogger("fastaxo.chat")
# apply_chat_template's own parameters: a chat_template_kwargs entry with one of these names
# changes how the text is made or tokenized, not just what the template sees
_RENDER_PARAMS = frozenset({
    "conversation", "tools", "documents", "chat_template", "add_generation_prompt",
    "continue_final_message", "tokenize", "sanitize_control_tokens", "padding", "truncation",
    "max_length", "return_tensors", "return_dict", "return_assistant_tokens_mask",
    "tokenizer_kwargs"})


@dataclass(frozen=True, eq=False)
class ChatSpec:
    """A tokenizer, a chat template and how labels are masked (Axolotl's ``chat_template``
    options). Build one with :meth:`create` or :meth:`from_strategy`."""

    tokenizer: Any
    chat_template: str
    template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    roles_to_train: frozenset[str] = frozenset({"assistant"})
    train_on_inputs: bool = False
    train_on_eos: str | None = "turn"
    train_on_eot: str | None = "turn"
    eot_ids: tuple[int, ...] = ()
    eos_id: int | None = None
    # Axolotl's find_turn: a leading system message is "not found" for tokenizers named mistral
    skips_first_system: bool = False
    # bounds of one render (fastaxo.chat.render): loop items + macro calls, and characters
    max_steps: int = DEFAULT_MAX_STEPS
    max_row_bytes: int = MAX_ROW_BYTES
    # "fastaxo" / "hf" / "auto" forces the encoder of the ids; None: FASTAXO_TOKENIZER
    encoder_choice: str | None = None

    @classmethod
    def create(cls, tokenizer: Any, chat_template: str | None = None, *,
               roles_to_train: Iterable[str] | None = ("assistant",),
               train_on_inputs: bool = False, train_on_eos: str | None = "turn",
               train_on_eot: str | None = None, eot_tokens: Iterable[str] | None = None,
               template_kwargs: Mapping[str, Any] | None = None,
               max_steps: int = DEFAULT_MAX_STEPS,
               max_row_bytes: int = MAX_ROW_BYTES, encoder: str | None = None) -> ChatSpec:
        """Axolotl's defaults and checks (``ChatTemplateStrategy.__init__``): the end-of-turn
        tokens default to the EOS token, tokens the template never writes are dropped, a token
        that is not a single id is an error. ``chat_template`` defaults to the tokenizer's.
        ``max_steps`` and ``max_row_bytes`` bound one render (:meth:`render`), and
        :func:`~fastaxo.chat.tokenize_chat` refuses a conversation whose message contents are
        over ``max_row_bytes`` before rendering it; a template that
        does not compile raises :class:`~fastaxo.errors.ChatTemplateError` here. ``encoder``
        ("auto", "fastaxo" or "hf") chooses the encoder of the ids as ``FASTAXO_TOKENIZER``
        does, for this spec (None: the variable decides)."""
        if not callable(getattr(tokenizer, "apply_chat_template", None)):
            raise InvalidTypeError(
                f"tokenizer: expected a transformers tokenizer, got {type(tokenizer).__name__}")
        tpl = chat_template if chat_template is not None else tokenizer.chat_template
        if isinstance(tpl, Mapping):
            tpl = tpl.get("default")
        if not isinstance(tpl, str) or not tpl:
            raise InvalidInputError(
                "chat_template: expected a Jinja template string (the tokenizer has none); got "
                f"{type(tpl).__name__}")
        for name, opt in (("train_on_eos", train_on_eos), ("train_on_eot", train_on_eot)):
            if opt is not None and not isinstance(opt, str):
                raise InvalidTypeError(f"{name}: expected one of {TRAIN_OPTIONS} or None, got "
                                       f"{opt!r}")
        eot_opt = train_on_eot if train_on_eot is not None else train_on_eos
        eos_token = getattr(tokenizer, "eos_token", None)
        eot = list(eot_tokens) if eot_tokens is not None else (
            [eos_token] if eos_token is not None else [])
        if not (len(eot) == 1 and eot[0] == eos_token):
            kept = []
            for tok in eot:
                if tok not in tpl:
                    LOG.warning("EOT token %r not found in chat_template.", tok)
                    continue
                kept.append(tok)
            eot = kept
            for tok in eot:
                got = tokenizer.encode(tok, add_special_tokens=False)
                if len(got) != 1:
                    raise InvalidInputError(
                        f"eot_tokens: expected tokens that encode to one id; {tok!r} encodes to "
                        f"{got}")
            if eos_token in eot and train_on_eos != eot_opt:
                raise InvalidInputError(
                    f"train_on_eot: the EOS token {eos_token!r} is an end-of-turn token, so "
                    f"train_on_eos ({train_on_eos!r}) and train_on_eot ({eot_opt!r}) must agree")
        ids = set()
        for tok in eot:
            got = tokenizer.encode(tok, add_special_tokens=False)
            if len(got) == 1:
                ids.add(got[0])
        from fastaxo.tokenizer.select import checked_choice

        if encoder is not None:
            encoder = checked_choice(encoder, "encoder")
        roles = frozenset(roles_to_train or ())
        spec = cls(tokenizer=tokenizer, chat_template=tpl,
                   template_kwargs=dict(template_kwargs or {}), roles_to_train=roles,
                   train_on_inputs=bool(train_on_inputs), train_on_eos=train_on_eos,
                   train_on_eot=eot_opt, eot_ids=tuple(sorted(ids)),
                   eos_id=getattr(tokenizer, "eos_token_id", None),
                   skips_first_system=_mistral_named(tokenizer),
                   max_steps=positive_int(max_steps, "max_steps"),
                   max_row_bytes=positive_int(max_row_bytes, "max_row_bytes"),
                   encoder_choice=encoder)
        spec._fast_render()  # a template that does not compile is an error now, not per row
        return spec

    @classmethod
    def from_strategy(cls, strategy: Any) -> ChatSpec:
        """The spec of a live Axolotl ``ChatTemplateStrategy`` (its already-resolved options)."""
        prompter = strategy.prompter
        tok = strategy.tokenizer
        return cls(tokenizer=tok, chat_template=prompter.chat_template,
                   template_kwargs=dict(prompter.chat_template_kwargs or {}),
                   roles_to_train=frozenset(strategy.roles_to_train or ()),
                   train_on_inputs=bool(strategy.train_on_inputs),
                   train_on_eos=strategy.train_on_eos, train_on_eot=strategy.train_on_eot,
                   eot_ids=tuple(sorted(strategy._eot_token_ids)),
                   eos_id=getattr(tok, "eos_token_id", None),
                   skips_first_system=_mistral_named(tok))

    # -- what it can do ---------------------------------------------------------------------
    def problem(self) -> str | None:
        """Why the one-pass path cannot reproduce this configuration (None: it can)."""
        if not getattr(self.tokenizer, "is_fast", False):
            return "the tokenizer is not a fast tokenizer (no character offsets)"
        if not self.roles_to_train and not self.train_on_eos and not self.train_on_eot:
            return "no roles_to_train and no train_on_eos (Axolotl's legacy masking)"
        if "all" in (self.train_on_eos, self.train_on_eot):
            return "train_on_eos/train_on_eot 'all'"
        bad = sorted(set(self.template_kwargs) & _RENDER_PARAMS)
        if bad:
            return f"chat_template_kwargs sets {bad[0]!r}"
        return None

    def render(self, conversations: list[list[dict[str, Any]]], **extra: Any) -> list[str]:
        """The template applied to each conversation (Axolotl's ``build_prompt_text``), under
        the bounds ``max_steps`` and ``max_row_bytes`` (characters of output) where the
        template can be compiled for them (:mod:`fastaxo.chat.render`): a bound exceeded
        raises :class:`~fastaxo.errors.TemplateLimitError` (too many steps, too big an
        operation) or :class:`~fastaxo.chat.render.OutputTooLarge` (the text itself); an error
        of the template, :class:`~fastaxo.errors.ChatTemplateError`."""
        fast = self._fast_render()
        if fast is not None:
            return [fast(c, **extra) for c in conversations]
        return self._render_hf(conversations, **extra)

    def _render_hf(self, conversations: list[list[dict[str, Any]]], **extra: Any) -> list[str]:
        kwargs = {"chat_template": self.chat_template, "add_generation_prompt": False,
                  **self.template_kwargs, **extra}
        out = self.tokenizer.apply_chat_template(conversations, tokenize=False, **kwargs)
        return list(out)

    def tokenize(self, texts: list[str]) -> list[tuple[list[int], Any]]:
        """Ids and character offsets of each text, as ``apply_chat_template(tokenize=True)``
        and Axolotl's turn locator make them (``add_special_tokens=False``). The offsets are a
        list of ``(start, end)``, or the ``tokenizers.Encoding`` holding them (``len`` and
        ``token_to_chars``: no Python object per token until one is asked for)."""
        if not texts:
            return []
        backend = self._fast_backend()
        if backend is not None:
            return [(e.ids, e) for e in backend.encode_batch(texts, add_special_tokens=False)]
        return self._tokenize_hf(texts)

    def _tokenize_hf(self, texts: list[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
        enc = self.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True,
                             return_attention_mask=False)
        return list(zip(enc["input_ids"], enc["offset_mapping"], strict=True))

    def tokenize_ids(self, texts: list[str]) -> list[list[int]] | None:
        """Ids alone (no offsets: about half the tokenizer's work), when :meth:`byte_tokens`
        can place the turns from them; else None. From fastaxo's encoder where it gives HF's
        ids (:attr:`encoder`), else from HF's ``encode_batch_fast``."""
        if self.byte_tokens() is None:
            return None
        fx = self._fastaxo()[0]
        if fx is not None:
            vals, offs = self.fastaxo_ids(texts)
            ids = vals.tolist()
            return [ids[a:b] for a, b in itertools.pairwise(offs.tolist())]
        return self._ids_fast(texts)

    def fastaxo_ids(self, texts: Any, num_threads: int | None = None, *, validate: bool = True
                    ) -> tuple[np.ndarray, np.ndarray]:
        """The ids of ``texts`` (a list of str, or a pyarrow string array) from fastaxo's
        encoder, ``add_special_tokens=False``: int32 values and int64 offsets (text i's ids
        are ``values[offsets[i]:offsets[i + 1]]``), on ``num_threads`` threads (default: one
        where HF's would run on one, else fastaxo's count). ``validate=False``: Arrow text
        known to be UTF-8 (:meth:`fastaxo.Tokenizer.encode_batch`). Only when :attr:`encoder`
        is ``"fastaxo"``."""
        import numpy as np

        fx = self._fastaxo_for("fastaxo_ids")
        if isinstance(texts, list) and not texts:
            return np.zeros(0, np.int32), np.zeros(1, np.int64)
        arr = fx.encode_batch(texts, add_special_tokens=False,
                              num_threads=num_threads or encode_threads(), validate=validate)
        return _ids_and_offsets(arr)

    def fastaxo_offsets(self, texts: Any, num_threads: int | None = None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`fastaxo_ids` with each id's character offsets, HF's ``Encoding.offsets``
        exactly (:meth:`fastaxo.Tokenizer.encode_batch_offsets`): int32 values, int64 offsets
        and an ``(n, 2)`` int64 array of ``(start, end)`` per id. Only when :attr:`encoder` is
        ``"fastaxo"``."""
        import numpy as np

        fx = self._fastaxo_for("fastaxo_offsets")
        if isinstance(texts, list) and not texts:
            return np.zeros(0, np.int32), np.zeros(1, np.int64), np.zeros((0, 2), np.int64)
        ids, offs = fx.encode_batch_offsets(texts, add_special_tokens=False,
                                            num_threads=num_threads or encode_threads())
        pairs = arrow.fixed_view(offs.values.flatten()).reshape(-1, 2)
        return (*_ids_and_offsets(ids), pairs)

    def _fastaxo_for(self, caller: str) -> Any:
        """fastaxo's Tokenizer, or InvalidInputError naming ``caller`` where it is HF's."""
        fx = self._fastaxo()[0]
        if fx is None:
            raise InvalidInputError(f"{caller}: this spec's encoder is HF's "
                                    f"({self.encoder_reason})")
        return fx

    # -- which encoder makes the ids --------------------------------------------------------
    @property
    def encoder(self) -> str:
        """``"fastaxo"`` when :meth:`tokenize_ids` takes its ids from fastaxo's C encoder
        (:class:`fastaxo.Tokenizer`: HF's ids, from C), ``"hf"`` when they come from HF's
        ``tokenizers`` (:attr:`encoder_reason` says why). ``FASTAXO_TOKENIZER`` chooses
        (:mod:`fastaxo.tokenizer.select`); rows that need character offsets (text that is not
        NFC-stable for an NFC tokenizer, ids that do not spell the text) take them from the
        same encoder (:meth:`fastaxo_offsets`, HF's offsets exactly)."""
        return "hf" if self._fastaxo()[0] is None else "fastaxo"

    @property
    def encoder_reason(self) -> str | None:
        """Why :attr:`encoder` is ``"hf"`` (None when it is ``"fastaxo"``)."""
        return self._fastaxo()[1]

    @property
    def fastaxo_tokenizer(self) -> Any:
        """The :class:`fastaxo.Tokenizer` that makes the ids when :attr:`encoder` is
        ``"fastaxo"``, else None."""
        return self._fastaxo()[0]

    def _fastaxo(self) -> tuple[Any, str | None]:
        """(fastaxo Tokenizer, None), or (None, why HF's ids are used); once per
        ``FASTAXO_TOKENIZER`` value."""
        from fastaxo.tokenizer.select import choice

        mode = self.encoder_choice or choice()
        cache = self.__dict__.setdefault("_cache", {})
        key = "fastaxo:" + mode
        if key not in cache:
            cache[key] = _fastaxo_encoder(self, mode)
            why = cache[key][1]
            if why is not None and why not in _SAID:
                _SAID.add(why)
                LOG.info("chat: tokenizing with HF's tokenizers, not fastaxo's encoder: %s",
                         why)
        return cache[key]

    def _ids_fast(self, texts: list[str]) -> list[list[int]]:
        backend = self._fast_backend()
        return [e.ids for e in backend.encode_batch_fast(texts, add_special_tokens=False)]

    def byte_tokens(self) -> tuple[Any, Any, bool] | None:
        """:func:`byte_table` of the tokenizer, checked against its offsets on a probe text;
        None if the tokenizer is not byte-level BPE or the check fails."""
        cache = self.__dict__.setdefault("_cache", {})
        if "bytes" not in cache:
            cache["bytes"] = None
            backend = self._fast_backend()
            if backend is not None and hasattr(backend, "encode_batch_fast"):
                table = byte_table(backend, _fastaxo_quiet(self.tokenizer,
                                                           self.encoder_choice))
                if table is not None and _probe_bytes(self, table):
                    cache["bytes"] = table
        return cache["bytes"]

    def build_tables(self) -> None:
        """The lazily built byte table and encoder choice, made now (once): before threads
        share the spec, or while a tokenizer snapshot records. Raises what :attr:`encoder`
        raises (``FASTAXO_TOKENIZER=fastaxo`` on a tokenizer it does not reproduce)."""
        if self.byte_tokens() is not None:
            self.encoder  # noqa: B018 - chooses (and caches) the encoder

    # -- the quicker ways to the same text and tokens ---------------------------------------
    def _fast_render(self) -> Any:
        cache = self.__dict__.setdefault("_cache", {})
        if "render" not in cache:
            cache["render"] = _bounded_renderer(self)
        return cache["render"]

    def paths(self) -> Any:
        """The template's recorded paths (:class:`fastaxo.chat.paths.Paths`): each
        conversation's rendered text, with no render where one fits; None without the bounded
        renderer or where no path can be recorded for the template."""
        cache = self.__dict__.setdefault("_cache", {})
        if "paths" not in cache:
            from fastaxo.chat import paths

            cache["paths"] = None
            fast = self._fast_render()
            if fast is not None:
                env, source, variables = fast.parts
                record = paths.compile_recorder(env, source, variables,
                                                max_steps=self.max_steps,
                                                max_chars=self.max_row_bytes)
                if record is not None:
                    cache["paths"] = paths.Paths(record, lambda c: self.render([c])[0],
                                                 self.max_row_bytes)
        return cache["paths"]

    def _fast_backend(self) -> Any:
        """The tokenizers.Tokenizer behind the transformers tokenizer, when calling it directly
        is what ``tokenizer(texts, add_special_tokens=False)`` does (no stored truncation or
        padding, the same special-token splitting); checked on one text when first used."""
        cache = self.__dict__.setdefault("_cache", {})
        if "backend" not in cache:
            cache["backend"] = None
            tok = self.tokenizer
            b: Any = getattr(tok, "_tokenizer", None)
            try:
                ok = (b is not None and b.truncation is None and b.padding is None
                      and b.encode_special_tokens == bool(getattr(tok, "split_special_tokens",
                                                                  False)))
                probe = ["<probe> a\n\n b\u00e9 \u6570\u636e"]
                if ok:
                    e = b.encode_batch(probe, add_special_tokens=False)[0]
                    ok = ([(e.ids, e.offsets)] == self._tokenize_hf(probe)
                          and e.offsets == [e.token_to_chars(i) for i in range(len(e))])
            except Exception:  # noqa: BLE001 - any surprise means: use the public call
                ok = False
            if ok:
                cache["backend"] = b
        return cache["backend"]


def _ids_and_offsets(arr: Any) -> tuple[np.ndarray, np.ndarray]:
    """int32 values and int64 offsets of a list array fastaxo's encoder made, from its
    buffers (Array.to_numpy imports pandas)."""
    import numpy as np
    import pyarrow as pa

    return (arrow.fixed_view(arr.values),
            arrow.offsets_of(arr, pa.types.is_large_list(arr.type)).astype(np.int64, copy=False))


# reasons for HF's encoder already logged (once per process)
_SAID: set[str] = set()


def _fastaxo_encoder(spec: ChatSpec, mode: str) -> tuple[Any, str | None]:
    """fastaxo's encoder for ``spec``'s byte path where its ids are provably HF's:
    :func:`~fastaxo.tokenizer.select.fast_tokenizer` supports the tokenizer, the byte path
    applies (:meth:`ChatSpec.byte_tokens`), special tokens are not split, the added tokens are
    the tokenizer's current ones, and the ids agree on a probe text holding every added token.
    ``mode`` "fastaxo" raises where any of that fails."""
    from fastaxo.tokenizer.select import ENV, fast_tokenizer

    def refuse(why: str) -> tuple[Any, str | None]:
        if mode == "fastaxo":
            said = (f"{ENV}=fastaxo" if spec.encoder_choice is None
                    else "encoder 'fastaxo' asked for")
            raise InvalidInputError(f"{said}: {why}")
        return None, why

    tok, why = fast_tokenizer(spec.tokenizer, spec.encoder_choice)
    if tok is None:
        return None, why
    if spec.byte_tokens() is None:
        return refuse("the chat path's tokenizer does not give byte-level offsets (the "
                      "characters each token's bytes fall in), so it needs HF's offsets")
    backend = spec._fast_backend()
    if backend.encode_special_tokens:
        return refuse("split_special_tokens is set (fastaxo's encoder never splits special "
                      "tokens)")
    added = {t.content: i for i, t in backend.get_added_tokens_decoder().items()}
    if tok.added_tokens != added:  # fast_tokenizer rebuilds on a change: a defence only
        return refuse("fastaxo's encoder does not hold the tokenizer's added tokens")
    probe = _PROBE + "".join(f"a{t}b {t}\n" for t in sorted(added))
    want = backend.encode_batch_fast([probe], add_special_tokens=False)[0].ids
    if tok.encode(probe, add_special_tokens=False).tolist() != want:
        return refuse("fastaxo's ids differ from HF's on a probe text")
    return tok, None


def encode_threads() -> int | None:
    """1 where HF's tokenizers would run on one thread (``TOKENIZERS_PARALLELISM`` false, as
    Axolotl's worker processes set it), else fastaxo's default."""
    import os

    flag = os.environ.get("TOKENIZERS_PARALLELISM", "").strip().lower()
    return 1 if flag in ("0", "f", "false", "n", "no", "off") else None


def _mistral_named(tokenizer: Any) -> bool:
    return "mistral" in str(getattr(tokenizer, "name_or_path", "") or "").lower()


_PROBE = ("<|im_start|>user\n  héllo 数据  wörld 🙂 x=1;\n\n\tcode()\n</think> "
          "ünïcödé — “quotes” 12345 \r\n end ")


def _probe_bytes(spec: ChatSpec, table: tuple[Any, Any, bool]) -> bool:
    """The byte rule gives the offsets' bisections at every character of a probe text."""
    from bisect import bisect_left, bisect_right

    import numpy as np

    offsets, blob, _ = table
    text = _PROBE + "".join(t for t in (getattr(spec.tokenizer, "eos_token", None),) if t)
    (ids, enc), = spec.tokenize([text])
    pairs = getattr(enc, "offsets", enc)
    starts, ends = [s for s, _ in pairs], [e for _, e in pairs]
    if spec._ids_fast([text]) != [ids]:
        return False
    data = text.encode("utf-8")
    got = b"".join(bytes(blob[offsets[i]:offsets[i + 1]]) for i in ids)
    if got != data:
        return False
    tok_ends = np.cumsum([offsets[i + 1] - offsets[i] for i in ids])
    for c in range(len(text) + 1):
        b = len(text[:c].encode("utf-8"))
        n_end = int(np.searchsorted(tok_ends, b, side="right"))
        n_start = int(np.searchsorted(np.concatenate(([0], tok_ends[:-1])), b, side="left"))
        if n_end != bisect_right(ends, c) or n_start != bisect_left(starts, c):
            return False
    return True


def _bounded_renderer(spec: ChatSpec) -> Any:
    """A render function equal to ``apply_chat_template(tokenize=False)`` for this spec, under
    the spec's step and size bounds (:mod:`fastaxo.chat.render`), or None when transformers'
    compiled template cannot be reached or the result differs on the probe conversations.
    Raises :class:`~fastaxo.errors.ChatTemplateError` for a template that does not compile."""
    from fastaxo.chat import snapshot

    try:
        tok = spec.tokenizer
        source = tok.get_chat_template(spec.chat_template, None)
        # transformers' environment (or fastaxo's copy, proven equal: no transformers import
        # on a snapshot's replay), never the user's template compiled there: that would fold
        # its constant expressions, unbounded
        env = snapshot.jinja_environment(tok)
    except Exception:  # noqa: BLE001 - transformers internals moved: use the public call
        return None
    variables = {**tok.special_tokens_map, **spec.template_kwargs}
    render = compile_renderer(env, source, variables, max_steps=spec.max_steps,
                              max_chars=spec.max_row_bytes)
    render.parts = (env, source, variables)  # type: ignore[attr-defined] # (for paths())
    for probe in _PROBES:
        # transformers' render runs only after the bounded one finished: the same template
        # takes the same steps, so an unbounded template stops here, with its limit error
        mine = theirs = None
        try:
            mine = render(probe)
        except OutputTooLarge as e:
            raise TemplateLimitError(f"chat_template: renders {e.chars:,}+ characters for a "
                                     f"short probe conversation (max_row_bytes "
                                     f"{spec.max_row_bytes:,})") from None
        except TemplateLimitError:
            raise
        except ChatTemplateError:
            pass
        theirs = _probe_render(spec, probe)
        if mine != theirs and snapshot.go_live(tok, "the renderer's probe check"):
            # a replayed render that differs (a template that renders the time of day): ask
            # the real tokenizer before giving up the bounded renderer
            theirs = _probe_render(spec, probe)
        if mine != theirs:
            LOG.warning("chat_template: fastaxo's bounded renderer differs from transformers' on "
                        "a probe conversation; rendering with transformers, without fastaxo's "
                        "step and size bounds")
            return None
    return render


def _probe_render(spec: ChatSpec, probe: list[dict[str, Any]]) -> str | None:
    try:
        return spec._render_hf([probe])[0]
    except Exception:  # noqa: BLE001 - templates raise anything on a probe they refuse
        return None


_PROBES = (
    [{"role": "system", "content": "s"}, {"role": "user", "content": "q\n"},
     {"role": "assistant", "content": "\na "}],
    [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
     {"role": "user", "content": " q2 "}, {"role": "assistant", "content": "a2\n"}],
)


# -- byte-level tokenizers: token boundaries from the ids alone --------------------------------

# What a component may be for a token's character offsets to be the characters its bytes fall
# in (pre-tokenizers that only split, the ByteLevel mapping; post-processors that trim nothing).
_SPLITTERS = frozenset({"Split", "Digits", "Punctuation", "ByteLevel"})
_POST_OK = frozenset({"TemplateProcessing", "ByteLevel"})


def _component(obj: Any) -> Any:
    import json

    return None if obj is None else json.loads(obj.__getstate__())


def _fastaxo_quiet(tokenizer: Any, mode: str | None = None) -> Any:
    """fastaxo's Tokenizer of ``tokenizer`` where ``mode`` (None: FASTAXO_TOKENIZER) allows
    one and it is supported (the per-object cache of
    :func:`~fastaxo.tokenizer.select.fast_tokenizer`), else None; never raises."""
    from fastaxo.tokenizer.select import fast_tokenizer

    try:
        return fast_tokenizer(tokenizer, mode)[0]
    except Exception:  # noqa: BLE001 - FASTAXO_TOKENIZER=fastaxo on an unsupported one
        return None


def byte_table(backend: Any, fast: Any = None) -> tuple[Any, Any, bool] | None:
    """``(token_offsets, token_bytes, nfc)`` for a byte-level BPE ``tokenizers.Tokenizer`` whose
    offsets are the characters each token's bytes fall in, or None. ``nfc``: the normalizer is
    NFC, so only NFC-stable text may use the table. ``fast``: fastaxo's Tokenizer of the same
    state (:meth:`fastaxo.Tokenizer.from_hf`), whose arrays already hold the tokens' bytes (a
    vocabulary walk in Python is ~0.5 s for 150k tokens)."""
    import numpy as np

    try:
        if type(backend.model).__name__ != "BPE":
            return None
        norm = _component(backend.normalizer)
        if norm is not None and norm.get("type") != "NFC":
            return None
        pre = _component(backend.pre_tokenizer)
        parts = pre.get("pretokenizers", []) if pre and pre.get("type") == "Sequence" else [pre]
        kinds = [p.get("type") if p else None for p in parts]
        if kinds.count("ByteLevel") != 1 or not set(kinds) <= _SPLITTERS:
            return None
        post = _component(backend.post_processor)
        posts = (post.get("processors", []) if post and post.get("type") == "Sequence"
                 else [post] if post else [])
        for p in posts:
            if p.get("type") not in _POST_OK or (p.get("type") == "ByteLevel"
                                                 and p.get("trim_offsets")):
                return None
        if fast is not None:
            got = _table_of(fast)
            if got is not None:
                return (*got, norm is not None)
        decode = {c: b for b, c in _bytes_to_unicode().items()}
        added = {i: t.content for i, t in backend.get_added_tokens_decoder().items()}
        vocab = backend.get_vocab(with_added_tokens=True)
        size = max(vocab.values()) + 1
        pieces = [b""] * size
        for token, i in vocab.items():
            if i in added:
                pieces[i] = added[i].encode("utf-8")
            elif all(c in decode for c in token):
                pieces[i] = bytes(decode[c] for c in token)
        lengths = np.fromiter((len(p) for p in pieces), np.int64, size)
        offsets = np.zeros(size + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        blob = np.frombuffer(b"".join(pieces), np.uint8)
        return offsets, blob, norm is not None
    except Exception:  # noqa: BLE001 - an unexpected tokenizer: use its offsets
        return None


def _table_of(fast: Any) -> tuple[Any, Any] | None:
    """:func:`byte_table`'s offsets and bytes from fastaxo's encoder arrays: the vocabulary's
    decoded bytes (an undecodable token: none, as there), then each added token's UTF-8 at its
    id. None where an added token has a vocabulary id (its bytes would replace the token's in
    the middle: the walk does that)."""
    import numpy as np

    spec = fast._spec
    n_vocab = len(spec.tok_off) - 1
    if any(i < n_vocab for i in spec.added.values()):
        return None
    size = max([n_vocab, *(i + 1 for i in spec.added.values())])
    lens = np.zeros(size, np.int64)
    lens[:n_vocab] = np.diff(spec.tok_off)
    pieces = {i: c.encode("utf-8") for c, i in spec.added.items()}
    for i, b in pieces.items():
        lens[i] = len(b)
    offsets = np.zeros(size + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    blob = np.empty(int(offsets[-1]), np.uint8)
    blob[:spec.tok_off[-1]] = spec.tok_bytes
    for i, b in pieces.items():
        blob[offsets[i]:offsets[i + 1]] = np.frombuffer(b, np.uint8)
    return offsets, blob


def _bytes_to_unicode() -> dict[int, str]:
    # GPT-2's reversible byte <-> printable character map, which ByteLevel uses
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs, strict=True)}
