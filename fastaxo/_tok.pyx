# cython: language_level=3
"""Private tokenizer kernels: the byte-level BPE encoder (csrc/), exact against HF tokenizers
0.23.3. For now only the Unicode layer's test hooks (``_tok_unicode.pxi``)."""
from libc.stdint cimport int64_t, uint8_t, uint32_t
from libc.stdlib cimport free

from fastaxo._csrc cimport *

include "_tok_unicode.pxi"
