# All C declarations of csrc/, in one place.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

cdef extern from "fx_status.h" nogil:
    int FX_OK, FX_EINVAL, FX_ENOMEM, FX_EBIG, FX_EUTF8, FX_ESURROGATE, FX_EOVERLONG, FX_EFULL
    int FX_EUNSUPPORTED, FX_ESELFTEST, FX_EOFFSETS, FX_EDICT_INDEX, FX_NSTATUS
    const char *fx_status_name(int status)

cdef extern from "fx_sha256.h" nogil:
    int FX_SHA256_AUTO, FX_SHA256_PORTABLE, FX_SHA256_SHANI, FX_SHA256_ARMV8, FX_SHA256_NIMPL
    ctypedef void (*fx_sha256_compress_fn)(uint32_t *state, const uint8_t *blocks, size_t nblocks)
    ctypedef struct fx_sha256_ctx:
        pass
    int fx_sha256_impl_compiled(int impl)
    int fx_sha256_impl_supported(int impl)
    const char *fx_sha256_impl_name(int impl)
    int fx_sha256_impl_from_name(const char *name)
    int fx_sha256_selftest(int impl)
    int fx_sha256_select(int impl)
    int fx_sha256_current()
    fx_sha256_compress_fn fx_sha256_compress_for(int impl)
    void fx_sha256_oneshot(fx_sha256_compress_fn fn, const void *data, size_t length, uint8_t *out)
    ctypedef struct fx_seg:
        const uint8_t *ptr
        size_t len
    void fx_sha256_many_segs(int impl, const fx_seg *segs, const int64_t *seg_start, int64_t n,
                             uint8_t *out)
    void fx_sha256_many_offsets32(int impl, const uint8_t *data, const int32_t *off, int64_t width,
                                  int64_t n, uint8_t *out)
    void fx_sha256_many_offsets64(int impl, const uint8_t *data, const int64_t *off, int64_t width,
                                  int64_t n, uint8_t *out)
    void fx_sha256_many_fixed(int impl, const uint8_t *data, int64_t row_bytes, int64_t n,
                              uint8_t *out)
    void fx_sha256_many_ptrs(int impl, const char *const *ptrs, const int64_t *lens, int64_t n,
                             uint8_t *out)

cdef extern from "fx_rows.h" nogil:
    int FX_COL_NULL, FX_COL_FIXED, FX_COL_BOOL, FX_COL_BINARY32, FX_COL_BINARY64
    int FX_COL_LIST32, FX_COL_LIST64, FX_COL_FIXED_LIST, FX_COL_STRUCT, FX_COL_DICT
    ctypedef struct fx_col:
        int32_t kind
        int32_t width
        int64_t offset
        int64_t length
        const uint8_t *validity
        const void *offsets
        const uint8_t *data
        int64_t data_len
        int32_t nchildren
        const fx_col *children
    int64_t fx_check_offsets32(const int32_t *offsets, int64_t n, int64_t limit)
    int64_t fx_check_offsets64(const int64_t *offsets, int64_t n, int64_t limit)
    int fx_hash_table_row(fx_sha256_compress_fn fn, const fx_col *cols, int32_t ncols,
                          int64_t row, uint8_t *out)
    ctypedef struct fx_segbuf:
        fx_seg *segs
        int64_t nsegs, cap_segs
        uint8_t *bytes
        int64_t nbytes, cap_bytes
        int64_t row_first_seg
        int full
    int64_t fx_hash_table_rows(int impl, const fx_col *cols, int32_t ncols, int64_t first,
                               int64_t m, fx_segbuf *sb, int64_t *starts, uint8_t *out)

cdef extern from "fx_seen.h" nogil:
    int64_t FX_SEEN_MAX
    ctypedef struct fx_seen:
        int64_t count
    void fx_seen_init(fx_seen *s)
    void fx_seen_free(fx_seen *s)
    int fx_seen_reserve(fx_seen *s, int64_t extra)
    int64_t fx_seen_find(const fx_seen *s, const uint8_t *d)
    int fx_seen_insert_many(fx_seen *s, const uint8_t *digests, int64_t n, uint8_t *is_new)
    const uint8_t *fx_seen_get(const fx_seen *s, int64_t index)
    size_t fx_seen_nbytes(const fx_seen *s)

