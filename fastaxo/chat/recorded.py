"""What a tokenizer snapshot (:mod:`fastaxo.chat.snapshot`) records, as JSON: plain values,
tagged so that they come back as they were, and the answers of a transformers tokenizer's
backend (a ``tokenizers.Tokenizer``): recorded by :class:`BackendRecorder` while the snapshot
records, given back by :class:`BackendReplay` on a replay, which builds the real backend only
for what the record lacks."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
import re
from collections.abc import Callable
from typing import Any

__all__ = ["NOTHING", "BackendRecorder", "BackendReplay", "RawBackend", "Unencodable",
           "backend_text", "call_text", "check_backend_record", "decode", "dumps", "encode"]

NOTHING = object()

# what the chat path's checks ask of the backend (a tokenizers.Tokenizer): recorded, so that a
# replay answers them without building it (from_str of Qwen3's tokenizer.json: ~0.8 s of CPU)
_BACKEND_METHODS = frozenset({"encode", "encode_batch", "encode_batch_fast", "get_vocab_size",
                              "get_added_tokens_decoder", "token_to_id", "id_to_token"})
_BACKEND_ATTRS = frozenset({"truncation", "padding", "encode_special_tokens"})
_BACKEND_PARTS = frozenset({"model", "normalizer", "pre_tokenizer", "post_processor",
                            "decoder"})
_MAX_ANSWER = 1 << 20  # an answer bigger than this (as JSON) is not recorded
_ADDED_FLAGS = ("lstrip", "rstrip", "single_word", "normalized", "special")
# a part's state bigger than this is not recorded (the model's: its whole vocabulary and merges)
_MAX_STATE = 1 << 16


# -- values as tagged JSON --------------------------------------------------------------------

class Unencodable(Exception):  # noqa: N818 - a verdict, not an error
    pass


def encode(v: Any) -> Any:
    """``v`` as JSON where it round-trips exactly: a JSON object is always a tag (``t`` a
    tuple, ``d`` a dict as its items in order, ``b`` a BatchEncoding's data, given back as a
    dict); anything else (a subclass, an object, a float that is not finite) is refused."""
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        if not math.isfinite(v):
            raise Unencodable
        return v
    if t is list:
        return [encode(x) for x in v]
    if t is tuple:
        return {"t": [encode(x) for x in v]}
    if t is dict:
        return {"d": [[encode(k), encode(x)] for k, x in v.items()]}
    if t.__name__ == "BatchEncoding" and type(getattr(v, "data", None)) is dict:
        return {"b": encode(v.data)["d"]}
    raise Unencodable


def decode(v: Any) -> Any:
    """The value :func:`encode` made ``v`` from (ValueError for anything it cannot have)."""
    if v is None or type(v) in (bool, int, str, float):
        return v
    if type(v) is list:
        return [decode(x) for x in v]
    if type(v) is dict and len(v) == 1:
        (tag, body), = v.items()
        if type(body) is list:
            if tag == "t":
                return tuple(decode(x) for x in body)
            if tag in ("d", "b") and all(type(p) is list and len(p) == 2 for p in body):
                return {decode(k): decode(x) for k, x in body}
    raise ValueError("not a value fastaxo encodes")


def dumps(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# -- the backend (a tokenizers.Tokenizer) --------------------------------------------------------

# a surrogate as surrogatepass writes it in UTF-8 (str.encode("utf-8") refuses one)
_SURROGATE = re.compile(rb"\xed[\xa0-\xbf]")


class RawBackend:
    """A replayed record's backend JSON as its file holds it, checked against its SHA-256 and
    decoded only when something uses it: a replay on fastaxo's encoder never does, and the
    check and decode of Qwen3's 11 MB tokenizer.json take ~65 ms."""

    __slots__ = ("data", "sha256", "_text")

    def __init__(self, data: bytes, sha256: str) -> None:
        self.data, self.sha256 = data, sha256
        self._text: str | None = None

    def text(self) -> str:
        """The JSON text; ValueError when the bytes are not the ones the record names."""
        if self._text is None:
            if hashlib.sha256(self.data).hexdigest() != self.sha256:
                raise ValueError("the recorded backend is not the one its record names")
            self._text = self.data.decode("utf-8", "surrogatepass")
        return self._text


