# cython: language_level=3
"""Private SHA-256 row-hashing kernels: typed memoryviews in, GIL released, prange over rows.

The public API is :mod:`fastaxo.hashing`; this module trusts its callers for types and
shapes but re-checks every invariant that protects memory (offsets, lengths, shapes).
"""
from cython.parallel cimport prange, threadid
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport malloc, calloc, realloc, free
from libc.string cimport memset
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_AsUTF8String
from cpython.pycapsule cimport PyCapsule_GetPointer

from fastaxo._csrc cimport *
from fastaxo._openmp cimport FX_HAVE_OPENMP, omp_get_max_threads, omp_get_num_procs

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)
    bint PyUnicode_CheckExact(object o)
    bint PyBytes_CheckExact(object o)

ctypedef fused offset_t:
    int32_t
    int64_t

# Below these sizes a thread team costs more than it saves.
cdef int64_t PAR_MIN_ROWS = 512
cdef int64_t PAR_MIN_BYTES = 1 << 16
cdef enum:
    CHUNK = 64            # rows per multi-lane call: the unit of work a thread takes
    SEG_CAP = 4096        # per-thread scratch of the table path: segments...
    BYTES_CAP = 65536     # ...and coalesced header bytes


cdef inline bint _par(int num_threads, int64_t nrows, int64_t nbytes) noexcept nogil:
    return num_threads > 1 and nrows > 1 and (nrows >= PAR_MIN_ROWS or nbytes >= PAR_MIN_BYTES)


# ---------------------------------------------------------------- SHA-256 paths
def openmp_enabled():
    """True when this extension was compiled with OpenMP."""
    return bool(FX_HAVE_OPENMP)


def openmp_max_threads():
    """omp_get_max_threads() of the runtime (1 without OpenMP)."""
    return omp_get_max_threads()


def sha256_impls():
    """List of (name, compiled, supported) for every SHA-256 path this source knows."""
    out = []
    for impl in range(FX_SHA256_NIMPL):
        out.append((fx_sha256_impl_name(impl).decode(), bool(fx_sha256_impl_compiled(impl)),
                    bool(fx_sha256_impl_supported(impl))))
    return out


def sha256_current():
    """Name of the SHA-256 path in use."""
    return fx_sha256_impl_name(fx_sha256_current()).decode()


def sha256_select(str name):
    """Select a SHA-256 path by name ('auto', 'portable', 'sha-ni', 'armv8-crypto').

    Runs the known-answer self-test on it. Returns the name now in use; raises
    ValueError for an unknown name and RuntimeError when the path is not usable.
    """
    cdef bytes bname = name.encode()
    cdef int impl = fx_sha256_impl_from_name(bname)
    if impl == -1 and name != "auto":
        known = ", ".join(repr(n) for n, _, _ in sha256_impls())
        raise ValueError(f"unknown SHA-256 path {name!r}; expected 'auto' or one of {known}")
    cdef int st = fx_sha256_select(impl)
    if st == FX_ERR_UNSUPPORTED:
        raise RuntimeError(f"SHA-256 path {name!r} is not supported by this CPU or build")
    if st == FX_ERR_SELFTEST:
        raise RuntimeError(f"SHA-256 path {name!r} failed its known-answer self-test")
    if st != FX_OK:
        raise RuntimeError(f"SHA-256 path {name!r} could not be selected (status {st})")
    return sha256_current()


def sha256_selftest(str name):
    """Run the known-answer self-test of one path; True when it passes."""
    cdef int impl = fx_sha256_impl_from_name(name.encode())
    if impl < 0:
        raise ValueError(f"unknown SHA-256 path {name!r}")
    return fx_sha256_selftest(impl) == FX_OK


cdef inline fx_sha256_compress_fn _compress() except NULL:
    cdef fx_sha256_compress_fn fn = fx_sha256_compress_for(fx_sha256_current())
    if fn is NULL:
        raise RuntimeError("no usable SHA-256 path")
    return fn


