# The byte-level BPE encoder (csrc/fx_bpe.h): a model object, per-thread caches, and batch
# encoding of UTF-8 texts given as Arrow's layout (values + int64 offsets) into one int32
# values array and per-text counts, with the GIL released and texts spread over threads.

# Texts per unit of work: a thread takes chunks of about this many bytes (dynamic schedule,
# so a thread that loses its core to another process takes fewer). An input of at least such
# a chunk per thread but less than BPE_CHUNKS_PER_THREAD each is cut finer (not below
# BPE_CHUNK_MIN): the last chunk to finish leaves the other threads idle for up to its time.
# (A smaller input stays one chunk a thread or less, as before: no more calls go parallel.)
cdef int64_t BPE_CHUNK_BYTES = 1 << 18
cdef int64_t BPE_CHUNK_MIN = 1 << 15
# the chunks' regions of a call are kept for the next when at most this big: memory touched
# for the first time costs the kernel's zeroing (13% of a 40 MB call); only the pages the
# regions used stay in memory (_scratch_array: about the ids of the largest call)
cdef int64_t BPE_SCRATCH_KEEP = 1 << 28
cdef int64_t BPE_CHUNKS_PER_THREAD = 16

# how merging looks up ranks (csrc/fx_bpe.h FX_BPE_PROBE_*; BPEModel._probe)
PROBE_PLAIN = FX_BPE_PROBE_PLAIN
PROBE_AVX2 = FX_BPE_PROBE_AVX2

# encode_many's `offsets` modes (csrc/fx_bpe.h FX_OFFSETS_*)
OFFSETS_NONE = FX_OFFSETS_NONE
OFFSETS_BYTES = FX_OFFSETS_BYTES
OFFSETS_CHARS = FX_OFFSETS_CHARS


cdef int8_t _encode_chunk(const fx_bpe *m, fx_bpe_cache *cache, const uint8_t *data,
                          const int64_t *off, int64_t first, int64_t last, bint specials,
                          bint validate, int32_t *ids, int64_t *spans, int mode, int64_t cap,
                          int64_t *counts, int64_t *used, int64_t *bad) noexcept nogil:
    """Texts [first, last) into ids[0..cap) (spans: 2 per id in FX_OFFSETS_* mode, or
    NULL)."""
    cdef fx_ids out
    out.ids = ids
    out.offsets = spans
    out.n = 0
    out.cap = cap
    out.want_offsets = mode if spans != NULL else FX_OFFSETS_NONE
    out.fixed = 1
    cdef int rc = fx_bpe_encode_many(m, cache, data + (off[first] - off[0]), off + first, 0,
                                     last - first, specials, validate, &out, counts + first,
                                     bad)
    used[0] = out.n
    if rc and bad[0] >= 0:
        bad[0] += first
    return <int8_t>rc


# Where encode_many's texts are: UTF-8 bytes and offsets (data != NULL), or the storage of
# Python str objects (kinds: 0 ASCII, else PEP 393's 1, 2 or 4 bytes a code point).
ctypedef struct _Source:
    const uint8_t *data
    const int64_t *off
    bint validate
    const int8_t *kinds
    const uintptr_t *ptrs
    const int64_t *lens
    const int64_t *bounds


cdef extern from *:
    """
    #if PY_VERSION_HEX < 0x030C0000
    #define fx_unicode_ready(o) PyUnicode_READY(o)
    #else
    #define fx_unicode_ready(o) 0
    #endif
    #define fx_unicode_is_ascii(o) PyUnicode_IS_ASCII(o)
    """
    int _unicode_ready "fx_unicode_ready"(object o) except -1
    bint _unicode_is_ascii "fx_unicode_is_ascii"(object o)


cdef int64_t _strs_utf8(const _Source *src, int64_t first, int64_t last, uint8_t *buf,
                        int64_t *off) noexcept nogil:
    """Texts [first, last) of src's str storage as UTF-8 into buf (room: their bounds):
    off[0] = 0, off[k + 1] the end of text first + k. -1, or the index of the first text
    holding a surrogate (UTF-8 cannot hold one)."""
    cdef int64_t i, at = 0, w, pos = 0
    off[0] = 0
    for i in range(first, last):
        if src.kinds[i] == 0:
            w = src.lens[i]
            memcpy(buf + at, <const void *>src.ptrs[i], w)
        else:
            w = fx_ucs_to_utf8(src.kinds[i], <const void *>src.ptrs[i], src.lens[i], buf + at,
                               &pos)
            if w < 0:
                return i
        at += w
        off[i - first + 1] = at
    return -1


