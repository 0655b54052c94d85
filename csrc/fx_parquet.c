/* fx_parquet: see fx_parquet.h. */
#include "fx_parquet.h"

#include <string.h>

/* One level stream: equal neighbouring levels join one run; a run is written when the next
 * level differs or the stream ends. */
typedef struct {
    uint8_t *p;
    int64_t count;
    int value;
} runs;

static void run_flush(runs *r)
{
    uint64_t h = (uint64_t)r->count << 1;
    if (r->count == 0)
        return;
    while (h >= 0x80) {
        *r->p++ = (uint8_t)(h | 0x80);
        h >>= 7;
    }
    *r->p++ = (uint8_t)h;
    *r->p++ = (uint8_t)r->value;
    r->count = 0;
}

static inline void run_add(runs *r, int value, int64_t count)
{
    if (count == 0)
        return;
    if (r->count != 0 && r->value != value)
        run_flush(r);
    r->value = value;
    r->count += count;
}

static inline void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* The values copied PLAIN, their bounds found in the same pass (one read of the values). */
#define FX_PQ_COPY_BOUNDS(T, LO, HI)                                                         \
    do {                                                                                     \
        T mn = HI, mx = LO;                                                                  \
        for (size_t k = 0; k < n; k++) {                                                     \
            T v;                                                                             \
            memcpy(&v, src + k * sizeof(T), sizeof(T));                                      \
            memcpy(dst + k * sizeof(T), &v, sizeof(T));                                      \
            mn = v < mn ? v : mn;                                                            \
            mx = v > mx ? v : mx;                                                            \
        }                                                                                    \
        bounds[0] = mn;                                                                      \
        bounds[1] = mx;                                                                      \
    } while (0)

static void copy_values(uint8_t *dst, const uint8_t *src, size_t n, int width, int64_t *bounds)
{
    if (bounds == NULL || n == 0) {
        if (n)
            memcpy(dst, src, n * (size_t)width);
        return;
    }
    switch (width) {
    case 1: FX_PQ_COPY_BOUNDS(int8_t, INT8_MIN, INT8_MAX); break;
    case 2: FX_PQ_COPY_BOUNDS(int16_t, INT16_MIN, INT16_MAX); break;
    case 4: FX_PQ_COPY_BOUNDS(int32_t, INT32_MIN, INT32_MAX); break;
    default: FX_PQ_COPY_BOUNDS(int64_t, INT64_MIN, INT64_MAX); break;
    }
}

int64_t fx_pq_list_page(const int32_t *offsets, int64_t rows, const uint8_t *values, int width,
                        int max_def, int empty_def, uint8_t *out, int64_t *num_values,
                        int64_t *bounds)
{
    int64_t levels = 0, i;
    runs rep = {0}, def = {0};
    uint8_t *start;

    if (rows < 0 || offsets[0] < 0)
        return -1;
    for (i = 0; i < rows; i++) {
        int64_t n = (int64_t)offsets[i + 1] - offsets[i];
        if (n < 0)
            return -1;
        levels += n ? n : 1;
    }
    if (levels >= INT32_MAX)
        return -1;

    /* Repetition levels: 0 starts a row, 1 continues it. */
    rep.p = out + 4;
    for (i = 0; i < rows; i++) {
        int64_t n = (int64_t)offsets[i + 1] - offsets[i];
        run_add(&rep, 0, 1);
        if (n > 1)
            run_add(&rep, 1, n - 1);
    }
    run_flush(&rep);
    put_le32(out, (uint32_t)(rep.p - (out + 4)));

    /* Definition levels: max_def per value, empty_def per empty row. */
    start = rep.p;
    def.p = start + 4;
    for (i = 0; i < rows; i++) {
        int64_t n = (int64_t)offsets[i + 1] - offsets[i];
        run_add(&def, n ? max_def : empty_def, n ? n : 1);
    }
    run_flush(&def);
    put_le32(start, (uint32_t)(def.p - (start + 4)));

    {
        size_t count = (size_t)((int64_t)offsets[rows] - offsets[0]);
        size_t bytes = count * (size_t)width;
        copy_values(def.p, count ? values + (size_t)offsets[0] * (size_t)width : NULL, count,
                    width, bounds);
        *num_values = levels;
        return (int64_t)(def.p - out) + (int64_t)bytes;
    }
}
