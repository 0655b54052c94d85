"""A chat template's output for a conversation without rendering it: recorded paths.

A template reads a message's content in few ways: it writes it (Qwen3, ChatML, Llama 3),
strips it, asks whether it holds or starts with some text or is empty. Everything else it
does depends on the roles. :func:`compile_recorder` renders a conversation once with every
content a :class:`_Slot`: an object that is not a ``str`` and answers only those questions,
each from the real content, writing down the question and the answer (a guard). Any other
use of a content (its length, a character, a hash, a filter, a conversion to ``str``, a
comparison by order, a macro's output) raises :class:`_Untracked` (a ``BaseException``,
which no ``except Exception`` in Jinja or a filter can turn into another branch), and the
conversation records no path. A content that reaches the output is written as a private-use
marker, so the rendered text is the template's text around the contents (the frame) with the
place, and the string methods applied, of each content.

The render is deterministic given the roles, the template's variables and the guards'
answers; so a conversation with the same message structure whose contents give every guard
the recorded answer renders to the frame filled with its contents (:meth:`Path.text`): no
Jinja. ``strftime_now`` is a guard too (its answer compared again each time). Each recorded
path is checked against the real render of the conversation it was recorded on; a mismatch
disables the paths (it would be a fault here, and the real render is always right).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable
from typing import Any

__all__ = ["WHITESPACE", "Path", "Paths", "compile_recorder"]

_SINK, _NEST = "__fastaxo_sink", "__fastaxo_nest"
_OWN = frozenset({"sink", "nest", "concat"})  # the recorder's functions the template calls
_MARK0 = 0x100000  # supplementary private use area B: a template that holds any is refused
_MAX_SLOTS = 0xFFFD
_MARK_RE = re.compile("[\U00100000-\U0010FFFF]")
_METHODS = frozenset({"startswith", "endswith", "strip", "lstrip", "rstrip"})
_MAX_CHAIN = 8  # string methods on one content (each a line of the path's function)
# Jinja tests whose answer is the same for every str (checked on two at compile time)
_CONST_TESTS = frozenset({"string", "defined", "undefined", "none", "mapping", "sequence",
                          "iterable", "number", "integer", "float", "boolean", "true", "false",
                          "callable", "escaped"})
_EQ_TESTS = {"eq": True, "equalto": True, "==": True, "ne": False, "!=": False}
# message fields other than ``content`` that may vary between conversations of one structure
_SCALARS = (str, int, bool, float, type(None))


class _Untracked(BaseException):
    """A content was used in a way the recorder does not follow: no path."""


class _Record:
    """What one recording render wrote down: the guards (in order, each once) and the
    contents (with their string methods) the output holds, in order."""

    __slots__ = ("clock", "guards", "seen", "sizes", "slots")

    def __init__(self) -> None:
        self.guards: list[tuple[int, tuple[tuple[str, Any], ...], str, Any, Any]] = []
        self.seen: set[tuple[Any, ...]] = set()
        # every text built from contents (+, ~): the render checks each against max_chars
        self.sizes: list[tuple[int, tuple[tuple[int, tuple[tuple[str, Any], ...]], ...]]] = []
        self.slots: list[tuple[int, tuple[tuple[str, Any], ...]]] = []
        self.clock: list[tuple[str, str]] = []

    def guard(self, slot: _Slot, op: str, arg: Any, answer: Any) -> Any:
        key = (slot._k, slot._chain, op, arg)
        if key not in self.seen:
            self.seen.add(key)
            self.guards.append((*key, answer))
        return answer

    def size(self, cat: _Cat) -> None:
        parts = cat._parts
        key = (sum(len(p) for p in parts if isinstance(p, str)),
               tuple((p._k, p._chain) for p in parts if isinstance(p, _Slot)))
        if key[1] and ("size", key) not in self.seen:
            self.seen.add(("size", key))
            self.sizes.append(key)


def _untracked(*args: Any, **kwargs: Any) -> Any:
    raise _Untracked


def _str_arg(x: Any) -> str:
    if isinstance(x, str) and not isinstance(x, (_Slot, _Cat)):
        return str.__str__(x)
    raise _Untracked


class _Slot:
    """Message ``k``'s content after the string methods ``chain`` (``value``: this
    conversation's); see the module docstring."""

    # (underscored: the sandbox refuses such attributes, as it does on a str)
    __slots__ = ("_chain", "_k", "_rec", "_value")

    def __init__(self, k: int, chain: tuple[tuple[str, Any], ...], value: str, rec: _Record):
        self._k, self._chain, self._value, self._rec = k, chain, value, rec

    def __bool__(self) -> bool:
        return self._rec.guard(self, "bool", None, bool(self._value))

    def __contains__(self, x: Any) -> bool:
        x = _str_arg(x)
        return self._rec.guard(self, "in", x, x in self._value)

    def __eq__(self, other: Any) -> Any:
        if isinstance(other, (_Slot, _Cat)):
            raise _Untracked
        if isinstance(other, str):
            x = str.__str__(other)
            return self._rec.guard(self, "eq", x, self._value == x)
        return NotImplemented

    def __ne__(self, other: Any) -> Any:
        got = self.__eq__(other)
        return got if got is NotImplemented else not got

    def _affix(self, op: str, x: Any, *rest: Any) -> bool:
        if rest:
            raise _Untracked
        if type(x) is tuple:
            x = tuple(_str_arg(p) for p in x)
        else:
            x = _str_arg(x)
        return self._rec.guard(self, op, x, getattr(self._value, op)(x))

    def startswith(self, x: Any, *rest: Any) -> bool:
        return self._affix("startswith", x, *rest)

    def endswith(self, x: Any, *rest: Any) -> bool:
        return self._affix("endswith", x, *rest)

    def _stripped(self, op: str, chars: Any) -> _Slot:
        if chars is not None:
            chars = _str_arg(chars)
        if len(self._chain) >= _MAX_CHAIN:
            raise _Untracked
        return _Slot(self._k, (*self._chain, (op, chars)), getattr(self._value, op)(chars),
                     self._rec)

    def strip(self, chars: Any = None) -> _Slot:
        return self._stripped("strip", chars)

    def lstrip(self, chars: Any = None) -> _Slot:
        return self._stripped("lstrip", chars)

    def rstrip(self, chars: Any = None) -> _Slot:
        return self._stripped("rstrip", chars)