cdef extern from "fx_pack.h" nogil:
    int FX_PACK_BFD, FX_PACK_FFD, FX_PACK_FF, FX_PACK_NF
    int64_t FX_PACK_BFD_MAX_CAPACITY
    int fx_pack_assign(const int64_t *lengths, int64_t n, int64_t capacity, int64_t max_items,
                       int strategy, int allow_overlong,
                       int64_t *order, int64_t *bin_offsets, int64_t *n_bins, int64_t *bad_item)
    int fx_pack_ff_index(const int32_t *lengths, const int64_t *index, int64_t n, int64_t capacity,
                         int64_t max_items, int allow_overlong, const int64_t *progress,
                         int64_t bins_hint, int64_t *order, int64_t *bin_offsets,
                         int64_t *n_bins, int64_t *bad_item)

cdef extern from "fx_perm.h" nogil:
    int64_t FX_RANDPERM_MAX_N
    int fx_randperm_mt19937(uint32_t seed, int64_t n, int64_t count, int64_t *out)
    int fx_randperm_mt19937_progress(uint32_t seed, int64_t n, int64_t count, int64_t *out,
                                     int64_t *progress)
    void fx_mt19937_fill(uint32_t seed, int64_t k, uint32_t *out)

cdef extern from "fx_fill.h" nogil:
    int FX_T_I8, FX_T_I16, FX_T_I32, FX_T_I64, FX_T_U8, FX_T_U16, FX_T_U32, FX_T_U64
    int FX_T_F32, FX_T_F64, FX_T_F16, FX_T_NTYPES
    int fx_type_size(int t)
    int fx_copy_supported(int dt, int st)
    void fx_copy_elems(void *dst, int dt, const void *src, int st, int64_t n)
    void fx_fill_elems(void *dst, int size, const void *pattern, int64_t n)
    void fx_iota_elems(void *dst, int dt, int64_t start, int64_t n)
    void fx_bounds_i32(const int32_t *v, int64_t n, int32_t *lo, int32_t *hi)
    void fx_prefetch_run(const void *p, int64_t bytes)

cdef extern from "fx_json.h" nogil:
    int64_t fx_json_too_deep(const uint8_t *p, int64_t n, int64_t limit)

cdef extern from "fx_rowset.h" nogil:
    int FX_ROWSET_HOT, FX_KEY_GROUP
    int64_t FX_ROWSET_MAX_ENTRIES
    ctypedef struct fx_tab:
        int32_t ncols
        int64_t nchunks
        const int64_t *starts
        const fx_col *cols
    int fx_segbuf_alloc(fx_segbuf *sb, int64_t cap_segs, int64_t cap_bytes)
    void fx_segbuf_release(fx_segbuf *sb)
    int fx_tab_encode(const fx_tab *t, int64_t row, fx_segbuf *sb)
    uint64_t fx_segs_key(const fx_segbuf *sb)
    int64_t fx_tab_keys(const fx_tab *t, const int64_t *rows, int64_t m, fx_segbuf *sbs,
                        uint64_t *keys, uint8_t *status)
    int fx_segs_equal(const fx_segbuf *a, const fx_segbuf *b)
    ctypedef struct fx_rowset:
        int64_t count
        int32_t *src
        int64_t *row
        int64_t compares
        int64_t hot_keys
    void fx_rowset_init(fx_rowset *s)
    void fx_rowset_free(fx_rowset *s)
    int fx_rowset_reserve(fx_rowset *s, int64_t extra)
    size_t fx_rowset_nbytes(const fx_rowset *s)
    int64_t fx_rowset_compare(const fx_rowset *s, const fx_tab *const *srcs, const fx_tab *t,
                              const int64_t *rows, const int64_t *cand, int64_t m, fx_segbuf *sbs,
                              uint8_t *status)
    void fx_rowset_prefetch(const fx_rowset *s, uint64_t key)
    int64_t fx_rowset_head(fx_rowset *s, uint64_t key, int32_t src, int64_t row, int *inserted)
    int64_t fx_rowset_resolve(fx_rowset *s, const fx_tab *const *srcs, uint64_t key, int32_t src,
                              int64_t row, fx_segbuf *mine, fx_segbuf *other,
                              fx_sha256_compress_fn fn)


cdef extern from "fx_arrow_c.h" nogil:
    struct ArrowSchema:
        const char *format
        const char *name
        const char *metadata
        int64_t flags
        int64_t n_children
        ArrowSchema **children
        ArrowSchema *dictionary
        void (*release)(ArrowSchema *)
        void *private_data
    struct ArrowArray:
        int64_t length
        int64_t null_count
        int64_t offset
        int64_t n_buffers
        int64_t n_children
        const void **buffers
        ArrowArray **children
        ArrowArray *dictionary
        void (*release)(ArrowArray *)
        void *private_data
    struct ArrowArrayStream:
        int (*get_schema)(ArrowArrayStream *, ArrowSchema *out)
        int (*get_next)(ArrowArrayStream *, ArrowArray *out)
        const char *(*get_last_error)(ArrowArrayStream *)
        void (*release)(ArrowArrayStream *)
        void *private_data


