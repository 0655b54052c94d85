# Included by _pack.pyx: fastaxo.chat.locate.parse in C, the same steps (every find, every
# comparison) over the same str objects, without an interpreter frame per turn; the Python
# function stays the reference (tests/test_chat_locate.py compares the two).

cdef extern from "Python.h":
    Py_ssize_t PyUnicode_Find(object s, object sub, Py_ssize_t start, Py_ssize_t end,
                              int direction) except -2
    Py_ssize_t PyUnicode_Tailmatch(object s, object sub, Py_ssize_t start, Py_ssize_t end,
                                   int direction) except -1
    object PyUnicode_Substring(object s, Py_ssize_t start, Py_ssize_t end)
    const Py_ssize_t PY_SSIZE_T_MAX

# as fastaxo.chat.locate._MAX_ENDS
cdef Py_ssize_t _LOCATE_MAX_ENDS = 16


cdef inline bint _starts_at(str text, str w, Py_ssize_t pos) except -1:
    return PyUnicode_Tailmatch(text, w, pos, PY_SSIZE_T_MAX, -1) == 1


cdef object _written_at(str text, Py_ssize_t pos, object ways, dict owner):
    # locate._written_at: the way of writing (of one length) that text holds at pos, or None
    cdef Py_ssize_t i, m
    cdef str w
    if ways is None:
        return None
    m = PyList_GET_SIZE(ways)
    if m == 0:
        return None
    if m <= 4:
        for i in range(m):
            w = <str>PyList_GET_ITEM(ways, i)
            if _starts_at(text, w, pos):
                return w
        return None
    w = <str>PyList_GET_ITEM(ways, 0)
    got = PyUnicode_Substring(text, pos, pos + len(w))
    return got if got in owner else None


def locate_parse(str text, list frames, list written):
    """:func:`fastaxo.chat.locate.parse`, step for step: the one way to read ``text`` as
    ``frames[0] X0 frames[1] ... frames[n]`` with each ``X_k`` one of ``written[k]``
    (``(variant, text)`` pairs): ``(start, variant, length)`` per k, or None."""
    cdef dict owner = {}, by_len = {}
    cdef Py_ssize_t k, n = len(written), pos, found, hi, tries, p, budget, longest = 0
    cdef Py_ssize_t size = len(text), ln
    cdef str after, w
    cdef list got = []
    if len(frames) != n + 1:
        raise ValueError(f"frames: expected {n + 1} (written + 1), got {len(frames)}")
    for k in range(n):
        for pair in <list>written[k]:
            w = <str>(<tuple>pair)[1]
            prev = owner.get(w, k)
            owner[w] = k if prev == k else -1
    after = <str>frames[0]
    if not _starts_at(text, after, 0):
        return None
    for w in owner:
        ln = len(w)
        lst = by_len.get(ln)
        if lst is None:
            by_len[ln] = [w]
        else:
            (<list>lst).append(w)
        if ln > longest:
            longest = ln
    pos = len(after)
    budget = 4 * size + 4096
    for k in range(n):
        after = <str>frames[k + 1]
        if k + 1 == n:  # the last frame ends the text
            found = size - len(after)
            if found < pos or PyUnicode_Tailmatch(text, after, 0, size, 1) != 1:
                return None
            hit = _written_at(text, pos, by_len.get(found - pos), owner)
        else:
            found, tries, hit = -1, 0, None
            hi = min(pos + longest + len(after), size)
            p = PyUnicode_Find(text, after, pos, hi, 1)
            while p >= 0:
                here = _written_at(text, pos, by_len.get(p - pos), owner)
                if here is not None:
                    if found >= 0:
                        return None
                    found, hit = p, here
                tries += 1
                if tries > _LOCATE_MAX_ENDS:  # a short frame that recurs: let the markers say
                    return None
                p = PyUnicode_Find(text, after, p + 1, hi, 1)
            budget -= hi - pos
            if budget < 0:
                return None
        if hit is None or owner[hit] != k:
            return None
        for pair in <list>written[k]:
            if (<tuple>pair)[1] == hit:
                got.append((pos, (<tuple>pair)[0], len(hit)))
                break
        else:  # pragma: no cover - hit is owned by turn k: one of its ways
            raise AssertionError("locate_parse: a turn's own way was not found")
        pos = found + len(after)
    if n == 0 and len(<str>frames[0]) != size:
        return None
    return got
