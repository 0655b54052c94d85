"""fastaxo on Ray: exact dedupe across a whole corpus and packing, on a Ray cluster.

Install with ``pip install 'fastaxo[ray]'``, then::

    from fastaxo.integrations.ray import prepare
    report = prepare(["data/*.parquet"], "packed/", 4096, address="auto")   # or a ray.data.Dataset

The result is what :func:`fastaxo.prepare` writes for the same input, split into shards: the
same kept rows (the first occurrence of each distinct row in the global order: files in the
order given, rows in file order; for a ``ray.data.Dataset``, its row order), the same windows of
``pack_window`` kept rows, packed the same way, so the shards ``part-00000.parquet``,
``part-00001.parquet``, ... read one after another hold exactly the rows of the single-machine
output file (window w is shard w). ``fastaxo.iter_batches("packed/")`` reads them in that
order; so does Axolotl's loader.

Stages (the driver holds unit descriptors, counts and object references, never rows):

1. **units**: the input cut into runs of consecutive rows in the global order: Parquet files
   by whole row groups (about ``unit_rows`` rows a unit, from the footers), other formats a
   file a unit, a ``ray.data.Dataset`` block by block (materialized, in its order). Row ``r``
   of unit ``u`` has the key ``u << 32 | r``, so keys sort in the global order.
2. **scan** (``ray.data`` ``map_batches``, one unit a batch): each unit is read, checked and cast
   as ``fastaxo prepare`` does (errors name the file and row), tokenized when a tokenizer is
   given (raw text, or chat data with its template: the same ``input_ids`` and ``labels``,
   fallbacks and rows over ``max_row_bytes`` counted), and every non-empty row hashed with
   fastaxo's SHA-256 kernel over the dedupe columns (the digests of the single-machine
   :class:`fastaxo.Seen`). Out: one small row per input
   row: digest (32 bytes), key, length, and the digest's partition.
3. **dedupe** (a shuffle keyed on the digest, in Ray tasks over the scan's blocks): each block
   is split into ``partitions`` by digest; one task per partition sees every copy of its
   digests and keeps the smallest key of each (the first occurrence in the global order),
   split by bucket (runs of units holding about ``pack_window`` rows); one task per bucket
   merges and sorts its kept keys. Memory per task: a partition's digests and keys (40 bytes a
   row) or a bucket's keys (8 bytes a kept row). With ``dedupe=False`` every non-empty row is
   kept (the same tasks, no digest comparison).
4. **pack** (Ray tasks, one per window): window w = kept rows ``[w * pack_window, (w + 1) *
   pack_window)`` of the global order. The task reads the units that hold them, takes those
   rows, packs them with ``fastaxo prepare``'s packer and writes shard w under a temporary name,
   renamed when complete (a retried task rewrites the same bytes; a half-written shard is
   never visible under its final name). Windows are independent: they run in parallel.

Each task sets fastaxo's thread count to the CPUs it reserves (``num_cpus_per_task``), so the
kernels, which release the GIL, use them without oversubscribing a node. Ray retries a task
whose worker died; every task here is a pure function of its inputs, so a retry gives the same
output: nothing lost, nothing doubled.
"""

from __future__ import annotations

try:
    import ray
    import ray.data  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "fastaxo.integrations.ray needs Ray Data: pip install 'fastaxo[ray]' "
        f"(or pip install 'ray[data]') ({exc})"
    ) from exc

from fastaxo.integrations.ray.driver import (
    DEFAULT_UNIT_ROWS,
    MANIFEST,
    RayPrepareReport,
    prepare,
)

__all__ = ["prepare", "RayPrepareReport", "DEFAULT_UNIT_ROWS", "MANIFEST"]
