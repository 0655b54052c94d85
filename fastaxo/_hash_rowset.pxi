# The exact row set (RowSetCore) of fastaxo._hash, kept in its own file: included by _hash.pyx
# (one extension module, one copy of the SHA-256 path selection), never compiled alone.

# ---------------------------------------------------------------- exact row set
cdef enum:
    ROWSET_TASK = 256     # rows per task of the key / compare loops
    INSERT_BLOCK = 32768  # rows per block of RowSetCore.insert (its scratch: 17 B a row)


cdef int _c_kind(const char *fmt, int32_t *width) noexcept nogil:
    """fx_col kind of an Arrow C format string, -1 for a type the C path does not take (the
    caller then uses fastaxo._core.arrow.column_spec). The kinds and widths are column_spec's."""
    cdef char c0 = fmt[0]
    cdef int64_t w = 0
    cdef const char *p
    width[0] = 0
    if c0 == 0:
        return -1
    if fmt[1] == 0:
        if c0 == b'c' or c0 == b'C':
            width[0] = 1
            return FX_COL_FIXED
        if c0 == b's' or c0 == b'S' or c0 == b'e':
            width[0] = 2
            return FX_COL_FIXED
        if c0 == b'i' or c0 == b'I' or c0 == b'f':
            width[0] = 4
            return FX_COL_FIXED
        if c0 == b'l' or c0 == b'L' or c0 == b'g':
            width[0] = 8
            return FX_COL_FIXED
        if c0 == b'b':
            width[0] = 1
            return FX_COL_BOOL
        if c0 == b'n':
            return FX_COL_NULL
        return -1
    if c0 != b'+':
        return -1
    if fmt[2] == 0:
        if fmt[1] == b'l':
            return FX_COL_LIST32
        if fmt[1] == b'L':
            return FX_COL_LIST64
        if fmt[1] == b's':
            return FX_COL_STRUCT
        return -1
    if fmt[1] == b'w' and fmt[2] == b':':
        p = fmt + 3
        while 48 <= p[0] <= 57 and w <= 2147483647:   # 0-9
            w = w * 10 + (p[0] - 48)
            p += 1
        if p[0] != 0 or p == fmt + 3 or w > 2147483647:
            return -1
        width[0] = <int32_t>w
        return FX_COL_FIXED_LIST
    return -1


cdef Py_ssize_t _c_count(const ArrowSchema *sc) noexcept nogil:
    """Nodes of one column's descriptor tree, or -1 if some type is not taken."""
    cdef int32_t w
    cdef Py_ssize_t total = 1, k, sub
    if sc.dictionary is not NULL or _c_kind(sc.format, &w) < 0:
        return -1
    for k in range(sc.n_children):
        sub = _c_count(sc.children[k])
        if sub < 0:
            return -1
        total += sub
    return total


cdef int _c_fill(fx_col *node, const ArrowSchema *sc, const ArrowArray *arr, fx_col **free_nodes,
                 int64_t parent_offset) noexcept nogil:
    """Descriptor of arr (whose type sc passed _c_count) into node; its children come from
    *free_nodes (advanced). -1 if the array does not have the buffers its type needs.

    column_spec describes a struct's children as pyarrow's StructArray.field() returns them:
    sliced by the struct's offset (fx_rows encodes struct row i from child row i). The C
    interface exports them unsliced, so a struct passes its own (effective) offset down and
    the child's offset is the sum; list children are indexed by the list's offsets as they are."""
    cdef int32_t w = 0
    cdef int kind = _c_kind(sc.format, &w)
    cdef int64_t k, need
    cdef fx_col *kids
    if arr.n_children != sc.n_children:
        return -1
    need = (0 if kind == FX_COL_NULL
            else 1 if kind == FX_COL_STRUCT or kind == FX_COL_FIXED_LIST else 2)
    if arr.n_buffers < need:
        return -1
    node.kind = kind
    node.width = w
    node.offset = arr.offset + parent_offset
    node.length = arr.length
    node.validity = NULL
    if need and arr.null_count != 0:
        node.validity = <const uint8_t *>arr.buffers[0]
    node.offsets = NULL
    node.data = NULL
    node.data_len = 0
    node.nchildren = 0
    node.children = NULL
    if kind == FX_COL_FIXED or kind == FX_COL_BOOL:
        node.data = <const uint8_t *>arr.buffers[1]
    elif kind == FX_COL_LIST32 or kind == FX_COL_LIST64:
        node.offsets = arr.buffers[1]
    if sc.n_children:
        kids = free_nodes[0]
        free_nodes[0] += sc.n_children
        node.nchildren = <int32_t>sc.n_children
        node.children = kids
        for k in range(sc.n_children):
            if _c_fill(&kids[k], sc.children[k], arr.children[k], free_nodes,
                       node.offset if kind == FX_COL_STRUCT else 0) < 0:
                return -1
    return 0


