"""Private packing and padding kernels (fastaxo._pack). The public API is fastaxo.packing and
fastaxo.padding; these trust their callers for types but re-check memory invariants."""

from collections.abc import Callable
from typing import Any

import numpy as np

KIND_COPY: int
KIND_POS: int
KIND_SEG: int
KIND_ONE: int
TYPE_CODES: dict[np.dtype[Any], int]
STRATEGIES: dict[str, int]
BFD_MAX_CAPACITY: int
OK: int
EOVERLONG: int
STATUS: dict[str, int]

def status_name(status: int) -> str: ...

def set_prefetch_ahead(n: int) -> int: ...
def copy_supported(dt: int, st: int) -> bool: ...
def assign(
    lengths: np.ndarray, capacity: int, max_items: int, strategy: int, allow_overlong: bool,
    groups: np.ndarray, num_threads: int,
) -> tuple[int, int, np.ndarray | None, np.ndarray | None, np.ndarray | None]: ...
def ff_in_order(
    lengths: np.ndarray, index: np.ndarray | None, seed: int, count: int, capacity: int,
    max_items: int, allow_overlong: bool, group_size: int, bins_hint: int, num_threads: int,
    work: list[np.ndarray | None] | None = ..., out: np.ndarray | None = ...,
) -> tuple[int, int, np.ndarray | None, np.ndarray | None]: ...
RANDPERM_MAX_N: int

def randperm_mt19937(seed: int, n: int, count: int) -> np.ndarray: ...
def mt19937_fill(seed: int, k: int) -> np.ndarray: ...
def row_ptrs(
    rows: list[np.ndarray], dtype: np.dtype[Any]
) -> tuple[np.ndarray, np.ndarray] | None: ...
def source_ptrs(
    rows: np.ndarray | None, n: int, starts: np.ndarray | None, lens: np.ndarray,
    chunks: list[tuple[np.ndarray, np.ndarray]], chunk_base: np.ndarray, itemsize: int,
    num_threads: int,
) -> np.ndarray: ...
def fill_bins(
    out: np.ndarray, dt: int, width: int, flat_base: np.ndarray | None, eoff: np.ndarray,
    src: np.ndarray | None, lens: np.ndarray, st: int, kind: int, pad: bytes, num_threads: int,
) -> None: ...
def padded_cu_seqlens(
    eoff: np.ndarray, lens: np.ndarray, width: int, out_dtype: Any
) -> np.ndarray: ...
def pad_fill(
    out: np.ndarray, dt: int, boff: np.ndarray, obase: np.ndarray, widths: np.ndarray,
    src: np.ndarray | None, lens: np.ndarray, st: int, kind: int, left: bool, pad: bytes,
    pad_range: bool, num_threads: int,
) -> None: ...
def pad_list(
    ids: list[np.ndarray], labels: list[np.ndarray] | None, dtype: np.dtype[Any], pad_id: int,
    label_pad_id: int, pad_to_multiple_of: int, left: bool, mask: bool,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None] | None: ...
def lists_to_values(
    rows: list[Any],
) -> tuple[np.ndarray, np.ndarray] | tuple[str, int, int | None, Any]: ...

CHAT_TRAIN_NONE: int
CHAT_TRAIN_TURN: int
CHAT_TRAIN_ALL: int
CHAT_TRAIN_LAST: int

def chat_labels(
    ids: list[int], offsets: Any, spans: np.ndarray, eot_ids: np.ndarray,
    eos_ids: np.ndarray, eot_mode: int, eos_mode: int,
) -> tuple[list[int] | None, int]: ...
def chat_labels_bytes(
    ids: list[int], text: bytes, token_offsets: np.ndarray, token_bytes: np.ndarray,
    spans: np.ndarray, eot_ids: np.ndarray, eos_ids: np.ndarray, eot_mode: int, eos_mode: int,
) -> tuple[list[int] | None, int]: ...
def chat_rows_bytes(
    ids: np.ndarray, id_offsets: np.ndarray, text: bytes | np.ndarray, text_offsets: np.ndarray,
    chars: np.ndarray, spans: np.ndarray, span_offsets: np.ndarray, token_offsets: np.ndarray,
    token_bytes: np.ndarray, eot_ids: np.ndarray, eos_ids: np.ndarray, eot_mode: int,
    eos_mode: int, num_threads: int = ...,
) -> tuple[np.ndarray, np.ndarray]: ...
def pooled_list(values: np.ndarray, pool: list[int]) -> list[int]: ...
def locate_parse(
    text: str, frames: list[str], written: list[list[tuple[int, str]]], max_ends: int,
    budget: int,
) -> list[tuple[int, int, int]] | None: ...
def locate_ways(
    turns: list[dict[str, Any]], last: int, variants: tuple[Callable[[str, bool], str], ...],
) -> list[list[tuple[int, str]]]: ...
def placeholder_spans(
    full: str | bytes, segments: list[tuple[int, int] | None],
    sentinels: tuple[str, ...] | tuple[bytes, ...], cap: int,
    skip_first: bool,
) -> tuple[np.ndarray, list[int]]: ...
def chat_row_offsets(
    ids: np.ndarray, offsets: np.ndarray, spans: np.ndarray, eot_ids: np.ndarray,
    eos_ids: np.ndarray, eot_mode: int, eos_mode: int, pool: list[int] | None = ...,
    arrays: bool = ...,
) -> tuple[list[int] | np.ndarray, list[int] | np.ndarray | None, int]: ...
def json_too_deep(block: memoryview | bytes | bytearray, limit: int) -> int: ...
def render_getattr(
    slow: Callable[[Any, Any], Any], safe: dict[tuple[type, str], bool] | None = ...,
) -> Callable[[Any, Any], Any]: ...
def render_binop(slow: Callable[..., Any], max_chars: int) -> Callable[..., Any]: ...
def render_call(slow: Callable[..., Any], max_chars: int) -> Callable[..., Any]: ...
def parquet_page_bound(rows: int, value_bytes: int) -> int: ...
def parquet_list_page(
    offsets: np.ndarray, values: memoryview | bytes | bytearray | np.ndarray, width: int,
    max_def: int, empty_def: int, out: bytearray | np.ndarray,
) -> tuple[int, int, int | None, int | None]: ...
def int32_bounds(values: np.ndarray, num_threads: int = ...) -> tuple[int, int] | None: ...
