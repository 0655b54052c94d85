"""Files that lie, change or kill: a damaged Parquet footer, JSON nested past what pyarrow's
parser survives, an Arrow file truncated under a memory map, an input still being written,
a resume state that is damaged or stale, and inputs that are not what they say. Each one is
a one-line fastaxo error naming the file, never a crash, never a silently different read."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fastaxo._core.backend import child_env

# --------------------------------------------------------------------------- Parquet footers

_MUTANTS_CHILD = r"""
import json, os, random, struct, sys
import fastaxo
from fastaxo.errors import FastaxoError
from fastaxo.readers.parquet import read_footer

src, path = sys.argv[1], sys.argv[2]
data = open(src, "rb").read()
(flen,) = struct.unpack("<I", data[-8:-4])
start = len(data) - 8 - flen
mutants = []
for p in range(start, len(data)):  # the thrift footer, its length and the magic
    for v in sorted({0x00, 0xFF, data[p] ^ 0x01, data[p] ^ 0x80} - {data[p]}):
        mutants.append([(p, v)])
rng = random.Random(27)
for _ in range(300):
    mutants.append([(rng.randrange(start, len(data)), rng.randrange(256)) for _ in range(2)])
print(json.dumps({"mutants": len(mutants)}), flush=True)


def outcome(fn):
    try:
        return {"rows": fn()}
    except Exception as e:  # every kind is reported; the parent judges
        return {"type": type(e).__module__ + "." + type(e).__qualname__,
                "fastaxo": isinstance(e, FastaxoError), "msg": str(e)}


def read(p):
    with fastaxo.iter_batches(p, batch_rows=64) as r:
        return sum(b.num_rows for b in r)


for k, m in enumerate(mutants):
    b = bytearray(data)
    for p, v in m:
        b[p] = v
    with open(path, "wb") as fh:
        fh.write(b)
    print(json.dumps({"k": k, "m": m}), flush=True)  # the last line names a mutant that kills
    print(json.dumps({"k": k, "reader": outcome(lambda: read(path)),
                      "footer": outcome(lambda: sum(read_footer(path)[1]))}), flush=True)
"""


def _footer_source(path) -> int:
    """A small real Parquet file: list, string and nullable number columns in three row
    groups, with the statistics (and, where this pyarrow writes them, the level histograms)
    a footer can lie about. Returns its row count."""
    rng = np.random.default_rng(27)
    n = 300
    ids = [rng.integers(0, 1000, int(k)).tolist() for k in rng.integers(0, 12, n)]
    t = pa.table({
        "input_ids": pa.array(ids, pa.list_(pa.int32())),
        "labels": pa.array([[-100] + x[1:] if x else x for x in ids], pa.list_(pa.int32())),
        "text": pa.array([f"row {i}" if i % 7 else None for i in range(n)]),
        "score": pa.array([float(i) if i % 5 else None for i in range(n)]),
    })
    pq.write_table(t, path, row_group_size=100, write_page_index=True)
    return n


def test_every_footer_mutation_is_rows_or_one_named_error(tmp_path):
    """Every byte of a Parquet footer mutated (a few values each) plus random two-byte flips,
    each read through the reader and prepare's footer read, all in one child process (a
    crash must not take pytest down): every mutant gives rows or a one-line FastaxoError
    naming the file. pyarrow's RowGroupMetaData.column() aborted the process on 6 of 2,381
    one-byte mutations before the reader stopped calling it unguarded."""
    src, path = tmp_path / "src.parquet", tmp_path / "mutant.parquet"
    n = _footer_source(src)
    p = subprocess.run([sys.executable, "-c", _MUTANTS_CHILD, str(src), str(path)],
                       capture_output=True, text=True, cwd="/", env=child_env(), timeout=900)
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert lines and "mutants" in lines[0], p.stderr[-3000:]
    total = lines[0]["mutants"]
    results = [x for x in lines[1:] if "reader" in x]
    last = next((x for x in reversed(lines) if "m" in x), None)
    assert p.returncode == 0, (f"the child died (exit {p.returncode}) on mutant {last}: "
                               f"{p.stderr[-3000:]}")
    assert len(results) == total > 5000
    bad = []
    kinds = {"rows": 0, "errors": 0}
    for r in results:
        for where in ("reader", "footer"):
            o = r[where]
            if "rows" in o:
                kinds["rows"] += 1
                continue
            kinds["errors"] += 1
            one_line = "\n" not in o["msg"].strip()
            if not (o["fastaxo"] and one_line and str(path) in o["msg"]):
                bad.append((r["k"], where, o))
    assert not bad, f"{len(bad)} mutants gave another error: {bad[:5]}"
    # the test can fail: mutants both read and fail, and the intact file reads whole
    assert kinds["rows"] > 100 and kinds["errors"] > 1000, kinds
    intact = subprocess.run(
        [sys.executable, "-c", "import fastaxo, sys; print(sum(b.num_rows for b in "
         "fastaxo.iter_batches(sys.argv[1])))", str(src)],
        capture_output=True, text=True, cwd="/", env=child_env(), timeout=300)
    assert intact.stdout.strip() == str(n), intact.stderr
