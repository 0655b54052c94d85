# Included by _pack.pyx: bin assignment (fx_pack.h) and torch's RandomSampler order
# replayed (fx_perm.h).

# ---------------------------------------------------------------- bin assignment
def assign(const int64_t[::1] lengths, int64_t capacity, int64_t max_items, int strategy,
           bint allow_overlong, const int64_t[::1] groups, int num_threads):
    """Assign items to bins, each group of items independently (in parallel).

    ``groups`` holds item boundaries (``groups[0] == 0``, ``groups[-1] == n``, non-empty
    groups). Returns ``(status, bad_item, order, bin_offsets, entry_lengths)`` with global
    item indices (``entry_lengths[j] = lengths[order[j]]``); on a non-OK status
    ``bad_item`` is the global index the kernel reported (or -1) and the arrays are None.
    """
    cdef int64_t n = lengths.shape[0]
    cdef int64_t G = groups.shape[0] - 1
    if n == 0:
        return OK, -1, np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, np.int64)
    if G < 1 or groups[0] != 0 or groups[G] != n:
        raise ValueError("groups must run from 0 to len(lengths)")
    cdef int64_t g, j, s, e, k, total
    for g in range(G):
        if groups[g + 1] <= groups[g]:
            raise ValueError("groups must be non-empty and increasing")
    order_arr = np.empty(n, np.int64)
    elen_arr = np.empty(n, np.int64)
    # group g writes its bin offsets at scratch[groups[g] + g ...] (at most its item count + 1)
    scratch_arr = np.empty(n + G + 1, np.int64)
    nb_arr = np.zeros(G, np.int64)
    bad_arr = np.full(G, -1, np.int64)
    st_arr = np.zeros(G, np.int32)
    cdef int64_t[::1] order = order_arr
    cdef int64_t[::1] elen = elen_arr
    cdef int64_t[::1] scratch = scratch_arr
    cdef int64_t[::1] nb = nb_arr
    cdef int64_t[::1] bad = bad_arr
    cdef int32_t[::1] st = st_arr
    for g in prange(G, nogil=True, num_threads=num_threads, schedule="dynamic", chunksize=1,
                    use_threads_if=num_threads > 1 and G > 1):
        s = groups[g]
        e = groups[g + 1]
        st[g] = fx_pack_assign(&lengths[s], e - s, capacity, max_items, strategy, allow_overlong,
                               &order[s], &scratch[s + g], &nb[g], &bad[g])
        if st[g] == FX_OK:
            for j in range(s, e):
                order[j] = order[j] + s
                elen[j] = lengths[order[j]]
    status, bad_item, offsets_arr = _group_results(st, bad, nb, scratch, &groups[0], 0, G, n)
    if status != FX_OK:
        return status, bad_item, None, None, None
    return OK, -1, order_arr, offsets_arr, elen_arr


cdef tuple _group_results(const int32_t[::1] st, const int64_t[::1] bad, const int64_t[::1] nb,
                          const int64_t[::1] scratch, const int64_t *starts, int64_t step,
                          int64_t G, int64_t n):
    """After G groups were packed: ``(status, bad item, bin offsets)``. Group g's items start at
    ``starts[g]`` (or ``g * step`` when ``starts`` is NULL) and its kernel wrote its local bin
    offsets at ``scratch[start + g ...]``; the first failed group's status and global bad item
    win, else the offsets of all bins, global."""
    cdef int64_t g, j, k, s, total = 0
    for g in range(G):
        s = starts[g] if starts is not NULL else g * step
        if st[g] != FX_OK:
            return int(st[g]), (int(bad[g] + s) if bad[g] >= 0 else -1), None
        total += nb[g]
    offsets_arr = np.empty(total + 1, np.int64)
    cdef int64_t[::1] offsets = offsets_arr
    with nogil:
        k = 0
        for g in range(G):
            s = starts[g] if starts is not NULL else g * step
            for j in range(nb[g]):
                offsets[k] = scratch[s + g + j] + s
                k += 1
        offsets[total] = n
    return FX_OK, -1, offsets_arr


cdef object _take(object buf, int64_t need):
    """``buf`` if it is an int64 array of at least ``need`` entries, else a new one."""
    if buf is not None and buf.dtype == np.int64 and buf.ndim == 1 and buf.flags.c_contiguous \
            and buf.flags.writeable and buf.shape[0] >= need:
        return buf
    return np.empty(max(need, 1), np.int64)


