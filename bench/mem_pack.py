"""Peak memory of fastaxo.pack (1M chat rows) and iter_pack(reuse_buffers=True) over 10M peer
rows, in a fresh process.

    python bench/mem_pack.py chat1m | peer10m
"""

import gc
import sys
import time

import numpy as np
import pyarrow as pa

import fastaxo
from fastaxo._core.proc import reset_peak, status_kib

what = sys.argv[1]
rng = np.random.default_rng(0)
if what == "chat1m":
    n, cap = 1_000_000, 4096
    lens = np.clip(rng.lognormal(5.4, 0.8, n), 1, 4096).astype(np.int64)
else:
    n, cap = 10_000_000, 512
    lens = rng.integers(10, 101, n).astype(np.int64)
offs = np.zeros(n + 1, np.int64)
np.cumsum(lens, out=offs[1:])
vals = rng.integers(0, 32000, int(offs[-1]), dtype=np.int32)
ids = pa.LargeListArray.from_arrays(pa.array(offs), pa.array(vals))
del offs
gc.collect()
base = (status_kib("VmRSS") or 0) * 1024
reset_peak()
t = time.perf_counter()
chunks = 0
if what == "chat1m":
    p = fastaxo.pack(ids, cap, labels=ids)
    out = p.nbytes
else:
    it = fastaxo.iter_pack(ids, cap, labels=ids, chunk_bins=65536, reuse_buffers=True)
    out = 0
    for q in it:
        out += q.nbytes
        chunks += 1
    out_chunk = q.nbytes
el = time.perf_counter() - t
peak = (status_kib("VmHWM") or 0) * 1024 - base
print(f"{what}: input {vals.nbytes/2**30:.2f} GiB, output {out/2**30:.2f} GiB written in {el:.2f} s, "
      f"extra peak {peak/2**30:.3f} GiB"
      + (f", chunks {chunks}, one chunk {out_chunk/2**30:.3f} GiB" if what != "chat1m" else ""))