def backend_text(v: str | RawBackend) -> str:
    """A record's backend as text (recorded in this process: already text)."""
    return v if isinstance(v, str) else v.text()


def check_backend_record(v: Any) -> None:
    """ValueError unless ``v`` is a record's backend answers as :class:`BackendRecorder`
    writes them."""
    if not (type(v) is dict and set(v) == {"attrs", "parts", "calls"}
            and all(type(x) is dict for x in v.values())):
        raise ValueError("the backend's answers are malformed")
    for x in v["attrs"].values():
        decode(x)
    for x in v["parts"].values():
        if x is not None and not (type(x) is list and len(x) == 2 and type(x[0]) is str
                                  and x[0].isidentifier() and type(x[1]) in (str, type(None))):
            raise ValueError("a part of the backend is malformed")
    for x in v["calls"].values():
        _answer(x, None)


def call_text(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], *extra: Any
              ) -> str | None:
    """The key of a call (with ``extra`` after its arguments), or None for one that is not
    recorded: arguments that are not plain data, or texts of more than _MAX_ANSWER characters
    in all (a batch the chat path encodes, not a check's probe: never keyed, so a replay does
    not dump its batches as JSON only to miss)."""
    if any(type(a) is list and sum(len(x) if type(x) is str else 0 for x in a) > _MAX_ANSWER
           for a in args):
        return None
    try:
        return dumps([name, encode(list(args)), encode({k: kwargs[k] for k in sorted(kwargs)}),
                      *extra])
    except (Unencodable, ValueError, RecursionError):
        return None


def _from_tokenizers(v: Any, name: str) -> bool:
    t = type(v)
    return t.__name__ == name and str(getattr(t, "__module__", "")).startswith("tokenizers")


def _answer_encode(v: Any) -> Any:
    """A backend call's answer as JSON: :func:`encode`'s values, and tagged ``E`` an Encoding
    (ids, offsets, each token's characters), ``A`` an AddedToken (content, repr, flags), ``m``
    a dict of such answers; anything else raises Unencodable."""
    if _from_tokenizers(v, "Encoding"):
        n = len(v)
        return {"E": [[int(i) for i in v.ids], encode(list(v.offsets)),
                      encode([v.token_to_chars(i) for i in range(n)])]}
    if _from_tokenizers(v, "AddedToken"):
        return {"A": [str(v.content), repr(v), *(bool(getattr(v, f)) for f in _ADDED_FLAGS)]}
    if type(v) is list:
        return [_answer_encode(x) for x in v]
    if type(v) is dict:
        return {"m": [[encode(k), _answer_encode(x)] for k, x in v.items()]}
    return encode(v)


def _once(real: Callable[[], Any]) -> Callable[[], Any]:
    got: list[Any] = []

    def first() -> Any:
        if not got:
            got.append(real())
        return got[0]

    return first


def _answer(v: Any, real: Callable[[], Any] | None) -> Any:
    """The answer :func:`_answer_encode` made ``v`` from (ValueError for anything it cannot
    have); ``real`` gives the real answer, which recorded objects ask for whatever else is
    read of them (None: checking only)."""
    def item(k: Any) -> Callable[[], Any] | None:
        return None if real is None else _once(lambda: real()[k])

    if type(v) is list:
        return [_answer(x, item(i)) for i, x in enumerate(v)]
    if type(v) is dict and len(v) == 1:
        (tag, body), = v.items()
        if tag == "E" and type(body) is list and len(body) == 3:
            ids, offsets, chars = body[0], decode(body[1]), decode(body[2])
            if (type(ids) is list and all(type(i) is int for i in ids)
                    and type(offsets) is list and type(chars) is list
                    and len(offsets) == len(chars) == len(ids)):
                return _RecordedEncoding(ids, offsets, chars, real)
        elif (tag == "A" and type(body) is list and len(body) == 2 + len(_ADDED_FLAGS)
              and type(body[0]) is str and type(body[1]) is str
              and all(type(x) is bool for x in body[2:])):
            return _RecordedAddedToken(body[0], body[1], dict(zip(_ADDED_FLAGS, body[2:])),
                                       real)
        elif tag == "m" and type(body) is list and all(
                type(p) is list and len(p) == 2 for p in body):
            return {k: _answer(x, item(k)) for k, x in ((decode(k), x) for k, x in body)}
        else:
            return decode(v)
        raise ValueError("a recorded answer is malformed")
    return decode(v)


