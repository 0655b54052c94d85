# Included by _pack.pyx: the chat engine's per-turn reading of a rendered text in C, the same
# steps (every find, every comparison) over the same str objects, without an interpreter frame
# per turn: fastaxo.chat.locate.parse and RowState._ways, and the placeholder diffs of
# engine._placeholder_span. The Python functions stay the reference (tests/test_chat_locate.py
# compares each pair).

cdef extern from "Python.h":
    Py_ssize_t PyUnicode_Find(object s, object sub, Py_ssize_t start, Py_ssize_t end,
                              int direction) except -2
    Py_ssize_t PyUnicode_Tailmatch(object s, object sub, Py_ssize_t start, Py_ssize_t end,
                                   int direction) except -1
    object PyUnicode_Substring(object s, Py_ssize_t start, Py_ssize_t end)
    Py_UCS4 PyUnicode_READ_CHAR(object s, Py_ssize_t i)
    bint Py_UNICODE_ISSPACE(Py_UCS4 ch)
    const Py_ssize_t PY_SSIZE_T_MAX

cdef inline bint _starts_at(str text, str w, Py_ssize_t pos) except -1:
    return PyUnicode_Tailmatch(text, w, pos, PY_SSIZE_T_MAX, -1) == 1


# A way of writing longer than this is filed under its length and ends, not hashed whole: a
# content's hash (SipHash over every character, 4 bytes each in a text with an emoji) cost
# more than the rest of the parse.
cdef Py_ssize_t _KEY_WHOLE = 32
cdef Py_ssize_t _KEY_END = 16


cdef inline object _key_at(str s, Py_ssize_t pos, Py_ssize_t size):
    # the bucket of the way s[pos:pos + size]: the string itself when short, else its length
    # and its first and last _KEY_END characters (ways in one bucket are then compared whole)
    if size <= _KEY_WHOLE:
        return PyUnicode_Substring(s, pos, pos + size)
    return (size, PyUnicode_Substring(s, pos, pos + _KEY_END),
            PyUnicode_Substring(s, pos + size - _KEY_END, pos + size))


cdef object _written_at(str text, Py_ssize_t pos, object ways, dict owner):
    # locate._written_at: the way of writing (of one length) that text holds at pos, as its
    # owner entry [way, turn] (turn -1: two turns write it), or None
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
                return _entry(owner, w)
        return None
    w = <str>PyList_GET_ITEM(ways, 0)
    bucket = owner.get(_key_at(text, pos, len(w)))
    if bucket is not None:
        for e in <list>bucket:
            if _starts_at(text, <str>(<list>e)[0], pos):
                return e
    return None


cdef bint _file(dict owner, str w, Py_ssize_t k) except -1:
    # w filed in owner as a way of turn k: True when new; else the equal way already filed
    # keeps its turn if it is k's, and becomes -1 (two turns write it) if not
    key = _key_at(w, 0, len(w))
    bucket = owner.get(key)
    if bucket is None:
        owner[key] = [[w, k]]
        return True
    for e in <list>bucket:
        if (<list>e)[0] == w:
            if (<list>e)[1] != k:
                (<list>e)[1] = -1
            return False
    (<list>bucket).append([w, k])
    return True


cdef object _entry(dict owner, str w):
    # the owner entry of the way w (which is one)
    for e in <list>owner[_key_at(w, 0, len(w))]:
        if (<list>e)[0] is w or (<list>e)[0] == w:
            return e
    raise AssertionError("locate_parse: a way without its entry")  # pragma: no cover