# ---------------------------------------------------------------- flat layouts
def hash_offsets(const uint8_t[::1] data, const offset_t[::1] offsets, int64_t width,
                 uint8_t[:, ::1] out, int num_threads):
    """out[i] = SHA-256(data[offsets[i]*width : offsets[i+1]*width]) for each row i.

    The offsets are validated here (monotone, inside data) before the GIL is released.
    """
    cdef int64_t n = offsets.shape[0] - 1
    cdef int64_t bad
    _compress()  # raises when no SHA-256 path is usable
    if num_threads < 1:
        raise ValueError(f"num_threads must be >= 1, got {num_threads}")
    if n < 0 or out.shape[0] != n or out.shape[1] != 32:
        raise ValueError(f"out has shape ({out.shape[0]}, {out.shape[1]}); expected ({n}, 32)")
    if width < 1:
        raise ValueError(f"width must be >= 1, got {width}")
    if n == 0:
        return
    cdef int64_t limit = data.shape[0] // width
    with nogil:
        if offset_t is int32_t:
            bad = fx_check_offsets32(&offsets[0], n, limit)
        else:
            bad = fx_check_offsets64(&offsets[0], n, limit)
    if bad >= 0:
        raise ValueError(f"offsets of row {bad} are out of order or outside the values "
                         f"({offsets[bad]}, {offsets[bad + 1]}; {data.shape[0] // width} values)")
    cdef const uint8_t *base = &data[0] if data.shape[0] > 0 else <const uint8_t *>&out[0, 0]
    cdef int64_t nbytes = (offsets[n] - offsets[0]) * width
    cdef int impl = fx_sha256_current()
    cdef int64_t c, a, nchunks = (n + CHUNK - 1) // CHUNK
    for c in prange(nchunks, nogil=True, num_threads=num_threads, schedule="dynamic", chunksize=1,
                    use_threads_if=_par(num_threads, n, nbytes)):
        a = c * CHUNK
        if offset_t is int32_t:
            fx_sha256_many_offsets32(impl, base, &offsets[a], width, min(CHUNK, n - a), &out[a, 0])
        else:
            fx_sha256_many_offsets64(impl, base, &offsets[a], width, min(CHUNK, n - a), &out[a, 0])


def hash_fixed(const uint8_t[::1] data, int64_t row_bytes, uint8_t[:, ::1] out, int num_threads):
    """out[i] = SHA-256(data[i*row_bytes : (i+1)*row_bytes]) for each row of out."""
    cdef int64_t n = out.shape[0]
    _compress()  # raises when no SHA-256 path is usable
    if num_threads < 1:
        raise ValueError(f"num_threads must be >= 1, got {num_threads}")
    if out.shape[1] != 32 or row_bytes < 0 or n * row_bytes > data.shape[0]:
        raise ValueError(f"{n} rows of {row_bytes} bytes do not fit {data.shape[0]} bytes")
    if n == 0:
        return
    cdef const uint8_t *base = &data[0] if data.shape[0] > 0 else <const uint8_t *>&out[0, 0]
    cdef int impl = fx_sha256_current()
    cdef int64_t c, a, nchunks = (n + CHUNK - 1) // CHUNK
    for c in prange(nchunks, nogil=True, num_threads=num_threads, schedule="static",
                    use_threads_if=_par(num_threads, n, n * row_bytes)):
        a = c * CHUNK
        fx_sha256_many_fixed(impl, base + a * row_bytes, row_bytes, min(CHUNK, n - a), &out[a, 0])


