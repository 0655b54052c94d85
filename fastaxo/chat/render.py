"""Chat templates rendered as transformers renders them, fast and under bounds.

A chat template arrives with a tokenizer directory, from anywhere: it can loop without end,
build a string of gigabytes, recurse or raise. :func:`compile_renderer` compiles it into
transformers' own environment (the sandbox, filters and globals of ``apply_chat_template``) with
three changes, none of which changes a text it renders:

- **steps**: every item a ``for`` loop takes and every macro or call block entered counts one
  step; past ``max_steps`` the render stops (:class:`TemplateLimitError`);
- **sizes**: the text rendered so far, and any string or list one operation would build
  (``*``, ``+``, ``~``, ``%``, a filter or method with a width or count, ``join``,
  ``replace``), may not exceed ``max_chars`` (:class:`OutputTooLarge`: the row is too large;
  a constant expression Jinja would fold at compile time, ``**`` on huge numbers and
  ``lipsum``: :class:`TemplateLimitError`);
- **speed**: ``message.content`` on a plain dict is answered from the dict, without the failed
  ``getattr`` the sandbox does first (most of a render's cost).

The loop and tick functions are per render (a template cannot reach them: it may not name
them). Errors the template itself raises become :class:`~fastaxo.errors.ChatTemplateError`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

from fastaxo._core import backend
from fastaxo.errors import ChatTemplateError, TemplateLimitError

__all__ = ["DEFAULT_MAX_STEPS", "OutputTooLarge", "compile_renderer",
           "template_source_error"]

DEFAULT_MAX_STEPS = 10_000_000
LOOP, TICK, JOIN = "__fastaxo_loop", "__fastaxo_tick", "__fastaxo_concat"
_RESERVED = "__fastaxo"
_DIGITS = re.compile(r"\d{7,}")  # widths in format strings worth a look


class OutputTooLarge(Exception):  # noqa: N818 - not an error of the template: of the row
    """The rendered text grew, or one operation would build a string or list, past
    ``max_chars``; ``chars`` is how far it got, ``what`` the operation (None: the text)."""

    def __init__(self, chars: int, what: str | None = None):
        super().__init__(chars, what)
        self.chars, self.what = chars, what


def template_source_error(exc: BaseException) -> str:
    """One line for a template that does not compile (Jinja's syntax error names the line)."""
    line = getattr(exc, "lineno", None)
    msg = str(getattr(exc, "message", None) or exc).splitlines()[0] if str(exc) else type(
        exc).__name__
    return f"line {line}: {msg}" if line else msg


def compile_renderer(env: Any, source: str, variables: dict[str, Any], *, max_steps: int,
                     max_chars: int) -> Callable[..., str]:
    """``render(conversation, **extra) -> str`` for ``source`` in a bounded overlay of the
    sandboxed environment ``env`` (transformers' compiled template's, or fastaxo's proven copy
    of it: :mod:`fastaxo.chat.environment`). ``variables`` are passed
    to every render (the tokenizer's special tokens, chat_template_kwargs). With the compiled
    extension the environment's ``getattr``, ``call_binop`` and ``call`` answer their common
    cases in C (``_pack.render_*``; ``render.hooks`` says which: ``"_pack"`` or ``"python"``).

    Raises :class:`~fastaxo.errors.ChatTemplateError` if the template does not compile."""
    from jinja2 import nodes
    from jinja2.exceptions import TemplateSyntaxError

    benv = env.overlay()
    sandbox_call, sandbox_binop = type(env).call, type(env).call_binop
    bound_getattr(benv, env)
    benv.intercepted_binops = frozenset({"*", "+", "**", "%"})
    limit = _Sizes(max_chars)

    table = dict(benv.binop_table)
    if sandbox_binop is not _sandbox_call_binop():  # a subclass with its own operators
        table = {}

    def call_binop(context: Any, op: str, left: Any, right: Any) -> Any:
        if op == "+" and type(left) is str and type(right) is str:  # most of a template's
            if len(left) + len(right) > max_chars:
                limit.check(len(left) + len(right), "'+'")
            return left + right
        limit.binop(op, left, right)
        f = table.get(op)
        return f(left, right) if f is not None else sandbox_binop(benv, context, op, left, right)

    def call(context: Any, obj: Any, *args: Any, **kwargs: Any) -> Any:
        limit.before_call(obj, args, kwargs)
        return limit.after(sandbox_call(benv, context, obj, *args, **kwargs))

    fast = backend.pack_ext
    benv.call_binop = call_binop if fast is None else fast.render_binop(call_binop, max_chars)
    benv.call = call if fast is None or not _plain_call(env) else fast.render_call(call, max_chars)
    benv.filters = {name: (_bounded_filter(f, limit) if _may_grow(f) else f)
                    for name, f in env.filters.items()}
    try:
        ast = benv.parse(source)
    except TemplateSyntaxError as e:
        raise ChatTemplateError(f"chat_template: syntax error at {template_source_error(e)}"
                                ) from None
    for name in ast.find_all(nodes.Name):
        if name.name.startswith(_RESERVED):
            raise ChatTemplateError(f"chat_template: the name {name.name!r} is reserved")
    check_constants(ast, benv, limit)
    instrument(ast)
    template = benv.template_class.from_code(benv, benv.compile(ast), benv.make_globals(None),
                                             None)
    if "lipsum" in template.globals:  # lipsum(n) builds n paragraphs: no chat template needs it
        template.globals = {**template.globals, "lipsum": _no_lipsum}

    def render(conversation: list[dict[str, Any]], **extra: Any) -> str:
        left = [max_steps]

        def loop(iterable: Any) -> Any:
            return Counted(iterable, left, max_steps)

        def tick() -> str:
            left[0] -= 1
            if left[0] < 0:
                raise _too_many_steps(max_steps)
            return ""

        def concat(*parts: Any) -> str:
            strs = [str(p) for p in parts]
            limit.check(sum(map(len, strs)), "~")
            return "".join(strs)

        out: list[str] = []
        size = 0
        try:
            # Template.render's own loop (root_render_func over a new context), counting: not
            # Template.generate, whose wrapper costs a generator frame per piece
            context = template.new_context(render_vars(
                conversation, variables, {**extra, LOOP: loop, TICK: tick, JOIN: concat}))
            for piece in template.root_render_func(context):
                size += len(piece)
                if size > max_chars:
                    raise OutputTooLarge(size)
                out.append(piece)
        except (ChatTemplateError, OutputTooLarge):
            raise
        except RecursionError:
            raise ChatTemplateError("chat_template: recursion too deep (a macro or recursive "
                                    "loop that does not end)") from None
        except MemoryError:
            raise TemplateLimitError("chat_template: out of memory while rendering") from None
        except Exception as e:  # noqa: BLE001 - raise_exception, SecurityError, TypeError, ...
            raise ChatTemplateError(f"chat_template: {_one_line(e)}") from e
        return "".join(out)

    render.hooks = "python" if fast is None else "_pack"  # type: ignore[attr-defined]
    return render


def render_vars(messages: Any, variables: dict[str, Any], extra: dict[str, Any]
                ) -> dict[str, Any]:
    """What a render sees: ``apply_chat_template``'s variables (``messages``, no tools or
    documents, no generation prompt), the template's ``variables``, then ``extra``."""
    return {"messages": messages, "tools": None, "documents": None,
            "add_generation_prompt": False, **variables, **extra}


def _one_line(e: BaseException) -> str:
    text = str(getattr(e, "message", None) or e) or type(e).__name__
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    kind = type(e).__name__
    msg = " ".join(lines)[:500]
    return msg if kind == "TemplateError" else f"{kind}: {msg}"


def _no_lipsum(*args: Any, **kwargs: Any) -> str:
    raise TemplateLimitError("chat_template: lipsum() is not available to chat templates")


def check_constants(ast: Any, env: Any, limit: _Sizes) -> None:
    """Evaluate, under the size checks, every constant expression Jinja's compiler would fold
    (``'x' * 10**9``, ``10 ** 10 ** 10``, a filter on constants): transformers compiles the
    template without intercepted operators and folds them at compile time, unbounded."""
    from jinja2 import nodes
    from jinja2.utils import _PassArg

    none = object()
    memo: dict[int, Any] = {}

    def fold(n: Any) -> Any:
        key = id(n)
        if key not in memo:
            try:
                memo[key] = fold_one(n)
            except (TemplateLimitError, OutputTooLarge):
                raise
            except Exception:  # noqa: BLE001 - what Jinja's folding gives up on
                memo[key] = none
        return memo[key]

    def fold_one(n: Any) -> Any:
        if isinstance(n, nodes.Const):
            return n.value
        if isinstance(n, (nodes.Tuple, nodes.List)):
            items = [fold(x) for x in n.items]
            if any(x is none for x in items):
                return none
            return tuple(items) if isinstance(n, nodes.Tuple) else items
        if isinstance(n, nodes.BinExpr) and n.operator in _BINOPS:
            left, right = fold(n.left), fold(n.right)
            if left is none or right is none:
                return none
            limit.binop(n.operator, left, right)
            return _BINOPS[n.operator](left, right)
        if isinstance(n, nodes.UnaryExpr) and n.operator in _UNOPS:
            value = fold(n.node)
            return none if value is none else _UNOPS[n.operator](value)
        if isinstance(n, nodes.Concat):
            parts = [fold(x) for x in n.nodes]
            if any(x is none for x in parts):
                return none
            strs = [str(x) for x in parts]
            limit.check(sum(map(len, strs)), "~")
            return "".join(strs)
        if isinstance(n, nodes.Filter) and n.node is not None and not n.dyn_args \
                and not n.dyn_kwargs:
            func = env.filters.get(n.name)
            pass_arg = _PassArg.from_obj(func) if func is not None else None
            if func is None or pass_arg is _PassArg.context:
                return none
            args = [fold(x) for x in [n.node, *n.args]]
            kwargs = {k.key: fold(k.value) for k in n.kwargs}
            if any(x is none for x in [*args, *kwargs.values()]):
                return none
            if pass_arg is _PassArg.eval_context:
                args.insert(0, nodes.EvalContext(env))
            elif pass_arg is _PassArg.environment:
                args.insert(0, env)
            return func(*args, **kwargs)
        return none

    try:
        for n in ast.find_all((nodes.BinExpr, nodes.UnaryExpr, nodes.Concat, nodes.Filter)):
            fold(n)
    except OutputTooLarge as e:
        raise TemplateLimitError(f"chat_template: a constant expression ({e.what}) would build "
                                 f"{e.chars:,} items, more than the {limit.max:,} allowed "
                                 "(max_row_bytes)") from None


def _binops() -> tuple[dict[str, Any], dict[str, Any]]:
    import operator

    return ({"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
             "//": operator.floordiv, "**": operator.pow, "%": operator.mod},
            {"not": operator.not_, "+": operator.pos, "-": operator.neg})


_BINOPS, _UNOPS = _binops()


def _too_many_steps(max_steps: int) -> TemplateLimitError:
    return TemplateLimitError(f"chat_template: more than {max_steps:,} steps (loop items and "
                              "macro calls) in one render")


class Counted:
    """A for-loop's iterable whose every item costs a step of the render's budget ``left``;
    sized when the original is (``loop.length`` stays as cheap as it was)."""

    __slots__ = ("_it", "_left", "_max")

    def __init__(self, iterable: Any, left: list[int], max_steps: int):
        self._it, self._left, self._max = iterable, left, max_steps

    def __len__(self) -> int:
        return len(self._it)

    def __iter__(self) -> Iterator[Any]:
        left = self._left
        for item in self._it:
            left[0] -= 1
            if left[0] < 0:
                raise _too_many_steps(self._max)
            yield item


@functools.cache  # a class made on first use (jinja2 imported lazily)
def _instrument_classes() -> Any:
    from jinja2 import nodes
    from jinja2.visitor import NodeTransformer

    class Instrument(NodeTransformer):
        """Loop iterables counted, a tick at the top of every macro, call block and recursive
        loop body, and ``~`` through a size-checked join."""

        def visit_For(self, node: Any) -> Any:
            self.generic_visit(node)
            if node.recursive:  # a recursive loop calls its body with new iterables
                node.body.insert(0, _tick_stmt(node.lineno))
            else:
                node.iter = nodes.Call(nodes.Name(LOOP, "load"), [node.iter], [], None, None
                                       ).set_lineno(node.lineno)
            return node

        def visit_Macro(self, node: Any) -> Any:
            self.generic_visit(node)
            node.body.insert(0, _tick_stmt(node.lineno))
            return node

        visit_CallBlock = visit_Macro  # noqa: N815 - the visitor's naming

        def visit_Concat(self, node: Any) -> Any:
            self.generic_visit(node)
            return nodes.Call(nodes.Name(JOIN, "load"), list(node.nodes), [], None, None
                              ).set_lineno(node.lineno)

    def _tick_stmt(lineno: int) -> Any:
        return nodes.ExprStmt(nodes.Call(nodes.Name(TICK, "load"), [], [], None, None)
                              ).set_lineno(lineno)

    return Instrument


def instrument(ast: Any) -> None:
    """The step counts and the size-checked ``~`` put into a parsed template (in place)."""
    _instrument_classes()().visit(ast)


class _Sizes:
    """The size checks: nothing one operation builds may exceed ``max_chars`` items."""

    __slots__ = ("max",)

    def __init__(self, max_chars: int):
        self.max = max_chars

    def check(self, n: int, what: str) -> None:
        if n > self.max:
            raise OutputTooLarge(n, what)

    def binop(self, op: str, left: Any, right: Any) -> None:
        if op == "*":
            for seq, k in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(k, int):
                    self.check(len(seq) * max(k, 0), "'*'")
        elif op == "+":
            if isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
                self.check(len(left) + len(right), "'+'")
        elif op == "**":
            if (isinstance(left, int) and isinstance(right, int) and right > 0
                    and abs(left) > 1 and right * math.log2(abs(left)) > 4 * self.max):
                raise TemplateLimitError(f"chat_template: {left} ** {right} is too large")
        elif op == "%" and isinstance(left, str):
            self.widths(left, "'%'")

    def widths(self, fmt: str, what: str) -> None:
        for m in _DIGITS.finditer(fmt):
            self.check(int(m.group()), what)

    def ints(self, args: Any, what: str) -> None:
        for a in args:
            if isinstance(a, int) and not isinstance(a, bool):
                self.check(a, what)

    def before_call(self, obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        for a in args:
            if type(a) is int and a > self.max:
                self.check(a, getattr(obj, "__name__", "a call"))
        if kwargs:
            self.ints(kwargs.values(), getattr(obj, "__name__", "a call"))
        name = getattr(obj, "__name__", None)
        if name not in _STR_GROWERS:
            return
        owner = getattr(obj, "__self__", None)
        if owner is None:  # the sandbox's str.format wrapper
            owner = getattr(getattr(obj, "__wrapped__", None), "__self__", None)
        if not isinstance(owner, str):
            return
        self.widths(owner, name)
        if name == "replace" and len(args) >= 2:
            self.check(_replaced_size(owner, args[0], args[1]), "replace")
        elif name == "expandtabs":
            tab = args[0] if args else kwargs.get("tabsize", 8)
            if isinstance(tab, int):
                self.check(len(owner) * max(tab, 1), "expandtabs")
        elif name == "join" and args:
            self.check(_joined_size(owner, args[0]), "join")

    def after(self, value: Any) -> Any:
        if isinstance(value, (str, list, tuple)):
            self.check(len(value), "a call")
        return value


# str methods whose result can outgrow the string by more than their arguments (the widths in a
# format string, replace's copies, join's items, expandtabs' tabs); int arguments are checked
# for every call
_STR_GROWERS = frozenset({"format", "format_map", "replace", "expandtabs", "join"})
# filters that take a width or count, or build from many items: the others' output is no bigger
# than their input (the output count catches the rest)
_GROWING_FILTERS = frozenset({"do_center", "do_indent", "do_wordwrap", "do_format", "do_replace",
                              "do_join", "tojson", "do_batch", "do_slice", "do_pprint",
                              "do_xmlattr", "do_truncate", "do_urlize", "do_sum", "do_list",
                              "do_map"})


def _may_grow(f: Any) -> bool:
    """Whether a filter is one that may build more than it is given: Jinja's listed above, and
    any not from Jinja or the builtins (transformers' tojson, an environment's own)."""
    module = (getattr(f, "__module__", None) or "").split(".")[0]
    return getattr(f, "__name__", None) in _GROWING_FILTERS or module not in ("jinja2",
                                                                              "builtins")


def _replaced_size(s: str, old: Any, new: Any) -> int:
    if not isinstance(old, str) or not isinstance(new, str):
        return len(s)
    n = s.count(old) if old else len(s) + 1
    return len(s) + n * (len(new) - len(old))


def _joined_size(sep: str, items: Any) -> int:
    if not isinstance(items, (list, tuple)):
        return 0
    return sum(len(x) if isinstance(x, str) else 0 for x in items) + len(sep) * len(items)


def _bounded_filter(f: Callable[..., Any], limit: _Sizes) -> Callable[..., Any]:
    """A filter with the size checks: int arguments (widths, counts) and the result; ``join``
    and ``replace`` estimated before they run; ``indent`` by its lines."""
    name = getattr(f, "__name__", "filter")

    @functools.wraps(f)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        pos = filter_args(args)
        limit.ints(pos[1:], name)
        limit.ints(kwargs.values(), name)
        if pos:
            value = pos[0]
            if isinstance(value, str):
                if name == "do_format":
                    limit.widths(value, name)
                elif name == "do_replace" and len(pos) >= 3:
                    limit.check(_replaced_size(value, pos[1], pos[2]), "replace")
                elif name == "do_indent":
                    width = pos[1] if len(pos) > 1 else kwargs.get("width", 4)
                    if isinstance(width, int):
                        limit.check(len(value) + (value.count("\n") + 1) * width, "indent")
            elif name == "do_join" and isinstance(value, (list, tuple)):
                sep = pos[1] if len(pos) > 1 and isinstance(pos[1], str) else ""
                limit.check(_joined_size(sep, value), "join")
        return limit.after(f(*args, **kwargs))

    return bounded


def filter_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    # a filter marked pass_context / pass_eval_context / pass_environment gets that first
    if args and isinstance(args[0], _passed_types()):
        return args[1:]
    return args


@functools.cache
def _passed_types() -> tuple[type, ...]:
    from jinja2.environment import Environment
    from jinja2.nodes import EvalContext
    from jinja2.runtime import Context

    return (Context, EvalContext, Environment)


@functools.cache
def _sandbox_call_binop() -> Any:
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment.call_binop


def bound_getattr(fast_env: Any, env: Any) -> None:
    """``obj.attr`` as the sandbox answers it, quicker: a plain dict's key straight from the
    dict, and the sandbox's safety verdict remembered per (type, name) (it depends on nothing
    else for ImmutableSandboxedEnvironment)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    sandbox_getattr = type(env).getattr
    memo = type(env) is ImmutableSandboxedEnvironment
    safe: dict[tuple[type, str], bool] = {}

    def getattr_(obj: Any, attribute: Any) -> Any:
        if type(attribute) is not str:
            return sandbox_getattr(fast_env, obj, attribute)
        if type(obj) is dict and attribute not in _DICT_ATTRS:
            try:
                return obj[attribute]
            except KeyError:
                pass
            if memo:  # the sandbox's getattr fails, then the subscript: Undefined
                return fast_env.undefined(obj=obj, name=attribute)
            return sandbox_getattr(fast_env, obj, attribute)
        if not memo:
            return sandbox_getattr(fast_env, obj, attribute)
        try:
            value = getattr(obj, attribute)
        except AttributeError:
            return sandbox_getattr(fast_env, obj, attribute)
        fmt = fast_env.wrap_str_format(value)
        if fmt is not None:
            return fmt
        key = (type(obj), attribute)
        ok = safe.get(key)
        if ok is None:
            ok = safe[key] = bool(fast_env.is_safe_attribute(obj, attribute, value))
        return value if ok else fast_env.unsafe_undefined(obj, attribute)

    fast = backend.pack_ext
    fast_env.getattr = getattr_ if fast is None else fast.render_getattr(
        getattr_, safe if memo else None)


def _plain_call(env: Any) -> bool:
    """Whether ``env`` calls as Jinja's sandbox does (its ``call``, ``is_safe_callable`` and
    context class): then ``_pack.render_call`` may answer a str method itself."""
    from jinja2.runtime import Context
    from jinja2.sandbox import SandboxedEnvironment

    cls = type(env)
    return (isinstance(env, SandboxedEnvironment) and cls.call is SandboxedEnvironment.call
            and cls.is_safe_callable is SandboxedEnvironment.is_safe_callable
            and env.context_class is Context)


_DICT_ATTRS = frozenset(dir(dict))
