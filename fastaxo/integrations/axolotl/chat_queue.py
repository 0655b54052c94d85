"""Axolotl's multi-process tokenization (``tokenize_with_work_queue``, used when
``dataset_num_proc`` > 1) for chat-template datasets, with Arrow between the processes.

Axolotl's workers return Python lists, which the parent unpickles and converts to Arrow one int
at a time while the workers run: with fastaxo's tokenization that single parent process became
the bottleneck (on 2 cores it used half a core for every token the two workers made). Here each
worker turns its chunk's columns into one Arrow record batch (the token lists flattened in one C
pass), which crosses the process boundary as buffers and is written as it is. Everything else is
Axolotl's: the chunking, the fork pool and its initializer, the fingerprint and cache file, the
writer's batch size, the messages and errors. The rows, their order and the column types are
Axolotl's (tests/test_chat_axolotl.py compares prepared datasets).
"""

from __future__ import annotations

import os
import tempfile
from collections import deque
from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow
from fastaxo._core.ragged import lists_to_values
from fastaxo.integrations.axolotl.settings import current

__all__ = ["make_tokenize_with_work_queue"]


def make_tokenize_with_work_queue(original: Any) -> Any:
    """``axolotl.datasets.tokenize_with_work_queue`` with Arrow record batches between the
    processes for a ``ChatTemplateStrategy`` fastaxo tokenizes; Axolotl's own otherwise."""

    def tokenize_with_work_queue(prompt_tokenizer: Any, dataset: Any, num_proc: int,
                                 keep_in_memory: bool | None = False) -> Any:
        from fastaxo.integrations.axolotl.chat import engine_for

        if not current().chat_template or engine_for(prompt_tokenizer) is None:
            return original(prompt_tokenizer, dataset, num_proc, keep_in_memory=keep_in_memory)
        return _tokenize(prompt_tokenizer, dataset, num_proc, keep_in_memory)

    tokenize_with_work_queue.__wrapped__ = original  # type: ignore[attr-defined]
    tokenize_with_work_queue.__doc__ = original.__doc__
    return tokenize_with_work_queue


# datasets' ArrowWriter stores these columns of Python ints in a narrower type when every value
# fits (OptimizedTypedSequence); the record batches must come out as Axolotl's lists would
_NARROW = {"attention_mask": np.int8, "special_tokens_mask": np.int8, "input_ids": np.int32,
           "token_type_ids": np.int8}


def _record_batch(result: dict[str, list[Any]]) -> pa.RecordBatch | None:
    """A chunk's columns as one record batch, typed as Axolotl's writer types the lists."""
    if not result:
        return None
    cols = {}
    for key, rows in result.items():
        got = lists_to_values(rows) if rows and type(rows[0]) is list else None
        if got is None or isinstance(got[0], str):
            cols[key] = pa.array(rows)  # whatever Axolotl's writer would infer
            continue
        values, lens = got
        narrow = _NARROW.get(key)
        if narrow is not None and values.size:
            info = np.iinfo(narrow)
            if info.min <= values.min() and values.max() <= info.max:
                values = values.astype(narrow)
        elif narrow is not None:
            values = values.astype(narrow)
        cols[key] = arrow.list_array(values, lens)
    return pa.RecordBatch.from_pydict(cols)


def _tokenize_chunk(bounds: tuple[int, int]) -> pa.RecordBatch | None:
    from axolotl.utils.data import work_queue as wq

    if wq._strategy is None or wq._dataset is None:
        raise RuntimeError("tokenization worker was not initialized")
    start, end = bounds
    return _record_batch(wq._strategy.tokenize_prompt(wq._dataset[start:end]) or {})


def _results(executor: Any, chunks: list[tuple[int, int]], num_proc: int) -> Any:
    from concurrent.futures import BrokenExecutor

    from axolotl.utils.data import work_queue as wq

    max_in_flight = max(1, num_proc * wq.MAX_IN_FLIGHT_PER_WORKER)
    remaining = iter(chunks)
    pending: deque[Any] = deque()
    try:
        for bounds in remaining:
            pending.append(executor.submit(_tokenize_chunk, bounds))
            if len(pending) >= max_in_flight:
                break
        while pending:
            result = pending.popleft().result()
            nxt = next(remaining, None)
            if nxt is not None:
                pending.append(executor.submit(_tokenize_chunk, nxt))
            yield result
    except BrokenExecutor as exc:
        raise RuntimeError(
            "A tokenization worker died unexpectedly (possibly OOM-killed). "
            "Set dataset_num_proc: 1 to debug."
        ) from exc