class _Cat:
    """Text and contents joined by ``+`` or ``~``: it may only be joined further or written."""

    __slots__ = ("_parts",)  # (underscored: see _Slot)

    def __init__(self, parts: tuple[Any, ...]):
        self._parts = parts


# every other way of reading a str: not followed (a _Cat may only be joined or written)
_READS = ("__hash__", "__len__", "__iter__", "__reversed__", "__getitem__", "__str__", "__repr__",
          "__format__", "__lt__", "__le__", "__gt__", "__ge__", "__add__", "__radd__",
          "__mul__", "__rmul__", "__mod__", "__rmod__", "__getnewargs__", "__reduce__",
          "__reduce_ex__", "__copy__", "__deepcopy__")
for _name in _READS:
    setattr(_Slot, _name, _untracked)
for _name in (*_READS, "__bool__", "__contains__", "__eq__", "__ne__"):
    setattr(_Cat, _name, _untracked)


def _tracked(x: Any) -> bool:
    return isinstance(x, (_Slot, _Cat))


def _cat(*parts: Any) -> _Cat:
    out: list[Any] = []
    for p in parts:
        if isinstance(p, _Cat):
            out.extend(p._parts)
        elif isinstance(p, _Slot) or type(p) is str:
            out.append(p)
        else:
            raise _Untracked
    cat = _Cat(tuple(out))
    rec = next((p._rec for p in out if isinstance(p, _Slot)), None)
    if rec is not None:
        rec.size(cat)
    return cat