def hash_objects(list rows, Py_ssize_t start, Py_ssize_t stop, uint8_t[:, ::1] out,
                 int num_threads):
    """out[i - start] = SHA-256 of rows[i] (str as UTF-8, or bytes) for start <= i < stop.

    Pointers into the objects are gathered with the GIL held (ASCII str and bytes
    are not copied; other str are encoded once into a temporary), then hashed
    without the GIL. Returns -1, or the index of the first row that is neither
    str nor bytes (nothing is hashed then).
    """
    cdef Py_ssize_t n = stop - start
    cdef Py_ssize_t i, size
    cdef int64_t nbytes = 0
    cdef const char *p
    cdef object row
    _compress()  # raises when no SHA-256 path is usable
    if num_threads < 1:
        raise ValueError(f"num_threads must be >= 1, got {num_threads}")
    if start < 0 or stop > len(rows) or n < 0 or out.shape[0] != n or out.shape[1] != 32:
        raise ValueError("hash_objects: range or out shape do not match")
    if n == 0:
        return -1
    cdef const char **ptrs = <const char **>malloc(n * sizeof(char *))
    cdef int64_t *lens = <int64_t *>malloc(n * sizeof(int64_t))
    cdef int impl = fx_sha256_current()
    cdef int64_t c, a, nchunks = (n + CHUNK - 1) // CHUNK
    keep = []  # temporaries (non-ASCII str encoded to UTF-8) alive until hashed
    try:
        if ptrs is NULL or lens is NULL:
            raise MemoryError()
        for i in range(n):
            row = rows[start + i]
            if PyUnicode_CheckExact(row) or isinstance(row, str):
                if PyUnicode_IS_ASCII(row):
                    p = PyUnicode_AsUTF8AndSize(row, &size)
                else:
                    row = PyUnicode_AsUTF8String(row)
                    keep.append(row)
                    p = PyBytes_AS_STRING(row)
                    size = PyBytes_GET_SIZE(row)
            elif PyBytes_CheckExact(row) or isinstance(row, bytes):
                p = PyBytes_AS_STRING(row)
                size = PyBytes_GET_SIZE(row)
            else:
                return start + i
            ptrs[i] = p
            lens[i] = size
            nbytes += size
        for c in prange(nchunks, nogil=True, num_threads=num_threads, schedule="dynamic",
                        chunksize=1, use_threads_if=_par(num_threads, n, nbytes)):
            a = c * CHUNK
            fx_sha256_many_ptrs(impl, &ptrs[a], &lens[a], min(CHUNK, n - a), &out[a, 0])
    finally:
        free(ptrs)
        free(lens)
    return -1


# ---------------------------------------------------------------- canonical table rows
cdef Py_ssize_t _count_nodes(tuple spec):
    cdef Py_ssize_t total = 1
    for child in spec[8]:
        total += _count_nodes(child)
    return total


cdef void _fill(fx_col *node, tuple spec, fx_col *children):
    node.kind = spec[0]
    node.width = spec[1]
    node.offset = spec[2]
    node.length = spec[3]
    node.validity = <const uint8_t *><uintptr_t>spec[4]
    node.offsets = <const void *><uintptr_t>spec[5]
    node.data = <const uint8_t *><uintptr_t>spec[6]
    node.data_len = spec[7]
    node.nchildren = len(spec[8])
    node.children = children if node.nchildren > 0 else NULL


def hash_table(list specs, int64_t n, uint8_t[:, ::1] out, int num_threads):
    """Canonical digest of each of n rows over the column descriptors `specs`.

    A descriptor is a tuple (kind, width, offset, length, validity_addr, offsets_addr,
    data_addr, data_len, children) built by fastaxo._arrow from live pyarrow buffers,
    which the caller keeps alive. Rows are encoded as segment lists into per-thread
    scratch and hashed by the multi-lane kernel. Returns None, or (row, status) for
    the first bad row.
    """
    cdef fx_sha256_compress_fn fn = _compress()
    cdef int impl = fx_sha256_current()
    cdef int32_t ncols = len(specs)
    cdef Py_ssize_t total = 0, nxt, qi, k
    cdef int64_t i, c, a, nbad = 0, nchunks = (n + CHUNK - 1) // CHUNK
    cdef int st, t
    cdef fx_col *nodes = NULL
    cdef fx_segbuf *sbs = NULL
    cdef int64_t *starts = NULL
    if num_threads < 1:
        raise ValueError(f"num_threads must be >= 1, got {num_threads}")
    if out.shape[0] != n or out.shape[1] != 32:
        raise ValueError(f"out has shape ({out.shape[0]}, {out.shape[1]}); expected ({n}, 32)")
    if n == 0:
        return None
    for spec in specs:
        total += _count_nodes(spec)
    try:
        nodes = <fx_col *>calloc(max(total, 1), sizeof(fx_col))
        sbs = <fx_segbuf *>calloc(num_threads, sizeof(fx_segbuf))
        starts = <int64_t *>malloc(num_threads * (CHUNK + 1) * sizeof(int64_t))
        if nodes is NULL or sbs is NULL or starts is NULL:
            raise MemoryError()
        for t in range(num_threads):
            sbs[t].segs = <fx_seg *>malloc(SEG_CAP * sizeof(fx_seg))
            sbs[t].bytes = <uint8_t *>malloc(BYTES_CAP)
            if sbs[t].segs is NULL or sbs[t].bytes is NULL:
                raise MemoryError()
            sbs[t].cap_segs = SEG_CAP
            sbs[t].cap_bytes = BYTES_CAP
        # Breadth first, so that the children of each node are contiguous.
        queue = [(spec, k) for k, spec in enumerate(specs)]
        nxt = ncols
        qi = 0
        while qi < len(queue):
            spec, k = queue[qi]
            qi += 1
            _fill(&nodes[k], spec, &nodes[nxt])
            for child in spec[8]:
                queue.append((child, nxt))
                nxt += 1
        for c in prange(nchunks, nogil=True, num_threads=num_threads, schedule="dynamic",
                        chunksize=1, use_threads_if=_par(num_threads, n, 0)):
            a = c * CHUNK
            t = threadid()
            nbad += fx_hash_table_rows(impl, nodes, ncols, a, min(CHUNK, n - a), &sbs[t],
                                       &starts[t * (CHUNK + 1)], &out[a, 0])
        if nbad:
            for i in range(n):
                st = fx_hash_table_row(fn, nodes, ncols, i, &out[i, 0])
                if st != FX_ROW_OK:
                    return (i, st)
        return None
    finally:
        if sbs is not NULL:
            for t in range(num_threads):
                free(sbs[t].segs)
                free(sbs[t].bytes)
        free(sbs)
        free(starts)
        free(nodes)


