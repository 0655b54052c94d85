"""The built-in default dataset: a tokenized, chat-shaped table with exact duplicates.

Deterministic for a given (n_rows, dup_fraction, seed). Shared by the command line's
default run and the benchmarks, so both measure the same kind of data.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def token_lengths(n: int, rng: np.random.Generator, mean: float = 300.0, sigma: float = 0.8,
                  max_len: int = 4096) -> np.ndarray:
    """Lognormal sequence lengths with the given mean, clipped to [1, max_len]."""
    mu = np.log(mean) - sigma**2 / 2
    return np.clip(rng.lognormal(mu, sigma, n), 1, max_len).astype(np.int64)


def token_rows(
    lengths: np.ndarray, rng: np.random.Generator, vocab: int = 32000
) -> pa.LargeListArray | pa.ListArray:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = rng.integers(3, vocab, int(offsets[-1]), dtype=np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))


def tokenized_table(n_rows: int = 100_000, dup_fraction: float = 0.1, seed: int = 0,
                    mean_tokens: float = 300.0) -> pa.Table:
    """An Axolotl-style tokenized table (input_ids, attention_mask, labels; int32 lists).

    ``round(n_rows * dup_fraction)`` rows are exact copies of other rows, at random places;
    the first occurrence of each copied row always comes before its copies.
    """
    rng = np.random.default_rng(seed)
    n_dup = int(round(n_rows * dup_fraction))
    n_unique = n_rows - n_dup
    lengths = token_lengths(n_unique, rng, mean=mean_tokens)
    ids = token_rows(lengths, rng)
    # Order: unique rows in order, with each duplicate inserted after its source.
    src = np.sort(rng.integers(0, max(n_unique, 1), n_dup)) if n_unique else np.zeros(0, np.int64)
    order = np.concatenate([np.arange(n_unique), src])
    pos = np.concatenate([np.arange(n_unique) * 2.0, src * 2.0 + 1 + rng.random(n_dup)])
    order = order[np.argsort(pos, kind="stable")]
    ids = ids.take(pa.array(order))
    offsets = ids.offsets
    values = ids.values.to_numpy()
    # Labels: the first quarter of each row is the prompt (-100), the rest the answer.
    labels = values.copy()
    starts = offsets.to_numpy()[:-1]
    prompt = (np.diff(offsets.to_numpy()) // 4).astype(np.int64)
    mask = np.zeros(len(values) + 1, dtype=np.int32)
    np.add.at(mask, starts, 1)
    np.add.at(mask, starts + prompt, -1)
    labels[np.cumsum(mask[:-1]) > 0] = -100
    ones = np.ones(len(values), dtype=np.int32)
    return pa.table({
        "input_ids": ids,
        "attention_mask": pa.ListArray.from_arrays(offsets, pa.array(ones)),
        "labels": pa.ListArray.from_arrays(offsets, pa.array(labels)),
    })


def text_rows(n_rows: int, mean_bytes: int, seed: int = 0, dup_fraction: float = 0.0) -> pa.Array:
    """n_rows ASCII strings of lognormal length around mean_bytes (string; large_string past 2 GiB).
    """
    rng = np.random.default_rng(seed)
    if mean_bytes <= 0:
        raise ValueError("mean_bytes must be > 0")
    lengths = np.clip(
        rng.lognormal(np.log(mean_bytes) - 0.045, 0.3, n_rows), 1, 16 * mean_bytes
    ).astype(np.int64)
    offsets = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = rng.integers(32, 127, int(offsets[-1]), dtype=np.uint8)
    arr = pa.LargeStringArray.from_buffers(n_rows, pa.py_buffer(offsets), pa.py_buffer(data))
    if offsets[-1] < 2**31:  # string (int32 offsets) where it fits, as most data is
        arr = arr.cast(pa.string())
    if dup_fraction:
        n_dup = round(n_rows * dup_fraction)
        idx = np.arange(n_rows)
        idx[rng.choice(np.arange(1, n_rows), n_dup, replace=False)] = rng.integers(
            0, n_rows // 2, n_dup
        )
        arr = arr.take(pa.array(idx))
    return arr


def chat_text(n_rows: int, rng: np.random.Generator, mean_bytes: int = 1200) -> pa.StringArray:
    """n_rows strings of random printable ASCII, lognormal length around mean_bytes."""
    lengths = np.clip(
        rng.lognormal(np.log(mean_bytes) - 0.045, 0.3, n_rows), 1, 16 * mean_bytes
    ).astype(np.int64)
    total = int(lengths.sum())
    offsets = np.zeros(n_rows + 1, dtype=np.int32 if total < 2**31 else np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = rng.integers(32, 127, total, dtype=np.uint8)
    cls = pa.StringArray if offsets.dtype == np.int32 else pa.LargeStringArray
    return cls.from_buffers(n_rows, pa.py_buffer(offsets), pa.py_buffer(data))


def chat_batches(n_rows: int, seed: int = 0, chunk_rows: int = 65_536, mean_tokens: float = 300.0,
                 mean_text_bytes: int = 1200):
    """Chat-shaped rows, streamed in tables of ``chunk_rows``: ``id`` (int64), ``text`` (string,
    ~1.2 kB of random printable ASCII) and ``input_ids`` (list<int32>, lognormal ~300 tokens).

    Deterministic for (n_rows, seed, chunk_rows): chunk k draws from its own seeded generator,
    so a file of any size is made in bounded memory.
    """
    for k, start in enumerate(range(0, n_rows, chunk_rows)):
        n = min(chunk_rows, n_rows - start)
        rng = np.random.default_rng([seed, k])
        ids = token_rows(token_lengths(n, rng, mean=mean_tokens), rng)
        yield pa.table({
            "id": pa.array(np.arange(start, start + n, dtype=np.int64)),
            "text": chat_text(n, rng, mean_text_bytes),
            "input_ids": ids,
        })