cdef object _str_storage(tuple keep):
    """Where each str of ``keep`` is held (PEP 393) as arrays: kinds (0 ASCII, else 1, 2 or 4
    bytes a code point), data addresses, lengths, and a bound of each one's UTF-8 bytes; None
    where an item is not a str. (``keep`` holds the texts while the addresses are read.)"""
    import numpy as np
    cdef int64_t n = len(keep), i, k
    cdef object t
    kinds = np.empty(n, np.int8)
    ptrs = np.empty(n, np.uintp)
    lens = np.empty(n, np.int64)
    bounds = np.empty(n, np.int64)
    cdef int8_t[::1] kd = kinds
    cdef uintptr_t[::1] pt = ptrs
    cdef int64_t[::1] ln = lens, bd = bounds
    for i in range(n):
        t = keep[i]
        if not isinstance(t, str):
            return None
        _unicode_ready(t)
        k = PyUnicode_GET_LENGTH(t)
        kd[i] = 0 if _unicode_is_ascii(t) else <int8_t>PyUnicode_KIND(t)
        pt[i] = <uintptr_t>PyUnicode_DATA(t)
        ln[i] = k
        bd[i] = k if kd[i] == 0 else fx_ucs_utf8_bound(kd[i], k)
    return kinds, ptrs, lens, bounds


cdef void _str_source(_Source *src, object storage):
    """src pointed at the arrays of :func:`_str_storage` (the caller keeps them alive)."""
    cdef int8_t[::1] kd = storage[0]
    cdef uintptr_t[::1] pt = storage[1]
    cdef int64_t[::1] ln = storage[2], bd = storage[3]
    cdef bint some = kd.shape[0] > 0
    src.data = NULL
    src.off = NULL
    src.validate = False
    src.kinds = &kd[0] if some else NULL
    src.ptrs = &pt[0] if some else NULL
    src.lens = &ln[0] if some else NULL
    src.bounds = &bd[0] if some else NULL


cdef void _check_mode(int mode, int num_threads) except *:
    if mode not in (FX_OFFSETS_NONE, FX_OFFSETS_BYTES, FX_OFFSETS_CHARS):
        raise ValueError(f"mode: expected OFFSETS_NONE, OFFSETS_BYTES or OFFSETS_CHARS, "
                         f"got {mode}")
    if num_threads < 1:
        raise ValueError(f"num_threads must be >= 1, got {num_threads}")


cdef int8_t _encode_source(const fx_bpe *m, fx_bpe_cache *cache, const _Source *src,
                           int64_t first,
                           int64_t last, bint specials, int32_t *ids, int64_t *spans, int mode,
                           int64_t cap, int64_t *counts, int64_t *used, int64_t *bad
                           ) noexcept nogil:
    """Texts [first, last) of src into ids[0..cap): src's bytes as they are, or each str's
    UTF-8 made into a buffer of this call's own first."""
    if src.data != NULL:
        return _encode_chunk(m, cache, src.data, src.off, first, last, specials, src.validate,
                             ids, spans, mode, cap, counts, used, bad)
    cdef int64_t i, room = 0
    cdef int8_t rc
    for i in range(first, last):
        room += src.bounds[i]
    cdef uint8_t *buf = <uint8_t *>malloc(room if room else 1)
    cdef int64_t *off = <int64_t *>malloc((last - first + 1) * sizeof(int64_t))
    used[0] = 0
    if buf == NULL or off == NULL:
        free(buf)
        free(off)
        return FX_ENOMEM
    i = _strs_utf8(src, first, last, buf, off)
    if i >= 0:
        free(buf)
        free(off)
        bad[0] = i
        return FX_ESURROGATE
    rc = _encode_chunk(m, cache, buf, off, 0, last - first, specials, False, ids, spans, mode,
                       cap, counts + first, used, bad)
    if rc and bad[0] >= 0:
        bad[0] += first
    free(buf)
    free(off)
    return rc