# ---------------------------------------------------------------- the seen set
cdef class SeenSet:
    """Insertion-ordered set of 32-byte digests (C hash table; not thread-safe by itself)."""
    cdef fx_seen s

    def __cinit__(self):
        fx_seen_init(&self.s)

    def __dealloc__(self):
        fx_seen_free(&self.s)

    def __len__(self):
        return self.s.count

    @property
    def nbytes(self):
        return fx_seen_nbytes(&self.s)

    def insert(self, const uint8_t[:, ::1] digests, uint8_t[::1] is_new):
        """Insert digests in order; is_new[i] = 1 for a digest not seen before. Returns the count."""
        cdef int64_t n = digests.shape[0], i, added = 0
        cdef int st
        if digests.shape[1] != 32 or is_new.shape[0] != n:
            raise ValueError("insert: digests must be (n, 32) and is_new (n,)")
        if n == 0:
            return 0
        with nogil:
            st = fx_seen_insert_many(&self.s, &digests[0, 0], n, &is_new[0])
        if st == FX_SEEN_FULL:
            raise OverflowError(f"a seen set holds at most {FX_SEEN_MAX} digests")
        if st != FX_SEEN_OK:
            raise MemoryError("out of memory growing the seen set")
        for i in range(n):
            added += is_new[i]
        return added

    def contains(self, const uint8_t[:, ::1] digests, uint8_t[::1] found):
        """found[i] = 1 when digests[i] is in the set."""
        cdef int64_t n = digests.shape[0], i
        if digests.shape[1] != 32 or found.shape[0] != n:
            raise ValueError("contains: digests must be (n, 32) and found (n,)")
        with nogil:
            for i in range(n):
                found[i] = fx_seen_find(&self.s, &digests[i, 0]) >= 0

    def export(self, uint8_t[:, ::1] out):
        """Copy every digest, in insertion order, into out (shape (len, 32))."""
        cdef int64_t i, j
        cdef const uint8_t *d
        if out.shape[0] != self.s.count or out.shape[1] != 32:
            raise ValueError("export: out must be (len(seen), 32)")
        with nogil:
            for i in range(self.s.count):
                d = fx_seen_get(&self.s, i)
                for j in range(32):
                    out[i, j] = d[j]


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
    need = 0 if kind == FX_COL_NULL else (1 if kind == FX_COL_STRUCT or kind == FX_COL_FIXED_LIST else 2)
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
            if _c_kind(schema.format, &w) != FX_COL_STRUCT or schema.n_children < 1 or schema.n_children >= 2**31:
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
                        if _c_fill(&t.nodes[k * ncols + j], schema.children[j], t.arrays[k].children[j],
                                   &free_nodes, 0) < 0:
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


cdef inline const int64_t *_block_rows(const int64_t *rmap, int64_t *iota, int64_t first, int64_t b0,
                                       int64_t m) noexcept nogil:
    """Rows of the block starting at b0: &rmap[b0], or iota filled with first + b0 + i."""
    cdef int64_t i
    if rmap is not NULL:
        return rmap + b0
    for i in range(m):
        iota[i] = first + b0 + i
    return iota