cdef class TabDesc:
    """Column descriptors of one source (every chunk) for fx_rowset: one node array.

    ``TabDesc(chunks, lengths, ncols, keep)``: ``chunks`` is a list (one per chunk) of lists (one
    per column) of descriptor tuples (fastaxo._core.arrow.column_spec); ``keep`` holds the Arrow
    objects they point into. ``TabDesc.from_arrow(table, keep)`` builds the same descriptors in C
    from the table's Arrow C stream (no Python object per chunk and column), or returns None
    when a column has a type only column_spec takes.
    """
    cdef fx_col *nodes
    cdef int64_t *starts
    cdef fx_tab tab
    cdef ArrowArray *arrays      # the exported chunks (from_arrow), released in __dealloc__
    cdef Py_ssize_t narrays
    cdef readonly int64_t n
    cdef readonly object keep

    def __cinit__(self):
        self.nodes = NULL
        self.starts = NULL
        self.arrays = NULL
        self.narrays = 0
        self.n = 0

    def __init__(self, list chunks, list lengths, int32_t ncols, object keep):
        cdef Py_ssize_t nch = len(chunks), total = 0, nxt, qi, k, j
        if len(lengths) != nch or ncols < 1:
            raise ValueError("TabDesc: one length per chunk and >= 1 column")
        for specs in chunks:
            if len(specs) != ncols:
                raise ValueError("TabDesc: every chunk needs ncols descriptors")
            for spec in specs:
                total += _count_nodes(spec)
        self.keep = keep
        self.nodes = <fx_col *>calloc(max(total, 1), sizeof(fx_col))
        self.starts = <int64_t *>malloc((nch + 1) * sizeof(int64_t))
        if self.nodes is NULL or self.starts is NULL:
            raise MemoryError()
        self.starts[0] = 0
        for k in range(nch):
            self.starts[k + 1] = self.starts[k] + <int64_t>lengths[k]
        self.n = self.starts[nch]
        # Top-level nodes first (chunk-major), then children breadth first.
        queue = []
        for k in range(nch):
            for j in range(ncols):
                queue.append((chunks[k][j], k * ncols + j))
        nxt = nch * ncols
        qi = 0
        while qi < len(queue):
            spec, k = queue[qi]
            qi += 1
            _fill(&self.nodes[k], spec, &self.nodes[nxt])
            for child in spec[8]:
                queue.append((child, nxt))
                nxt += 1
        self.tab.ncols = ncols
        self.tab.nchunks = nch
        self.tab.starts = self.starts
        self.tab.cols = self.nodes
        self.keep = keep

    @staticmethod
    def from_arrow(object table, object keep):
        """The descriptors of a pyarrow Table (>= 1 column) from its Arrow C stream, or None
        when a column's type (dictionary, string/binary, views, run-end, map, ...) is left to
        fastaxo._core.arrow.column_spec. ``keep`` must hold the table for the TabDesc's lifetime."""
        cdef TabDesc t
        cdef ArrowSchema schema
        cdef ArrowArray arr
        cdef ArrowArrayStream *stream
        cdef ArrowArray *grown
        cdef Py_ssize_t per_chunk = 0, sub, j, cap = 0, nch = 0, k
        cdef int32_t ncols, w
        cdef fx_col *free_nodes
        cdef int rc
        capsule = table.__arrow_c_stream__()
        stream = <ArrowArrayStream *>PyCapsule_GetPointer(capsule, "arrow_array_stream")
        schema.release = NULL
        if stream.get_schema(stream, &schema) != 0:
            return None
        try:
            if (_c_kind(schema.format, &w) != FX_COL_STRUCT or schema.n_children < 1
                    or schema.n_children >= 2**31):
                return None
            ncols = <int32_t>schema.n_children
            for j in range(ncols):
                sub = _c_count(schema.children[j])
                if sub < 0:
                    return None
                per_chunk += sub
            t = TabDesc.__new__(TabDesc)
            t.keep = keep
            while True:
                arr.release = NULL
                if stream.get_next(stream, &arr) != 0:
                    return None
                if arr.release is NULL:
                    break  # end of stream
                if arr.length == 0:
                    arr.release(&arr)
                    continue
                if arr.offset != 0 or arr.n_children != ncols:
                    arr.release(&arr)
                    return None
                if t.narrays == cap:
                    cap = max(16, 2 * cap)
                    grown = <ArrowArray *>realloc(t.arrays, cap * sizeof(ArrowArray))
                    if grown is NULL:
                        arr.release(&arr)
                        raise MemoryError()
                    t.arrays = grown
                t.arrays[t.narrays] = arr  # moved (the C interface allows a bitwise move)
                t.narrays += 1
            nch = t.narrays
            t.nodes = <fx_col *>calloc(max(nch * per_chunk, 1), sizeof(fx_col))
            t.starts = <int64_t *>malloc((nch + 1) * sizeof(int64_t))
            if t.nodes is NULL or t.starts is NULL:
                raise MemoryError()
            t.starts[0] = 0
            free_nodes = t.nodes + nch * ncols   # top-level nodes first, chunk-major
            rc = 0
            with nogil:
                for k in range(nch):
                    t.starts[k + 1] = t.starts[k] + t.arrays[k].length
                    for j in range(ncols):
                        if _c_fill(&t.nodes[k * ncols + j], schema.children[j],
                                   t.arrays[k].children[j], &free_nodes, 0) < 0:
                            rc = -1
                            break
                    if rc:
                        break
            if rc:
                return None
            t.n = t.starts[nch]
            t.tab.ncols = ncols
            t.tab.nchunks = nch
            t.tab.starts = t.starts
            t.tab.cols = t.nodes
            return t
        finally:
            if schema.release is not NULL:
                schema.release(&schema)

    def __dealloc__(self):
        cdef Py_ssize_t k
        for k in range(self.narrays):
            if self.arrays[k].release is not NULL:
                self.arrays[k].release(&self.arrays[k])
        free(self.arrays)
        free(self.nodes)
        free(self.starts)