def locate_parse(str text, list frames, list written, Py_ssize_t max_ends,
                 Py_ssize_t budget):
    """:func:`fastaxo.chat.locate.parse`, step for step: the one way to read ``text`` as
    ``frames[0] X0 frames[1] ... frames[n]`` with each ``X_k`` one of ``written[k]``
    (``(variant, text)`` pairs): ``(start, variant, length)`` per k, or None. Its bounds are
    parse's: at most ``max_ends`` ends tried after a content, ``budget`` characters
    searched. (The ways are filed by length and ends, not hashed whole: :func:`_key_at`.)"""
    cdef dict owner = {}, by_len = {}
    cdef Py_ssize_t k, n = len(written), pos, found, hi, tries, p, longest = 0
    cdef Py_ssize_t size = len(text), ln
    cdef str after, w
    cdef list got = []
    if len(frames) != n + 1:
        raise ValueError(f"frames: expected {n + 1} (written + 1), got {len(frames)}")
    for k in range(n):
        for pair in <list?>written[k]:
            w = <str?>(<tuple?>pair)[1]
            if not _file(owner, w, k):
                continue  # not a new way
            ln = len(w)
            lst = by_len.get(ln)
            if lst is None:
                by_len[ln] = [w]
            else:
                (<list>lst).append(w)
            if ln > longest:
                longest = ln
    after = <str?>frames[0]
    if not _starts_at(text, after, 0):
        return None
    pos = len(after)
    for k in range(n):
        after = <str?>frames[k + 1]
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
                if tries > max_ends:  # a short frame that recurs: let the markers say
                    return None
                p = PyUnicode_Find(text, after, p + 1, hi, 1)
            budget -= hi - pos
            if budget < 0:
                return None
        if hit is None or (<list>hit)[1] != k:
            return None
        w = <str>(<list>hit)[0]
        for pair in <list?>written[k]:
            if (<tuple?>pair)[1] is w or (<tuple?>pair)[1] == w:
                got.append((pos, (<tuple?>pair)[0], len(w)))
                break
        else:  # pragma: no cover - hit is owned by turn k: one of its ways
            raise AssertionError("locate_parse: a turn's own way was not found")
        pos = found + len(after)
    if n == 0 and len(<str?>frames[0]) != size:
        return None
    return got


def locate_ways(list turns, Py_ssize_t last, tuple variants):
    """``[RowState._ways(j) for j in range(len(turns))]`` (fastaxo.chat.locate): per message
    the distinct ways the template may write its content, ``(variant, text)``; a content
    that no variant changes (no space at either end, no ``</think>``) is answered here, the
    rest by calling ``variants`` as ``_ways`` does."""
    cdef Py_ssize_t j, v, n = len(turns), size
    cdef list out = PyList_New(n), got
    cdef str content
    cdef object w
    for j in range(n):
        content = <str?>(<dict?>turns[j])["content"]
        size = len(content)
        got = [(0, content)]
        if (size and (Py_UNICODE_ISSPACE(PyUnicode_READ_CHAR(content, 0))
                      or Py_UNICODE_ISSPACE(PyUnicode_READ_CHAR(content, size - 1)))
                ) or "</think>" in content:  # else every variant writes it as it is
            for v in range(1, len(variants)):
                w = variants[v](content, j > last)
                for pair in got:
                    if not (w != (<tuple?>pair)[1]):
                        break
                else:
                    got.append((v, w))
        Py_INCREF(got)
        PyList_SET_ITEM(out, j, got)
    return out


def placeholder_spans(object full, list segments, tuple sentinels, Py_ssize_t cap,
                      bint skip_first):
    """Each proven turn's character span as Axolotl's diffs of ``full`` against ``full`` with
    the turn's segment replaced by each of ``sentinels`` give it, united
    (fastaxo.chat.engine._placeholder_span per sentinel, scans bounded by ``cap``):
    ``(spans, failed)``, an ``(turns, 2)`` int64 array (-1: no segment, or failed) and the
    turns whose scan ran past ``cap``. ``skip_first``: turn 0 is a system message the
    strategy skips, (0, 0). ``full`` may be the text's UTF-8 (``bytes``, valid UTF-8, the
    segments and ``sentinels`` in bytes too): the same spans in bytes (the scans compare
    bytes, then step back to whole characters; ``cap`` counts bytes)."""
    cdef Py_ssize_t k, nk = len(segments), a, b, s0, s1
    cdef bint utf8 = type(full) is bytes
    if not utf8 and type(full) is not str:
        raise TypeError(f"full: expected str or bytes, got {type(full).__name__}")
    cdef list failed = []
    spans_arr = np.full((nk, 2), -1, np.int64)
    cdef int64_t[:, ::1] spans = spans_arr
    cdef bint ok
    for k in range(nk):
        if k == 0 and skip_first:
            spans[0, 0] = 0
            spans[0, 1] = 0
            continue
        seg = segments[k]
        if seg is None:
            continue
        a = (<tuple?>seg)[0]
        b = (<tuple?>seg)[1]
        ok = True
        for t in range(len(sentinels)):
            if utf8:
                ok = _placeholder_span_utf8(<bytes>full, a, b - a, <bytes?>sentinels[t], cap,
                                            &s0, &s1)
            else:
                ok = _placeholder_span(full, a, b - a, <str?>sentinels[t], cap, &s0, &s1)
            if not ok:
                break
            if t == 0:
                spans[k, 0], spans[k, 1] = s0, s1
            else:
                spans[k, 0] = min(spans[k, 0], s0)
                spans[k, 1] = max(spans[k, 1], s1)
        if not ok:
            spans[k, 0] = spans[k, 1] = -1
            failed.append(k)
    return spans_arr, failed