cdef int64_t _head_pass(fx_rowset *rs, const uint64_t *keys, int32_t src, const int64_t *rp, int64_t m,
                        int64_t *cand) noexcept nogil:
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
    """(row, status) of the first bad row of a block (compare: 255 means 'same key, another row')."""
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
        return {"compares": self.rs.compares, "hot_keys": self.rs.hot_keys, "sources": len(self.tabs)}

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
                raise IndexError(f"insert: rows [{first}, {first + n}) out of range for a source of {nsrc_rows} rows")
        else:
            rmap = rows
            if rmap.shape[0] != n:
                raise ValueError("insert: is_new must have one entry per row")
            for i in range(n):
                if rmap[i] < 0 or rmap[i] >= nsrc_rows:
                    raise IndexError(f"insert: row {rmap[i]} out of range for a source of {nsrc_rows} rows")
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
            if (keys is NULL or cand is NULL or status is NULL or sync is NULL or mine is NULL or other is NULL
                    or group is NULL or (rows is None and iota is NULL)):
                raise MemoryError()
            for t in range(num_threads):
                if fx_segbuf_alloc(&mine[t], SEG_CAP, BYTES_CAP) or fx_segbuf_alloc(&other[t], SEG_CAP, BYTES_CAP):
                    raise MemoryError()
            for i in range(2 * num_threads * FX_KEY_GROUP):
                if fx_segbuf_alloc(&group[i], 32, 512):   # grows for bigger rows
                    raise MemoryError()
            rc = fx_rowset_reserve(&self.rs, n)
            if rc == -1:
                raise OverflowError(f"a RowSet holds at most {FX_ROWSET_MAX_ENTRIES:,} rows; it has "
                                    f"{self.rs.count:,} and {n:,} more were added (use fastaxo.Seen)")
            if rc:
                raise MemoryError("out of memory growing the row set")
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
                    rp1 = _block_rows(&rmap[0] if rows is not None else NULL, &iota[k1], first, b0 + blk, m1)
                    memset(&status[k1], 0, m1)
                nt_head = 1
                nt_keys = (m1 + ROWSET_TASK - 1) // ROWSET_TASK
                nt_cmp = (m + ROWSET_TASK - 1) // ROWSET_TASK
                sync[0] = 0
                sync[1] = 0
                for task in prange(nt_head + nt_keys + nt_cmp, nogil=True, num_threads=num_threads,
                                   schedule="dynamic", chunksize=1, use_threads_if=_par(num_threads, m + m1, 0)):
                    t = threadid()
                    if task == 0:
                        # 1. first row of each key (serial: first occurrence is an order)
                        sync[1] = _head_pass(&self.rs, &keys[c0], src, rp, m, cand)
                        fx_publish(&sync[0], 1)
                    elif task <= nt_keys:
                        # 2. keys of the next block
                        a = (task - 1) * ROWSET_TASK
                        nbad_k += fx_tab_keys(tab, &rp1[a], min(<int64_t>ROWSET_TASK, m1 - a),
                                              &group[2 * t * FX_KEY_GROUP], &keys[k1 + a], &status[k1 + a])
                    else:
                        # 3. rows whose key was seen: compare with that key's first row
                        fx_wait_progress(&sync[0], 0)
                        a = (task - 1 - nt_keys) * ROWSET_TASK
                        nbad_c += fx_rowset_compare(&self.rs, self.srcs, tab, &rp[a], &cand[a],
                                                    min(<int64_t>ROWSET_TASK, m - a), &group[2 * t * FX_KEY_GROUP],
                                                    &status[c0 + a])   # 255: same key, different row
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
                            if st != FX_ROW_OK:
                                nerr = 2
                                break
                            e = fx_rowset_resolve(&self.rs, self.srcs, keys[c0 + r], src, rp[r], &mine[0], &other[0], fn)
                            if e < -1:
                                nerr = 3 if e == -2 else 4
                                break
                            is_new[b0 + r] = e == -1
                if nerr == 3 or nerr == 2:
                    raise MemoryError("out of memory in the row set")
                if nerr:
                    raise RuntimeError("fastaxo row set: a stored row could not be re-read (its data changed?)")
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
