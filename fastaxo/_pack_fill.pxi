# Included by _pack.pyx: where rows come from (pointers into the caller's arrays) and the
# packed and padded output filled from them (fx_fill.h); Python lists of ints to values.

# ---------------------------------------------------------------- sources
cdef inline int64_t _segment_of(const int64_t *bounds, int64_t nseg, int64_t x) noexcept nogil:
    """The last segment s < nseg with bounds[s] <= x (bounds non-decreasing, bounds[nseg] > x):
    which chunk holds row x, which batch holds row x (empty segments are skipped)."""
    cdef int64_t lo = 0, hi = nseg, mid
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if bounds[mid] <= x:
            lo = mid
        else:
            hi = mid
    return lo


cdef uintptr_t _address(object arr) except? 0:
    """Address of a C-contiguous buffer (the buffer protocol: cheaper than any NumPy attribute)."""
    cdef Py_buffer view
    PyObject_GetBuffer(arr, &view, PyBUF_C_CONTIGUOUS)
    cdef uintptr_t addr = <uintptr_t>view.buf
    PyBuffer_Release(&view)
    return addr


cdef inline object _plain_row(object r):
    """``r`` as a 1-D C-contiguous native-order ndarray (exactly that type), else None: a row
    read in place through the NumPy C API (row_ptrs, pad_list)."""
    if type(r) is not cnp.ndarray:
        return None
    cdef cnp.ndarray a = <cnp.ndarray>r
    if (cnp.PyArray_NDIM(a) != 1 or not cnp.PyArray_IS_C_CONTIGUOUS(a)
            or not cnp.PyArray_ISNOTSWAPPED(a)):
        return None
    return a


def row_ptrs(list rows, object dtype):
    """(addresses, lengths) of a list of 1-D C-contiguous arrays of exactly ``dtype`` (native
    byte order), read in place through the NumPy C API; None when any row is not like that."""
    cdef Py_ssize_t n = len(rows), i
    ptrs_arr = np.empty(n, np.uintp)
    lens_arr = np.empty(n, np.int64)
    cdef uintptr_t[::1] ptrs = ptrs_arr
    cdef int64_t[::1] lens = lens_arr
    cdef cnp.ndarray a
    cdef object r
    cdef cnp.dtype want = dtype
    if not want.isnative:
        return None
    for i in range(n):
        r = _plain_row(rows[i])
        if r is None:
            return None
        a = <cnp.ndarray>r
        if <object>cnp.PyArray_DESCR(a) is not want and not cnp.PyArray_EquivTypes(
                <cnp.dtype>cnp.PyArray_DESCR(a), want):
            return None
        ptrs[i] = <uintptr_t>cnp.PyArray_DATA(a)
        lens[i] = cnp.PyArray_DIM(a, 0)
    return ptrs_arr, lens_arr