class Path:
    """One recorded path of a template: ``values(contents)`` is the render of a conversation
    of the recorded structure whose contents (one str per message) answer every guard as
    recorded, as its pieces (text and contents, ``"".join`` them), else None."""

    __slots__ = ("_places", "guards", "pieces", "values", "values_utf8")

    def __init__(self, rec: _Record, pieces: list[Any], strftime: Callable[[str], str] | None,
                 max_chars: int):
        self.guards, self.pieces = rec.guards, pieces
        self.values = _compile(rec, pieces, strftime, max_chars)
        # the same over each content's UTF-8, giving the pieces' UTF-8 (Paths.placed_utf8);
        # None where the template's text or a guard holds a lone surrogate (no UTF-8)
        try:
            self.values_utf8: Callable[[list[Any]], tuple[Any, ...] | None] | None = _compile(
                rec, pieces, strftime, max_chars, utf8=True)
        except UnicodeEncodeError:
            self.values_utf8 = None
        self._places: dict[tuple[Any, ...], tuple[int, ...] | None] = {}

    def text(self, contents: list[str]) -> str | None:
        got = self.values(contents)
        return None if got is None else "".join(got)

    def places(self, messages: tuple[int, ...], placeholders: tuple[str, ...]
               ) -> tuple[int, ...] | None:
        """The index in :attr:`pieces` of each of ``messages``' contents, when each is written
        once, and writes each placeholder as it is, and the placeholder answers every guard on
        that message as recorded: then a render with any of those contents replaced by a
        placeholder is this path's text with the placeholder in its piece (the guards ask of
        one message each). Else None."""
        key = (messages, placeholders)
        if key not in self._places:
            self._places[key] = self._find(messages, placeholders)
        return self._places[key]

    def _find(self, messages: tuple[int, ...], placeholders: tuple[str, ...]
              ) -> tuple[int, ...] | None:
        at: dict[int, list[int]] = {}
        for n, p in enumerate(self.pieces):
            if not isinstance(p, str):
                at.setdefault(p[0], []).append(n)
        if any(len(at.get(j, ())) != 1 for j in messages):
            return None
        for s in placeholders:
            if any(_chained(s, self.pieces[at[j][0]][1]) != s for j in messages):
                return None
            if any(k in messages and _asked(_chained(s, chain), op, arg) is not answer
                   for k, chain, op, arg, answer in self.guards):
                return None
        return tuple(at[j][0] for j in messages)


def _chained(value: str, chain: tuple[tuple[str, Any], ...]) -> str:
    for method, chars in chain:
        value = getattr(value, method)(chars)
    return value


def _asked(value: str, op: str, arg: Any) -> bool:
    if op == "bool":
        return bool(value)
    if op == "in":
        return bool(arg in value)
    if op == "eq":
        return value == arg
    return bool(getattr(value, op)(arg))


def _compile(rec: _Record, pieces: list[Any], strftime: Callable[[str], str] | None,
             max_chars: int, utf8: bool = False) -> Callable[[list[Any]], tuple[Any, ...] | None]:
    """The guards, the size checks and the pieces as one Python function (constants by
    ``repr``). With ``utf8`` the function takes each content's UTF-8 (``bytes``) and gives the
    pieces' UTF-8: every guard asks the same of the bytes (UTF-8 is self-synchronizing: one
    text holds, starts or ends with another, or equals it, exactly where its bytes do), the
    string methods are :func:`_strip_utf8`, and a size check counts bytes, never fewer than
    characters (a text it refuses is rendered, and says its size)."""
    names: dict[tuple[int, tuple[Any, ...]], str] = {}
    lines = ["def values(c):"]
    const = _utf8 if utf8 else (lambda x: x)

    def value(k: int, chain: tuple[Any, ...]) -> str:
        key = (k, chain)
        if key not in names:
            base = f"c[{k}]" if not chain else value(k, chain[:-1])
            name = names[key] = f"v{len(names)}"
            method, chars = chain[-1] if chain else ("", None)
            expr = (base if not chain else f"strip({base}, {method!r}, {chars!r})" if utf8
                    else f"{base}.{method}({chars!r})")
            lines.append(f"    {name} = {expr}")
        return names[key]

    for k, chain, op, arg, answer in rec.guards:
        v, arg = value(k, chain), const(arg)
        test = {"bool": f"bool({v})", "in": f"({arg!r} in {v})", "eq": f"({v} == {arg!r})",
                "startswith": f"{v}.startswith({arg!r})",
                "endswith": f"{v}.endswith({arg!r})"}[op]
        lines.append(f"    if {test} is not {answer!r}: return None")
    for fmt, answer in rec.clock:
        lines.append(f"    if strftime({fmt!r}) != {answer!r}: return None")
    for literal, slots in rec.sizes:  # (past max_chars the render raises: no path then)
        total = " + ".join(f"len({value(k, chain)})" for k, chain in slots)
        lines.append(f"    if {literal} + {total} > {max_chars}: return None")
    parts = [repr(const(p)) if isinstance(p, str) else value(*p) for p in pieces]
    lines.append(f"    return ({''.join(p + ', ' for p in parts)})")
    scope: dict[str, Any] = {"strftime": strftime, "strip": _strip_utf8}
    exec(compile("\n".join(lines), "<fastaxo recorded path>", "exec"), scope)  # noqa: S102
    return scope["values"]


