"""`fastaxo prepare` / `fastaxo demo`: real files, read back and checked against plain Python."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from collections import Counter

import numpy as np
import packed_io
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastaxo
from fastaxo.pipeline import PrepareReport, prepare

SEQ = 64


def _cli(*args, timeout: int = 300) -> subprocess.CompletedProcess:
    # cwd="/": never import fastaxo from a source tree; the compiled extension must load.
    env = {**os.environ, "FASTAXO_REQUIRE_EXTENSION": "1"}
    return subprocess.run([sys.executable, "-m", "fastaxo", *map(str, args)], capture_output=True, text=True,
                          cwd="/", env=env, timeout=timeout)


def _rows(n: int, seed: int, max_len: int = 60, long_every: int = 0, dup_every: int = 7):
    """(input_ids rows, labels rows) as lists of lists; every dup_every-th row copies an earlier row;
    with long_every, every long_every-th row is longer than SEQ."""
    rng = np.random.default_rng(seed)
    ids, labs = [], []
    for i in range(n):
        if dup_every and i and i % dup_every == 0:
            j = int(rng.integers(0, i))
            ids.append(list(ids[j]))
            labs.append(list(labs[j]))
            continue
        L = int(rng.integers(1, max_len + 1))
        if long_every and i % long_every == 3:
            L = int(rng.integers(SEQ + 1, 3 * SEQ + 5))
        row = rng.integers(0, 50_000, L).tolist()
        ids.append(row)
        labs.append([-100 if k < L // 3 else t for k, t in enumerate(row)])
    return ids, labs


def _write(path, ids, labs, fmt="parquet", row_group_size=100):
    cols = {"input_ids": ids} if labs is None else {"input_ids": ids, "labels": labs}
    if fmt == "parquet":
        t = pa.table({k: pa.array(v, pa.list_(pa.int32())) for k, v in cols.items()})
        pq.write_table(t, path, row_group_size=row_group_size)
    else:
        with open(path, "w") as fh:
            for i in range(len(ids)):
                fh.write(json.dumps({k: v[i] for k, v in cols.items()}) + "\n")
    return str(path)


def _first_occurrences(ids, labs):
    """Plain-Python reference dedupe: hashlib of each row, first occurrence wins."""
    seen, keep = set(), []
    for i in range(len(ids)):
        h = hashlib.sha256(np.asarray(ids[i], np.int64).tobytes())
        if labs is not None:
            h.update(b"|" + np.asarray(labs[i], np.int64).tobytes())
        d = h.digest()
        if d not in seen:
            seen.add(d)
            keep.append(i)
    return keep


def _read_segments(path, seq_len, attention="segments"):
    """Sequences of the packed file (split where position_ids restart), each checked on the way
    (tests/packed_io.py: either layout's promises, no row over seq_len)."""
    return packed_io.sequences(path, seq_len, attention)


def _expected_segments(ids, labs, keep, overflow, C=SEQ, layout="standard"):
    """The sequences prepare must write (as ``layout`` holds them: packed_io.as_packed)."""
    out = []
    for i in keep:
        row, lab = ids[i], (labs[i] if labs is not None else None)
        L = len(row)
        if L <= C:
            pieces = [(0, L)]
        elif overflow == "truncate":
            pieces = [(0, C)]
        elif overflow == "drop":
            pieces = []
        else:  # split
            pieces = [(a, min(a + C, L)) for a in range(0, L, C)]
        for a, b in pieces:
            out.append((tuple(row[a:b]), tuple(lab[a:b]) if lab is not None else None))
    return packed_io.as_packed(out, layout)


def _check_report(rep: PrepareReport, table: pa.Table, segs, C=SEQ):
    tokens = sum(len(s[0]) for s in segs)
    assert rep.bins == table.num_rows
    assert rep.tokens_out == tokens
    assert rep.sequences_out == len(segs)
    assert rep.lower_bound == math.ceil(tokens / C)
    assert rep.efficiency == pytest.approx(tokens / (rep.bins * C))
    assert rep.bins >= rep.lower_bound
    assert rep.rows_per_s > 0 and rep.tokens_per_s > 0
    if sys.platform.startswith("linux"):
        assert rep.peak_rss_bytes and rep.peak_rss_bytes > 0
    else:  # VmHWM is read from Linux's /proc/self/status
        assert rep.peak_rss_bytes is None


def test_exported():
    assert fastaxo.prepare is prepare and fastaxo.PrepareReport is PrepareReport
    assert "prepare" in fastaxo.__all__ and "PrepareReport" in fastaxo.__all__


@pytest.mark.parametrize("strategy", ["bfd", "ffd", "ff", "nf"])
def test_every_token_once_per_strategy(tmp_path, strategy):
    ids, labs = _rows(1500, seed=1)
    src = _write(tmp_path / "a.parquet", ids, labs)
    out = tmp_path / "out.parquet"
    rep = prepare([src], out, SEQ, strategy=strategy, pack_window=400, batch_rows=256)
    keep = _first_occurrences(ids, labs)
    table, segs = _read_segments(out, SEQ)
    assert Counter(segs) == Counter(_expected_segments(ids, labs, keep, "error"))
    assert rep.rows_in == 1500 and rep.duplicates == 1500 - len(keep) and rep.rows_packed == len(keep)
    assert rep.windows == math.ceil(len(keep) / 400)
    assert rep.tokens_in == sum(map(len, ids))
    _check_report(rep, table, segs)
    if strategy == "nf":  # order-preserving: the kept rows in input order
        assert segs == _expected_segments(ids, labs, keep, "error")
    assert set(os.listdir(tmp_path)) == {"a.parquet", "out.parquet"}


@pytest.mark.parametrize("overflow", ["truncate", "split", "drop"])
def test_overflow_modes(tmp_path, overflow):
    ids, labs = _rows(600, seed=2, long_every=25)
    src = _write(tmp_path / "a.parquet", ids, labs)
    out = tmp_path / "out.parquet"
    rep = prepare(src, out, SEQ, overflow=overflow, pack_window=250)
    keep = _first_occurrences(ids, labs)
    long_kept = [i for i in keep if len(ids[i]) > SEQ]
    assert long_kept and rep.overlong == len(long_kept)
    table, segs = _read_segments(out, SEQ)
    assert Counter(segs) == Counter(_expected_segments(ids, labs, keep, overflow))
    excess = sum(len(ids[i]) - SEQ for i in long_kept)
    if overflow == "truncate":
        assert rep.truncated == len(long_kept) and rep.truncated_tokens == excess
    elif overflow == "split":
        assert rep.split == len(long_kept) and rep.split_pieces == sum(-(-len(ids[i]) // SEQ) for i in long_kept)
    else:
        assert rep.dropped == len(long_kept) and rep.dropped_tokens == sum(len(ids[i]) for i in long_kept)
    _check_report(rep, table, segs)


def test_overflow_error_cli_names_file_and_row_and_leaves_no_output(tmp_path):
    ids, labs = _rows(300, seed=3, dup_every=0)
    ids[217] = list(range(SEQ + 9))
    labs[217] = list(range(SEQ + 9))
    src = _write(tmp_path / "in.parquet", ids, labs, row_group_size=50)
    out = tmp_path / "out.parquet"
    r = _cli("prepare", src, "-o", out, "--max-length", SEQ, "--quiet")
    assert r.returncode == 1, r.stderr
    assert "in.parquet row 217" in r.stderr and f"{SEQ + 9} tokens" in r.stderr and "--overflow" in r.stderr
    assert "Traceback" not in r.stderr
    assert os.listdir(tmp_path) == ["in.parquet"]  # no OUT, no temporary file


def test_error_after_row_groups_were_written_removes_the_temp_file(tmp_path):
    ids, labs = _rows(2000, seed=4, dup_every=0)
    a = _write(tmp_path / "a.parquet", ids, labs)
    bad = pa.table({"input_ids": pa.array([[1, 2], None], pa.list_(pa.int32())),
                    "labels": pa.array([[1, 2], [3]], pa.list_(pa.int32()))})
    pq.write_table(bad, tmp_path / "b.parquet")
    out = tmp_path / "out.parquet"
    out.write_bytes(b"old")  # an earlier output stays as it was
    with pytest.raises(fastaxo.NullValueError, match=r"b\.parquet row 1 .*input_ids is null"):
        prepare([a, str(tmp_path / "b.parquet")], out, SEQ, pack_window=300)
    assert out.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["a.parquet", "b.parquet", "out.parquet"]


def test_json_lines_shards_with_no_rows_are_skipped_and_counted(tmp_path):
    """An empty shard (or one of blank lines) has no rows and so no columns: it cannot fix the
    columns nor be refused for lacking them. It is skipped, first or later, and counted; the
    output equals the run without it. Before: "no column 'input_ids' (columns: [])"."""
    ids, labs = _rows(600, seed=9)
    a = _write(tmp_path / "a.jsonl", ids[:300], labs[:300], "jsonl")
    b = _write(tmp_path / "b.jsonl", ids[300:], labs[300:], "jsonl")
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "blank.jsonl").write_bytes(b"\n \r\n\t\n")
    empty, blank = str(tmp_path / "empty.jsonl"), str(tmp_path / "blank.jsonl")
    want = prepare([a, b], tmp_path / "want.parquet", SEQ, progress=False)
    for inputs in ([empty, a, blank, b, empty], [blank, a, b]):
        out = tmp_path / "out.parquet"
        rep = prepare(inputs, out, SEQ, progress=False)
        assert (rep.files, rep.empty_files) == (len(inputs), len(inputs) - 2)
        assert rep.inputs == inputs and rep.rows_in == want.rows_in == 600
        assert pq.read_table(out).equals(pq.read_table(tmp_path / "want.parquet"))
        assert f"({len(inputs) - 2} with no rows, skipped)" in str(rep)
    with pytest.raises(fastaxo.errors.InvalidInputError, match=r"empty.jsonl: no rows"):
        prepare(empty, tmp_path / "none.parquet", SEQ, progress=False)
    with pytest.raises(fastaxo.errors.InvalidInputError, match=r"no input has rows \(2 files\)"):
        prepare([empty, blank], tmp_path / "none.parquet", SEQ, progress=False)
    assert not (tmp_path / "none.parquet").exists()
    # a file of rows with no fields is not empty: it is still refused, naming the column
    (tmp_path / "fields.jsonl").write_text("{}\n{}\n")
    with pytest.raises(fastaxo.errors.ColumnNotFoundError, match="no column 'input_ids'"):
        prepare(str(tmp_path / "fields.jsonl"), tmp_path / "none.parquet", SEQ, progress=False)


def _late_typed_jsonl(path, ids, labs, fields: dict) -> int:
    """JSON Lines whose first 17 MiB (past the 16 MiB that fix the column types) are rows of
    ``fields`` only, then the rows ``ids``/``labs`` with a string in ``meta``; the number of
    leading rows."""
    line = (json.dumps(fields) + "\n").encode()
    n = (17 << 20) // len(line) + 1
    with open(path, "wb") as fh:
        fh.write(line * n)
        for a, b in zip(ids, labs):
            fh.write((json.dumps({"input_ids": a, "labels": b, "meta": "x"}) + "\n").encode())
    return n


@pytest.mark.parametrize("lead", ["empty-rows", "null-meta"])
def test_columns_the_first_16_mib_leave_untyped_are_read_to_the_end(tmp_path, lead):
    """The first 16 MiB of a JSON Lines file fix its column types. When they hold only empty
    token rows (input_ids inferred as list<null>), or a column prepare does not read is null
    there and a string later, the file is still prepared: the output equals the run on the
    rows alone. Before: "must be a list of integer token ids, got list<item: null>", and "JSON
    parse error: Column(/meta) changed from null to string"."""
    ids, labs = _rows(500, seed=12)
    fields = ({"input_ids": [], "labels": []} if lead == "empty-rows" else
              {"input_ids": [5, 6], "labels": [5, 6], "meta": None})
    path = str(tmp_path / "late.jsonl")
    n = _late_typed_jsonl(path, ids, labs, fields)
    lead_rows = [] if lead == "empty-rows" else [fields["input_ids"]]
    want = prepare(_write(tmp_path / "rows.jsonl", lead_rows + ids, lead_rows + labs, "jsonl"),
                   tmp_path / "want.parquet", SEQ, progress=False)
    rep = prepare(path, tmp_path / "out.parquet", SEQ, progress=False)
    assert pq.read_table(tmp_path / "out.parquet").equals(pq.read_table(tmp_path / "want.parquet"))
    assert rep.rows_in == n + 500
    if lead == "empty-rows":
        assert rep.empty_rows == n
    else:
        assert rep.duplicates == want.duplicates + n - 1


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
@pytest.mark.parametrize("with_labels", [True, False])
@pytest.mark.parametrize("layout", ["standard", "axolotl"])
def test_cli_formats_and_labels(tmp_path, fmt, with_labels, layout):
    ids, labs = _rows(900, seed=5)
    labs = labs if with_labels else None
    half = 450  # two files: dedupe runs across them
    f1 = _write(tmp_path / f"a.{fmt}", ids[:half], None if labs is None else labs[:half], fmt)
    f2 = _write(tmp_path / f"b.{fmt}", ids[half:], None if labs is None else labs[half:], fmt)
    out = tmp_path / "out.parquet"
    rj = tmp_path / "report.json"
    att = ["--layout", "axolotl", "--attention", "ones"] if layout == "axolotl" else []
    r = _cli("prepare", f1, f2, "-o", out, "--max-length", SEQ, "--pack-window", 200, *att,
             "--report-json", rj, "--quiet")
    assert r.returncode == 0, r.stderr
    assert "duplicates dropped" in r.stdout and "efficiency" in r.stdout and "peak RSS" in r.stdout
    rep = PrepareReport(**json.loads(rj.read_text()))
    keep = _first_occurrences(ids, labs)
    table, segs = _read_segments(out, SEQ, attention="ones")
    # the standard layout always has labels (the input's, else its input_ids)
    assert ("labels" in table.column_names) == (with_labels or layout == "standard")
    assert packed_io.layout_of(table) == layout == rep.layout
    assert Counter(segs) == Counter(_expected_segments(ids, labs, keep, "error", layout=layout))
    assert rep.duplicates == len(ids) - len(keep) and rep.files == 2 and rep.labels == with_labels
    assert rep.columns == {f.name: str(f.type.value_type) for f in table.schema}
    _check_report(rep, table, segs)


def test_no_dedupe_dedupe_columns_and_attention_none(tmp_path):
    ids, labs = _rows(700, seed=6)
    src = _write(tmp_path / "a.parquet", ids, labs)
    rep = prepare(src, tmp_path / "o1.parquet", SEQ, dedupe=False, attention="none",
                  layout="axolotl")
    table, segs = _read_segments(tmp_path / "o1.parquet", SEQ, attention="none")
    assert rep.duplicates == 0 and Counter(segs) == Counter(
        _expected_segments(ids, labs, range(700), "error", layout="axolotl"))
    # same input_ids, different labels: distinct on input_ids+labels, duplicates on input_ids alone
    labs2 = [list(l) for l in labs]
    labs2[5] = [7] * len(labs2[5])
    ids2 = list(ids)
    ids2[5] = list(ids[4])
    labs2[5] = [7] * len(ids[4])
    src2 = _write(tmp_path / "b.parquet", ids2, labs2)
    r_all = prepare(src2, tmp_path / "o2.parquet", SEQ)
    r_ids = prepare(src2, tmp_path / "o3.parquet", SEQ, dedupe_columns=["input_ids"])
    assert r_all.duplicates == 700 - len(_first_occurrences(ids2, labs2))
    assert r_ids.duplicates == 700 - len(_first_occurrences(ids2, None)) == r_all.duplicates + 1


def test_empty_rows_counted_and_left_out(tmp_path):
    t = pa.table({"input_ids": pa.array([[1, 2], [], [3], []], pa.list_(pa.int32()))})
    pq.write_table(t, tmp_path / "a.parquet")
    rep = prepare(str(tmp_path / "a.parquet"), tmp_path / "o.parquet", 8)
    assert rep.empty_rows == 2 and rep.rows_in == 4 and rep.tokens_out == 3 and rep.bins == 1


def test_data_errors_name_file_and_row(tmp_path):
    t = pa.table({"input_ids": pa.array([[1, 2], [3, 4, 5]], pa.list_(pa.int32())),
                  "labels": pa.array([[1, 2], [3, 4]], pa.list_(pa.int32()))})
    pq.write_table(t, tmp_path / "mis.parquet")
    with pytest.raises(fastaxo.InvalidInputError, match=r"mis\.parquet row 1 .*labels has 2 values and input_ids 3"):
        prepare(str(tmp_path / "mis.parquet"), tmp_path / "o.parquet", 8)
    pq.write_table(pa.table({"text": ["a"]}), tmp_path / "text.parquet")
    r = _cli("prepare", tmp_path / "text.parquet", "-o", tmp_path / "o.parquet", "--max-length", 8)
    assert r.returncode == 1 and "no column 'input_ids'" in r.stderr and "--tokenizer" in r.stderr
    with open(tmp_path / "big.jsonl", "w") as fh:
        fh.write('{"input_ids": [1, 2]}\n{"input_ids": [3, 5000000000]}\n')
    r = _cli("prepare", tmp_path / "big.jsonl", "-o", tmp_path / "o.parquet", "--max-length", 8)
    assert r.returncode == 1 and "big.jsonl row 1" in r.stderr and "int32" in r.stderr
    r = _cli("prepare", tmp_path / "missing.parquet", "-o", tmp_path / "o.parquet", "--max-length", 8)
    assert r.returncode == 1 and "missing.parquet" in r.stderr
    assert not (tmp_path / "o.parquet").exists()


@pytest.mark.parametrize("argv", [
    ["prepare", "x.parquet", "-o", "o.parquet"],                          # no --max-length
    ["prepare", "x.parquet", "-o", "o.parquet", "--max-length", "0"],
    ["prepare", "x.parquet", "-o", "o.parquet", "--max-length", "8", "--strategy", "best"],
    ["prepare", "x.parquet", "--max-length", "8"],                           # no -o
    ["prepare", "x.parquet", "-o", "o.parquet", "--max-length", "8", "--overflow", "isolate"],
    ["demo", "--rows", "-5"],
])
def test_bad_arguments_exit_2(argv):
    r = _cli(*argv)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "usage:" in r.stderr


def _word_tokenizer(texts, where):
    """A word-level tokenizer trained on ``texts``, saved in the directory ``where``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    where.mkdir()
    tok.save(str(where / "tokenizer.json"))
    return tok


def test_tokenizer(tmp_path):
    rng = np.random.default_rng(7)
    words = [f"w{k}" for k in range(40)]
    texts = [" ".join(rng.choice(words, int(rng.integers(1, 30)))) for _ in range(300)]
    texts += texts[:40]  # exact duplicates
    tok = _word_tokenizer(texts, tmp_path / "tok")
    with open(tmp_path / "raw.jsonl", "w") as fh:
        for i, t in enumerate(texts):
            fh.write(json.dumps({"id": i, "body": t}) + "\n")
    out = tmp_path / "out.parquet"
    rj = tmp_path / "r.json"
    r = _cli("prepare", tmp_path / "raw.jsonl", "-o", out, "--max-length", 32, "--tokenizer", tmp_path / "tok",
             "--text-column", "body", "--report-json", rj, "--quiet", "--batch-rows", 64)
    assert r.returncode == 0, r.stderr
    enc = [e.ids for e in tok.encode_batch(texts)]
    keep = _first_occurrences(enc, None)
    table, segs = _read_segments(out, 32)
    # text has no labels: the standard layout's are its input_ids, -100 on each first token
    assert Counter(segs) == Counter(_expected_segments(enc, None, keep, "error", C=32))
    assert table.schema.field("input_ids").type.value_type == pa.int8()  # (a 41-word vocab)
    rep = json.loads(rj.read_text())
    assert rep["duplicates"] == len(texts) - len(keep) >= 40 and rep["tokenizer"].endswith("tok")
    r = _cli("prepare", tmp_path / "raw.jsonl", "-o", out, "--max-length", 32, "--tokenizer", tmp_path)
    assert r.returncode == 1 and "tokenizer.json" in r.stderr


def test_the_first_input_is_read_while_the_tokenizer_loads(tmp_path, monkeypatch):
    """The tokenizer's load (a chat template compiled, a snapshot replayed: a few tenths of a
    second, mostly under the GIL) overlaps the first input's read-ahead (file reads and JSON
    parse, the GIL released); a load that fails stops that read-ahead with the call."""
    import threading

    from fastaxo.errors import InvalidInputError
    from fastaxo.pipeline.options import PrepareOptions

    texts = [f"w{k % 40} w{k % 7} w{k % 13}" for k in range(3000)]
    _word_tokenizer(texts, tmp_path / "tok")
    with open(tmp_path / "raw.jsonl", "w") as fh:
        for t in texts:
            fh.write(json.dumps({"text": t}) + "\n")

    def reader_threads():
        return {th for th in threading.enumerate() if th.name == "fastaxo-reader"}

    before = reader_threads()
    seen: list[set] = []
    real = PrepareOptions.make_tokenizer

    def spy(self, *args, **kwargs):
        seen.append(reader_threads() - before)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(PrepareOptions, "make_tokenizer", spy)
    rep = prepare(tmp_path / "raw.jsonl", tmp_path / "out.parquet", 16, batch_rows=64,
                  tokenizer=tmp_path / "tok", progress=False)
    assert seen and seen[0]  # reading when the load began
    assert rep.rows_in == 3000 and rep.tokens_in == 9000

    def fails(self, *args, **kwargs):
        seen.append(reader_threads() - before)
        raise InvalidInputError("tokenizer: cannot load")

    monkeypatch.setattr(PrepareOptions, "make_tokenizer", fails)
    with pytest.raises(InvalidInputError, match="cannot load"):
        prepare(tmp_path / "raw.jsonl", tmp_path / "out2.parquet", 16, batch_rows=64,
                tokenizer=tmp_path / "tok", progress=False)
    assert seen[-1]  # it had started
    assert not reader_threads() - before  # and stopped (joined) with the failed call
    assert not (tmp_path / "out2.parquet").exists()


def test_fixed_size_lists_and_categorical_or_view_text_are_read_as_their_rows(tmp_path):
    """HF datasets stores ``Sequence(Value("int32"), length=N)`` (rows grouped into blocks) as
    fixed_size_list, and a pandas categorical text column is dictionary-encoded: both were
    refused ("must be a list of integer token ids" / "must be strings"). They are read as the
    same rows: the output equals the plain columns', and dedupe sees the same rows across
    files of either type."""
    rng = np.random.default_rng(17)
    rows = rng.integers(0, 30_000, (400, 24)).astype(np.int32)
    rows[300:] = rows[:100]  # duplicates
    labs = np.where(np.arange(24) < 6, -100, rows).astype(np.int64)
    plain = pa.table({"input_ids": pa.array(list(rows), pa.list_(pa.int32())),
                      "labels": pa.array(list(labs), pa.list_(pa.int64()))})
    fixed = pa.table({"input_ids": pa.FixedSizeListArray.from_arrays(pa.array(rows.ravel()), 24),
                      "labels": pa.FixedSizeListArray.from_arrays(pa.array(labs.ravel()), 24)})
    pq.write_table(plain, tmp_path / "plain.parquet")
    pq.write_table(fixed.slice(0, 200), tmp_path / "fixed_a.parquet")
    pq.write_table(fixed.slice(200), tmp_path / "fixed_b.parquet")
    assert pa.types.is_fixed_size_list(pq.read_schema(tmp_path / "fixed_a.parquet")[0].type)
    want = prepare(str(tmp_path / "plain.parquet"), tmp_path / "want.parquet", SEQ,
                   progress=False)
    got = prepare([str(tmp_path / "fixed_a.parquet"), str(tmp_path / "fixed_b.parquet")],
                  tmp_path / "got.parquet", SEQ, progress=False)
    assert got.duplicates == want.duplicates == 100
    assert pq.read_table(tmp_path / "got.parquet").equals(pq.read_table(tmp_path / "want.parquet"))
    # a list file and a fixed-size file: the same rows are duplicates across them
    both = prepare([str(tmp_path / "plain.parquet"), str(tmp_path / "fixed_a.parquet")],
                   tmp_path / "both.parquet", SEQ, progress=False)
    assert both.duplicates == 100 + 200
    # a null row is refused, naming it (in memory: pyarrow 15 cannot read such a Parquet file)
    with pytest.raises(fastaxo.errors.NullValueError, match=r"row 1 \(0-based\): input_ids is null"):
        prepare(pa.table({"input_ids": pa.array([[1, 2], None], pa.list_(pa.int32(), 2))}),
                tmp_path / "n.parquet", SEQ, progress=False)
    # a categorical text column
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    texts = [" ".join(f"w{k}" for k in rng.integers(0, 30, int(n))) for n in rng.integers(1, 9, 60)]
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    (tmp_path / "tok").mkdir()
    tok.save(str(tmp_path / "tok" / "tokenizer.json"))
    col = pa.array(texts + texts[:10])
    pq.write_table(pa.table({"text": col}), tmp_path / "t.parquet")
    pq.write_table(pa.table({"text": col.dictionary_encode()}), tmp_path / "cat.parquet")
    assert pa.types.is_dictionary(pq.read_schema(tmp_path / "cat.parquet")[0].type)
    a = prepare(str(tmp_path / "t.parquet"), tmp_path / "ta.parquet", SEQ,
                tokenizer=str(tmp_path / "tok"), progress=False)
    b = prepare(str(tmp_path / "cat.parquet"), tmp_path / "tb.parquet", SEQ,
                tokenizer=str(tmp_path / "tok"), progress=False)
    assert (b.rows_in, b.duplicates) == (a.rows_in, a.duplicates) and a.duplicates >= 10
    assert pq.read_table(tmp_path / "ta.parquet").equals(pq.read_table(tmp_path / "tb.parquet"))
    if hasattr(pa, "string_view"):  # (pyarrow 16 and later: Polars' and DuckDB's text)
        import pyarrow.feather as feather

        feather.write_feather(pa.table({"text": col.cast(pa.string_view())}),
                              tmp_path / "view.arrow", compression="uncompressed")
        c = prepare(str(tmp_path / "view.arrow"), tmp_path / "tc.parquet", SEQ,
                    tokenizer=str(tmp_path / "tok"), progress=False)
        assert c.rows_in == a.rows_in
        assert pq.read_table(tmp_path / "tc.parquet").equals(pq.read_table(tmp_path / "ta.parquet"))


def test_demo_prints_ok():
    r = _cli("demo", "--rows", 20000, "--quiet", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "result: OK" in r.stdout
    assert "plain Python" in r.stdout and "duplicates dropped 2,000" in r.stdout


def test_demo_from_a_directory_holding_another_fastaxo(tmp_path):
    """The README runs `.venv/bin/fastaxo demo` from the source checkout, whose fastaxo/ has no
    compiled extension: demo's `prepare` child must import the fastaxo its parent runs (it ran
    `python -m fastaxo`, which imported the working directory's tree and ran 20x slower)."""
    decoy = tmp_path / "fastaxo"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the working directory fastaxo was imported')\n")
    # the console script beside the interpreter (bin/fastaxo; Scripts\fastaxo.exe on Windows)
    script = shutil.which("fastaxo", path=os.path.dirname(sys.executable))
    assert script, f"the console script fastaxo is not installed beside {sys.executable}"
    r = subprocess.run([script, "demo", "--rows", "20000", "--quiet"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=600)
    assert "working directory fastaxo" not in r.stdout + r.stderr
    assert r.returncode == 0 and "result: OK" in r.stdout, r.stdout + r.stderr


# ---------------------------------------------------------------- 2M rows, bounded memory
N_BIG = 2_000_000


def _big_source(i: np.ndarray) -> np.ndarray:
    """Row i copies row i-1 when i % 10 == 9 (200,000 exact duplicates)."""
    return np.where(i % 10 == 9, i - 1, i)


def _big_len(r: np.ndarray) -> np.ndarray:
    return 3 + (r * 7919) % 30


def _big_tokens(r: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Token j of (source) row r: the row number in the first two tokens, then a formula."""
    return np.where(j == 0, r // 30000, np.where(j == 1, r % 30000, (r * 31 + j * 17) % 30000)).astype(np.int32)


def _write_big(path: str) -> None:
    schema = pa.schema([("input_ids", pa.list_(pa.int32())), ("labels", pa.list_(pa.int32()))])
    with pq.ParquetWriter(path, schema, compression="zstd") as w:
        for a in range(0, N_BIG, 200_000):
            r = _big_source(np.arange(a, a + 200_000, dtype=np.int64))
            lens = _big_len(r)
            offs = np.zeros(len(r) + 1, np.int64)
            np.cumsum(lens, out=offs[1:])
            rr = np.repeat(r, lens)
            j = np.arange(offs[-1]) - np.repeat(offs[:-1], lens)
            tok = _big_tokens(rr, j)
            lab = np.where(j < 2, -100, tok).astype(np.int32)
            o = pa.array(offs.astype(np.int32))
            w.write_table(pa.table({"input_ids": pa.ListArray.from_arrays(o, pa.array(tok)),
                                    "labels": pa.ListArray.from_arrays(o, pa.array(lab))}, schema=schema),
                          row_group_size=50_000)


@pytest.mark.slow
def test_2m_rows_peak_rss_under_1gib_and_output_verified(tmp_path):
    src = str(tmp_path / "big.parquet")
    out = tmp_path / "packed.parquet"
    rj = tmp_path / "r.json"
    try:
        _write_big(src)
        r = _cli("prepare", src, "-o", out, "--max-length", 2048, "--report-json", rj, "--quiet", timeout=900)
        assert r.returncode == 0, r.stderr
        rep = json.loads(rj.read_text())
        if sys.platform.startswith("linux"):  # (VmHWM: Linux's /proc)
            assert rep["peak_rss_bytes"] < 1 << 30, rep["peak_rss_bytes"]
        assert rep["rows_in"] == N_BIG and rep["duplicates"] == N_BIG // 10
        # read back: every kept row exactly once, whole and in order; bins within capacity
        pf = pq.ParquetFile(out)
        rows_seen, bins, tokens = [], 0, 0
        for batch in pf.iter_batches(batch_size=65536):
            ids, lab, pos = (batch.column(k) for k in ("input_ids", "labels", "position_ids"))
            offs = np.asarray(ids.offsets)
            iv, lv, pv = (np.asarray(c.values)[offs[0]:offs[-1]] for c in (ids, lab, pos))
            assert np.diff(offs).max() <= 2048 and np.asarray(pos.offsets).tolist() == offs.tolist()
            bins += batch.num_rows
            tokens += len(iv)
            starts = np.flatnonzero(pv == 0)
            assert np.isin(offs[:-1] - offs[0], starts).all()  # every bin starts a sequence
            seg_len = np.diff(np.append(starts, len(pv)))
            r_of = iv[starts].astype(np.int64) * 30000 + iv[starts + 1]
            assert np.array_equal(seg_len, _big_len(r_of))
            assert np.array_equal(pv, np.arange(len(pv)) - np.repeat(starts, seg_len))
            rr = np.repeat(r_of, seg_len)
            want = _big_tokens(rr, pv)
            assert np.array_equal(iv, want)
            assert np.array_equal(lv, np.where(pv < 2, -100, want))
            rows_seen.append(r_of)
        got = np.sort(np.concatenate(rows_seen))
        i = np.arange(N_BIG)
        assert np.array_equal(got, i[i % 10 != 9])  # the first occurrences, each once
        assert bins == rep["bins"] and tokens == rep["tokens_out"]
        assert rep["lower_bound"] == -(-tokens // 2048) and rep["efficiency"] == pytest.approx(tokens / (bins * 2048))
        print(f"2M rows: {rep['seconds']:.1f} s, peak RSS {rep['peak_rss_bytes'] / 2**20:.0f} MiB, "
              f"{rep['bins']:,} bins, efficiency {rep['efficiency']:.4%}")
    finally:
        for p in (src, out):
            if os.path.exists(p):
                os.unlink(p)


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals: Windows sends Ctrl-C to a console "
                    "process group, not a SIGINT to one process")
def test_ctrl_c_leaves_no_output_that_looks_complete(tmp_path):
    """SIGINT while row groups are being written: exit 130, OUT untouched (an earlier file stays
    as it was), the temporary file removed, a message on stderr."""
    import signal
    import time

    src = str(tmp_path / "in.parquet")
    ids, labs = _rows(60_000, seed=9, max_len=400)
    _write(src, ids, labs, row_group_size=2_000)
    out = tmp_path / "out.parquet"
    out.write_bytes(b"old")
    env = {**os.environ, "FASTAXO_REQUIRE_EXTENSION": "1"}
    # small windows and batches: many row groups, so the interrupt lands mid-write
    p = subprocess.Popen([sys.executable, "-m", "fastaxo", "prepare", src, "-o", str(out), "--max-length", "512",
                          "--pack-window", "500", "--batch-rows", "500", "-q"],
                         cwd="/", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    tmp_seen = False
    while time.monotonic() < deadline and p.poll() is None:
        if any(".fastaxo-tmp-" in f for f in os.listdir(tmp_path)):
            tmp_seen = True
            time.sleep(0.05)
            break
        time.sleep(0.005)
    assert tmp_seen, "prepare finished before it could be interrupted; make the input bigger"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert out.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["in.parquet", "out.parquet"]
    assert "interrupt" in err.lower()


def test_errors_survive_pickling():
    """Errors cross process boundaries (Ray tasks, multiprocessing) with their fields."""
    import pickle

    from fastaxo.errors import (
        FileFormatError,
        NullValueError,
        SchemaMismatchError,
        SequenceTooLongError,
    )

    e = pickle.loads(pickle.dumps(SequenceTooLongError("a.parquet row 3: too long", 3, 5000, 4096)))
    assert isinstance(e, SequenceTooLongError) and isinstance(e, ValueError)
    assert (str(e), e.row, e.length, e.max_length) == ("a.parquet row 3: too long", 3, 5000, 4096)
    f = pickle.loads(pickle.dumps(FileFormatError("bad file", "b.jsonl", "line 7")))
    assert (str(f), f.path, f.location) == ("bad file", "b.jsonl", "line 7")
    for cls in (NullValueError, SchemaMismatchError):
        g = pickle.loads(pickle.dumps(cls("msg")))
        assert type(g) is cls and str(g) == "msg"


def test_ray_flags_are_checked_by_argparse(tmp_path):
    r = _cli("prepare", tmp_path / "x.parquet", "-o", tmp_path / "o", "--max-length", 8, "--ray", "local",
             "--ray-cpus-per-task", "0")
    assert r.returncode == 2 and "--ray-cpus-per-task: expected a number > 0, got 0" in r.stderr


def test_one_name_the_old_one_is_refused(tmp_path):
    """max_length / --max-length only: seq_len= and --seq-len (never released) are refused."""
    ids, labs = _rows(300, seed=21)
    src = _write(tmp_path / "in.parquet", ids, labs)
    new = fastaxo.prepare(src, tmp_path / "new.parquet", max_length=SEQ, attention=None)
    assert new.max_length == SEQ and not hasattr(new, "seq_len")
    assert "attention_mask" not in pq.read_table(tmp_path / "new.parquet").column_names
    with pytest.raises(TypeError, match="unexpected keyword argument 'seq_len'"):
        fastaxo.prepare(src, tmp_path / "old.parquet", seq_len=SEQ)
    r = _cli("prepare", src, "-o", tmp_path / "cli.parquet", "--seq-len", SEQ, "-q")
    assert r.returncode == 2 and "--seq-len" in r.stderr, r.stderr
    assert not (tmp_path / "old.parquet").exists() and not (tmp_path / "cli.parquet").exists()


# -- token columns from rows: views of one buffer stay in it ----------------------------------

def _row_kinds():
    from hypothesis import strategies as st

    return st.lists(st.tuples(st.sampled_from(["view", "view", "view", "gap", "list", "int64",
                                               "own", "strided", "empty"]),
                              st.integers(0, 2), st.integers(0, 40)), max_size=60)


def test_token_lists_keep_adjacent_views_in_their_buffer():
    """_int32_lists on any mix of adjacent views of int32 buffers (chunks over the buffer:
    the next test), gaps between views, lists, int64 arrays, arrays of their own, strided
    views and empty rows: the column reads back as the rows, in order, with their lengths."""
    from hypothesis import given, settings

    from fastaxo.pipeline.columns import _int32_lists, list_lengths

    @settings(max_examples=300, deadline=None)
    @given(_row_kinds())
    def check(kinds):
        bufs = [np.arange(k * 10_000, k * 10_000 + 4_000, dtype=np.int32) for k in range(3)]
        at = [0, 0, 0]
        rows = []
        for kind, k, n in kinds:
            if kind in ("view", "gap"):
                at[k] += 3 if kind == "gap" else 0
                rows.append(bufs[k][at[k]:at[k] + n])
                at[k] += n
            elif kind == "list":
                rows.append(list(range(n)))
            elif kind == "int64":
                rows.append(np.arange(n, dtype=np.int64))
            elif kind == "own":
                rows.append(np.arange(n, dtype=np.int32))
            elif kind == "strided":
                rows.append(bufs[k][at[k]:at[k] + 2 * n:2])
                at[k] += 2 * n
            else:
                rows.append([])
        col = _int32_lists(rows)
        assert col.type == pa.list_(pa.int32())
        assert col.to_pylist() == [list(map(int, r)) for r in rows]
        assert list(list_lengths(col)) == [len(r) for r in rows]
    check()


def test_token_lists_of_part_views_are_not_copied():
    """The chat engine's case: each part's rows are adjacent views of its ids; a fallback row
    (a list) sits between. Three chunks: part 1 (a view), the fallback (copied), part 2 (a
    view), each view chunk over the part's own memory."""
    from fastaxo.pipeline.columns import _int32_lists

    part1, part2 = np.arange(100, dtype=np.int32), np.arange(500, 560, dtype=np.int32)
    rows = [part1[:30], part1[30:30], part1[30:100], [7, 8, 9], part2[:60]]
    col = _int32_lists(rows)
    assert isinstance(col, pa.ChunkedArray) and col.num_chunks == 3
    assert col.to_pylist() == [list(map(int, r)) for r in rows]
    for chunk, part in ((col.chunk(0), part1), (col.chunk(2), part2)):
        assert chunk.values.buffers()[1].address == part.ctypes.data
    assert not np.shares_memory(np.frombuffer(col.chunk(1).values.buffers()[1], np.int32),
                                part1)
    # scattered: more groups than the bound, one copy
    many = [part1[i:i + 1] if i % 2 else [i] for i in range(200)]
    one = _int32_lists(many)
    assert isinstance(one, pa.Array) and one.to_pylist() == [list(map(int, r)) for r in many]


def test_the_reports_peak_is_the_calls(tmp_path):
    """The report's peak RSS is the call's (VmHWM reset when it starts), not the process's:
    300 MB touched and freed before the call do not show in it."""
    from fastaxo._core.proc import reset_peak, status_kib

    if not reset_peak():
        pytest.skip("this kernel cannot reset VmHWM (/proc/self/clear_refs)")
    big = np.ones(300 << 20, np.uint8)
    big[:: 1 << 12] = 2
    del big
    before = status_kib("VmHWM") * 1024
    f = tmp_path / "in.parquet"
    pq.write_table(pa.table({"input_ids": pa.array([[1, 2, 3], [4, 5]], pa.list_(pa.int32()))}), f)
    rep = prepare(str(f), str(tmp_path / "out.parquet"), 8, progress=False)
    assert rep.peak_rss_bytes < before - (200 << 20), (rep.peak_rss_bytes, before)
