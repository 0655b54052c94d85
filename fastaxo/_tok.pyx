# cython: language_level=3
"""Private tokenizer kernels: the byte-level BPE encoder (csrc/fx_bpe.h), exact against HF
tokenizers 0.23.3, and its Unicode layer's test hooks. The public API is
:mod:`fastaxo.tokenizer`."""
from cython.parallel cimport prange, threadid
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF

from fastaxo._csrc cimport *

include "_status.pxi"
include "_tok_unicode.pxi"
include "_tok_bpe.pxi"