def _utf8(x: Any) -> Any:
    """A guard's argument or a piece of text as UTF-8 (a guard's argument is a str, a tuple
    of str or None: :class:`_Slot`)."""
    if type(x) is tuple:
        return tuple(p.encode() for p in x)
    return x.encode() if type(x) is str else x


# the UTF-8 of every character str.strip() takes for whitespace, 1 to 3 bytes each
# (str.isspace; tests/test_chat_utf8rows.py checks the list against every code point)
WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004"
              "\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_SPACES = tuple(c.encode() for c in WHITESPACE)


def _space_len(b: int) -> int:
    # the length of a whitespace character from its first byte (C2: 2 bytes, E1-E3: 3)
    return 1 if b < 0x80 else 2 if b == 0xC2 else 3


def _strip_utf8(v: bytes, method: str, chars: str | None) -> bytes:
    """``v.decode().<method>(chars).encode()`` for UTF-8 ``v``, without decoding it where
    ``chars`` is None or ASCII (the common case: one ``startswith``/``endswith`` per end)."""
    if chars is not None:
        if chars.isascii():  # an ASCII byte is a whole character
            return getattr(v, method)(chars.encode())
        return getattr(v.decode(), method)(chars).encode()
    a, b = 0, len(v)
    if method != "rstrip":
        while a < b and v.startswith(_SPACES, a, b):
            a += _space_len(v[a])
    if method != "lstrip":
        while b > a and v.endswith(_SPACES, a, b):
            b -= 1 if v[b - 1] < 0x80 else 2 if v[b - 2] == 0xC2 else 3
    return v if (a, b) == (0, len(v)) else v[a:b]


def structure(conversation: Any) -> tuple[Any, ...] | None:
    """What of a conversation a path depends on besides its contents (the roles and any other
    message fields, in order), or None when it is not a list of dicts whose contents are str
    and whose other fields are plain scalars."""
    if type(conversation) is not list or len({id(m) for m in conversation}) != len(
            conversation):  # (one message twice: the recorder's copies would differ by `is`)
        return None
    key: list[Any] = []
    for m in conversation:
        if type(m) is not dict or type(m.get("content")) is not str:
            return None
        if len(m) == 2 and next(iter(m)) == "role" and type(m["role"]) is str:
            key.append(m["role"])
            continue
        fields: list[tuple[Any, ...]] = []
        for name, v in m.items():
            if type(name) is not str:  # (1 == True: equal keys that write differently)
                return None
            if name == "content":
                fields.append((name,))
            elif type(v) in _SCALARS:  # a float by its bits (0.0 == -0.0)
                fields.append((name, type(v), v.hex() if type(v) is float else v))
            else:
                return None
        key.append(tuple(fields))
    return tuple(key)


