"""Private tokenizer kernels (fastaxo._tok): the byte-level BPE encoder and the Unicode
layer's test hooks."""

import numpy as np
import numpy.typing as npt
from typing_extensions import disjoint_base

STATUS: dict[str, int]

def status_name(status: int) -> str: ...

UNICODE_VERSION: str
NFC_UNICODE_VERSION: str
UC_L: int
UC_N: int
UC_WS: int
UC_M: int
UC_CRLF: int
UC_W: int
PROBE_PLAIN: int
PROBE_AVX2: int
OFFSETS_NONE: int
OFFSETS_BYTES: int
OFFSETS_CHARS: int

def _uclass_all() -> bytes: ...
def _nfc_is_quick(s: str) -> bool: ...
def _nfc_utf8(b: bytes, offsets: bool = ...) -> tuple[bytes, list[int] | None]: ...
def _nfc(s: str) -> tuple[str, list[int]]: ...
def _fail_big_allocs(on: bool) -> bool: ...
def utf8_split(
    data: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64], first: int, last: int,
) -> list[bytes] | int: ...
def utf8_join(
    texts: list[str] | tuple[str, ...], out: npt.NDArray[np.uint8] | None = ...,
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None: ...

@disjoint_base
class BPEModel:
    vocab_size: int
    def __init__(self, tok_bytes: npt.ArrayLike, tok_off: npt.ArrayLike, merges: npt.ArrayLike,
                 added_bytes: npt.ArrayLike, added_off: npt.ArrayLike, added_ids: npt.ArrayLike,
                 added_flags: npt.ArrayLike, pretok: int, ignore_merges: bool, nfc: bool,
                 bos_id: int) -> None: ...
    def _probe(self, level: int) -> int: ...
    def clear_cache(self) -> None: ...
    def _cache_stats(self) -> list[tuple[int, int, int]]: ...
    def encode_many(self, data: npt.ArrayLike, offsets: npt.ArrayLike, specials: bool,
                    num_threads: int, mode: int, validate: bool = ...
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]: ...
    def encode_strs(self, texts: list[str] | tuple[str, ...], specials: bool, num_threads: int,
                    mode: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None: ...
