"""fastaxo: fast, memory-bounded data preparation for LLM fine-tuning with Axolotl.

Ragged data stays columnar (Arrow's values + offsets) from disk to C; kernels take whole
arrays per call and release the GIL. ``import fastaxo`` imports numpy and pyarrow only:
never axolotl, torch or transformers.
"""

from fastaxo._core.config import config, show_config
from fastaxo._core.threads import default_num_threads
from fastaxo._version import __version__
from fastaxo.errors import (
    CapacityError,
    ChatTemplateError,
    ColumnNotFoundError,
    FastaxoError,
    FileFormatError,
    InvalidInputError,
    InvalidTypeError,
    KernelError,
    NullValueError,
    RowTooLargeError,
    SchemaMismatchError,
    SequenceTooLongError,
    SourceNotFoundError,
    TemplateLimitError,
    UnsupportedVersionError,
)
from fastaxo.hashing import (
    ROW_ENCODING_VERSION,
    DedupeResult,
    RowSet,
    Seen,
    dedupe,
    hash_rows,
    iter_dedupe,
)
from fastaxo.packing import Bins, Packed, PackIterator, PackStats, iter_pack, pack, pack_bins
from fastaxo.padding import Padded, PaddedBatches, pad, pad_batches
from fastaxo.pipeline import PrepareReport, prepare
from fastaxo.readers import BatchReader, ReaderStats, iter_batches, iter_parquet, list_column
from fastaxo.tokenizer import Tokenizer, UnsupportedTokenizerError

__all__ = [
    "__version__",
    "Tokenizer",
    "UnsupportedTokenizerError",
    "hash_rows",
    "dedupe",
    "iter_dedupe",
    "DedupeResult",
    "Seen",
    "RowSet",
    "ROW_ENCODING_VERSION",
    "pack_bins",
    "pack",
    "iter_pack",
    "Bins",
    "PackStats",
    "Packed",
    "PackIterator",
    "pad",
    "pad_batches",
    "Padded",
    "PaddedBatches",
    "iter_batches",
    "iter_parquet",
    "BatchReader",
    "ReaderStats",
    "list_column",
    "prepare",
    "PrepareReport",
    "show_config",
    "config",
    "default_num_threads",
    "FastaxoError",
    "InvalidInputError",
    "InvalidTypeError",
    "ColumnNotFoundError",
    "NullValueError",
    "CapacityError",
    "SequenceTooLongError",
    "RowTooLargeError",
    "ChatTemplateError",
    "TemplateLimitError",
    "SourceNotFoundError",
    "FileFormatError",
    "SchemaMismatchError",
    "KernelError",
    "UnsupportedVersionError",
]