class _Recorded:
    """A recorded answer's object: what was recorded of it, and for anything else the object
    the real backend gives to the same call (built then)."""

    def __init__(self, real: Callable[[], Any] | None) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        real = self.__dict__.get("_real")
        if real is None:
            raise AttributeError(name)
        return getattr(real(), name)


class _RecordedEncoding(_Recorded):
    def __init__(self, ids: list[int], offsets: list[Any], chars: list[Any],
                 real: Callable[[], Any] | None) -> None:
        super().__init__(real)
        self.ids, self.offsets, self._chars = ids, offsets, chars

    def __len__(self) -> int:
        return len(self.ids)

    def token_to_chars(self, token_index: int) -> Any:
        if type(token_index) is int and 0 <= token_index < len(self._chars):
            return self._chars[token_index]
        return self.__getattr__("token_to_chars")(token_index)


class _RecordedAddedToken(_Recorded):
    def __init__(self, content: str, text: str, flags: dict[str, bool],
                 real: Callable[[], Any] | None) -> None:
        super().__init__(real)
        self.content, self._repr = content, text
        self.__dict__.update(flags)

    def __repr__(self) -> str:
        return self._repr

    def __str__(self) -> str:
        return self.content

    def __eq__(self, other: object) -> Any:
        if isinstance(other, _RecordedAddedToken) and other._real is not None:
            other = other._real()
        return self.__getattr__("__eq__")(other)  # (NotImplemented stays what it is)

    def __hash__(self) -> int:
        return hash(self.__getattr__("__hash__")())


_PART_CLASSES: dict[str, type] = {}


def _part(rec: list[Any] | None, real: Callable[[], Any]) -> Any:
    """A part of the pipeline (model, normalizer, ...) as recorded: its class's name and
    ``__getstate__()``; the real part for anything else."""
    if rec is None:
        return None
    cls = _PART_CLASSES.get(rec[0])
    if cls is None:
        def getstate(self: Any) -> Any:
            state = self.__dict__["_state"]
            return self.__getattr__("__getstate__")() if state is None else state.encode()

        cls = _PART_CLASSES[rec[0]] = type(rec[0], (_Recorded,), {
            "__module__": __name__, "__getstate__": getstate})
    got = cls(real)
    got._state = rec[1]
    return got


def _part_record(value: Any) -> list[Any] | None:
    if value is None:
        return None
    try:
        state = value.__getstate__()
        text = state.decode() if type(state) is bytes else state if type(state) is str else None
    except Exception:  # noqa: BLE001 - a state it cannot give: asked of the real part
        text = None
    if text is not None and len(text) > _MAX_STATE:
        text = None
    return [type(value).__name__, text]


def _real_backend(st: Any) -> Any:
    """The real backend of a replay: ``from_str`` of the recorded tokenizer.json (or the real
    tokenizer's, loaded, where that fails), built once."""
    with st.lock:
        if st.backend is None:
            try:
                from tokenizers import Tokenizer

                st.backend = Tokenizer.from_str(backend_text(st.rec["backend"]))
            except Exception:  # noqa: BLE001 - a record it cannot read: the real one
                st.backend = st.go_live("its backend").backend_tokenizer
        return st.backend


