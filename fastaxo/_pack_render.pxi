# Included by _pack.pyx: the three calls a compiled chat template makes most often, for
# fastaxo's bounded renderer (fastaxo.chat.render). Jinja's generated code calls
# environment.getattr for every `message.role`, environment.call_binop for every `+` and
# environment.call for every method call; in Python each is a frame and a few type tests, most of
# a render's time. Here the common cases are answered in C with the same result, and every other
# case goes to the Python function given (the renderer's own path, with its checks).

import types

cdef extern from "Python.h":
    PyObject *PyDict_GetItemWithError(object d, object key) except? NULL
    PyObject *PyCFunction_GET_SELF(object op)
    void *PyCFunction_GetFunction(object op) except? NULL


def render_getattr(object slow, dict safe=None):
    """``environment.getattr(obj, attribute)`` for a str ``attribute``: a plain dict's key
    answered from the dict when ``attribute`` names no attribute of dict (where the sandbox's
    getattr fails and then subscripts); with ``safe`` (the sandbox's verdicts by ``(type(obj),
    attribute)``, filled by ``slow``; only for a sandbox whose verdict depends on nothing else),
    any other object's attribute whose verdict is known and that is not a method other than a
    plain str's own (the sandbox wraps ``str.format``). Everything else, and a missing key, ``slow(obj, attribute)``."""
    cdef frozenset dict_attrs = frozenset(dir(dict))
    method_types = (types.MethodType, types.BuiltinMethodType)
    method_type = type("".startswith)
    cdef uintptr_t fmt = <uintptr_t>PyCFunction_GetFunction("".format)
    cdef uintptr_t fmt_map = <uintptr_t>PyCFunction_GetFunction("".format_map)

    def getattr_(obj, attribute):
        cdef PyObject *v
        if type(attribute) is not str:
            return slow(obj, attribute)
        if type(obj) is dict:
            if attribute not in dict_attrs:
                v = PyDict_GetItemWithError(obj, attribute)
                if v is not NULL:
                    return <object>v
            return slow(obj, attribute)
        if safe is None:
            return slow(obj, attribute)
        v = PyDict_GetItemWithError(safe, (type(obj), attribute))
        if v is NULL or <object>v is not True:
            return slow(obj, attribute)
        try:
            value = getattr(obj, attribute)
        except AttributeError:
            return slow(obj, attribute)
        if type(value) is method_type:  # a str's own method, but format: the sandbox's as is
            if (type(<object>PyCFunction_GET_SELF(value)) is str
                    and <uintptr_t>PyCFunction_GetFunction(value) != fmt
                    and <uintptr_t>PyCFunction_GetFunction(value) != fmt_map):
                return value
            return slow(obj, attribute)
        if isinstance(value, method_types):
            return slow(obj, attribute)
        return value

    return getattr_


def render_binop(object slow, Py_ssize_t max_chars):
    """``environment.call_binop(context, op, left, right)``: ``str + str`` of at most
    ``max_chars`` characters joined here; anything else ``slow(context, op, left, right)``."""
    def call_binop(context, op, left, right):
        if (type(left) is str and type(right) is str and op == "+"
                and len(<str>left) + len(<str>right) <= max_chars):
            return <str>left + <str>right
        return slow(context, op, left, right)

    return call_binop


# str methods answered by render_call: no argument can make them build more than their string
# (the renderer's checks look only at int arguments and at `format`, `format_map`, `replace`,
# `expandtabs` and `join`), and their results are checked as the renderer checks them
_RENDER_STR_METHODS = ("startswith", "endswith", "strip", "lstrip", "rstrip", "split", "rsplit",
                       "splitlines", "partition", "rpartition", "removeprefix", "removesuffix",
                       "find", "rfind", "count", "lower", "upper", "title", "capitalize",
                       "casefold", "swapcase", "isdigit", "isalpha", "isalnum", "isspace",
                       "isupper", "islower", "isnumeric", "isdecimal")
_RENDER_CALL_KWARGS = frozenset({"_loop_vars", "_block_vars"})


def render_call(object slow, Py_ssize_t max_chars):
    """``environment.call(context, obj, *args, **kwargs)`` of a sandbox whose ``call``,
    ``is_safe_callable`` and context are Jinja's own: a method of a plain str from
    ``_RENDER_STR_METHODS`` whose arguments are all str or None (keywords: only the loop and
    block variables Jinja passes, which the context drops) is called here, as the sandbox would
    (a builtin method is safe, takes no context); its result, when a str, list or tuple longer
    than ``max_chars``, and every other call go to ``slow`` (the renderer's checked path)."""
    cdef Py_ssize_t n = len(_RENDER_STR_METHODS), i
    fns_arr = np.zeros(n, np.uintp)
    cdef uintptr_t[::1] fns = fns_arr
    for i in range(n):
        fns[i] = <uintptr_t>PyCFunction_GetFunction(getattr("", _RENDER_STR_METHODS[i]))
    method_type = type("".startswith)
    cdef frozenset dropped = _RENDER_CALL_KWARGS

    def call(context, obj, *args, **kwargs):
        cdef uintptr_t fn
        cdef Py_ssize_t k
        cdef bint known = False
        if type(obj) is method_type and type(<object>PyCFunction_GET_SELF(obj)) is str and (
                not kwargs or dropped.issuperset(kwargs)):
            fn = <uintptr_t>PyCFunction_GetFunction(obj)
            for k in range(fns.shape[0]):
                if fns[k] == fn:
                    known = True
                    break
            for a in args:
                if a is not None and type(a) is not str:
                    known = False
                    break
            if known:
                value = obj(*args)
                if not (type(value) is str or type(value) is list or type(value) is tuple) \
                        or len(value) <= max_chars:
                    return value
        return slow(context, obj, *args, **kwargs)

    return call
