# Included by _pack.pyx: the per-token part of chat-template tokenization (fastaxo.chat).
#
# Axolotl's ChatTemplateStrategy maps each trainable turn's character span to tokens by bisecting
# the tokenizer's offsets, copies the turn's ids into the labels and searches for the first
# end-of-turn / EOS token after it. Done in Python that is a list of starts and a list of ends
# per conversation and, for an EOS the template never emits, a scan to the end of the
# conversation per turn (quadratic). Here the offsets are bisected in place (the tokenizer's own
# list of tuples), the EOT/EOS positions are found in one pass over the ids, and the labels are
# built from the ids' own objects: no Python object per token. chat_rows_bytes takes fastaxo's
# int32 ids for a batch of rows, the GIL released; lists take shared int objects (a pool).

cdef enum:
    TRAIN_NONE = 0   # any value Axolotl does not act on (None, "none", ...)
    TRAIN_TURN = 1
    TRAIN_ALL = 2
    TRAIN_LAST = 3

CHAT_TRAIN_NONE = TRAIN_NONE
CHAT_TRAIN_TURN = TRAIN_TURN
CHAT_TRAIN_ALL = TRAIN_ALL
CHAT_TRAIN_LAST = TRAIN_LAST


cdef inline int64_t _offset_at(object offsets, Py_ssize_t i, Py_ssize_t which) except? -1:
    cdef object o
    if type(offsets) is list:
        o = <object>PyList_GET_ITEM(offsets, i)
        if type(o) is tuple and PyTuple_GET_SIZE(o) == 2:
            return PyLong_AsLongLong(<object>PyTuple_GET_ITEM(o, which))
        return o[which]
    return offsets.token_to_chars(i)[which]


cdef Py_ssize_t _bisect_offsets(object offsets, Py_ssize_t n, int64_t x, Py_ssize_t which,
                                bint right) except -1:
    # bisect.bisect_right / bisect_left over [o[which] for o in offsets], the same probes
    # (so the same answer even where the offsets are not sorted)
    cdef Py_ssize_t lo = 0, hi = n, mid
    cdef int64_t v
    while lo < hi:
        mid = (lo + hi) // 2
        v = _offset_at(offsets, mid, which)
        if (x < v) if right else (x <= v):
            hi = mid
        else:
            lo = mid + 1
    return lo


cdef int64_t _positions_of(list ids, Py_ssize_t n, const int64_t[::1] wanted,
                           int64_t[::1] out) except -1:
    cdef Py_ssize_t i, j, k = 0, m = wanted.shape[0]
    cdef int64_t v
    if m == 0:
        return 0
    for i in range(n):
        v = PyLong_AsLongLong(<object>PyList_GET_ITEM(ids, i))
        for j in range(m):
            if v == wanted[j]:
                out[k] = i
                k += 1
                break
    return k