class BackendReplay:
    """``backend_tokenizer`` on a replay: the recorded answers until anything the record
    lacks is asked, then (from then on) the real backend's."""

    __slots__ = ("_st",)

    def __init__(self, st: Any) -> None:
        object.__setattr__(self, "_st", st)

    def __getattr__(self, name: str) -> Any:
        st = self._st
        if st.backend is None:
            ans = st.rec["backend_answers"]
            if name in _BACKEND_ATTRS and name in ans["attrs"]:
                return decode(ans["attrs"][name])
            if name in _BACKEND_PARTS and name in ans["parts"]:
                return _part(ans["parts"][name], lambda: getattr(_real_backend(st), name))
            if name == "to_str":
                return functools.partial(_replay_to_str, st)
            if name in _BACKEND_METHODS:
                return functools.partial(_replay_call, st, name)
        return getattr(_real_backend(st), name)

    def to_str_utf8(self) -> bytes | None:
        """``to_str().encode("utf-8")`` from the record's bytes as its file holds them (checked
        against its SHA-256; not decoded and encoded again: ~25 ms for Qwen3's 11 MB), or None
        (the text is not in the record, holds a surrogate, or the real backend is in use).
        :meth:`fastaxo.Tokenizer.from_hf` asks it, as a method of this class only."""
        st = self._st
        raw = st.rec["backend"] if st.backend is None else None
        if (not isinstance(raw, RawBackend) or _SURROGATE.search(raw.data)
                or hashlib.sha256(raw.data).hexdigest() != raw.sha256):
            return None
        return raw.data

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(_real_backend(self._st), name, value)

    def __reduce_ex__(self, protocol: Any) -> Any:  # (pickled, or copied, as the real one)
        return copy.copy, (_real_backend(self._st),)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {'built' if self._st.backend is not None else 'recorded'}>"


def _replay_to_str(st: Any, pretty: bool = False) -> str:
    if st.backend is None and pretty is False:
        try:  # (the record holds it when from_str gives it back)
            return backend_text(st.rec["backend"])
        except ValueError:
            pass
    return str(_real_backend(st).to_str(pretty))


def _replay_call(st: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    def real() -> Any:
        return getattr(_real_backend(st), name)(*args, **kwargs)

    key = call_text(name, args, kwargs) if st.backend is None else None
    hit = None if key is None else st.rec["backend_answers"]["calls"].get(key)
    return real() if hit is None else _answer(hit, _once(real))


class BackendRecorder:
    """``backend_tokenizer`` while the snapshot records: the real backend, whose flags, parts
    and read-only calls are recorded as they are answered. Any other method ends the
    recording (it may change the backend)."""

    __slots__ = ("_st", "real")

    def __init__(self, st: Any, real: Any) -> None:
        object.__setattr__(self, "_st", st)
        object.__setattr__(self, "real", real)

    def __getattr__(self, name: str) -> Any:
        st = self._st
        value = getattr(self.real, name)
        if not st.recording:
            return value
        ans = st.rec["backend_answers"]
        if name in _BACKEND_ATTRS:
            try:
                _put(st, ans["attrs"], name, encode(value))
            except (Unencodable, RecursionError):
                pass
        elif name in _BACKEND_PARTS:
            _put(st, ans["parts"], name, _part_record(value))
        elif name in _BACKEND_METHODS and callable(value):
            return functools.partial(_recorded_call, st, name, value)
        elif callable(value) and name != "to_str":
            st.recording = False
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        self._st.recording = False
        setattr(self.real, name, value)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return copy.copy, (self.real,)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of a {type(self.real).__name__}>"


def _put(st: Any, into: dict[str, Any], name: str, enc: Any) -> None:
    if into.get(name, NOTHING) != enc:
        into[name] = enc
        st.grew = True


def _recorded_call(st: Any, name: str, method: Callable[..., Any], *args: Any,
                   **kwargs: Any) -> Any:
    key = call_text(name, args, kwargs)
    result = method(*args, **kwargs)
    if key is not None and st.recording:
        try:
            enc = _answer_encode(result)
            if len(dumps(enc)) <= _MAX_ANSWER:
                _put(st, st.rec["backend_answers"]["calls"], key, enc)
        except (Unencodable, ValueError, RecursionError):
            pass
    return result