cdef inline const int64_t *_block_rows(const int64_t *rmap, int64_t *iota, int64_t first,
                                       int64_t b0, int64_t m) noexcept nogil:
    """Rows of the block starting at b0: &rmap[b0], or iota filled with first + b0 + i."""
    cdef int64_t i
    if rmap is not NULL:
        return rmap + b0
    for i in range(m):
        iota[i] = first + b0 + i
    return iota


cdef int64_t _head_pass(fx_rowset *rs, const uint64_t *keys, int32_t src, const int64_t *rp,
                        int64_t m, int64_t *cand) noexcept nogil:
    """cand[r] = the head entry of keys[r] (or -1 after inserting row rp[r] as a new head), in
    order. On allocation failure: 1, with cand -1 from the failed row on (so that the
    comparisons waiting for this pass read nothing stale)."""
    cdef int64_t r, j
    cdef int inserted
    for r in range(m):
        if r + 16 < m:
            fx_rowset_prefetch(rs, keys[r + 16])
        cand[r] = fx_rowset_head(rs, keys[r], src, rp[r], &inserted)
        if cand[r] == -2:
            for j in range(r, m):
                cand[j] = -1
            return 1
    return 0


cdef object _first_bad(const uint8_t *status, int64_t m, int64_t b0, bint compare):
    """(row, status) of the first bad row of a block (compare: 255 means 'same key, another
    row')."""
    cdef int64_t r
    for r in range(m):
        if status[r] and not (compare and status[r] == 255):
            return (b0 + r, int(status[r]))
    return None


