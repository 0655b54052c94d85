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

from fastaxo.errors import KernelError

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


# The C values Python mirrors (fastaxo._core.arrow's COL_*: the row encoding's column kinds,
# part of every digest; a row's status): tests/test_constants.py checks the copies.
COL_KINDS = {"NULL": FX_COL_NULL, "FIXED": FX_COL_FIXED, "BOOL": FX_COL_BOOL,
             "BINARY32": FX_COL_BINARY32, "BINARY64": FX_COL_BINARY64, "LIST32": FX_COL_LIST32,
             "LIST64": FX_COL_LIST64, "FIXED_LIST": FX_COL_FIXED_LIST, "STRUCT": FX_COL_STRUCT,
             "DICT": FX_COL_DICT}
ROW_BAD_OFFSETS = FX_EOFFSETS
ROW_BAD_DICT_INDEX = FX_EDICT_INDEX


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
    if st == FX_EUNSUPPORTED:
        raise RuntimeError(f"SHA-256 path {name!r} is not supported by this CPU or build")
    if st == FX_ESELFTEST:
        raise RuntimeError(f"SHA-256 path {name!r} failed its known-answer self-test")
    check_status(st, "sha256_select", f"selecting SHA-256 path {name!r}")
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
    # our own list of the rows: another thread may empty or change the caller's list while the
    # GIL is released below, and the objects the pointers point into must outlive the hashing
    cdef list held = rows[start:stop]
    try:
        if ptrs is NULL or lens is NULL:
            raise MemoryError()
        for i in range(n):
            row = held[i]
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
                if st != FX_OK:
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
        """Insert digests in order; is_new[i] = 1 for a digest not seen before.
        Returns the count."""
        cdef int64_t n = digests.shape[0], i, added = 0
        cdef int st
        if digests.shape[1] != 32 or is_new.shape[0] != n:
            raise ValueError("insert: digests must be (n, 32) and is_new (n,)")
        if n == 0:
            return 0
        with nogil:
            st = fx_seen_insert_many(&self.s, &digests[0, 0], n, &is_new[0])
        if st == FX_EFULL:
            raise OverflowError(f"a seen set holds at most {FX_SEEN_MAX} digests")
        check_status(st, "fastaxo.Seen", "growing the seen set")
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
include "_status.pxi"
include "_hash_rowset.pxi"
