"""prepare's ``wrapped`` strategy (issue 30; TRL's, for pretraining text): each window's
documents back to back, cut every max_length tokens; a document running on into the next row
is a new segment there. Checked against a plain Python reference, with the counts."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastaxo
from fastaxo.errors import InvalidInputError

I32 = pa.list_(pa.int32())


def _reference(docs, labels, L, window):
    """Plain Python: per window of ``window`` documents, the tokens back to back cut every L;
    positions and segment ids restart at each document and at each row."""
    rows = {"input_ids": [], "labels": [], "position_ids": [], "attention_mask": [],
            "seq_lengths": [], "standard_labels": []}
    cut = pieces = 0
    for w in range(0, len(docs), window):
        stream = []  # (token, label, document)
        for d in range(w, min(w + window, len(docs))):
            stream += [(t, lab, d) for t, lab in zip(docs[d], labels[d])]
        for r in range(0, len(stream), L):
            row = stream[r:r + L]
            rows["input_ids"].append([t for t, _, _ in row])
            rows["labels"].append([lab for _, lab, _ in row])
            pos, seg, last = [], [], None
            for _, _, d in row:
                if d != last:
                    seg.append((seg[-1] if seg else 0) + 1)
                    pos.append(0)
                else:
                    seg.append(seg[-1])
                    pos.append(pos[-1] + 1)
                last = d
            rows["position_ids"].append(pos)
            rows["attention_mask"].append(seg)
            rows["seq_lengths"].append([seg.count(k) for k in range(1, seg[-1] + 1)])
            # the standard layout: -100 on each segment's first token
            rows["standard_labels"].append([-100 if p == 0 else lab
                                            for p, (_, lab, _) in zip(pos, row)])
        start = 0
        for d in range(w, min(w + window, len(docs))):
            inside = sum(1 for b in range(L, len(stream), L) if start < b < start + len(docs[d]))
            cut += inside > 0
            pieces += inside + 1 if inside else 0
            start += len(docs[d])
    return rows, cut, pieces


def _docs(lengths, seed):
    rng = np.random.default_rng(seed)
    docs = [rng.integers(0, 50_000, n).tolist() for n in lengths]
    return docs, [[-100] + d[1:] for d in docs]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=60), st.integers(1, 16),
       st.integers(1, 25), st.integers(0, 2**31), st.sampled_from(["standard", "axolotl"]))
def test_wrapped_equals_the_reference(tmp_path_factory, lengths, L, window, seed, layout):
    tmp = tmp_path_factory.mktemp("w")
    docs, labels = _docs(lengths, seed)
    pq.write_table(pa.table({"input_ids": pa.array(docs, I32), "labels": pa.array(labels, I32)}),
                   tmp / "in.parquet", row_group_size=7)
    rep = fastaxo.prepare(str(tmp / "in.parquet"), str(tmp / "out.parquet"), L,
                          strategy="wrapped", pack_window=window, dedupe=False, batch_rows=5,
                          progress=False, layout=layout)
    got = pq.read_table(tmp / "out.parquet")
    want, cut, pieces = _reference(docs, labels, L, window)
    if layout == "standard":
        want["labels"] = want.pop("standard_labels")
        del want["attention_mask"]
    else:
        del want["standard_labels"], want["seq_lengths"]
    assert got.column_names == list(want)
    for name, rows in want.items():
        assert got.column(name).to_pylist() == rows, name
    total = sum(lengths)
    assert (rep.tokens_out, rep.rows_packed, rep.bins) == (total, len(docs), got.num_rows)
    assert (rep.split, rep.split_pieces) == (cut, pieces)
    assert rep.overlong == sum(1 for n in lengths if n > L)
    assert rep.efficiency == pytest.approx(total / (rep.bins * L))


def test_wrapped_on_the_command_line_and_its_refusal(tmp_path):
    docs, labels = _docs([30, 5, 70, 12, 40], 1)
    pq.write_table(pa.table({"input_ids": pa.array(docs, I32)}), tmp_path / "in.parquet")
    r = subprocess.run([sys.executable, "-m", "fastaxo", "prepare", str(tmp_path / "in.parquet"),
                        "-o", str(tmp_path / "o.parquet"), "--max-length", "32",
                        "--strategy", "wrapped"], capture_output=True, text=True, cwd="/",
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "documents run on into the next row" in r.stdout
    got = pq.read_table(tmp_path / "o.parquet").column("input_ids").to_pylist()
    assert [len(x) for x in got] == [32, 32, 32, 32, 29]
    assert [t for row in got for t in row] == [t for d in docs for t in d]
    with pytest.raises(InvalidInputError, match="overflow='truncate' does not apply"):
        fastaxo.prepare(str(tmp_path / "in.parquet"), str(tmp_path / "x.parquet"), 32,
                        strategy="wrapped", overflow="truncate", progress=False)