cdef class RowSetCore:
    """fx_rowset plus the sources its entries point into (not thread-safe by itself)."""
    cdef fx_rowset rs
    cdef list tabs
    cdef const fx_tab **srcs
    cdef Py_ssize_t cap

    def __cinit__(self):
        fx_rowset_init(&self.rs)
        self.tabs = []
        self.srcs = NULL
        self.cap = 0

    def __dealloc__(self):
        fx_rowset_free(&self.rs)
        free(self.srcs)

    def __len__(self):
        return self.rs.count

    @property
    def nbytes(self):
        return fx_rowset_nbytes(&self.rs)

    @property
    def stats(self):
        return {"compares": self.rs.compares, "hot_keys": self.rs.hot_keys,
                "sources": len(self.tabs)}

    def add_source(self, TabDesc t):
        cdef const fx_tab **p
        cdef Py_ssize_t ncap
        if len(self.tabs) >= 2**31 - 1:
            raise OverflowError("a row set holds at most 2**31 - 1 sources")
        if len(self.tabs) == self.cap:
            ncap = max(16, 2 * self.cap)
            p = <const fx_tab **>realloc(self.srcs, ncap * sizeof(fx_tab *))
            if p is NULL:
                raise MemoryError()
            self.srcs = p
            self.cap = ncap
        self.srcs[len(self.tabs)] = &t.tab
        self.tabs.append(t)
        return len(self.tabs) - 1

    def insert(self, int32_t src, object rows, int64_t first, uint8_t[::1] is_new, int num_threads):
        """Insert rows of source ``src`` in order: ``rows`` (int64 indices into the source) or,
        when None, the source's rows first, first + 1, ... (one per ``is_new`` entry);
        is_new[i] = 1 for a row not equal to any row inserted before. Returns None, or
        (i, status) for the first bad row.

        Works in blocks of INSERT_BLOCK rows with one set of per-row buffers (keys, candidate
        heads, statuses; two of keys and statuses): on memory the process touches for the
        first time every page costs a fault, so scratch that scales with the input would cost
        more than it saves. The blocks go through a software pipeline, one thread team per
        step: step s runs the serial head pass of block s (one task), the keys of block s + 1
        (tasks of ROWSET_TASK rows) and then the comparisons of block s (tasks that wait for
        that head pass), so the other threads compute keys instead of idling (or spinning,
        which on a VM slows the serial thread beside them) while the head pass runs. The
        serial chain pass of block s (rows whose key was shared by a different row: rare)
        follows each step."""
        cdef int64_t n = is_new.shape[0], i, r, a, task, e, b0, m, m1, nb, s_, k1, c0
        cdef int64_t nbad_k = 0, nbad_c = 0, nerr = 0
        cdef int64_t nsrc_rows = (<TabDesc>self.tabs[src]).n if 0 <= src < len(self.tabs) else 0
        cdef int t, st, rc
        cdef const fx_tab *tab
        cdef fx_sha256_compress_fn fn = _compress()
        cdef const int64_t[::1] rmap
        cdef int64_t *iota = NULL        # two blocks of row numbers when rows is None
        cdef uint64_t *keys = NULL       # two blocks
        cdef int64_t *cand = NULL
        cdef uint8_t *status = NULL      # two blocks
        cdef int64_t *sync = NULL        # [0]: head pass done (published), [1]: its error
        cdef fx_segbuf *mine = NULL
        cdef fx_segbuf *other = NULL
        cdef fx_segbuf *group = NULL
        cdef const int64_t *rp
        cdef const int64_t *rp1 = NULL
        cdef int64_t blk = min(n, <int64_t>INSERT_BLOCK)
        cdef int64_t nt_head, nt_keys, nt_cmp
        if num_threads < 1:
            raise ValueError(f"num_threads must be >= 1, got {num_threads}")
        if src < 0 or src >= len(self.tabs):
            raise ValueError(f"insert: no source {src}")
        tab = self.srcs[src]
        if rows is None:
            if first < 0 or first + n > nsrc_rows:
                raise IndexError(f"insert: rows [{first}, {first + n}) out of range for a source "
                                 f"of {nsrc_rows} rows")
        else:
            rmap = rows
            if rmap.shape[0] != n:
                raise ValueError("insert: is_new must have one entry per row")
            for i in range(n):
                if rmap[i] < 0 or rmap[i] >= nsrc_rows:
                    raise IndexError(f"insert: row {rmap[i]} out of range for a source of "
                                     f"{nsrc_rows} rows")
        if n == 0:
            return None
        nb = (n + blk - 1) // blk
        try:
            keys = <uint64_t *>malloc(2 * blk * sizeof(uint64_t))
            cand = <int64_t *>malloc(blk * sizeof(int64_t))
            status = <uint8_t *>malloc(2 * blk)
            sync = <int64_t *>calloc(2, sizeof(int64_t))
            if rows is None:
                iota = <int64_t *>malloc(2 * blk * sizeof(int64_t))
            mine = <fx_segbuf *>calloc(num_threads, sizeof(fx_segbuf))
            other = <fx_segbuf *>calloc(num_threads, sizeof(fx_segbuf))
            group = <fx_segbuf *>calloc(2 * num_threads * FX_KEY_GROUP, sizeof(fx_segbuf))
            if (keys is NULL or cand is NULL or status is NULL or sync is NULL or mine is NULL
                    or other is NULL or group is NULL or (rows is None and iota is NULL)):
                raise MemoryError()
            for t in range(num_threads):
                if (fx_segbuf_alloc(&mine[t], SEG_CAP, BYTES_CAP)
                        or fx_segbuf_alloc(&other[t], SEG_CAP, BYTES_CAP)):
                    raise MemoryError()
            for i in range(2 * num_threads * FX_KEY_GROUP):
                if fx_segbuf_alloc(&group[i], 32, 512):   # grows for bigger rows
                    raise MemoryError()
            rc = fx_rowset_reserve(&self.rs, n)
            if rc == -1:
                raise OverflowError(f"a RowSet holds at most {FX_ROWSET_MAX_ENTRIES:,} rows; it "
                                    f"has {self.rs.count:,} and {n:,} more were added (use "
                                    f"fastaxo.Seen)")
            check_status(rc, "fastaxo.RowSet", "growing the row set")
            # keys of block 0
            rp = _block_rows(&rmap[0] if rows is not None else NULL, iota, first, 0, min(blk, n))
            m = min(blk, n)
            memset(status, 0, m)
            nt_keys = (m + ROWSET_TASK - 1) // ROWSET_TASK
            for task in prange(nt_keys, nogil=True, num_threads=num_threads, schedule="dynamic",
                               chunksize=1, use_threads_if=_par(num_threads, m, 0)):
                t = threadid()
                a = task * ROWSET_TASK
                nbad_k += fx_tab_keys(tab, &rp[a], min(<int64_t>ROWSET_TASK, m - a),
                                      &group[2 * t * FX_KEY_GROUP], &keys[a], &status[a])
            if nbad_k:
                return _first_bad(status, m, 0, False)
            for s_ in range(nb):
                b0 = s_ * blk
                m = min(blk, n - b0)
                k1 = ((s_ + 1) % 2) * blk             # buffers of block s + 1
                c0 = (s_ % 2) * blk                   # buffers of block s
                rp = (&rmap[b0] if rows is not None else &iota[c0])
                m1 = min(blk, n - b0 - blk) if s_ + 1 < nb else 0
                if m1 > 0:
                    rp1 = _block_rows(&rmap[0] if rows is not None else NULL, &iota[k1], first,
                                      b0 + blk, m1)
                    memset(&status[k1], 0, m1)
                nt_head = 1
                nt_keys = (m1 + ROWSET_TASK - 1) // ROWSET_TASK
                nt_cmp = (m + ROWSET_TASK - 1) // ROWSET_TASK
                sync[0] = 0
                sync[1] = 0
                for task in prange(nt_head + nt_keys + nt_cmp, nogil=True, num_threads=num_threads,
                                   schedule="dynamic", chunksize=1,
                                   use_threads_if=_par(num_threads, m + m1, 0)):
                    t = threadid()
                    if task == 0:
                        # 1. first row of each key (serial: first occurrence is an order)
                        sync[1] = _head_pass(&self.rs, &keys[c0], src, rp, m, cand)
                        fx_publish(&sync[0], 1)
                    elif task <= nt_keys:
                        # 2. keys of the next block
                        a = (task - 1) * ROWSET_TASK
                        nbad_k += fx_tab_keys(tab, &rp1[a], min(<int64_t>ROWSET_TASK, m1 - a),
                                              &group[2 * t * FX_KEY_GROUP], &keys[k1 + a],
                                              &status[k1 + a])
                    else:
                        # 3. rows whose key was seen: compare with that key's first row
                        fx_wait_progress(&sync[0], 0)
                        a = (task - 1 - nt_keys) * ROWSET_TASK
                        # status 255: same key, different row
                        nbad_c += fx_rowset_compare(&self.rs, self.srcs, tab, &rp[a], &cand[a],
                                                    min(<int64_t>ROWSET_TASK, m - a),
                                                    &group[2 * t * FX_KEY_GROUP], &status[c0 + a])
                if sync[1]:
                    raise MemoryError("out of memory growing the row set")
                if nbad_c:
                    return _first_bad(&status[c0], m, b0, True)
                # 4. the rest, in order: key collisions walk the key's chain
                with nogil:
                    for r in range(m):
                        if cand[r] < 0:
                            is_new[b0 + r] = 1
                        elif status[c0 + r] != 255:
                            is_new[b0 + r] = 0
                        else:
                            st = fx_tab_encode(tab, rp[r], &mine[0])
                            if st != FX_OK:
                                nerr = 2
                                break
                            e = fx_rowset_resolve(&self.rs, self.srcs, keys[c0 + r], src, rp[r],
                                                  &mine[0], &other[0], fn)
                            if e < -1:
                                nerr = 3 if e == -2 else 4
                                break
                            is_new[b0 + r] = e == -1
                if nerr == 3 or nerr == 2:
                    raise MemoryError("out of memory in the row set")
                if nerr:
                    raise KernelError("fastaxo row set: a stored row could not be re-read (its "
                                      "data changed?)", "RowSetCore.insert", nerr, -1)
                if nbad_k:
                    return _first_bad(&status[k1], m1, b0 + blk, False)
            return None
        finally:
            if mine is not NULL:
                for t in range(num_threads):
                    fx_segbuf_release(&mine[t])
            if other is not NULL:
                for t in range(num_threads):
                    fx_segbuf_release(&other[t])
            if group is not NULL:
                for i in range(2 * num_threads * FX_KEY_GROUP):
                    fx_segbuf_release(&group[i])
            free(group)
            free(mine)
            free(other)
            free(keys)
            free(cand)
            free(status)
            free(iota)
