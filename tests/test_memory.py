"""Memory: hashing holds no copy of the input (at most 32 bytes per row, the digests, plus a constant)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

CHILD = r"""
import json, sys
import numpy as np, pyarrow as pa
import fastaxo
from fastaxo._bench.demo import text_rows, tokenized_table

kind = sys.argv[1]
n = 1_000_000
if kind == "strings":
    data = text_rows(n, 60, seed=1)
elif kind == "tokens":
    data = tokenized_table(n, 0.0, seed=1, mean_tokens=40).column("input_ids")
elif kind == "table":
    data = tokenized_table(n, 0.0, seed=1, mean_tokens=40)
else:
    data = text_rows(n, 60, seed=1).to_pylist()
fastaxo.hash_rows(data[:1000] if isinstance(data, list) else data.slice(0, 1000))  # warm-up: thread pool, code

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
base = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
out = fastaxo.hash_rows(data)
print(json.dumps({"extra": status("VmHWM") - base, "n": len(out)}))
"""


def _clear_refs_works() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")
@pytest.mark.parametrize("kind", ["strings", "tokens", "table", "list"])
def test_extra_memory_hashing_1m_rows_is_the_digests_plus_a_constant(kind):
    if not _clear_refs_works():
        pytest.fail("cannot reset VmHWM via /proc/self/clear_refs on this Linux")
    # cwd="/": never let `python -c` import fastaxo from a source tree in the working directory.
    env = {**os.environ, "FASTAXO_REQUIRE_EXTENSION": "1"}
    r = subprocess.run([sys.executable, "-c", CHILD, kind], capture_output=True, text=True, timeout=300, cwd="/", env=env)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["n"] == 1_000_000
    limit = 32 * res["n"] + 8 * 2**20  # the uint8[n, 32] result + 8 MiB of constant
    assert res["extra"] <= limit, f"{kind}: {res['extra'] / 2**20:.1f} MiB extra > {limit / 2**20:.1f} MiB"
