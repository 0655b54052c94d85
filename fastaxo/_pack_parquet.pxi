# Included by _pack.pyx: the body of a Parquet data page of list rows without nulls
# (csrc/fx_parquet.h; fastaxo/pipeline/parquet.py compresses it and writes the file around it).


def parquet_page_bound(int64_t rows, int64_t value_bytes):
    """The most bytes ``parquet_list_page`` writes for ``rows`` rows of ``value_bytes``."""
    if rows < 0 or value_bytes < 0:
        raise ValueError(f"rows and value_bytes must be >= 0, got {rows} and {value_bytes}")
    return FX_PQ_PAGE_BOUND(rows, value_bytes)


def parquet_list_page(const int32_t[::1] offsets, const uint8_t[::1] values, int width,
                      int max_def, int empty_def, uint8_t[::1] out):
    """Writes the uncompressed body of a Parquet DATA_PAGE (v1) for the list rows whose
    ``len(offsets) - 1`` offsets index ``values`` (elements of ``width`` bytes) into ``out``:
    repetition levels, definition levels (``max_def`` a value's, ``empty_def`` an empty
    row's), values PLAIN. Returns (bytes written, level count, smallest value, largest value),
    the values read as signed integers of ``width`` bytes (None, None without a value). GIL
    released."""
    cdef int64_t rows = offsets.shape[0] - 1, n, levels = 0, last
    cdef int64_t bounds[2]
    if rows < 0:
        raise ValueError("offsets must hold at least one entry (rows + 1), got none")
    if width not in (1, 2, 4, 8):
        raise ValueError(f"width must be 1, 2, 4 or 8 bytes, got {width}")
    if not 0 <= empty_def < max_def <= 3:
        raise ValueError(f"levels must satisfy 0 <= empty_def < max_def <= 3, got empty_def="
                         f"{empty_def} and max_def={max_def}")
    last = offsets[rows]
    if offsets[0] < 0 or last < offsets[0]:
        raise ValueError(f"offsets must be >= 0 and end at or after their start, got "
                         f"{offsets[0]}..{last}")
    if last * width > values.shape[0]:
        raise ValueError(f"offsets reach value {last} but values holds "
                         f"{values.shape[0] // width} of {width} bytes")
    if out.shape[0] < FX_PQ_PAGE_BOUND(rows, (last - offsets[0]) * width):
        raise ValueError(f"out holds {out.shape[0]} bytes, fewer than parquet_page_bound("
                         f"{rows}, {(last - offsets[0]) * width})")
    cdef const uint8_t *vp = &values[0] if values.shape[0] else NULL
    with nogil:
        n = fx_pq_list_page(&offsets[0], rows, vp, width, max_def, empty_def, &out[0], &levels,
                            bounds)
    if n < 0:
        raise ValueError("offsets must not decrease, and a page must hold fewer than 2**31 "
                         "levels")
    if last == offsets[0]:
        return n, levels, None, None
    return n, levels, bounds[0], bounds[1]