def ff_in_order(const int32_t[::1] lengths, object index, uint64_t seed, int64_t count,
                int64_t capacity, int64_t max_items, bint allow_overlong, int64_t group_size,
                int64_t bins_hint, int num_threads, object work=None, object out=None):
    """First fit over rows of ``lengths`` taken in an order, in groups of ``group_size`` items
    packed independently (the bins of ``assign(lengths[order], ..., FF)``), with row ids out.

    The order is ``index`` (int64 row ids, each in [0, len(lengths)): the caller checks), or,
    when ``index`` is None, ``count`` entries of torch's RandomSampler stream from a fresh
    generator seeded with ``seed`` (csrc/fx_perm.h). With one group and >= 2 threads the
    shuffle runs on one thread while the other packs behind it (csrc/fx_sync.h). Lengths
    must be >= 0 (the caller checks). ``bins_hint``: expected bins per group (0: unknown).

    ``work``: an optional list of reusable int64 scratch arrays (the shuffle's buffer and the
    bin offsets' scratch): an entry too small or missing is replaced by a new array in the
    list, so a caller that keeps the list does not fault in fresh pages on every call (memory
    freed and taken again costs ~1 ms per MiB on some VMs). ``out``: an optional int64 array
    of at least the item count for the ids (its first entries are used).

    Returns ``(status, bad_item, ids, bin_offsets)``: ``ids`` the row ids grouped by bin,
    ``bin_offsets`` nb + 1 entries; on a non-OK status ``bad_item`` is the item position the
    kernel reported (or -1) and the arrays are None.
    """
    if work is None:
        work = [None, None]
    elif len(work) < 2:
        work.extend([None] * (2 - len(work)))
    cdef int64_t nrows = lengths.shape[0]
    cdef int64_t n, room, G, g, j, s, e, k, total
    cdef const int64_t[::1] idx_view
    cdef int64_t[::1] perm
    if index is None:
        if nrows < 1 or nrows >= FX_RANDPERM_MAX_N or count < 0:
            raise ValueError(f"ff_in_order: the shuffle needs 1 <= len(lengths) < "
                             f"{FX_RANDPERM_MAX_N} and count >= 0, got {nrows} rows, "
                             f"count {count}")
        n = count
        room = ((count + nrows - 1) // nrows) * nrows
        work[0] = _take(work[0], room)
        perm = work[0]
    else:
        idx_view = index
        n = idx_view.shape[0]
    if n == 0:
        return OK, -1, np.empty(0, np.int64), np.zeros(1, np.int64)
    if group_size < 1:
        raise ValueError("group_size must be >= 1")
    G = (n + group_size - 1) // group_size
    ids_arr = _take(out, n)[:n]
    # group g writes its bin offsets at scratch[g * group_size + g ...] (at most its item count + 1)
    work[1] = _take(work[1], n + G + 1)
    scratch_arr = work[1]
    nb_arr = np.zeros(G, np.int64)
    bad_arr = np.full(G, -1, np.int64)
    st_arr = np.zeros(G, np.int32)
    cdef int64_t[::1] ids = ids_arr
    cdef int64_t[::1] scratch = scratch_arr
    cdef int64_t[::1] nb = nb_arr
    cdef int64_t[::1] bad = bad_arr
    cdef int32_t[::1] st = st_arr
    cdef const int64_t *src
    cdef int64_t progress = 0
    cdef int t
    cdef uint32_t s32 = <uint32_t>(seed & 0xffffffffu)
    # the shuffle beside the packer pays only on big inputs: below ~4M rows it gained nothing
    # on an idle 2-core VM and, with the other core busy, cost up to 5x (bench_contention.py)
    cdef bint pipeline = index is None and G == 1 and num_threads > 1 and count >= (1 << 22)
    if index is None:
        src = &perm[0]
        if pipeline:
            # task 0 shuffles, task 1 packs behind it; on one thread (no OpenMP) they run in
            # that order, so the packer never waits for a shuffle that has not started
            for t in prange(2, nogil=True, num_threads=2, schedule="static", chunksize=1):
                if t == 0:
                    fx_randperm_mt19937_progress(s32, nrows, count, &perm[0], &progress)
                else:
                    st[0] = fx_pack_ff_index(&lengths[0], src, n, capacity, max_items,
                                             allow_overlong, &progress, bins_hint, &ids[0],
                                             &scratch[0], &nb[0], &bad[0])
        else:
            with nogil:
                fx_randperm_mt19937(s32, nrows, count, &perm[0])
    else:
        src = &idx_view[0]
    if not pipeline:
        for g in prange(G, nogil=True, num_threads=num_threads, schedule="dynamic", chunksize=1,
                        use_threads_if=num_threads > 1 and G > 1):
            s = g * group_size
            e = min(s + group_size, n)
            st[g] = fx_pack_ff_index(&lengths[0], src + s, e - s, capacity, max_items,
                                     allow_overlong, NULL, bins_hint, &ids[s], &scratch[s + g],
                                     &nb[g], &bad[g])
    status, bad_item, offsets_arr = _group_results(st, bad, nb, scratch, NULL, group_size, G, n)
    if status != FX_OK:
        return status, bad_item, None, None
    return OK, -1, ids_arr, offsets_arr


RANDPERM_MAX_N = FX_RANDPERM_MAX_N


def randperm_mt19937(uint64_t seed, int64_t n, int64_t count):
    """What ``list(RandomSampler(range(n), num_samples=count))`` yields from a fresh torch
    generator seeded with ``seed``, as an int64 array (csrc/fx_perm.h). 1 <= n < RANDPERM_MAX_N."""
    if n < 1 or n >= FX_RANDPERM_MAX_N or count < 0:
        raise ValueError(f"randperm_mt19937: n must be in [1, {FX_RANDPERM_MAX_N}) and count >= 0, "
                         f"got n={n}, count={count}")
    cdef int64_t room = ((count + n - 1) // n) * n
    out = np.empty(room, dtype=np.int64)
    cdef int64_t[::1] o = out
    cdef int64_t *p = &o[0] if room else NULL
    cdef uint32_t s32 = <uint32_t>(seed & 0xffffffffu)
    with nogil:
        if room:
            fx_randperm_mt19937(s32, n, count, p)
    return out[:count]


def mt19937_fill(uint64_t seed, int64_t k):
    """The first k outputs of MT19937 seeded by init_genrand(seed & 0xffffffff) (tests)."""
    out = np.empty(max(k, 0), dtype=np.uint32)
    cdef uint32_t[::1] o = out
    if k > 0:
        fx_mt19937_fill(<uint32_t>(seed & 0xffffffffu), k, &o[0])
    return out