def _tokenize(prompt_tokenizer: Any, dataset: Any, num_proc: int,
              keep_in_memory: bool | None) -> Any:
    # Axolotl 0.21's tokenize_with_work_queue, step for step, with record batches
    from concurrent.futures import ProcessPoolExecutor

    from axolotl.utils.data import work_queue as wq
    from datasets import Dataset
    from datasets.arrow_writer import ArrowWriter
    from datasets.fingerprint import update_fingerprint
    from datasets.utils import tqdm as hf_tqdm

    fingerprint = update_fingerprint(
        dataset._fingerprint, "tokenize_with_work_queue",
        {"function": prompt_tokenizer.tokenize_prompt,
         "batched": prompt_tokenizer.supports_batched})
    cache_file = (dataset._get_cache_file_path(fingerprint)
                  if not keep_in_memory and dataset.cache_files else None)
    if cache_file and os.path.exists(cache_file):
        wq.LOG.info(f"Loading cached tokenized dataset at {cache_file}")
        return Dataset.from_file(cache_file, split=dataset.split)
    writer_kwargs: dict[str, Any] = {"fingerprint": fingerprint}
    buf_writer = None
    tmp_path = None
    if cache_file:
        wq.LOG.info(f"Caching tokenized dataset at {cache_file}")
        cache_dir = os.path.dirname(cache_file)
        os.makedirs(cache_dir, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=cache_dir, delete=False) as tmp:
            tmp_path = tmp.name
        writer_kwargs["path"] = tmp_path
    else:
        buf_writer = pa.BufferOutputStream()
        writer_kwargs["stream"] = buf_writer
    chunks = wq._chunk_bounds(len(dataset), num_proc)
    wq.LOG.info(f"Tokenizing {len(dataset)} examples with {num_proc} workers "
                f"({len(chunks)} chunks, fastaxo's chat path)")
    prev = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        writer = ArrowWriter(**writer_kwargs)
        try:
            with ProcessPoolExecutor(num_proc, mp_context=wq._mp_context(),
                                     initializer=wq._init_worker,
                                     initargs=(prompt_tokenizer, dataset)) as executor, \
                    hf_tqdm(total=len(dataset), desc="Tokenizing Prompts",
                            unit=" examples") as pbar:
                buffered: list[pa.RecordBatch] = []
                rows = written = 0
                for (start, end), batch in zip(chunks, _results(executor, chunks, num_proc),
                                               strict=True):
                    if batch is not None and batch.num_rows:
                        if buffered and batch.schema.names != buffered[0].schema.names:
                            raise ValueError(
                                "tokenize_prompt returned inconsistent keys across chunks: "
                                f"{sorted(buffered[0].schema.names)} then "
                                f"{sorted(batch.schema.names)}. Every row must produce the "
                                "same set of columns.")
                        buffered.append(batch)
                        rows += batch.num_rows
                    if rows >= wq.WRITER_BATCH_SIZE:
                        writer.write_table(pa.Table.from_batches(buffered))
                        written += rows
                        buffered, rows = [], 0
                    pbar.update(end - start)
                if buffered:
                    writer.write_table(pa.Table.from_batches(buffered))
                    written += rows
            if not written:
                raise ValueError(
                    "Tokenization produced no rows. Every example was dropped by "
                    "the prompt strategy; check the dataset and its `type:` config.")
            writer.finalize()
        finally:
            writer.close()
    except BaseException:
        if tmp_path:
            os.remove(tmp_path)
        raise
    finally:
        if prev is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = prev
    if cache_file and tmp_path:
        os.replace(tmp_path, cache_file)
        umask = os.umask(0o666)
        os.umask(umask)
        os.chmod(cache_file, 0o666 & ~umask)
        return Dataset.from_file(cache_file, split=dataset.split)
    assert buf_writer is not None
    return Dataset.from_buffer(buf_writer.getvalue(), split=dataset.split)
