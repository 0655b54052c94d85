"""Sample packing: which sequences share a packed row (:func:`pack_bins`), and the packed rows
themselves (:func:`pack`, :func:`iter_pack`).

Sequences arrive as whole ragged arrays (Arrow list arrays, ``(values, offsets)`` NumPy pairs,
lists of arrays; lists of lists are converted once, the slow path) and leave as rectangular
NumPy arrays, zero-copy to torch with ``torch.from_numpy``. Bin assignment runs in C with the
GIL released (independent groups in parallel); materialisation copies every token exactly once,
in parallel over bins.

Losslessness: every token of every input row is in exactly one bin, in order within its
sequence, with its labels beside it. The only exceptions are the explicit ``overflow`` options
for sequences longer than the capacity, and each one is counted in :class:`PackStats`.
"""

from fastaxo.packing.bins import (
    BFD_MAX_CAPACITY,
    OVERFLOW_MODES,
    STRATEGIES,
    Bins,
    PackStats,
    pack_bins,
)
from fastaxo.packing.rows import Packed, PackedRows, PackIterator, iter_pack, pack

__all__ = ["pack_bins", "pack", "iter_pack", "Bins", "PackStats", "Packed", "PackedRows",
           "PackIterator", "STRATEGIES", "OVERFLOW_MODES", "BFD_MAX_CAPACITY"]