cdef inline Py_UCS4 _dummy_at(str full, Py_ssize_t p, Py_ssize_t length, str sentinel,
                              Py_ssize_t x, Py_ssize_t i) noexcept:
    # the character i of full with full[p:p + length] replaced by sentinel (x characters)
    if i < p:
        return PyUnicode_READ_CHAR(full, i)
    if i < p + x:
        return PyUnicode_READ_CHAR(sentinel, i - p)
    return PyUnicode_READ_CHAR(full, i - x + length)


cdef bint _placeholder_span(str full, Py_ssize_t p, Py_ssize_t length, str sentinel,
                            Py_ssize_t cap, Py_ssize_t *start, Py_ssize_t *end) except -1:
    # engine._placeholder_span: False where it answers None
    cdef Py_ssize_t n = len(full), x = len(sentinel), nd, limit, i, j, j0, bound
    nd = n - length + x
    limit = min(n, nd)
    if p < 0 or length < 0 or p + length > n:
        raise ValueError(f"segments: ({p}, {p + length}) is outside the text ({n})")
    i = p
    while i < limit and PyUnicode_READ_CHAR(full, i) == _dummy_at(full, p, length, sentinel,
                                                                  x, i):
        i += 1
        if i - p > cap:
            return False
    bound = limit - i
    j0 = min(n - p - length, bound)
    j = j0
    while j < bound and PyUnicode_READ_CHAR(full, n - 1 - j) == _dummy_at(
            full, p, length, sentinel, x, nd - 1 - j):
        j += 1
        if j - j0 > cap:
            return False
    start[0] = i
    end[0] = n - j
    return True


cdef inline uint8_t _dummy_byte(const uint8_t *full, Py_ssize_t p, Py_ssize_t length,
                                const uint8_t *sentinel, Py_ssize_t x, Py_ssize_t i) noexcept:
    # _dummy_at over UTF-8 bytes
    if i < p:
        return full[i]
    if i < p + x:
        return sentinel[i - p]
    return full[i - x + length]


cdef bint _placeholder_span_utf8(bytes text, Py_ssize_t p, Py_ssize_t length, bytes sentinel,
                                 Py_ssize_t cap, Py_ssize_t *start, Py_ssize_t *end
                                 ) except -1:
    # _placeholder_span over valid UTF-8: two valid UTF-8 texts agree on their first (last)
    # characters exactly where they agree on those bytes, so the byte scans give the character
    # spans once a scan that stopped inside a character steps back to its first byte (forward,
    # for the scan from the end); a scan that runs out stops between characters in both texts
    cdef Py_ssize_t n = len(text), x = len(sentinel), nd, limit, i, j, j0, bound
    cdef const uint8_t *full = <const uint8_t *><char *>text
    cdef const uint8_t *sent = <const uint8_t *><char *>sentinel
    nd = n - length + x
    limit = min(n, nd)
    if p < 0 or length < 0 or p + length > n:
        raise ValueError(f"segments: ({p}, {p + length}) is outside the text ({n})")
    i = p
    while i < limit and full[i] == _dummy_byte(full, p, length, sent, x, i):
        i += 1
        if i - p > cap:
            return False
    if i < limit:
        while i > p and (full[i] & 0xC0) == 0x80:
            i -= 1
    bound = limit - i
    j0 = min(n - p - length, bound)
    j = j0
    while j < bound and full[n - 1 - j] == _dummy_byte(full, p, length, sent, x, nd - 1 - j):
        j += 1
        if j - j0 > cap:
            return False
    if j < bound:
        while j > 0 and (full[n - j] & 0xC0) == 0x80:
            j -= 1
    start[0] = i
    end[0] = n - j
    return True