cdef extern from "fx_sync.h" nogil:
    int64_t fx_acquire_load(const int64_t *p)
    void fx_publish(int64_t *p, int64_t v)
    int64_t fx_wait_progress(const int64_t *p, int64_t k)

cdef extern from "fx_unicode.h" nogil:
    const char *FX_UC_VERSION
    const char *FX_UC_NFC_VERSION
    int FX_UC_L, FX_UC_N, FX_UC_WS, FX_UC_M, FX_UC_CRLF, FX_UC_W
    unsigned fx_uclass(uint32_t cp)
    int fx_nfc_is_quick(const uint8_t *s, size_t n)
    int fx_nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *out_len, size_t *out_cap,
               int64_t **src_of, size_t *src_cap)

cdef extern from "fx_bpe.h" nogil:
    int FX_PRETOK_LLAMA3, FX_PRETOK_QWEN2, FX_PRETOK_GPT2, FX_PRETOK_NONE
    int FX_OFFSETS_NONE, FX_OFFSETS_BYTES, FX_OFFSETS_CHARS
    int FX_BPE_PROBE_PLAIN, FX_BPE_PROBE_AVX2
    ctypedef struct fx_bpe_spec:
        int32_t n_vocab
        const uint8_t *tok_bytes
        const int64_t *tok_off
        int32_t n_merges
        const int32_t *merges
        int32_t n_added
        const uint8_t *added_bytes
        const int64_t *added_off
        const int32_t *added_ids
        const uint8_t *added_flags
        int32_t pretok
        int32_t ignore_merges
        int32_t nfc
        int32_t bos_id
    ctypedef struct fx_bpe:
        pass
    ctypedef struct fx_bpe_cache:
        pass
    ctypedef struct fx_ids:
        int32_t *ids
        int64_t *offsets
        int64_t n
        int64_t cap
        int want_offsets
        int fixed
    fx_bpe *fx_bpe_new(const fx_bpe_spec *spec, int *status, const char **what)
    void fx_bpe_free(fx_bpe *m)
    int32_t fx_bpe_vocab_size(const fx_bpe *m)
    int fx_bpe_set_probe(fx_bpe *m, int level)
    void fx_bpe_cache_stats(const fx_bpe_cache *c, unsigned *bits, unsigned *long_bits,
                            uint64_t *merged)
    fx_bpe_cache *fx_bpe_cache_new()
    void fx_bpe_cache_free(fx_bpe_cache *c)
    void fx_ids_free(fx_ids *out)
    int fx_bpe_encode(const fx_bpe *m, fx_bpe_cache *cache, const uint8_t *s, size_t n,
                      int with_specials, fx_ids *out)
    int fx_bpe_encode_many(const fx_bpe *m, fx_bpe_cache *cache, const uint8_t *data,
                           const int64_t *off, int64_t first, int64_t last, int with_specials,
                           int validate, fx_ids *out, int64_t *counts, int64_t *bad)
    int fx_utf8_valid(const uint8_t *s, size_t n)
    size_t fx_pretok_next(const uint8_t *seg, size_t n, size_t i, int pretok)


cdef extern from "fx_mem.h" nogil:
    int fx_big_fail(int on)

cdef extern from "fx_compat.h" nogil:
    enum: FX_LITTLE

cdef extern from "fx_utf8.h" nogil:
    int64_t fx_ucs_utf8_bound(int kind, int64_t n)
    int64_t fx_ucs_to_utf8(int kind, const void *data, int64_t n, uint8_t *out, int64_t *bad)
    int64_t fx_utf8_count(const uint8_t *s, int64_t n)
    int64_t fx_utf8_skip(const uint8_t *s, int64_t n, int64_t at, int64_t k)

cdef extern from "fx_parquet.h" nogil:
    int64_t FX_PQ_PAGE_BOUND(int64_t rows, int64_t value_bytes)
    int64_t fx_pq_list_page(const int32_t *offsets, int64_t rows, const uint8_t *values,
                            int width, int max_def, int empty_def, uint8_t *out,
                            int64_t *num_values, int64_t *bounds)