class Paths:
    """The recorded paths of one template, by conversation :func:`structure` (at most
    :attr:`MAX_PATHS` each, :attr:`MAX_STRUCTURES` in all). Thread-safe without a lock (none to
    be held across a fork): each recording has its own state, a structure's paths are
    replaced whole; two threads recording one structure at once may keep one path more."""

    MAX_PATHS = 4
    MAX_STRUCTURES = 4096

    def __init__(self, record: Callable[[list[dict[str, Any]]], Any],
                 render: Callable[[list[dict[str, Any]]], str], max_chars: int):
        self._record, self._render, self._max = record, render, max_chars
        self._paths: dict[tuple[Any, ...], tuple[Path, ...]] = {}
        self.hits = self.recorded = self.refused = 0
        self.broken: str | None = None

    def text(self, conversation: list[dict[str, Any]]) -> str:
        """The template's output for ``conversation``: from a recorded path where one fits,
        else rendered (and a path recorded from that render when there is room)."""
        return self.placed(conversation)[0]

    def placed(self, conversation: list[dict[str, Any]], messages: tuple[int, ...] = (),
               placeholders: tuple[str, ...] = ()
               ) -> tuple[str, list[tuple[int, int]] | None]:
        """:meth:`text`, and where it came from a path that places ``messages``
        (:meth:`Path.places`), each one's ``(start, length)`` in it (else None)."""
        key = structure(conversation) if self.broken is None else None
        if key is None:
            return self._render(conversation), None
        got = self._paths.get(key, ())
        if got:
            contents = [m["content"] for m in conversation]
            for p in got:
                values = p.values(contents)
                if values is None:
                    continue
                text = "".join(values)
                if len(text) > self._max:  # the render says how big
                    break
                self.hits += 1
                where = p.places(messages, placeholders) if messages else None
                if where is None:
                    return text, None
                ends = list(itertools.accumulate(map(len, values)))
                return text, [(ends[n] - len(values[n]), len(values[n])) for n in where]
        text = self._render(conversation)  # raises what the template raises: no path
        if len(got) < self.MAX_PATHS and self.worth_trying():
            self._learn(key, conversation, text)
        return text, None

    def placed_utf8(self, roles: tuple[str, ...], contents: list[bytes],
                    messages: tuple[int, ...], placeholders: tuple[str, ...]
                    ) -> tuple[bytes, list[tuple[int, int]]] | None:
        """:meth:`placed` for a conversation of plain ``{"role", "content"}`` messages given
        as its roles and each content's UTF-8: the text's UTF-8 and each of ``messages``'
        ``(start, length)`` in bytes, from the path :meth:`placed` would take (its guards ask
        the same of the bytes). None where :meth:`placed` would render, or would not place
        the messages, or the text may be past the size bound: :meth:`placed` then answers
        (it records, places or says the size)."""
        got = self._paths.get(roles, ()) if self.broken is None else ()
        for p in got:
            if p.values_utf8 is None:
                return None
            values = p.values_utf8(contents)
            if values is None:
                continue
            where = p.places(messages, placeholders) if messages else ()
            text = b"".join(values)
            if where is None or len(text) > self._max:
                return None
            self.hits += 1
            ends = list(itertools.accumulate(map(len, values)))
            return text, [(ends[n] - len(values[n]), len(values[n])) for n in where]
        return None

    def worth_trying(self) -> bool:
        """Whether recording still pays: not after many refusals with few paths."""
        return (self.broken is None and len(self._paths) < self.MAX_STRUCTURES
                and (self.refused < 64 or self.recorded * 4 > self.refused))

    def _learn(self, key: tuple[Any, ...], conversation: list[dict[str, Any]],
               text: str) -> None:
        path = self._record(conversation)
        if path is None:
            self.refused += 1
            return
        got = path.text([m["content"] for m in conversation])
        if got is None:  # the clock moved on since the render
            return
        if got != text:  # never: it would be a fault of the recorder
            self.broken = "a recorded path differs from the template's render"
            self._paths.clear()
            return
        self.recorded += 1
        self._paths[key] = (*self._paths.get(key, ()), path)