cdef inline Py_ssize_t _first_from(const int64_t *pos, Py_ssize_t npos, Py_ssize_t n,
                                   Py_ssize_t start) noexcept nogil:
    # Axolotl's `for i in range(start, len(ids))`: start is a token index or -1, and -1 first
    # looks at the last token (Python's ids[-1]); finding it there answers -1, "not found"
    cdef Py_ssize_t lo = 0, hi = npos, mid
    if npos == 0:
        return -1
    if start < 0:
        if pos[npos - 1] == n - 1:
            return -1
        return pos[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if pos[mid] < start:
            lo = mid + 1
        else:
            hi = mid
    return pos[lo] if lo < npos else -1


cdef Py_ssize_t _positions_of32(const int32_t *ids, Py_ssize_t n, const int64_t *wanted,
                               Py_ssize_t m, int64_t *out) noexcept nogil:
    # _positions_of over int32 ids (no Python object read per token); one or two wanted ids
    # (the common EOT / EOS sets) without a branch per token: every index is stored, the
    # count advances on a match (k <= i: within out's n entries)
    cdef Py_ssize_t i, j, k = 0
    cdef int64_t v, w0, w1
    if m == 0:
        return 0
    if m <= 2:
        w0 = wanted[0]
        w1 = wanted[m - 1]
        for i in range(n):
            v = ids[i]
            out[k] = i
            k += (v == w0) | (v == w1)
        return k
    for i in range(n):
        v = ids[i]
        for j in range(m):
            if v == wanted[j]:
                out[k] = i
                k += 1
                break
    return k


cdef void _keep_into(uint8_t *keep, Py_ssize_t n, const int64_t *tok, Py_ssize_t nturns,
                     const int64_t *pos_eot, Py_ssize_t npos_eot, const int64_t *pos_eos,
                     Py_ssize_t npos_eos, int eot_mode, int eos_mode) noexcept nogil:
    # Axolotl's label rule as a mask (1: the label is the id; keep[:n] zeroed by the caller):
    # tok[2k:2k+2] is turn k's token span, or (-1, -1) when the turn was not found; pos_eot /
    # pos_eos the EOT / EOS positions
    cdef Py_ssize_t k, s, e, idx, t, i
    cdef Py_ssize_t last[2]
    cdef Py_ssize_t npos[2]
    cdef const int64_t *pos[2]
    cdef int modes[2]
    npos[0] = npos_eot
    npos[1] = npos_eos
    pos[0] = pos_eot
    pos[1] = pos_eos
    modes[0] = eot_mode
    modes[1] = eos_mode
    last[0] = -1
    last[1] = -1
    for k in range(nturns):
        s = tok[2 * k]
        e = tok[2 * k + 1]
        if s != -1:
            for i in range(s, e):
                keep[i] = 1
        for t in range(2):  # EOT, then EOS, searched from the turn's end (-1 if not found)
            idx = _first_from(pos[t], npos[t], n, e)
            if idx != -1 and (idx - e if idx >= e else e - idx) <= 3:
                last[t] = idx
                if modes[t] == TRAIN_ALL or modes[t] == TRAIN_TURN:
                    keep[idx] = 1
    for t in range(2):
        if modes[t] == TRAIN_LAST and last[t] != -1:
            keep[last[t]] = 1


cdef object _keep_mask(Py_ssize_t n, const int64_t[:, ::1] tok, int64_t[:, ::1] pos,
                       Py_ssize_t npos_eot, Py_ssize_t npos_eos, int eot_mode, int eos_mode):
    # _keep_into as a new uint8 array
    keep_arr = np.zeros(n, np.uint8)
    cdef uint8_t[::1] keep = keep_arr
    if n:  # (no tokens: nothing to keep)
        _keep_into(&keep[0], n, &tok[0, 0] if tok.shape[0] else NULL, tok.shape[0], &pos[0, 0],
                   npos_eot, &pos[1, 0], npos_eos, eot_mode, eos_mode)
    return keep_arr


cdef inline const int64_t *_ptr64(const int64_t[::1] v) noexcept nogil:
    return &v[0] if v.shape[0] else NULL


cdef object _labels_of(list ids, Py_ssize_t n, const int64_t[:, ::1] tok,
                       const int64_t[::1] eot_ids, const int64_t[::1] eos_ids, int eot_mode,
                       int eos_mode, const int32_t[::1] ids32=None, bint arrays=False):
    # the labels of ``ids`` (a list, or None with ``ids32``): a list of the ids' own objects
    # and -100, or with ``arrays`` an int32 array (no Python object per token)
    cdef Py_ssize_t i, a, b
    cdef Py_ssize_t n0, n1
    pos_arr = np.empty((2, n), np.int64)
    cdef int64_t[:, ::1] pos = pos_arr
    if ids32 is None:
        n0 = _positions_of(ids, n, eot_ids, pos[0])
        n1 = _positions_of(ids, n, eos_ids, pos[1])
    elif n:
        n0 = _positions_of32(&ids32[0], n, _ptr64(eot_ids), eot_ids.shape[0], &pos[0, 0])
        n1 = _positions_of32(&ids32[0], n, _ptr64(eos_ids), eos_ids.shape[0], &pos[1, 0])
    else:
        n0 = n1 = 0
    keep_arr = _keep_mask(n, tok, pos, n0, n1, eot_mode, eos_mode)
    cdef const uint8_t[::1] keep = keep_arr
    if arrays:
        out_arr = np.full(n, -100, np.int32)
        if n:
            np.copyto(out_arr, ids32, where=keep_arr.view(np.bool_))
        return out_arr
    labels = [-100] * n
    i = 0
    while i < n:  # runs of kept positions, copied as slices
        if not keep[i]:
            i += 1
            continue
        a = i
        while i < n and keep[i]:
            i += 1
        b = i
        labels[a:b] = ids[a:b]
    return labels


cdef inline int _not_found(int64_t *s, int64_t *e, Py_ssize_t n) except -1:
    # find_turn: an empty or inverted turn is "not found"; Axolotl's end-of-turn search from a
    # turn not found starts at ids[-1], an IndexError when there are no ids
    if e[0] <= s[0]:
        s[0] = -1
        e[0] = -1
        if n == 0:
            raise IndexError("list index out of range (a conversation with no tokens)")
    return 0


def chat_labels(list ids, object offsets, const int64_t[:, ::1] spans, const int64_t[::1] eot_ids,
                const int64_t[::1] eos_ids, int eot_mode, int eos_mode):
    """Labels of one conversation, Axolotl's rules (twin: fastaxo._reference.chat.chat_labels).

    ``ids``: the token ids (list of int); ``offsets``: the tokenizer's character offsets, one
    ``(start, end)`` per token, or the ``tokenizers.Encoding`` that holds them (read through
    ``token_to_chars`` only where the bisection looks, so no list of offsets is made);
    ``spans``: ``(char_start, char_end)`` of each trainable turn in order (``char_end <=
    char_start``: the turn was not found); ``eot_ids`` / ``eos_ids``: the end-of-turn ids and
    the EOS id (empty: none); modes: ``CHAT_TRAIN_*``.

    Returns ``(labels, -1)``, or ``(None, k)`` when turn k starts past the last token (Axolotl
    then locates that turn by re-tokenizing, which is not replicated here).
    """
    cdef Py_ssize_t n = PyList_GET_SIZE(ids), k
    if spans.shape[1] != 2:
        raise ValueError(f"spans: expected shape (turns, 2), got {tuple(spans.shape)[:2]}")
    if len(offsets) != n:
        raise ValueError(f"offsets: expected one per token ({n}), got {len(offsets)}")
    tok_arr = np.full((spans.shape[0], 2), -1, np.int64)
    cdef int64_t[:, ::1] tok = tok_arr
    for k in range(spans.shape[0]):
        if spans[k, 1] <= spans[k, 0]:
            _not_found(&tok[k, 0], &tok[k, 1], n)
        else:
            tok[k, 0] = _bisect_offsets(offsets, n, spans[k, 0], 1, True)
            tok[k, 1] = _bisect_offsets(offsets, n, spans[k, 1], 0, False)
            if tok[k, 0] >= n or tok[k, 1] > n:
                return None, k
            _not_found(&tok[k, 0], &tok[k, 1], n)
    return _labels_of(ids, n, tok, eot_ids, eos_ids, eot_mode, eos_mode), -1


cdef inline int _spelled(int64_t tid, const uint8_t *text, int64_t text_len,
                         const int64_t *token_offsets, int64_t ntok, const uint8_t *token_bytes,
                         int64_t tb_len, int64_t *at) noexcept nogil:
    # token tid's bytes are text's next bytes: advance *at past them (0), else -1. A token of
    # up to 8 bytes (most are) is compared as one word where both sides have 8 bytes to load
    # (tb_len: token_bytes' size), not by a memcmp call
    cdef int64_t ln, t0
    cdef uint64_t a, b
    if tid < 0 or tid >= ntok:
        return -1
    t0 = token_offsets[tid]
    ln = token_offsets[tid + 1] - t0
    if ln <= 0 or ln > text_len - at[0]:
        return -1
    if FX_LITTLE and ln <= 8 and at[0] + 8 <= text_len and t0 + 8 <= tb_len:
        memcpy(&a, text + at[0], 8)
        memcpy(&b, token_bytes + t0, 8)
        if ((a ^ b) << (64 - 8 * ln)) != 0:  # the low ln bytes: the token's
            return -1
    elif memcmp(text + at[0], token_bytes + t0, ln) != 0:
        return -1
    at[0] += ln
    return 0


cdef int _byte_spans(const uint8_t *text, int64_t nbytes, int64_t nchars,
                     const int64_t *cspans, Py_ssize_t m, int64_t *bspans,
                     int64_t *starts) noexcept nogil:
    # the character positions cspans[:m] (-1 kept; else 0..nchars) as byte positions of the
    # UTF-8 text; -4 where the text does not hold nchars characters. Positions in order (the
    # turns of a row) are found in one pass that skips whole words; others take a table of
    # every character's start (starts: nchars + 1 entries)
    cdef Py_ssize_t k
    cdef int64_t c, i, v, at = 0, here = 0
    if fx_utf8_count(text, nbytes) != nchars:
        return -4
    c = 0
    for k in range(m):
        if cspans[k] >= 0:
            if cspans[k] < c:
                break
            c = cspans[k]
    else:
        for k in range(m):
            v = cspans[k]
            if v < 0:
                bspans[k] = v
            else:  # character `here` starts at byte `at`
                at = fx_utf8_skip(text, nbytes, at, v - here)
                here = v
                bspans[k] = at
        return 0
    c = 0
    for i in range(nbytes):
        if (text[i] & 0xC0) != 0x80:
            starts[c] = i
            c += 1
    starts[nchars] = nbytes
    for k in range(m):
        v = cspans[k]
        bspans[k] = v if v < 0 else starts[v]
    return 0


cdef inline int _spelled_at(int64_t tid, const uint8_t[::1] text, const int64_t[::1] token_offsets,
                            const uint8_t[::1] token_bytes, int64_t *at) noexcept:
    return _spelled(tid, &text[0] if text.shape[0] else NULL, text.shape[0], &token_offsets[0],
                    token_offsets.shape[0] - 1,
                    &token_bytes[0] if token_bytes.shape[0] else NULL, token_bytes.shape[0], at)


cdef Py_ssize_t _turn_tokens_into(const int64_t *ends, Py_ssize_t n, const int64_t *spans,
                                  Py_ssize_t nturns, int64_t *tok) noexcept nogil:
    # each turn's token span (tok[2k], tok[2k + 1]) from the tokens' byte ends (token i covers
    # [ends[i-1], ends[i])) and the turns' byte spans (spans[2k], spans[2k + 1]); -1, or k when
    # turn k starts past the last token, or -3 when an empty turn meets a row with no tokens
    # (Axolotl's IndexError: _not_found)
    cdef Py_ssize_t k, lo, hi, mid
    for k in range(nturns):
        if spans[2 * k + 1] <= spans[2 * k]:
            if n == 0:
                return -3
            tok[2 * k] = -1
            tok[2 * k + 1] = -1
        else:
            lo, hi = 0, n  # tokens ending at or before the start byte
            while lo < hi:
                mid = (lo + hi) // 2
                if spans[2 * k] < ends[mid]:
                    hi = mid
                else:
                    lo = mid + 1
            tok[2 * k] = lo
            lo, hi = 0, n  # tokens starting before the end byte (token i starts at ends[i-1])
            while lo < hi:
                mid = (lo + hi) // 2
                if (ends[mid - 1] if mid > 0 else 0) < spans[2 * k + 1]:
                    lo = mid + 1
                else:
                    hi = mid
            tok[2 * k + 1] = lo
            if tok[2 * k] >= n or tok[2 * k + 1] > n:
                return k
            if tok[2 * k + 1] <= tok[2 * k]:  # _not_found (n > 0 here)
                tok[2 * k] = -1
                tok[2 * k + 1] = -1
    return -1


cdef Py_ssize_t _turn_tokens(const int64_t[::1] ends, Py_ssize_t n, const int64_t[:, ::1] spans,
                             int64_t[:, ::1] tok) except -2:
    cdef Py_ssize_t got
    if spans.shape[0] == 0:
        return -1
    got = _turn_tokens_into(&ends[0] if n else NULL, n, &spans[0, 0], spans.shape[0],
                            &tok[0, 0])
    if got == -3:
        raise IndexError("list index out of range (a conversation with no tokens)")
    return got


def chat_labels_bytes(list ids, const uint8_t[::1] text, const int64_t[::1] token_offsets,
                      const uint8_t[::1] token_bytes, const int64_t[:, ::1] spans,
                      const int64_t[::1] eot_ids, const int64_t[::1] eos_ids, int eot_mode,
                      int eos_mode):
    """:func:`chat_labels` for a byte-level tokenizer without its offsets: ``text`` is the
    UTF-8 of the rendered conversation, ``token_bytes[token_offsets[i]:token_offsets[i + 1]]``
    the bytes token i stands for, ``spans`` in bytes.

    The ids must spell ``text`` exactly (checked, token by token). Then a token's character
    offsets are the characters its bytes fall in, so "ends at or before character c" is "ends
    at or before c's first byte" and the bisections are the offsets' own. Returns
    ``(None, -2)`` when the ids do not spell the text (the caller then asks for offsets).
    """
    cdef Py_ssize_t n = PyList_GET_SIZE(ids), i, bad
    cdef int64_t at = 0
    if spans.shape[1] != 2:
        raise ValueError(f"spans: expected shape (turns, 2), got {tuple(spans.shape)[:2]}")
    ends_arr = np.empty(n, np.int64)
    cdef int64_t[::1] ends = ends_arr
    for i in range(n):
        if _spelled_at(PyLong_AsLongLong(<object>PyList_GET_ITEM(ids, i)), text, token_offsets,
                       token_bytes, &at) != 0:
            return None, -2
        ends[i] = at
    if at != text.shape[0]:
        return None, -2
    tok_arr = np.full((spans.shape[0], 2), -1, np.int64)
    bad = _turn_tokens(ends, n, spans, tok_arr)
    if bad != -1:
        return None, bad
    return _labels_of(ids, n, tok_arr, eot_ids, eos_ids, eot_mode, eos_mode), -1


cdef object _row_ids(object ids, const int32_t[::1] ids32, list pool, bint arrays):
    # a row's ids as the caller wants them: its own int32 array, or a list (pooled ints)
    if arrays:
        return np.asarray(ids, np.int32)
    return _pooled(ids32, pool) if pool is not None else np.asarray(ids32).tolist()


cdef list _pooled(const int32_t[::1] ids, list pool):
    # the ids as a list of the pool's int objects (pool[v] is v) and a shared -100 (the
    # labels' mask): a pointer and a reference per token, no int allocated; every id is in
    # [0, len(pool)) or -100 (checked by the caller)
    cdef Py_ssize_t n = ids.shape[0], i
    cdef list out = PyList_New(n)
    cdef PyObject *o
    for i in range(n):
        o = PyList_GET_ITEM(pool, ids[i]) if ids[i] >= 0 else <PyObject *>_minus_100
        Py_INCREF(<object>o)
        PyList_SET_ITEM(out, i, <object>o)
    return out


cdef object _minus_100 = -100


cdef Py_ssize_t _bisect_pairs(const int64_t[:, ::1] offsets, Py_ssize_t n, int64_t x,
                              Py_ssize_t which, bint right) noexcept:
    # _bisect_offsets over an (n, 2) array: the same probes, so the same answer
    cdef Py_ssize_t lo = 0, hi = n, mid
    cdef int64_t v
    while lo < hi:
        mid = (lo + hi) // 2
        v = offsets[mid, which]
        if (x < v) if right else (x <= v):
            hi = mid
        else:
            lo = mid + 1
    return lo


def chat_row_offsets(object ids, const int64_t[:, ::1] offsets, const int64_t[:, ::1] spans,
                     const int64_t[::1] eot_ids, const int64_t[::1] eos_ids, int eot_mode,
                     int eos_mode, list pool=None, bint arrays=False):
    """:func:`chat_labels` for int32 ids (fastaxo's encoder) and their character offsets as
    an ``(n, 2)`` int64 array (HF's ``Encoding.offsets``, from
    ``fastaxo.Tokenizer.encode_batch_offsets``): the turns are bisected in the array, and the
    row's list of ids is made from ``pool`` (item v is the int v) or new ints. Returns
    ``(ids list, labels, -1)``, or ``(ids list, None, k)`` when turn k starts past the last
    token; with ``arrays``, int32 arrays instead of lists.
    """
    cdef const int32_t[::1] ids32 = ids
    cdef Py_ssize_t n = ids32.shape[0], i, k
    if spans.shape[1] != 2:
        raise ValueError(f"spans: expected shape (turns, 2), got {tuple(spans.shape)[:2]}")
    if offsets.shape[0] != n or offsets.shape[1] != 2:
        raise ValueError(f"offsets: expected shape ({n}, 2), got {tuple(offsets.shape)[:2]}")
    cdef Py_ssize_t limit = PyList_GET_SIZE(pool) if pool is not None else 1 << 31
    for i in range(n):
        if ids32[i] < 0 or ids32[i] >= limit:
            raise ValueError(f"ids: id {ids32[i]} at {i} is outside [0, {limit})")
    ids_list = _row_ids(ids, ids32, pool, arrays)
    tok_arr = np.full((spans.shape[0], 2), -1, np.int64)
    cdef int64_t[:, ::1] tok = tok_arr
    for k in range(spans.shape[0]):
        if spans[k, 1] <= spans[k, 0]:
            _not_found(&tok[k, 0], &tok[k, 1], n)
        else:
            tok[k, 0] = _bisect_pairs(offsets, n, spans[k, 0], 1, True)
            tok[k, 1] = _bisect_pairs(offsets, n, spans[k, 1], 0, False)
            if tok[k, 0] >= n or tok[k, 1] > n:
                return ids_list, None, k
            _not_found(&tok[k, 0], &tok[k, 1], n)
    return (ids_list, _labels_of(None if arrays else ids_list, n, tok, eot_ids, eos_ids,
                                 eot_mode, eos_mode, ids32, arrays), -1)


cdef int64_t _row_labels(const int32_t *ids, Py_ssize_t n, const uint8_t *text, int64_t nbytes,
                         int64_t nchars, const int64_t *cspans, Py_ssize_t nturns,
                         const int64_t *token_offsets, int64_t ntok,
                         const uint8_t *token_bytes, int64_t tb_len,
                         const int64_t *eot_ids, Py_ssize_t neot,
                         const int64_t *eos_ids, Py_ssize_t neos, int eot_mode, int eos_mode,
                         int64_t *ends, int64_t *starts, int64_t *bspans, int64_t *tok,
                         int64_t *pos, uint8_t *keep, int32_t *labels) noexcept nogil:
    # one row of chat_rows_bytes: its status, and its labels when -1 (scratch sized by the
    # caller: ends, pos (2n) and keep for the ids, starts for the characters + 1, bspans and
    # tok for the turns)
    cdef int64_t at = 0
    cdef Py_ssize_t i, k, n0, n1
    if n == 0:
        return -3
    for i in range(n):
        if _spelled(ids[i], text, nbytes, token_offsets, ntok, token_bytes, tb_len, &at) != 0:
            return -2
        ends[i] = at
    if at != nbytes:
        return -2
    if nchars == nbytes:  # ASCII: characters are bytes
        for k in range(2 * nturns):
            bspans[k] = cspans[k]
    elif _byte_spans(text, nbytes, nchars, cspans, 2 * nturns, bspans, starts) != 0:
        return -4  # (the text is valid UTF-8: one str's encoding; 0 <= v <= nchars: checked
                   # by the caller)
    k = _turn_tokens_into(ends, n, bspans, nturns, tok)
    if k != -1:
        return k  # n > 0: never -3
    n0 = _positions_of32(ids, n, eot_ids, neot, pos)
    n1 = _positions_of32(ids, n, eos_ids, neos, pos + n)
    memset(keep, 0, n)
    _keep_into(keep, n, tok, nturns, pos, n0, pos + n, n1, eot_mode, eos_mode)
    for i in range(n):
        labels[i] = ids[i] if keep[i] else -100
    return -1


def chat_rows_bytes(const int32_t[::1] ids, const int64_t[::1] id_offsets,
                    const uint8_t[::1] text, const int64_t[::1] text_offsets,
                    const int64_t[::1] chars, const int64_t[:, ::1] spans,
                    const int64_t[::1] span_offsets, const int64_t[::1] token_offsets,
                    const uint8_t[::1] token_bytes, const int64_t[::1] eot_ids,
                    const int64_t[::1] eos_ids, int eot_mode, int eos_mode,
                    int num_threads=1):
    """:func:`chat_labels_bytes` for a batch of rows in Arrow layout, the GIL released: row r's
    int32 ids are ``ids[id_offsets[r]:id_offsets[r + 1]]`` (fastaxo's encoder), its UTF-8 text
    ``text[text_offsets[r]:text_offsets[r + 1]]`` holding ``chars[r]`` characters, its turns'
    character spans ``spans[span_offsets[r]:span_offsets[r + 1]]`` (-1: not found; made byte
    spans here).

    Returns ``(labels, status)``: int32 labels aligned with ``ids``, and per row -1 (its
    labels are made), k >= 0 (turn k starts past the last token), -2 (the ids do not spell the
    text: an NFC tokenizer changed it, say) or -3 (no ids); labels of rows not -1 are
    unspecified. Rows go to ``num_threads`` threads (each with scratch of its own).
    """
    cdef Py_ssize_t rows = chars.shape[0], r, k, n, nt, c
    cdef Py_ssize_t max_n = 0, max_c = 0, max_t = 0
    cdef int64_t v
    if (id_offsets.shape[0] != rows + 1 or text_offsets.shape[0] != rows + 1
            or span_offsets.shape[0] != rows + 1):
        raise ValueError(f"id_offsets, text_offsets, span_offsets: expected {rows + 1} entries "
                         f"(rows + 1), got {id_offsets.shape[0]}, {text_offsets.shape[0]}, "
                         f"{span_offsets.shape[0]}")
    if spans.shape[1] != 2:
        raise ValueError(f"spans: expected shape (turns, 2), got {tuple(spans.shape)[:2]}")
    _check_offsets(token_offsets, token_bytes.shape[0], "token_offsets")
    _check_offsets(id_offsets, ids.shape[0], "id_offsets")
    _check_offsets(text_offsets, text.shape[0], "text_offsets")
    _check_offsets(span_offsets, spans.shape[0], "span_offsets")
    for r in range(rows):
        n = id_offsets[r + 1] - id_offsets[r]
        nt = span_offsets[r + 1] - span_offsets[r]
        if chars[r] < 0 or chars[r] > text_offsets[r + 1] - text_offsets[r]:
            raise ValueError(f"chars: row {r} holds {chars[r]} characters in "
                             f"{text_offsets[r + 1] - text_offsets[r]} bytes")
        for k in range(span_offsets[r], span_offsets[r + 1]):
            for c in range(2):
                v = spans[k, c]
                if v > chars[r] or v < -1:
                    raise ValueError(f"spans: row {r} has a span at {v}, outside "
                                     f"[-1, {chars[r]}]")
        max_n = max(max_n, n)
        max_c = max(max_c, chars[r])
        max_t = max(max_t, nt)
    if num_threads < 1:
        raise ValueError(f"num_threads: expected >= 1, got {num_threads}")
    cdef int nth = <int>min(num_threads, max(rows, 1))
    labels_arr = np.empty(ids.shape[0], np.int32)
    status_arr = np.empty(rows, np.int64)
    # scratch per thread: the ids' ends, positions and marks, the characters' starts, the turns
    cdef Py_ssize_t wn = max_n + 1, wp = 2 * max_n + 1, wc = max_c + 1, wt = 2 * max_t + 1
    ends_arr = np.empty(nth * wn, np.int64)
    pos_arr = np.empty(nth * wp, np.int64)
    keep_arr = np.empty(nth * wn, np.uint8)
    starts_arr = np.empty(nth * wc, np.int64)
    turn_arr = np.empty(nth * 2 * wt, np.int64)
    cdef int32_t[::1] labels = labels_arr
    cdef int64_t[::1] status = status_arr, ends = ends_arr, pos = pos_arr, starts = starts_arr
    cdef uint8_t[::1] keep = keep_arr
    cdef int64_t[::1] turn = turn_arr
    cdef const int32_t *ip = &ids[0] if ids.shape[0] else NULL
    cdef const uint8_t *tp = &text[0] if text.shape[0] else NULL
    cdef const uint8_t *bp = &token_bytes[0] if token_bytes.shape[0] else NULL
    cdef const int64_t *sp = &spans[0, 0] if spans.shape[0] else NULL
    cdef int32_t *lp = &labels[0] if labels.shape[0] else NULL
    cdef Py_ssize_t t
    for r in prange(rows, nogil=True, num_threads=nth, schedule="dynamic", chunksize=4):
        t = threadid()
        status[r] = _row_labels(
            ip + id_offsets[r], id_offsets[r + 1] - id_offsets[r], tp + text_offsets[r],
            text_offsets[r + 1] - text_offsets[r], chars[r], sp + 2 * span_offsets[r],
            span_offsets[r + 1] - span_offsets[r], &token_offsets[0],
            token_offsets.shape[0] - 1, bp, token_bytes.shape[0], _ptr64(eot_ids),
            eot_ids.shape[0],
            _ptr64(eos_ids), eos_ids.shape[0], eot_mode, eos_mode, &ends[t * wn],
            &starts[t * wc], &turn[t * 2 * wt], &turn[t * 2 * wt + wt], &pos[t * wp],
            &keep[t * wn], lp + id_offsets[r])
    for r in range(rows):
        if status[r] == -4:
            raise ValueError(f"chars: row {r} does not hold {chars[r]} characters")
    return labels_arr, status_arr


cdef int _check_offsets(const int64_t[::1] offsets, Py_ssize_t size, str name) except -1:
    cdef Py_ssize_t i
    if offsets.shape[0] == 0 or offsets[0] != 0 or offsets[offsets.shape[0] - 1] > size:
        raise ValueError(f"{name}: expected offsets from 0 to at most {size}")
    for i in range(offsets.shape[0] - 1):
        if offsets[i + 1] < offsets[i]:
            raise ValueError(f"{name}: decreasing at {i + 1}")
    return 0


def pooled_list(const int32_t[::1] values, list pool):
    """``values`` as a list of ``pool``'s int objects (``pool[v]`` is v) and a shared -100 (the
    labels' mask): no int allocated per value."""
    cdef Py_ssize_t i, size = PyList_GET_SIZE(pool)
    for i in range(values.shape[0]):
        if not (0 <= values[i] < size or values[i] == -100):
            raise ValueError(f"values: {values[i]} at {i} is outside [0, {size}) and not -100")
    return _pooled(values, pool)