def source_ptrs(object rows, int64_t n, object starts, const int64_t[::1] lens, list chunks,
                const int64_t[::1] chunk_base, int itemsize, int num_threads):
    """Address of the first token of each of ``n`` entries: row ``rows[e]`` (``e`` itself when
    ``rows`` is None; global over ``chunks``, a list of ``(values, offsets)`` C-contiguous arrays
    whose first rows are ``chunk_base``), plus ``starts[e]`` tokens (or 0 when None).

    Every entry's tokens ``[start, start + lens[e])`` must lie inside its chunk's values, as
    the offsets read now say: the offsets were checked when the call began, but a lazy caller
    (an iter_pack chunk) reads them later, and the memory protected here must not depend on
    nobody having changed them since. ValueError counts the entries that do not.
    """
    cdef const int64_t[::1] rw
    cdef bint has_rows = rows is not None
    if has_rows:
        rw = rows
        if rw.shape[0] != n:
            raise ValueError("source_ptrs: rows must have n entries")
    if lens.shape[0] != n:
        raise ValueError("source_ptrs: lens must have n entries")
    cdef int64_t nchunks = chunk_base.shape[0] - 1
    if nchunks < 1 or len(chunks) != nchunks:
        raise ValueError("source_ptrs: inconsistent chunk tables")
    tables = np.empty((4, nchunks), np.uintp)
    cdef uintptr_t[:, ::1] tab = tables
    cdef int64_t c
    for c in range(nchunks):
        values, offsets = chunks[c]
        if offsets.shape[0] != chunk_base[c + 1] - chunk_base[c] + 1:
            raise ValueError("source_ptrs: chunk offsets do not match chunk_base")
        if offsets.dtype.itemsize not in (4, 8) or values.dtype.itemsize != itemsize:
            raise ValueError("source_ptrs: offsets must be int32 or int64, values of itemsize")
        tab[0, c] = _address(values)
        tab[1, c] = _address(offsets)
        tab[2, c] = offsets.dtype.itemsize == 8
        tab[3, c] = values.shape[0]
    cdef const uintptr_t[::1] chunk_values = tab[0]
    cdef const uintptr_t[::1] chunk_offsets = tab[1]
    cdef const uintptr_t[::1] chunk_off64 = tab[2]
    cdef const uintptr_t[::1] chunk_len = tab[3]
    cdef const int64_t[::1] st
    cdef bint has_starts = starts is not None
    if has_starts:
        st = starts
        if st.shape[0] != n:
            raise ValueError("source_ptrs: starts must have one entry per row")
    out_arr = np.empty(n, np.uintp)
    cdef uintptr_t[::1] out = out_arr
    cdef int64_t e, r, local, off, room, skip, bad = 0
    for e in prange(n, nogil=True, num_threads=num_threads, schedule="static",
                    use_threads_if=num_threads > 1 and n >= 65536):
        r = rw[e] if has_rows else e
        if r < 0 or r >= chunk_base[nchunks]:
            bad += 1
            out[e] = 0
            continue
        c = _segment_of(&chunk_base[0], nchunks, r)
        local = r - chunk_base[c]
        if chunk_off64[c]:
            off = (<const int64_t *>chunk_offsets[c])[local]
        else:
            off = (<const int32_t *>chunk_offsets[c])[local]
        skip = st[e] if has_starts else 0
        # compared, never added before it is known not to wrap
        if off < 0 or off > <int64_t>chunk_len[c]:
            bad += 1
            out[e] = 0
            continue
        room = <int64_t>chunk_len[c] - off
        if skip < 0 or skip > room or lens[e] < 0 or lens[e] > room - skip:
            bad += 1
            out[e] = 0
            continue
        out[e] = chunk_values[c] + <uintptr_t>((off + skip) * itemsize)
    if bad:
        raise ValueError(f"source_ptrs: {bad} entries lie outside their rows' values")
    return out_arr


cdef inline void _fill_value(char *dst, int dt, int dsize, int64_t value, int64_t n) noexcept nogil:
    cdef int32_t v32
    cdef int64_t v64
    if dt == FX_T_I32:
        v32 = <int32_t>value
        fx_fill_elems(dst, 4, &v32, n)
    else:
        v64 = value
        fx_fill_elems(dst, 8, &v64, n)