cdef class BPEModel:
    """An fx_bpe model built from the arrays of fastaxo.tokenizer._spec.Spec."""
    cdef fx_bpe *m
    cdef readonly int32_t vocab_size
    cdef list _caches  # per-thread caches kept between calls (warm), guarded by _busy
    cdef object _busy
    cdef object _scratch_ids, _scratch_spans  # regions kept between calls (_take_scratch)

    def __cinit__(self):
        self.m = NULL

    def __init__(self, const uint8_t[::1] tok_bytes, const int64_t[::1] tok_off,
                  const int32_t[::1] merges, const uint8_t[::1] added_bytes,
                  const int64_t[::1] added_off, const int32_t[::1] added_ids,
                  const uint8_t[::1] added_flags, int pretok, bint ignore_merges, bint nfc,
                  int bos_id):
        cdef fx_bpe_spec sp
        cdef int status = 0
        cdef const char *what = NULL
        cdef uint8_t zero8 = 0
        cdef int32_t zero32 = 0
        if self.m != NULL:
            raise RuntimeError("BPEModel is already built")
        if tok_off.shape[0] < 2 or tok_off[0] != 0 or tok_off[tok_off.shape[0] - 1] != tok_bytes.shape[0]:
            raise ValueError("tok_off: expected n_vocab + 1 offsets from 0 to len(tok_bytes)")
        if merges.shape[0] % 3:
            raise ValueError("merges: expected 3 ids per merge")
        if (added_off.shape[0] != added_ids.shape[0] + 1 or added_flags.shape[0] != added_ids.shape[0]
                or added_off[0] != 0 or added_off[added_off.shape[0] - 1] != added_bytes.shape[0]):
            raise ValueError("added tokens: arrays of mismatched lengths")
        for i in range(added_off.shape[0] - 1):
            if added_off[i + 1] < added_off[i]:
                raise ValueError("added_off: offsets decrease")
        sp.n_vocab = <int32_t>(tok_off.shape[0] - 1)
        sp.tok_bytes = &tok_bytes[0] if tok_bytes.shape[0] else &zero8
        sp.tok_off = &tok_off[0]
        sp.n_merges = <int32_t>(merges.shape[0] // 3)
        sp.merges = &merges[0] if merges.shape[0] else &zero32
        sp.n_added = <int32_t>added_ids.shape[0]
        sp.added_bytes = &added_bytes[0] if added_bytes.shape[0] else &zero8
        sp.added_off = &added_off[0]
        sp.added_ids = &added_ids[0] if added_ids.shape[0] else &zero32
        sp.added_flags = &added_flags[0] if added_flags.shape[0] else &zero8
        sp.pretok = pretok
        sp.ignore_merges = ignore_merges
        sp.nfc = nfc
        sp.bos_id = bos_id
        with nogil:
            self.m = fx_bpe_new(&sp, &status, &what)
        if self.m == NULL:
            if status != FX_EINVAL:
                check_status(status, "tokenizer", "building the BPE model")
            raise ValueError(f"tokenizer: {what.decode()}")
        self.vocab_size = sp.n_vocab
        self._caches = []
        import threading
        self._busy = threading.Lock()

    def __dealloc__(self):
        cdef uintptr_t p
        if self._caches is not None:
            for p in self._caches:
                fx_bpe_cache_free(<fx_bpe_cache *>p)
        if self.m != NULL:
            fx_bpe_free(self.m)

    cdef list _take_caches(self, int n, bint *owned):
        """n caches: this model's own (warm) when no other call holds them, else new ones."""
        import numpy as np
        cdef list got
        cdef int k, more
        cdef bint failed = False
        if self.m == NULL:
            raise RuntimeError("BPEModel was not built")
        owned[0] = not self._busy.acquire(False)
        got = [] if owned[0] else self._caches
        more = n - len(got)
        if more <= 0:
            return got
        # made on the threads that will use them: zeroing a cache's tables (a memset of
        # ~4 MB when the pool hands them back) is then not done one after another
        cdef uintptr_t[::1] made = np.zeros(more, np.uintp)
        with nogil:
            for k in prange(more, num_threads=more, schedule="static", use_threads_if=more > 1):
                made[k] = <uintptr_t>fx_bpe_cache_new()
        for k in range(more):
            failed = failed or made[k] == 0
        if failed:  # (owned: got was empty, so only the ones made here are freed)
            for k in range(more):
                fx_bpe_cache_free(<fx_bpe_cache *>made[k])  # (NULL: nothing)
            if not owned[0]:
                self._busy.release()
            raise MemoryError("tokenizer: out of memory for a word cache")
        for k in range(more):
            got.append(made[k])
        return got

    cdef object _take_scratch(self, int64_t need, bint spans):
        """Room for ``need`` ids (or spans): the array the last call gave back when it is big
        enough (no other call holds it: taking it is one step under the GIL), else a new one
        a quarter larger (the next call a little longer fits too)."""
        import numpy as np
        got = self._scratch_spans if spans else self._scratch_ids
        if spans:
            self._scratch_spans = None
        else:
            self._scratch_ids = None
        if got is None or got.shape[0] < need:
            need += need // 4
            got = _scratch_array(need, spans)
        return got

    cdef object _give_scratch(self, object got, bint spans):
        """Keep ``got`` for the next call, unless it is over BPE_SCRATCH_KEEP bytes or one
        kept already is larger."""
        if got is None or got.nbytes > BPE_SCRATCH_KEEP:
            return None
        kept = self._scratch_spans if spans else self._scratch_ids
        if kept is None or kept.shape[0] < got.shape[0]:
            if spans:
                self._scratch_spans = got
            else:
                self._scratch_ids = got
        return None

    cdef void _give_caches(self, list caches, bint owned):
        cdef uintptr_t p
        if owned:
            for p in caches:
                fx_bpe_cache_free(<fx_bpe_cache *>p)
        else:
            self._busy.release()

    def _probe(self, int level):
        """Test hook: look up merge ranks with ``level`` (PROBE_PLAIN or PROBE_AVX2), or the
        best below it that the build and the processor have. Returns the level in effect."""
        with self._busy:
            return fx_bpe_set_probe(self.m, level)

    def _cache_stats(self):
        """Test hook: (log2 word slots, log2 long-piece slots, pieces merged because the cache
        did not hold them) of each kept word cache."""
        cdef uintptr_t p
        cdef unsigned bits = 0, long_bits = 0
        cdef uint64_t merged = 0
        got = []
        with self._busy:
            for p in self._caches:
                fx_bpe_cache_stats(<fx_bpe_cache *>p, &bits, &long_bits, &merged)
                got.append((bits, long_bits, merged))
        return got

    def clear_cache(self):
        """Drop the word caches (the next call starts cold) and the regions kept."""
        cdef uintptr_t p
        with self._busy:
            for p in self._caches:
                fx_bpe_cache_free(<fx_bpe_cache *>p)
            self._caches = []
        self._scratch_ids = self._scratch_spans = None

    def encode_many(self, const uint8_t[::1] data, const int64_t[::1] offsets, bint specials,
                    int num_threads, int mode, bint validate=True):
        """(values int32, counts int64 per text, token spans int64 (n, 2) or None) for the
        texts data[offsets[i] - offsets[0] : offsets[i + 1] - offsets[0]]; mode: OFFSETS_NONE,
        OFFSETS_BYTES (UTF-8 byte spans) or OFFSETS_CHARS (HF's code point offsets); validate:
        check each is UTF-8 (ValueError naming the first that is not)."""
        cdef int64_t n = offsets.shape[0] - 1, i
        _check_mode(mode, num_threads)
        if n < 0:
            raise ValueError("offsets: expected at least one entry")
        for i in range(n):
            if offsets[i + 1] < offsets[i]:
                raise ValueError(f"offsets: text {i} ends before it starts")
        if offsets[n] - offsets[0] > data.shape[0]:
            raise ValueError(f"offsets: the texts span {offsets[n] - offsets[0]} bytes, data "
                             f"holds {data.shape[0]}")
        cdef uint8_t empty = 0
        cdef _Source src
        src.data = &data[0] if data.shape[0] else &empty
        src.off = &offsets[0]
        src.validate = validate
        import numpy as np
        return self._encode(&src, np.diff(offsets), specials, num_threads, mode)

    def encode_strs(self, texts, bint specials, int num_threads, int mode):
        """encode_many for a list (or tuple) of str, each text's UTF-8 made in C by the thread
        that encodes it: no str.encode under the GIL, no joined copy. None where the sequence
        holds something other than a str or a str holding a surrogate (the caller's
        str.encode path then raises the error it should), or NFC outgrew a chunk's room."""
        cdef tuple keep = tuple(texts)  # (a list another thread changes cannot free a text)
        _check_mode(mode, num_threads)
        storage = _str_storage(keep)
        if storage is None:
            return None
        cdef _Source src
        _str_source(&src, storage)
        return self._encode(&src, storage[3], specials, num_threads, mode)

    cdef object _encode(self, const _Source *src, object sizes, bint specials, int num_threads,
                        int mode):
        """The texts of ``src`` (``sizes``: each one's UTF-8 bytes, or a bound of them) in
        chunks of whole texts over the threads (the caller keeps src's memory alive)."""
        import numpy as np
        cdef int64_t[::1] size = np.ascontiguousarray(sizes, np.int64)
        cdef int64_t n = size.shape[0], i, c, nchunks, acc
        cdef bint want_offsets = mode != FX_OFFSETS_NONE
        # chunks of whole texts, about `chunk` bytes each, and the bytes each holds
        cdef int64_t chunk = BPE_CHUNK_BYTES, total = 0
        if num_threads > 1:
            for i in range(n):
                total += size[i]
            if total >= num_threads * BPE_CHUNK_BYTES:
                chunk = max(BPE_CHUNK_MIN,
                            min(BPE_CHUNK_BYTES, total // (num_threads * BPE_CHUNKS_PER_THREAD)))
        starts, sums = [0], []
        acc = 0
        for i in range(n):
            acc += size[i]
            if acc >= chunk and i + 1 < n:
                starts.append(i + 1)
                sums.append(acc)
                acc = 0
        starts.append(n)
        sums.append(acc)
        nchunks = len(starts) - 1
        cdef int64_t[::1] cstart = np.asarray(starts, np.int64)
        # each chunk writes into its own region: a text of b bytes gives at most b ids (+ BOS)
        cdef int64_t[::1] region = np.empty(nchunks + 1, np.int64)
        region[0] = 0
        for c in range(nchunks):
            region[c + 1] = region[c] + sums[c] + (cstart[c + 1] - cstart[c]) * (
                1 if specials else 0)
        vals = self._take_scratch(max(region[nchunks], 1), False)
        spans = self._take_scratch(max(region[nchunks], 1), True) if want_offsets else None
        try:
            return self._encode_into(src, vals, spans, region, cstart, nchunks, n, specials,
                                     num_threads, mode)
        finally:
            self._give_scratch(vals, False)
            self._give_scratch(spans, True)

    cdef object _encode_into(self, const _Source *src, object vals, object spans,
                             const int64_t[::1] region, const int64_t[::1] cstart,
                             int64_t nchunks, int64_t n, bint specials, int num_threads,
                             int mode):
        """_encode's work: chunk c into vals[region[c]:region[c + 1]] (spans alike), then the
        chunks gathered in order into arrays of their own."""
        import numpy as np
        cdef int64_t c, pos
        cdef bint want_offsets = mode != FX_OFFSETS_NONE
        cdef int32_t[::1] v = vals
        cdef int64_t[:, ::1] sp = spans if want_offsets else np.empty((1, 2), np.int64)
        counts = np.zeros(n, np.int64)
        cdef int64_t[::1] cnt = counts
        cdef int64_t[::1] used = np.zeros(max(nchunks, 1), np.int64)
        cdef int8_t[::1] status = np.zeros(max(nchunks, 1), np.int8)
        cdef int64_t[::1] badrow = np.full(max(nchunks, 1), -1, np.int64)
        cdef int nt = num_threads if nchunks > 1 else 1
        cdef bint owned = False
        cdef list caches = self._take_caches(nt, &owned)
        cdef uintptr_t[::1] cptr = np.asarray(caches, np.uintp)
        cdef dict wide = {}  # chunk -> (ids, spans) of a chunk NFC made outgrow its region
        try:
            with nogil:
                for c in prange(nchunks, num_threads=nt, schedule="dynamic", chunksize=1,
                                use_threads_if=nt > 1):
                    status[c] = _encode_source(
                        self.m, <fx_bpe_cache *>cptr[threadid()], src, cstart[c],
                        cstart[c + 1], specials, &v[region[c]],
                        &sp[region[c], 0] if want_offsets else NULL, mode,
                        region[c + 1] - region[c], &cnt[0], &used[c], &badrow[c])
            for c in range(nchunks):
                if status[c] == FX_EBIG:
                    if src.data == NULL:
                        return None  # (text from str: the caller's joined path has the room)
                    wide[c] = self._wide_chunk(src.data, src.off, cstart[c], cstart[c + 1],
                                               specials, src.validate, mode,
                                               <fx_bpe_cache *>cptr[0], cnt, &used[c],
                                               &badrow[c], &status[c])
        finally:
            self._give_caches(caches, owned)
        for c in range(nchunks):
            if status[c] == FX_ESURROGATE:
                return None
            if status[c] == FX_EUTF8:
                raise ValueError(f"texts: text {badrow[c]} is not valid UTF-8")
            check_status(status[c], "tokenizer", "encoding", badrow[c])
        if wide:
            return (_closed_up(vals, region, used, wide, 0, nchunks), counts,
                    _closed_up(spans, region, used, wide, 1, nchunks) if want_offsets else None)
        # the regions gathered in order into arrays of their own size, on the threads
        dest = np.empty(nchunks + 1, np.int64)
        cdef int64_t[::1] at = dest
        at[0] = 0
        for c in range(nchunks):
            at[c + 1] = at[c] + used[c]
        pos = at[nchunks]
        out = np.empty(max(pos, 1), np.int32)
        cdef int32_t[::1] o = out
        out_spans = np.empty((max(pos, 1), 2), np.int64) if want_offsets else None
        cdef int64_t[:, ::1] osp = out_spans if want_offsets else sp
        with nogil:
            for c in prange(nchunks, num_threads=nt, schedule="static",
                            use_threads_if=nt > 1 and pos > BPE_CHUNK_BYTES):
                if used[c]:
                    memcpy(&o[at[c]], &v[region[c]], used[c] * sizeof(int32_t))
                    if want_offsets:
                        memcpy(&osp[at[c], 0], &sp[region[c], 0], used[c] * 2 * sizeof(int64_t))
        vals = out[:pos]
        if want_offsets:
            spans = out_spans[:pos]
        return vals, counts, spans

    cdef tuple _wide_chunk(self, const uint8_t *d0, const int64_t *offsets, int64_t first,
                           int64_t last, bint specials, bint validate, int mode,
                           fx_bpe_cache *cache, int64_t[::1] cnt, int64_t *used, int64_t *bad,
                           int8_t *status):
        """Texts [first, last) again, into room for NFC's largest growth: NFC can make text up
        to 3 times longer in UTF-8 (UAX #15's bound; e.g. U+1D160 -> 3 code points of 4
        bytes), and ids can then outnumber the text's bytes (U+0F73: 3 bytes, 4 of Qwen3's
        ids). Rare: only a chunk that outgrew its region comes here."""
        import numpy as np
        cdef int64_t room = 3 * (offsets[last] - offsets[first]) + (last - first) * (
            1 if specials else 0)
        vals = np.empty(max(room, 1), np.int32)
        spans = np.empty((max(room, 1), 2), np.int64) if mode != FX_OFFSETS_NONE else None
        cdef int32_t[::1] v = vals
        cdef int64_t[:, ::1] sp = spans if spans is not None else np.empty((1, 2), np.int64)
        bad[0] = -1
        with nogil:
            status[0] = _encode_chunk(self.m, cache, d0, offsets, first, last, specials,
                                      validate, &v[0], &sp[0, 0] if mode != FX_OFFSETS_NONE
                                      else NULL, mode, room, &cnt[0], used, bad)
        return vals, spans


cdef object _scratch_array(int64_t n, bint spans):
    """An array of n ids (int32) or spans (n x 2 int64) in anonymous memory without huge
    pages: a chunk uses about a quarter of its region, and with 4 KiB pages only that much
    is ever touched (zeroed by the kernel, and kept while the array is), where NumPy's
    huge pages for large arrays would touch all of it."""
    import mmap

    import numpy as np
    cdef int64_t nbytes = n * (16 if spans else 4)
    # private: after a fork the child's copy is its own (an anonymous mapping is shared by
    # default, and parent and child encoding at once would write into each other's regions)
    mem = (mmap.mmap(-1, max(nbytes, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
           if hasattr(mmap, "MAP_PRIVATE") else mmap.mmap(-1, max(nbytes, 1)))
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        mem.madvise(mmap.MADV_NOHUGEPAGE)
    got = np.frombuffer(mem, np.int64 if spans else np.int32, count=n * (2 if spans else 1))
    return got.reshape(n, 2) if spans else got


cdef object _closed_up(object arr, const int64_t[::1] region, const int64_t[::1] used,
                       dict wide, int which, int64_t nchunks):
    """arr's regions closed up in order into a new array, a wide chunk's taken from its own
    arrays (wide[c][which]: 0 the ids, 1 the spans)."""
    import numpy as np
    cdef int64_t c
    parts = [wide[c][which][:used[c]] if c in wide else arr[region[c]:region[c] + used[c]]
             for c in range(nchunks)]
    return np.concatenate(parts) if parts else arr[:0].copy()


def utf8_join(texts, out=None):
    """The UTF-8 of a list (or tuple) of str, joined, made in C with the GIL released (the
    chat engine's encoder thread makes it while the other thread renders): ``(data, offsets,
    chars)``, a uint8 array, int64 offsets (text i is ``data[offsets[i]:offsets[i + 1]]``) and
    int64 characters of each text. None where an item is not a str or holds a surrogate
    (``str.encode`` then raises the error it should). ``out``: a writable C-contiguous uint8
    array to write into when it has room for the UTF-8's bound (``data`` is then a view of
    it; the engine reuses one per pass: fresh memory costs a page fault and the kernel's
    zeroing per page, a tenth of the chat pass's CPU)."""
    import numpy as np
    cdef tuple keep = tuple(texts)  # (a list another thread changes cannot free a text)
    storage = _str_storage(keep)
    if storage is None:
        return None
    cdef _Source src
    _str_source(&src, storage)
    cdef int64_t n = len(keep), bad
    offsets = np.empty(n + 1, np.int64)
    cdef int64_t need = max(int(storage[3].sum()), 1)
    if out is not None and (not isinstance(out, np.ndarray) or out.dtype != np.uint8
                            or out.ndim != 1 or not out.flags.c_contiguous
                            or not out.flags.writeable):
        raise ValueError("out: expected a writable C-contiguous uint8 array")
    data = out if out is not None and out.shape[0] >= need else np.empty(need, np.uint8)
    cdef int64_t[::1] off = offsets
    cdef uint8_t[::1] buf = data
    with nogil:
        bad = _strs_utf8(&src, 0, n, &buf[0], &off[0])
    if bad >= 0:
        return None
    return data[:offsets[n]], offsets, storage[2]


def utf8_split(const uint8_t[::1] data, const int64_t[::1] offsets, Py_ssize_t first,
               Py_ssize_t last):
    """Strings ``first..last`` of an Arrow string column (``data`` its values, ``offsets`` its
    int64 offsets) as ``bytes``, each checked to be UTF-8 as Python's strict decoder takes it
    (the GIL released for the check): the chat engine's UTF-8 rows read contents without
    decoding them. Returns the list, or the index of the first string that is not UTF-8."""
    if not 0 <= first <= last < offsets.shape[0]:
        raise ValueError(f"first, last: expected 0 <= first <= last < {offsets.shape[0]}, got "
                         f"{first}, {last}")
    cdef Py_ssize_t i, bad = -1
    cdef int64_t a, b
    for i in range(first, last):
        if not 0 <= offsets[i] <= offsets[i + 1] <= data.shape[0]:
            raise ValueError(f"offsets: string {i} spans [{offsets[i]}, {offsets[i + 1]}), "
                             f"outside the {data.shape[0]} bytes of data")
    cdef const uint8_t *p = &data[0] if data.shape[0] else <const uint8_t *>b""
    with nogil:
        for i in range(first, last):
            if not fx_utf8_valid(p + offsets[i], <size_t>(offsets[i + 1] - offsets[i])):
                bad = i
                break
    if bad >= 0:
        return bad
    cdef list out = PyList_New(last - first)
    for i in range(first, last):
        a, b = offsets[i], offsets[i + 1]
        got = PyBytes_FromStringAndSize(<const char *>(p + a), b - a)
        Py_INCREF(got)
        PyList_SET_ITEM(out, i - first, got)
    return out


def _fail_big_allocs(bint on):
    """Test hook: while on, the allocations of the encoder's large tables (a model's, a word
    cache's and its growth) fail as out of memory would. Returns the previous setting. Set it
    while no encode runs on another thread."""
    return bool(fx_big_fail(on))