def compile_recorder(env: Any, source: str, variables: dict[str, Any], *, max_steps: int,
                     max_chars: int) -> Callable[[list[dict[str, Any]]], Path | None] | None:
    """``record(conversation) -> Path | None`` for ``source`` in an overlay of the sandboxed
    environment ``env`` (the one :func:`~fastaxo.chat.render.compile_renderer` renders in),
    or None for a template no path can be recorded for (one that holds a marker character,
    uses the ``random`` filter or a global this module does not know)."""
    from jinja2 import nodes

    from fastaxo.chat import render as r

    known = {"range", "dict", "lipsum", "cycler", "joiner", "namespace", "raise_exception",
             "strftime_now"}
    if (_MARK_RE.search(source) or set(env.globals) - known or env.finalize is not None
            or env.autoescape is not False
            or any(_MARK_RE.search(v) for v in _strings(variables))):
        return None
    benv = env.overlay()
    r.bound_getattr(benv, env)
    benv.intercepted_binops = frozenset({"*", "+", "**", "%"})
    sandbox_call, sandbox_binop = type(env).call, type(env).call_binop
    constructors = tuple(env.globals[n] for n in ("dict", "namespace") if n in env.globals)

    def call_binop(context: Any, op: str, left: Any, right: Any) -> Any:
        if _tracked(left) or _tracked(right):
            if op == "+":
                return _cat(left, right)
            raise _Untracked
        return sandbox_binop(benv, context, op, left, right)

    def call(context: Any, obj: Any, *args: Any, **kwargs: Any) -> Any:
        owner = getattr(obj, "__self__", None)
        if type(owner) is _Slot and getattr(obj, "__name__", None) in _METHODS:
            kwargs.pop("_loop_vars", None)  # (what Jinja's Context.call takes out)
            kwargs.pop("_block_vars", None)
            return obj(*args, **kwargs)
        if (any(map(_tracked, args)) or any(map(_tracked, kwargs.values()))) and not (
                any(obj is c for c in constructors) or (getattr(obj, "__name__", None) in _OWN
                and getattr(obj, "__module__", None) == __name__)):
            raise _Untracked
        return sandbox_call(benv, context, obj, *args, **kwargs)

    def getitem(obj: Any, argument: Any) -> Any:
        # a list or str indexed by a content: the sandbox answers TypeError with getattr
        # (``x["count"]`` is a method), a read of the content no guard holds
        if _tracked(argument) or (type(argument) is slice and any(
                map(_tracked, (argument.start, argument.stop, argument.step)))):
            raise _Untracked
        return sandbox_getitem(benv, obj, argument)

    sandbox_getitem = type(env).getitem
    benv.call_binop, benv.call, benv.getitem = call_binop, call, getitem
    benv.filters = {name: _filter(name, f) for name, f in env.filters.items()}
    tests = {name: _test(name, f) for name, f in env.tests.items()}
    if any(t is None for t in tests.values()):
        return None
    benv.tests = tests
    try:
        ast = benv.parse(source)
    except Exception:  # noqa: BLE001 - compile_renderer has said why already
        return None
    if any(f.name == "random" for f in ast.find_all(nodes.Filter)) or any(
            True for _ in ast.find_all((nodes.EvalContextModifier, nodes.Extends,
                                        nodes.Include, nodes.Import, nodes.FromImport))):
        return None  # (a random choice; escaping turned on in a block; other templates)
    r.instrument(ast)
    _sinks_class()().visit(ast)
    template = benv.template_class.from_code(benv, benv.compile(ast), benv.make_globals(None),
                                             None)
    strftime = env.globals.get("strftime_now")
    return _recorder(template, variables, max_steps, max_chars, strftime)


def _recorder(template: Any, variables: dict[str, Any], max_steps: int, max_chars: int,
              strftime: Callable[[str], str] | None
              ) -> Callable[[list[dict[str, Any]]], Path | None]:
    from fastaxo.chat import render as r

    def record(conversation: list[dict[str, Any]]) -> Path | None:
        rec = _Record()
        left = [max_steps]

        def loop(iterable: Any) -> Any:
            return r.Counted(iterable, left, max_steps)

        def tick() -> str:
            left[0] -= 1
            if left[0] < 0:
                raise _Untracked
            return ""

        def concat(*parts: Any) -> Any:
            if any(map(_tracked, parts)):
                return _cat(*[p if _tracked(p) else str(p) for p in parts])
            return "".join([str(p) for p in parts])

        def sink(x: Any) -> Any:
            if not _tracked(x):
                return x
            out = []
            for p in (x._parts if isinstance(x, _Cat) else (x,)):
                if isinstance(p, str):
                    out.append(p)
                    continue
                if len(rec.slots) >= _MAX_SLOTS:
                    raise _Untracked
                out.append(chr(_MARK0 + len(rec.slots)))
                rec.slots.append((p._k, p._chain))
            return "".join(out)

        def nest(x: Any) -> Any:
            if _tracked(x):
                raise _Untracked
            return x

        def clock(fmt: Any) -> Any:
            got = strftime(fmt)  # type: ignore[misc]
            if type(fmt) is not str or type(got) is not str:
                raise _Untracked
            rec.clock.append((fmt, got))
            return got

        messages = [{k: (_Slot(i, (), v, rec) if k == "content" else v) for k, v in m.items()}
                    for i, m in enumerate(conversation)]
        context = template.new_context(r.render_vars(messages, variables, {
            **({"strftime_now": clock} if strftime is not None else {}),
            r.LOOP: loop, r.TICK: tick, r.JOIN: concat, _SINK: sink, _NEST: nest}))
        try:
            text = "".join(template.root_render_func(context))
        except _Untracked:
            return None
        except Exception:  # noqa: BLE001 - the real render raised the same, or it is ours
            return None
        try:
            return _path(text, rec, strftime, max_chars)
        except (RecursionError, MemoryError, SyntaxError):  # (a path too big to compile)
            return None

    return record


