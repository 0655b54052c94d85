# cython: language_level=3
"""Private packing and padding kernels: typed memoryviews in, GIL released, prange over bins/rows.

The public API is :mod:`fastaxo.packing` and :mod:`fastaxo.padding`; they validate and allocate.
This module trusts them for types but re-checks every invariant that protects memory (output
sizes, row widths) and reports a violation instead of writing out of bounds.
"""
from cython.parallel cimport prange, threadid
from libc.stdint cimport INT64_MAX, int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t
from libc.string cimport memcmp, memcpy, memset
from cpython.list cimport PyList_GET_SIZE, PyList_GET_ITEM, PyList_New, PyList_SET_ITEM
from cpython.tuple cimport PyTuple_GET_SIZE, PyTuple_GET_ITEM
from cpython.long cimport PyLong_Check, PyLong_AsLongLong
from cpython.ref cimport PyObject, Py_INCREF
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_C_CONTIGUOUS, PyBUF_ND
from cpython.mem cimport PyMem_Malloc, PyMem_Free
cimport numpy as cnp

import numpy as np

cnp.import_array()

from fastaxo._csrc cimport *

# Kinds of output column (what a row's tokens become).
cdef enum:
    K_COPY = 0      # the source tokens, converted to the output type
    K_POS = 1       # 0, 1, 2, ... per sequence
    K_SEG = 2       # the sequence's 1-based index within its bin (segment ids)
    K_ONE = 3       # 1

KIND_COPY = K_COPY
KIND_POS = K_POS
KIND_SEG = K_SEG
KIND_ONE = K_ONE

# Element type codes of csrc/fx_fill.h, by NumPy dtype.
TYPE_CODES = {
    np.dtype("int8"): FX_T_I8, np.dtype("int16"): FX_T_I16, np.dtype("int32"): FX_T_I32,
    np.dtype("int64"): FX_T_I64, np.dtype("uint8"): FX_T_U8, np.dtype("uint16"): FX_T_U16,
    np.dtype("uint32"): FX_T_U32, np.dtype("uint64"): FX_T_U64, np.dtype("float16"): FX_T_F16,
    np.dtype("float32"): FX_T_F32, np.dtype("float64"): FX_T_F64,
}

STRATEGIES = {"bfd": FX_PACK_BFD, "ffd": FX_PACK_FFD, "ff": FX_PACK_FF, "nf": FX_PACK_NF}
BFD_MAX_CAPACITY = FX_PACK_BFD_MAX_CAPACITY
OK = FX_OK
EOVERLONG = FX_EOVERLONG

# Below this many output elements a thread team costs more than it saves.
cdef int64_t PAR_MIN_ELEMS = 1 << 18
# Entries ahead whose source tokens are prefetched while copying (bin order is random in the
# source, so every entry would start with a cache miss).
cdef int64_t PREFETCH_AHEAD = 4


def set_prefetch_ahead(int64_t n):
    """Entries ahead to prefetch while copying (0 = none); returns the previous value.
    A tuning knob for benchmarks."""
    global PREFETCH_AHEAD
    old = PREFETCH_AHEAD
    PREFETCH_AHEAD = n
    return old


def copy_supported(int dt, int st):
    """True when values of type code ``st`` can be written as type code ``dt``."""
    return bool(fx_copy_supported(dt, st))


include "_status.pxi"
include "_pack_bins.pxi"
include "_pack_fill.pxi"
include "_pack_chat.pxi"
include "_pack_text.pxi"
include "_pack_render.pxi"
include "_pack_locate.pxi"
include "_pack_parquet.pxi"
