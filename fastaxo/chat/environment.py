"""fastaxo's own copy of the Jinja environment transformers renders chat templates in, and the
structural check that proves a copy equal to transformers' before it is used.

``apply_chat_template`` compiles every template in an ``ImmutableSandboxedEnvironment`` that
``transformers.utils.chat_template_utils._cached_compile_jinja_template`` builds: trim_blocks,
lstrip_blocks, the ``{% generation %}`` extension, ``loopcontrols``, a ``tojson`` filter that
does not escape HTML, and the globals ``raise_exception`` and ``strftime_now``. Reaching it
means importing transformers (seconds). :func:`fastaxo_environment` builds the same thing
from jinja2 alone; :func:`environment_differences` compares it with transformers' own,
option by option, name by name, and function by function (bytecode, constants, defaults, the
globals and closures they reach), so the copy is used only where a run that had transformers
loaded anyway found no difference (:mod:`fastaxo.chat.snapshot` records that verdict).
"""

from __future__ import annotations

import functools
import inspect
import json
import types
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

# (module level, as in transformers: the functions below reach them as globals, not closures)
import jinja2
import jinja2.exceptions
import jinja2.ext
import jinja2.nodes
import jinja2.parser
import jinja2.runtime
import jinja2.utils
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = ["VARIANTS", "closest_variant", "environment_differences", "fastaxo_environment",
           "transformers_environment"]


# The environments transformers has built, oldest first (a verdict names one): "plain"
# (5.x up to 5.23: the tracker's state on the extension) and "guarded" (5.24: the tracker's
# state in a ContextVar, and ``dict`` and ``namespace`` globals that refuse type-hackery).
VARIANTS = ("plain", "guarded")