def _path(text: str, rec: _Record, strftime: Callable[[str], str] | None,
          max_chars: int) -> Path | None:
    """The recorded output split at the markers, each of which must appear once, in order."""
    pieces: list[Any] = []
    at = n = 0
    for m in _MARK_RE.finditer(text):
        if n >= len(rec.slots) or ord(m.group()) != _MARK0 + n:
            return None
        if m.start() > at:
            pieces.append(text[at:m.start()])
        pieces.append(rec.slots[n])
        at, n = m.end(), n + 1
    if n != len(rec.slots):
        return None
    if at < len(text):
        pieces.append(text[at:])
    return Path(rec, pieces, strftime, max_chars)


def _strings(x: Any) -> list[str]:
    if isinstance(x, str):
        return [x]
    if isinstance(x, dict):
        return [s for v in x.values() for s in _strings(v)]
    if isinstance(x, (list, tuple)):
        return [s for v in x for s in _strings(v)]
    return []


def _filter(name: str, f: Callable[..., Any]) -> Callable[..., Any]:
    """The filter, refusing a content unless it is ``trim`` (a strip) or ``default``."""
    from fastaxo.chat import render as r

    @functools.wraps(f)
    def filtered(*args: Any, **kwargs: Any) -> Any:
        pos = r.filter_args(args)
        if any(map(_tracked, pos)) or any(map(_tracked, kwargs.values())):
            if any(map(_tracked, (*pos[1:], *kwargs.values()))):
                raise _Untracked
            if name == "trim" and type(pos[0]) is _Slot and len(pos) <= 2 and set(kwargs) <= {
                    "chars"}:
                chars = pos[1] if len(pos) == 2 else kwargs.get("chars")
                return pos[0].strip(chars)
            if name not in ("default", "d"):
                raise _Untracked
        return f(*args, **kwargs)

    return filtered


def _test(name: str, f: Callable[..., Any]) -> Callable[..., Any] | None:
    """The test, answering for a content as for any str, or as a guard (``eq``/``ne``);
    None when a test listed as constant is not (another environment's)."""
    from fastaxo.chat import render as r

    const = None
    if name in _CONST_TESTS:
        try:
            answers = {bool(f(s)) for s in ("", "x\n")}
        except Exception:  # noqa: BLE001 - a test that needs its environment
            answers = set()
        if len(answers) != 1:
            return None
        const = answers.pop()

    @functools.wraps(f)
    def tested(*args: Any, **kwargs: Any) -> Any:
        pos = r.filter_args(args)
        if any(map(_tracked, (*pos[1:], *kwargs.values()))):
            raise _Untracked
        if pos and _tracked(pos[0]):
            if const is not None:
                return const
            if name in _EQ_TESTS and len(pos) == 2 and not kwargs and type(pos[0]) is _Slot:
                same = pos[0] == pos[1]
                if same is NotImplemented:
                    raise _Untracked
                return same if _EQ_TESTS[name] else not same
            raise _Untracked
        return f(*args, **kwargs)

    return tested


@functools.cache  # a class made on first use (jinja2 imported lazily)
def _sinks_class() -> Any:
    from jinja2 import nodes
    from jinja2.visitor import NodeTransformer

    nested = (nodes.Macro, nodes.CallBlock, nodes.FilterBlock, nodes.AssignBlock, nodes.Block)

    class Sinks(NodeTransformer):
        """Each output of an expression through the sink: at the template's level (written to
        the output) contents become markers; inside a macro, call, filter, set or block body
        (captured: it could be read again) a content is not followed."""

        def __init__(self) -> None:
            self.depth = 0

        def generic_visit(self, node: Any, *args: Any, **kwargs: Any) -> Any:
            inner = isinstance(node, nested) or (isinstance(node, nodes.For) and node.recursive)
            self.depth += inner
            try:
                return super().generic_visit(node, *args, **kwargs)
            finally:
                self.depth -= inner

        def visit_Output(self, node: Any) -> Any:
            name = _NEST if self.depth else _SINK
            node.nodes = [n if isinstance(n, nodes.TemplateData) else
                          nodes.Call(nodes.Name(name, "load"), [n], [], None, None
                                     ).set_lineno(n.lineno) for n in node.nodes]
            return node

    return Sinks
