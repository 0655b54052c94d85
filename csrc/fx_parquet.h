/* fx_parquet: the body of a Parquet data page for a column of list rows without nulls.
 *
 * pyarrow's writer spends most of its time on list columns making their repetition and
 * definition levels, one per value, then encoding them. For lists without nulls the levels
 * are known from the offsets alone: a row of n values has repetition levels 0, 1 x (n - 1)
 * and definition levels max_def x n; an empty row has one level each (0 and empty_def). So a
 * page's levels are a few RLE runs per row, written straight from the offsets, and its values
 * are one copy. fastaxo/pipeline/parquet.py compresses the page and writes the file around it.
 *
 * Page layout (Parquet DATA_PAGE, format v1, before compression): the repetition levels, the
 * definition levels, each as a 4-byte little-endian length and the RLE/bit-packed hybrid of
 * bit width 1 and 2 (here only RLE runs: a varint run header `count << 1`, then the value in
 * one byte), then the values PLAIN (little-endian, `width` bytes each).
 * fastaxo/_reference/parquet.py, the Python twin, writes the same bytes.
 */
#ifndef FX_PARQUET_H
#define FX_PARQUET_H

#include <stdint.h>

/* At most the bytes fx_pq_list_page writes for `rows` rows whose values take `value_bytes`:
 * per row at most two runs in each level stream, a run at most 6 bytes (counts < 2^31). */
#define FX_PQ_PAGE_BOUND(rows, value_bytes) (8 + 24 * (int64_t)(rows) + (int64_t)(value_bytes))

/* Writes the uncompressed body of one data page for rows [0, rows) into `out` (room for
 * FX_PQ_PAGE_BOUND bytes) and returns its length; *num_values gets the page's level count
 * (its values, plus one per empty row). `offsets[0..rows]` index `values` in elements of
 * `width` bytes; max_def is the definition level of a value (3 for an optional list of
 * optional items), empty_def that of an empty list (1 there), both at most 3.
 * `bounds`, if not NULL and the page holds a value, gets the smallest and the largest value
 * (signed integers of `width` bytes), found in the copy's own pass: a writer that narrows a
 * column's type at the end checks the values with them at no extra read.
 * Returns -1, writing nothing, when the offsets decrease, start below 0 or the page would
 * hold 2^31 values or more (Parquet's counts are int32). */
int64_t fx_pq_list_page(const int32_t *offsets, int64_t rows, const uint8_t *values, int width,
                        int max_def, int empty_def, uint8_t *out, int64_t *num_values,
                        int64_t *bounds);

#endif