def _build(variant: str = "plain", **options: Any) -> Any:
    """The environment ``variant`` (:data:`VARIANTS`), built as transformers builds it (the
    nested definitions mirror ``_cached_compile_jinja_template``, whose bytecode they must
    equal; transformers is Apache-2.0, as fastaxo). ``options`` replace the environment's
    options (tests)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
    tracker = _plain_tracker() if variant == "plain" else _guarded_tracker()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        # (Jinja's own tojson escapes HTML characters)
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    kwargs = dict(trim_blocks=True, lstrip_blocks=True,
                  extensions=[tracker, jinja2.ext.loopcontrols])
    jinja_env = ImmutableSandboxedEnvironment(**{**kwargs, **options})
    jinja_env.filters["tojson"] = tojson
    jinja_env.globals["raise_exception"] = raise_exception
    jinja_env.globals["strftime_now"] = strftime_now
    if variant == "guarded":
        template_dict, template_namespace = _guarded_globals()
        jinja_env.globals["dict"] = template_dict()
        jinja_env.globals["namespace"] = template_namespace
    return jinja_env


def _plain_tracker() -> type:
    class AssistantTracker(Extension):
        # (tracks the indices of assistant-generated tokens in the rendered chat)
        tags = {"generation"}  # noqa: RUF012 - (as transformers writes it)

        def __init__(self, environment: ImmutableSandboxedEnvironment):
            # The class is only initiated by jinja.
            super().__init__(environment)
            environment.extend(activate_tracker=self.activate_tracker)
            self._rendered_blocks = None
            self._generation_indices = None

        def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.CallBlock:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [],
                                          body).set_lineno(lineno)

        @jinja2.pass_eval_context
        def _generation_support(self, context: jinja2.nodes.EvalContext,
                                caller: jinja2.runtime.Macro) -> str:
            rv = caller()
            if self.is_active():
                # Only track generation indices if the tracker is active
                start_index = len("".join(self._rendered_blocks))  # type: ignore[arg-type]
                end_index = start_index + len(rv)
                self._generation_indices.append((start_index, end_index))  # type: ignore[attr-defined]
            return rv

        def is_active(self) -> bool:
            return self._rendered_blocks is not None or self._generation_indices is not None

        @contextmanager
        def activate_tracker(self, rendered_blocks: list[int],
                             generation_indices: list[int]):
            try:
                if self.is_active():
                    raise ValueError("AssistantTracker should not be reused before closed")
                self._rendered_blocks = rendered_blocks  # type: ignore[assignment]
                self._generation_indices = generation_indices  # type: ignore[assignment]

                yield
            finally:
                self._rendered_blocks = None
                self._generation_indices = None

    return AssistantTracker


def _guarded_tracker() -> type:
    class AssistantTracker(Extension):
        # (the tracker's state lives in a ContextVar: one environment, many threads)
        tags = {"generation"}  # noqa: RUF012 - (as transformers writes it)

        def __init__(self, environment: ImmutableSandboxedEnvironment):
            # The class is only initiated by jinja.
            super().__init__(environment)
            environment.extend(activate_tracker=self.activate_tracker)
            self._tracking = ContextVar("assistant_tracker", default=None)

        def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.CallBlock:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [],
                                          body).set_lineno(lineno)

        @jinja2.pass_eval_context
        def _generation_support(self, context: jinja2.nodes.EvalContext,
                                caller: jinja2.runtime.Macro) -> str:
            rv = caller()
            if (tracking := self._tracking.get()) is not None:
                # Only track generation indices if the tracker is active
                rendered_blocks, generation_indices = tracking
                start_index = len("".join(rendered_blocks))
                end_index = start_index + len(rv)
                generation_indices.append((start_index, end_index))
            return rv

        def is_active(self) -> bool:
            return self._tracking.get() is not None

        @contextmanager
        def activate_tracker(self, rendered_blocks: list[int],
                             generation_indices: list[int]):
            if self.is_active():
                raise ValueError("AssistantTracker should not be reused before closed")
            token = self._tracking.set((rendered_blocks, generation_indices))  # type: ignore[arg-type]
            try:
                yield
            finally:
                self._tracking.reset(token)

    return AssistantTracker


def _guarded_globals() -> tuple[type, type]:
    class TemplateDict:
        # (a callable, not the dict type: no attribute access to the type from a template)
        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    class TemplateNamespace(jinja2.utils.Namespace):
        # (refuses underscore-prefixed names: no reach into CPython internals)
        def __init__(*args, **kwargs):  # noqa: N805 - (Jinja's own signature trick)
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name, value):
            TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check_name(name):
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(
                    f"Chat templates cannot store underscore-prefixed attributes on a namespace, "
                    f"but got {name!r}. Please rename the attribute."
                )

    return TemplateDict, TemplateNamespace


@functools.cache
def fastaxo_environment(variant: str = "plain") -> Any:
    """fastaxo's copy of transformers' chat-template environment ``variant`` (one per process
    and variant; the bounded renderer only ever overlays it)."""
    return _build(variant)


def transformers_environment() -> Any:
    """transformers' own environment, from a template of its own (compiling the user's template
    there would fold its constant expressions, unbounded). Imports transformers."""
    from transformers.utils.chat_template_utils import _compile_jinja_template

    return _compile_jinja_template("").environment


def closest_variant(theirs: Any) -> tuple[str, list[str]]:
    """The variant of fastaxo's copy equal to ``theirs`` and no differences, or, where none is,
    the one with the fewest differences and those differences."""
    best: tuple[str, list[str]] | None = None
    for variant in reversed(VARIANTS):
        diffs = environment_differences(theirs, fastaxo_environment(variant))
        if not diffs:
            return variant, []
        if best is None or len(diffs) < len(best[1]):
            best = (variant, diffs)
    assert best is not None
    return best


# -- the structural comparison ----------------------------------------------------------------

# Flags that change what a code object does (CO_NESTED and the __future__ flags do not)
_FLAGS = (inspect.CO_OPTIMIZED | inspect.CO_NEWLOCALS | inspect.CO_VARARGS
          | inspect.CO_VARKEYWORDS | inspect.CO_GENERATOR | inspect.CO_COROUTINE
          | inspect.CO_ITERABLE_COROUTINE | inspect.CO_ASYNC_GENERATOR)
_CODE_FIELDS = ("co_code", "co_names", "co_varnames", "co_freevars", "co_cellvars",
                "co_argcount", "co_posonlyargcount", "co_kwonlyargcount")
# what a class body holds besides behaviour (names of the place it was written)
_CLASS_NOISE = frozenset({"__module__", "__qualname__", "__doc__", "__firstlineno__",
                          "__static_attributes__", "__dict__", "__weakref__", "__annotations__"})
# an environment's runtime state, not its configuration
_ENV_STATE = frozenset({"cache"})
_PLAIN = (str, bytes, int, float, complex, bool, type(None), type(Ellipsis))


def environment_differences(theirs: Any, mine: Any) -> list[str]:
    """Where environment ``mine`` differs from ``theirs`` (empty: none): the class, every
    option and attribute (the template cache's contents excepted), the names of the filters,
    tests, globals and extensions, and each object under those names: Jinja's own must be
    the same objects; functions and classes defined elsewhere (transformers' ``tojson``,
    ``raise_exception``, ``strftime_now``, the generation extension) must have equal bytecode,
    constants, names, flags, defaults and attributes, and reach the same objects through
    their globals and closures."""
    out: list[str] = []
    seen = {(id(theirs), id(mine)): True}
    if type(theirs) is not type(mine):
        return [f"class {type(mine).__name__}, not {type(theirs).__name__}"]
    a, b = vars(theirs), vars(mine)
    if sorted(a) != sorted(b):
        return [f"attributes {sorted(set(a) ^ set(b))}"]
    for name in sorted(a):
        if name in _ENV_STATE:
            if type(a[name]) is not type(b[name]) or getattr(a[name], "capacity", None) != \
                    getattr(b[name], "capacity", None):
                out.append(name)
        elif name == "extensions":
            ea = {type(x).__name__: x for x in a[name].values()}
            eb = {type(x).__name__: x for x in b[name].values()}
            if sorted(ea) != sorted(eb) or len(ea) != len(a[name]) or len(eb) != len(b[name]):
                out.append(f"extensions {sorted(ea)} / {sorted(eb)}")
            else:
                out += [f"extensions[{k}]" for k in sorted(ea) if not _same(ea[k], eb[k], seen)]
        elif isinstance(a[name], dict) and name in ("filters", "tests", "globals"):
            if sorted(a[name]) != sorted(b[name]):
                out.append(f"{name} names: {sorted(set(a[name]) ^ set(b[name]))}")
            else:
                out += [f"{name}[{k}]" for k in sorted(a[name])
                        if not _same(a[name][k], b[name][k], seen)]
        elif not _same(a[name], b[name], seen):
            out.append(name)
    return out


def _same(x: Any, y: Any, seen: dict[tuple[int, int], bool]) -> bool:
    """Whether ``x`` and ``y`` behave the same (see :func:`environment_differences`). ``seen``:
    pairs under comparison (taken as equal: the comparison is of structures that refer to
    themselves, an extension's environment, a method's class)."""
    if x is y:
        return True
    if type(x) is not type(y):
        # instances of two equal classes defined in two places (the generation extension)
        if (isinstance(x, _PLAIN) or type(type(x)) is not type or type(type(y)) is not type
                or not _same_class(type(x), type(y), seen)):
            return False
        try:
            return _same(vars(x), vars(y), seen)
        except TypeError:
            return False
    if isinstance(x, _PLAIN):
        return bool(x == y)
    pair = (id(x), id(y))
    if pair in seen:
        return True
    seen[pair] = True
    if isinstance(x, (list, tuple)):
        return len(x) == len(y) and all(_same(p, q, seen) for p, q in zip(x, y, strict=True))
    if isinstance(x, (set, frozenset)):
        return bool(x == y)
    if isinstance(x, dict):
        return list(x) == list(y) and all(_same(x[k], y[k], seen) for k in x)
    if isinstance(x, types.CodeType):
        return _same_code(x, y, seen)
    if isinstance(x, types.FunctionType):
        return _same_function(x, y, seen)
    if isinstance(x, types.MethodType):
        return _same(x.__func__, y.__func__, seen) and _same(x.__self__, y.__self__, seen)
    if isinstance(x, (staticmethod, classmethod)):
        return _same(x.__func__, y.__func__, seen)
    if isinstance(x, property):
        return all(_same(getattr(x, f), getattr(y, f), seen) for f in ("fget", "fset", "fdel"))
    if isinstance(x, type):
        return _same_class(x, y, seen)
    if isinstance(x, types.ModuleType):
        return False  # (the same module is the same object)
    if isinstance(x, ContextVar):  # state of a tracker: its name and value in this context
        return x.name == y.name and _same(x.get(_MISSING), y.get(_MISSING), seen)
    try:
        vx, vy = vars(x), vars(y)
    except TypeError:  # a builtin object that is not the same one
        return False
    return _same(vx, vy, seen)


def _same_code(x: types.CodeType, y: types.CodeType, seen: dict[tuple[int, int], bool]
               ) -> bool:
    return (all(getattr(x, f) == getattr(y, f) for f in _CODE_FIELDS)
            and (x.co_flags & _FLAGS) == (y.co_flags & _FLAGS)
            and len(x.co_consts) == len(y.co_consts)
            and all(_same(p, q, seen) for p, q in zip(x.co_consts, y.co_consts, strict=True)))


def _same_function(x: types.FunctionType, y: types.FunctionType,
                   seen: dict[tuple[int, int], bool]) -> bool:
    if x.__name__ != y.__name__ or not _same_code(x.__code__, y.__code__, seen):
        return False
    if not (_same(x.__defaults__, y.__defaults__, seen)
            and _same(x.__kwdefaults__, y.__kwdefaults__, seen)
            and sorted(vars(x)) == sorted(vars(y))
            and all(_same(vars(x)[k], vars(y)[k], seen) for k in vars(x))):
        return False
    cx, cy = x.__closure__ or (), y.__closure__ or ()
    if len(cx) != len(cy) or not all(_same(p.cell_contents, q.cell_contents, seen)
                                     for p, q in zip(cx, cy, strict=True)):
        return False
    # the globals the code names: the same objects (json, datetime, jinja2, ...)
    for name in _global_names(x.__code__):
        gx = x.__globals__.get(name, _MISSING)
        gy = y.__globals__.get(name, _MISSING)
        if not _same(gx, gy, seen):
            return False
    return True


_MISSING = object()


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _global_names(c)
    return names


def _same_class(x: type, y: type, seen: dict[tuple[int, int], bool]) -> bool:
    if x.__name__ != y.__name__ or len(x.__bases__) != len(y.__bases__):
        return False
    if not all(p is q for p, q in zip(x.__bases__, y.__bases__, strict=True)):
        return False
    dx = {k: v for k, v in vars(x).items() if k not in _CLASS_NOISE}
    dy = {k: v for k, v in vars(y).items() if k not in _CLASS_NOISE}
    # a Jinja extension's identifier names where it was defined (the key of its environment's
    # extensions, by which its compiled templates find it): it must be just that
    for c, d in ((x, dx), (y, dy)):
        if "identifier" in d and d.pop("identifier") != f"{c.__module__}.{c.__name__}":
            return False
    return sorted(dx) == sorted(dy) and all(_same(dx[k], dy[k], seen) for k in dx)