# ---------------------------------------------------------------- packed rows
def fill_bins(char[::1] out, int dt, int64_t width, object flat_base, const int64_t[::1] eoff,
              object src, const int64_t[::1] lens, int st, int kind, bytes pad, int num_threads):
    """Write one output column of packed bins.

    Bin ``b`` holds entries ``eoff[b]:eoff[b+1]`` (entry ``e``: ``lens[e]`` tokens at address
    ``src[e]`` of type ``st``). Padded layout (``width > 0``): bin ``b`` is row ``b`` of a
    ``[n_bins, width]`` array, its tail padded (``pad`` bytes for K_COPY, 0 for masks, 0,1,2..
    for positions). Flat layout (``width == 0``): bin ``b`` starts at element ``flat_base[b]``.
    """
    cdef int64_t nb = eoff.shape[0] - 1
    cdef int dsize = fx_type_size(dt)
    cdef int64_t n_entries = lens.shape[0]
    cdef const uintptr_t[::1] srcp
    cdef const int64_t[::1] fbase
    cdef bint padded = width > 0
    cdef const char *padp = pad
    if dsize == 0 or nb < 0 or eoff[0] != 0 or eoff[nb] != n_entries:
        raise ValueError("fill_bins: inconsistent bins")
    if kind == K_COPY:
        if src is None or not fx_copy_supported(dt, st):
            raise ValueError("fill_bins: unsupported copy")
        srcp = src
        if srcp.shape[0] != n_entries:
            raise ValueError("fill_bins: src must have one address per entry")
        if len(pad) != dsize:
            raise ValueError("fill_bins: pad must be one output element")
    elif dt != FX_T_I32 and dt != FX_T_I64:
        raise ValueError("fill_bins: generated columns are int32 or int64")
    cdef int64_t total
    if padded:
        if nb and width > (out.shape[0] // dsize) // nb:  # (no nb * width: it could wrap)
            raise ValueError("fill_bins: output too small")
        total = nb * width
    else:
        fbase = flat_base
        if fbase.shape[0] != nb + 1 or fbase[0] != 0 or fbase[nb] > out.shape[0] // dsize:
            raise ValueError("fill_bins: output too small")
        total = fbase[nb]
    cdef char *base = &out[0] if out.shape[0] else NULL
    cdef char *row
    cdef int64_t b, e, pos, l, limit, bad = 0
    cdef int64_t ssize = fx_type_size(st) if kind == K_COPY else 0
    for b in prange(nb, nogil=True, num_threads=num_threads, schedule="dynamic", chunksize=64,
                    use_threads_if=num_threads > 1 and total >= PAR_MIN_ELEMS):
        if padded:
            row = base + b * width * dsize
            limit = width
        else:
            row = base + fbase[b] * dsize
            limit = fbase[b + 1] - fbase[b]
        pos = 0
        for e in range(eoff[b], eoff[b + 1]):
            l = lens[e]
            if l < 0 or pos + l > limit:
                bad += 1
                break
            if kind == K_COPY:
                if PREFETCH_AHEAD and e + PREFETCH_AHEAD < n_entries:
                    fx_prefetch_run(<const void *>srcp[e + PREFETCH_AHEAD],
                                    lens[e + PREFETCH_AHEAD] * ssize)
                fx_copy_elems(row + pos * dsize, dt, <const void *>srcp[e], st, l)
            elif kind == K_POS:
                fx_iota_elems(row + pos * dsize, dt, 0, l)
            elif kind == K_SEG:
                _fill_value(row + pos * dsize, dt, dsize, e - eoff[b] + 1, l)
            else:
                _fill_value(row + pos * dsize, dt, dsize, 1, l)
            pos = pos + l
        if pos < limit:
            if kind == K_COPY:
                fx_fill_elems(row + pos * dsize, dsize, padp, limit - pos)
            elif kind == K_POS:
                fx_iota_elems(row + pos * dsize, dt, 0, limit - pos)
            else:
                _fill_value(row + pos * dsize, dt, dsize, 0, limit - pos)
    if bad:
        raise ValueError(f"fill_bins: {bad} bins exceed their row")


def padded_cu_seqlens(const int64_t[::1] eoff, const int64_t[::1] lens, int64_t width, out_dtype):
    """Sequence boundaries over the flattened ``[n_bins, width]`` rows; a non-empty pad tail
    counts as one more segment (as its position ids restart at 0)."""
    cdef int64_t nb = eoff.shape[0] - 1
    cdef int64_t b, e, used, nseg = 0
    for b in range(nb):
        used = 0
        for e in range(eoff[b], eoff[b + 1]):
            used += lens[e]
        nseg += (eoff[b + 1] - eoff[b]) + (1 if used < width else 0)
    out_arr = np.empty(nseg + 1, np.int64)
    cdef int64_t[::1] out = out_arr
    cdef int64_t k = 0, pos = 0
    with nogil:
        out[0] = 0
        for b in range(nb):
            used = 0
            for e in range(eoff[b], eoff[b + 1]):
                used += lens[e]
                k += 1
                out[k] = b * width + used
            if used < width:
                k += 1
                out[k] = (b + 1) * width
    return out_arr.astype(out_dtype, copy=False)


# ---------------------------------------------------------------- padding
def pad_fill(char[::1] out, int dt, const int64_t[::1] boff, const int64_t[::1] obase,
             const int64_t[::1] widths, object src, const int64_t[::1] lens, int st, int kind,
             bint left, bytes pad, bint pad_range, int num_threads):
    """Write one padded column for rows grouped in batches.

    Batch ``b`` (rows ``boff[b]:boff[b+1]``) is a ``[rows, widths[b]]`` block at element
    ``obase[b]``. Row ``i`` has ``lens[i]`` tokens at ``src[i]``; at most ``widths[b]`` are
    kept (the head when padding right, the tail when padding left). Kinds: K_COPY (source
    tokens), K_ONE (1s, an attention mask), K_POS (0, 1, 2, ...). The pad is ``pad`` (one
    element) or, with ``pad_range``, 0, 1, 2, ... (Axolotl's position-id padding).
    """
    cdef int64_t nbatch = boff.shape[0] - 1
    cdef int64_t n = lens.shape[0]
    cdef int dsize = fx_type_size(dt)
    cdef const uintptr_t[::1] srcp
    cdef const char *padp = pad
    if dsize == 0 or nbatch < 0 or boff[0] != 0 or boff[nbatch] != n \
            or obase.shape[0] < nbatch or widths.shape[0] < nbatch:
        raise ValueError("pad_fill: inconsistent batches")
    if kind == K_COPY:
        if src is None or not fx_copy_supported(dt, st):
            raise ValueError("pad_fill: unsupported copy")
        srcp = src
        if srcp.shape[0] != n:
            raise ValueError("pad_fill: src must have one address per row")
    elif dt != FX_T_I32 and dt != FX_T_I64:
        raise ValueError("pad_fill: generated columns are int32 or int64")
    if not pad_range and len(pad) != dsize:
        raise ValueError("pad_fill: pad must be one output element")
    cdef int64_t b, rows_b, need = 0
    for b in range(nbatch):
        if widths[b] < 0 or boff[b + 1] < boff[b] or obase[b] < 0:
            raise ValueError("pad_fill: inconsistent batches")
        rows_b = boff[b + 1] - boff[b]
        # checked: rows x width must not wrap (a wrapped size once let a huge max_length write past
        # a small buffer)
        if rows_b and widths[b] > (INT64_MAX - obase[b]) // rows_b:
            raise ValueError("pad_fill: batch sizes overflow")
        need = max(need, obase[b] + rows_b * widths[b])
    if need > out.shape[0] // dsize:
        raise ValueError("pad_fill: output too small")
    cdef char *base = &out[0] if out.shape[0] else NULL
    cdef char *row
    cdef char *data
    cdef char *tail
    cdef int64_t i, lo, w, l, keep, skip, npad
    for i in prange(n, nogil=True, num_threads=num_threads, schedule="static",
                    use_threads_if=num_threads > 1 and need >= PAR_MIN_ELEMS):
        lo = _segment_of(&boff[0], nbatch, i)
        w = widths[lo]
        row = base + (obase[lo] + (i - boff[lo]) * w) * dsize
        l = lens[i]
        keep = l if l < w else w
        npad = w - keep
        skip = (l - keep) if left else 0
        if left:
            data = row + npad * dsize
            tail = row
        else:
            data = row
            tail = row + keep * dsize
        if kind == K_COPY:
            fx_copy_elems(data, dt, <const char *>srcp[i] + skip * fx_type_size(st), st, keep)
        elif kind == K_POS:
            fx_iota_elems(data, dt, 0, keep)
        else:
            _fill_value(data, dt, dsize, 1, keep)
        if pad_range:
            fx_iota_elems(tail, dt, 0, npad)
        else:
            fx_fill_elems(tail, dsize, padp, npad)


cdef inline int _int_code(cnp.ndarray a) noexcept:
    """fx type code of an integer array's elements, or -1 (not an integer type)."""
    cdef int t = cnp.PyArray_TYPE(a)
    cdef Py_ssize_t size = cnp.PyArray_ITEMSIZE(a)
    if cnp.PyTypeNum_ISSIGNED(t):
        return (FX_T_I8 if size == 1 else FX_T_I16 if size == 2
                else FX_T_I32 if size == 4 else FX_T_I64)
    if cnp.PyTypeNum_ISUNSIGNED(t):
        return (FX_T_U8 if size == 1 else FX_T_U16 if size == 2
                else FX_T_U32 if size == 4 else FX_T_U64)
    return -1


cdef inline bint _casts_safely(int st, int dt) noexcept nogil:
    """np.can_cast(src, dst) for an integer src and dst int32/int64."""
    cdef int ds = fx_type_size(dt), ss = fx_type_size(st)
    if st >= FX_T_U8:  # unsigned: needs a wider signed type
        return ss < ds
    return ss <= ds


cdef int _scan_rows(tuple rows, Py_ssize_t n, int dt, uintptr_t *ptrs, int64_t *lens,
                    uint8_t *codes) noexcept:
    """Addresses, lengths and element codes of n rows that are 1-D C-contiguous native-order
    integer ndarrays castable to ``dt``; 0, or -1 when a row is not like that."""
    cdef Py_ssize_t i
    cdef cnp.ndarray a
    cdef object r
    cdef int c
    for i in range(n):
        r = _plain_row(<object>PyTuple_GET_ITEM(rows, i))
        if r is None:
            return -1
        a = <cnp.ndarray>r
        c = _int_code(a)
        if c < 0 or not _casts_safely(c, dt):
            return -1
        ptrs[i] = <uintptr_t>cnp.PyArray_DATA(a)
        lens[i] = cnp.PyArray_DIM(a, 0)
        codes[i] = <uint8_t>c
    return 0


def pad_list(list ids, object labels, object dtype, int64_t pad_id, int64_t label_pad_id,
             int64_t pad_to_multiple_of, bint left, bint mask):
    """The collator fast path: pad a list of 1-D contiguous integer arrays (and labels) to the
    longest row (rounded up to ``pad_to_multiple_of`` when > 0) in one call, without
    concatenating.

    Rows are read through the NumPy C API (no per-row Python attribute or buffer request) and
    may differ in integer type as long as each casts safely to ``dtype`` (int32 or int64).
    Returns ``(input_ids, attention_mask or None, labels or None)`` as ``[n, width]`` arrays of
    ``dtype``, or None when a row is not a 1-D C-contiguous native-order integer ndarray that
    casts safely (the caller then takes the general path). Raises ValueError (with the row)
    when a label row's length differs from its token row.
    """
    cdef Py_ssize_t n = len(ids), i
    cdef bint has_labels = labels is not None
    if n == 0:
        return None
    if has_labels and (type(labels) is not list or len(labels) != n):
        return None
    cdef int dt = TYPE_CODES[dtype]
    if dt != FX_T_I32 and dt != FX_T_I64:
        return None
    # tuples hold the rows alive (and unresizable) while the GIL is released below
    cdef tuple trows = tuple(ids)
    cdef tuple tlabs = tuple(labels) if has_labels else None
    cdef Py_ssize_t nl = n if has_labels else 0
    # per row of each list: an address, a length, a type code
    cdef char *scratch = <char *>PyMem_Malloc((n + nl) * (sizeof(uintptr_t) + sizeof(int64_t) + 1))
    if scratch == NULL:
        raise MemoryError()
    cdef uintptr_t *ip = <uintptr_t *>scratch
    cdef uintptr_t *lp = ip + n
    cdef int64_t *il = <int64_t *>(lp + nl)
    cdef int64_t *ll = il + n
    cdef uint8_t *ic = <uint8_t *>(ll + nl)
    cdef uint8_t *lc = ic + n
    cdef int dsize = fx_type_size(dt)
    cdef int64_t width = 0, l, off, npad, rowb
    cdef int32_t p32
    cdef char pad_b[8]
    cdef char lpad_b[8]
    cdef char *po
    cdef char *pm = NULL
    cdef char *pl = NULL
    cdef cnp.npy_intp dims[2]
    try:
        if _scan_rows(trows, n, dt, ip, il, ic) < 0:
            return None
        if has_labels:
            if _scan_rows(tlabs, n, dt, lp, ll, lc) < 0:
                return None
            for i in range(n):
                if ll[i] != il[i]:
                    raise ValueError(f"labels row {i} has {ll[i]} values; input_ids row {i} "
                                     f"has {il[i]} (per-token columns must match row by row)")
        for i in range(n):
            if il[i] > width:
                width = il[i]
        if pad_to_multiple_of > 0:
            if pad_to_multiple_of > INT64_MAX // 4 or width > INT64_MAX // 4:
                raise ValueError(f"pad_list: pad_to_multiple_of {pad_to_multiple_of} is too large")
            width = ((width + pad_to_multiple_of - 1) // pad_to_multiple_of
                     * pad_to_multiple_of)
        dims[0] = n
        dims[1] = width
        tnum = cnp.NPY_INT32 if dt == FX_T_I32 else cnp.NPY_INT64
        out_ids = cnp.PyArray_EMPTY(2, dims, tnum, 0)
        out_mask = cnp.PyArray_EMPTY(2, dims, tnum, 0) if mask else None
        out_lab = cnp.PyArray_EMPTY(2, dims, tnum, 0) if has_labels else None
        po = <char *>cnp.PyArray_DATA(<cnp.ndarray>out_ids)
        if mask:
            pm = <char *>cnp.PyArray_DATA(<cnp.ndarray>out_mask)
        if has_labels:
            pl = <char *>cnp.PyArray_DATA(<cnp.ndarray>out_lab)
        if dt == FX_T_I32:
            p32 = <int32_t>pad_id
            memcpy(pad_b, &p32, 4)
            p32 = <int32_t>label_pad_id
            memcpy(lpad_b, &p32, 4)
        else:
            memcpy(pad_b, &pad_id, 8)
            memcpy(lpad_b, &label_pad_id, 8)
        with nogil:
            for i in range(n):
                l = il[i]
                npad = width - l
                off = npad if left else 0
                rowb = i * width * dsize
                fx_copy_elems(po + rowb + off * dsize, dt, <const void *>ip[i], ic[i], l)
                fx_fill_elems(po + rowb + (0 if left else l) * dsize, dsize, pad_b, npad)
                if mask:
                    _fill_value(pm + rowb + off * dsize, dt, dsize, 1, l)
                    _fill_value(pm + rowb + (0 if left else l) * dsize, dt, dsize, 0, npad)
                if has_labels:
                    fx_copy_elems(pl + rowb + off * dsize, dt, <const void *>lp[i], lc[i], l)
                    fx_fill_elems(pl + rowb + (0 if left else l) * dsize, dsize, lpad_b, npad)
    finally:
        PyMem_Free(scratch)
    return out_ids, out_mask, out_lab


def lists_to_values(list rows):
    """Convert a list of lists (or tuples) of Python ints into ``(values int64, lengths int64)``
    in one C pass (``PyLong_AsLongLong`` per token, no intermediate objects).

    Returns ``("type", row, position, value)`` for the first token that is not an int, or
    ``("row", row, None, value)`` for a row that is not a list or tuple, instead of raising,
    so the caller words the error; OverflowError propagates for ints beyond int64.
    """
    cdef Py_ssize_t n = len(rows), i, j, m
    cdef int64_t total = 0
    lens_arr = np.empty(n, np.int64)
    cdef int64_t[::1] lens = lens_arr
    cdef object r
    for i in range(n):
        r = rows[i]
        if type(r) is list:
            lens[i] = PyList_GET_SIZE(r)
        elif type(r) is tuple:
            lens[i] = PyTuple_GET_SIZE(r)
        else:
            return ("row", i, None, r)
        total += lens[i]
    vals_arr = np.empty(total, np.int64)
    cdef int64_t[::1] vals = vals_arr
    cdef int64_t k = 0
    cdef PyObject *item
    cdef bint is_list
    for i in range(n):
        r = rows[i]
        m = lens[i]
        is_list = type(r) is list
        for j in range(m):
            item = PyList_GET_ITEM(r, j) if is_list else PyTuple_GET_ITEM(r, j)
            if not PyLong_Check(<object>item):
                return ("type", i, j, <object>item)
            vals[k] = PyLong_AsLongLong(<object>item)
            k += 1
    return vals_arr, lens_arr


def int32_bounds(const int32_t[::1] values, int num_threads=1):
    """(smallest, largest) of int32 ``values`` (None when empty): one pass over blocks of
    PAR_MIN_ELEMS on ``num_threads`` threads, GIL released."""
    cdef int64_t n = values.shape[0], nb, b, a, z
    if n == 0:
        return None
    nb = (n + PAR_MIN_ELEMS - 1) // PAR_MIN_ELEMS
    los = np.empty(nb, np.int32)
    his = np.empty(nb, np.int32)
    cdef int32_t[::1] lo = los, hi = his
    cdef const int32_t *v = &values[0]
    for b in prange(nb, nogil=True, num_threads=num_threads, schedule="static",
                    use_threads_if=num_threads > 1 and nb > 1):
        a = b * PAR_MIN_ELEMS
        z = n if a + PAR_MIN_ELEMS > n else a + PAR_MIN_ELEMS
        fx_bounds_i32(v + a, z - a, &lo[b], &hi[b])
    return int(los.min()), int(his.max())
