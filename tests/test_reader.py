"""The streaming reader against pyarrow's own readers (and a plain-Python reference for text):
same rows and values in the same order for every format, batch size, read-ahead, shard,
shuffle and resume point; errors that name the file and the place."""

from __future__ import annotations

import bz2
import gzip
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fastaxo
from fastaxo._bench.demo import chat_batches
from fastaxo.errors import (
    ColumnNotFoundError,
    FileFormatError,
    InvalidInputError,
    InvalidTypeError,
    SchemaMismatchError,
    SourceNotFoundError,
)
from fastaxo.readers import text as R

# --------------------------------------------------------------------------- data

def typed_table(n: int, seed: int) -> pa.Table:
    """Every kind of column a fine-tuning set has, nulls included: struct, list, large_list,
    dictionary, unsigned, timestamp, binary, bool, float, empty lists and strings."""
    rng = np.random.default_rng(seed)
    lens = rng.integers(0, 9, n)
    lens[rng.random(n) < 0.1] = 0
    off = np.zeros(n + 1, np.int32)
    np.cumsum(lens, out=off[1:])
    vals = pa.array(rng.integers(-(2**31), 2**31 - 1, int(off[-1]), dtype=np.int32))
    nulls = rng.random(n) < 0.1
    words = np.array(["", "a", "bé", "chat", "ünïcode ✓", "x" * 300])
    s = words[rng.integers(0, len(words), n)]
    return pa.table({
        "u16": pa.array(rng.integers(0, 2**16, n, dtype=np.uint16)),
        "i64": pa.array(rng.integers(-(2**62), 2**62, n), mask=nulls),
        "f32": pa.array(rng.standard_normal(n).astype(np.float32)),
        "b": pa.array(rng.random(n) < 0.5),
        "s": pa.array(s.tolist(), type=pa.string(), mask=nulls[::-1].copy()),
        "ls": pa.array(s.tolist(), type=pa.large_string()),
        "bin": pa.array([x.encode() for x in s.tolist()], type=pa.binary()),
        "ids": pa.ListArray.from_arrays(pa.array(off), vals),
        "lids": pa.LargeListArray.from_arrays(pa.array(off.astype(np.int64)), vals.cast(pa.int64())),
        "ts": pa.array(rng.integers(0, 2**40, n), type=pa.timestamp("ms", tz="UTC")),
        "cat": pa.array(s.tolist()).dictionary_encode(),
        "msg": pa.StructArray.from_arrays(
            [pa.array(rng.integers(0, 5, n, dtype=np.int8)), pa.array(s.tolist())], names=["role", "content"]),
    })


def normal(t: pa.Table) -> pa.Table:
    """Dictionary columns decoded (a batch may carry its own dictionary), one chunk each."""
    cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in t.columns]
    return pa.table(cols, names=t.column_names).combine_chunks()


def read_all(r) -> tuple[pa.Table, list[int]]:
    batches = list(r)
    sizes = [b.num_rows for b in batches]
    if not batches:
        return pa.Table.from_batches([], schema=r.schema), sizes
    return pa.Table.from_batches(batches), sizes


def assert_batch_sizes(sizes: list[int], batch_rows: int, total: int) -> None:
    assert sum(sizes) == total
    assert all(s == batch_rows for s in sizes[:-1]), sizes
    assert not sizes or 0 < sizes[-1] <= batch_rows


def write_parquet(t: pa.Table, path, rg: int) -> None:
    pq.write_table(t, path, row_group_size=max(rg, 1))


# --------------------------------------------------------------------------- Parquet / Arrow

@given(n=st.integers(0, 3000), seed=st.integers(0, 2**16), rg=st.integers(1, 4000),
       batch_rows=st.integers(1, 5000), prefetch=st.integers(0, 3), threads=st.sampled_from([1, None]))
def test_parquet_equals_pyarrow(tmp_path_factory, n, seed, rg, batch_rows, prefetch, threads):
    path = tmp_path_factory.mktemp("pq") / "t.parquet"
    write_parquet(typed_table(n, seed), path, rg)
    ref = pq.read_table(path)
    with fastaxo.iter_parquet(path, batch_rows=batch_rows, prefetch=prefetch, threads=threads) as r:
        got, sizes = read_all(r)
        assert r.schema == ref.schema
    assert got.schema == ref.schema  # types intact, dictionary and large_list included
    assert normal(got).equals(normal(ref))
    assert_batch_sizes(sizes, batch_rows, n)


@pytest.mark.parametrize("kind", ["file", "stream", "file_lz4", "stream_zstd"])
@given(n=st.integers(0, 2500), seed=st.integers(0, 2**16), chunk=st.integers(1, 3000),
       batch_rows=st.integers(1, 4000))
def test_arrow_ipc_equals_pyarrow(tmp_path_factory, kind, n, seed, chunk, batch_rows):
    t = typed_table(n, seed).drop_columns(["cat"]) if kind.startswith("stream") and n % 2 else typed_table(n, seed)
    path = tmp_path_factory.mktemp("ipc") / "t.arrow"
    comp = {"file_lz4": "lz4", "stream_zstd": "zstd"}.get(kind)
    opts = pa.ipc.IpcWriteOptions(compression=comp)
    new = pa.ipc.new_file if kind.startswith("file") else pa.ipc.new_stream
    with new(path, t.schema, options=opts) as w:
        w.write_table(t, max_chunksize=chunk)
    ref = (pa.ipc.open_file if kind.startswith("file") else pa.ipc.open_stream)(path).read_all()
    got, sizes = read_all(fastaxo.iter_batches(path, batch_rows=batch_rows))
    assert got.schema == ref.schema
    assert normal(got).equals(normal(ref))
    assert_batch_sizes(sizes, batch_rows, n)


def test_hf_save_to_disk_and_cache_files(tmp_path):
    datasets = pytest.importorskip("datasets")
    t = pa.concat_tables(chat_batches(3000, chunk_rows=1000))
    ds = datasets.Dataset(t)
    ds.save_to_disk(str(tmp_path / "saved"), num_shards=3)
    got, _ = read_all(fastaxo.iter_batches(tmp_path / "saved", batch_rows=700))
    assert got.equals(t.combine_chunks()) or normal(got).equals(normal(t))
    assert got.column_names == t.column_names


def test_a_saved_dataset_lists_its_files_in_utf8_whatever_the_locale(tmp_path):
    """A save_to_disk directory's state.json names its data files in their order; JSON is UTF-8
    (RFC 8259) whatever the locale's encoding (cp1252 on Windows, ASCII under LANG=C). Before,
    it was read in the locale's: a non-ASCII character anywhere in it made the reader fall back
    to listing the directory, silently in another order."""
    d = tmp_path / "saved"
    d.mkdir()
    for i in range(2):
        with pa.ipc.new_stream(d / f"data-0000{i}-of-00002.arrow", pa.schema([("x", pa.int64())])) as w:
            w.write_table(pa.table({"x": [i]}))
    state = {"_data_files": [{"filename": "data-00001-of-00002.arrow"},  # not in sorted order
                             {"filename": "data-00000-of-00002.arrow"}],
             "_format_columns": ["été"], "_split": "entraînement"}
    (d / "state.json").write_bytes(json.dumps(state, ensure_ascii=False).encode("utf-8"))
    code = ("import sys, fastaxo; print(' '.join(str(x) for b in fastaxo.iter_batches(sys.argv[1]) "
            "for x in b.column('x').to_pylist()))")
    # an ASCII locale, not coerced to UTF-8 (PEP 538, PEP 540)
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    r = subprocess.run([sys.executable, "-c", code, str(d)], capture_output=True, text=True,
                       cwd="/", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "0"]  # the order state.json gives


def test_directories_globs_and_lists_read_in_a_stable_order(tmp_path):
    parts = [pa.table({"x": np.arange(i * 10, i * 10 + 10)}) for i in range(12)]
    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    for i, p in enumerate(parts):
        pq.write_table(p, (d / "sub" if i >= 6 else d) / f"part-{i:03d}.parquet")
    (d / "_SUCCESS").write_text("")
    (d / ".hidden.parquet").write_bytes(b"junk")
    want_dir = sorted([str(d / f"part-{i:03d}.parquet") for i in range(6)] +
                      [str(d / "sub" / f"part-{i:03d}.parquet") for i in range(6, 12)])
    r = fastaxo.iter_batches(d)
    assert [f[0] for f in r.files] == want_dir
    got, _ = read_all(r)
    order = [int(os.path.basename(p)[5:8]) for p in want_dir]
    assert got.column("x").to_pylist() == [v for i in order for v in range(i * 10, i * 10 + 10)]
    assert [f[0] for f in fastaxo.iter_batches(str(d / "**" / "*.parquet")).files] == sorted(want_dir)
    listed = [want_dir[3], want_dir[0]]
    assert [f[0] for f in fastaxo.iter_batches(listed).files] == listed


def test_columns_project_and_order(tmp_path):
    t = typed_table(500, 1)
    write_parquet(t, tmp_path / "t.parquet", 128)
    got, _ = read_all(fastaxo.iter_parquet(tmp_path / "t.parquet", columns=["ids", "u16", "msg"]))
    assert got.column_names == ["ids", "u16", "msg"]
    assert got.equals(t.select(["ids", "u16", "msg"]))
    with pytest.raises(ColumnNotFoundError, match=r"columns: \['nope'\] not in .*t.parquet"):
        fastaxo.iter_parquet(tmp_path / "t.parquet", columns=["ids", "nope"])


# --------------------------------------------------------------------------- text formats

def text_reference(path) -> pa.Table:
    opener = {".gz": gzip.open, ".bz2": bz2.open}.get(os.path.splitext(str(path))[1], open)
    with opener(path, "rb") as fh:
        data = fh.read().decode("utf-8")
    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return pa.table({"text": pa.array([ln[:-1] if ln.endswith("\r") else ln for ln in lines], pa.string())})


line_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=40)


@given(lines=st.lists(st.one_of(line_text, st.just(""), st.text("ab", min_size=300, max_size=900)), max_size=60),
       crlf=st.lists(st.booleans(), max_size=60), final_newline=st.booleans(),
       block=st.integers(1, 400), batch_rows=st.integers(1, 50), comp=st.sampled_from(["", ".gz", ".bz2"]))
def test_text_lines_equal_the_python_reference(tmp_path_factory, lines, crlf, final_newline, block, batch_rows, comp):
    ends = ["\r\n" if (crlf[i] if i < len(crlf) else False) else "\n" for i in range(len(lines))]
    body = "".join(ln + e for ln, e in zip(lines, ends))
    if lines and not final_newline:
        body = body[: -len(ends[-1])]
    raw = body.encode("utf-8")
    path = tmp_path_factory.mktemp("txt") / f"t.txt{comp}"
    # closed before reading: an unclosed GzipFile (3.12+ buffers its writes) may still hold the
    # data when the reference reads the file
    with {"": open, ".gz": gzip.open, ".bz2": bz2.open}[comp](path, "wb") as fh:
        fh.write(raw)
    ref = text_reference(path)
    got, sizes = read_all(fastaxo.iter_batches(path, batch_rows=batch_rows, block_bytes=block))
    assert got.schema == ref.schema
    assert got.combine_chunks().equals(ref.combine_chunks())
    assert_batch_sizes(sizes, batch_rows, len(ref))


def _rows(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"id": int(i), "text": "t" * int(rng.integers(0, 200)) + "é\"x,\t",
             "score": float(rng.standard_normal()),
             "ids": rng.integers(0, 1000, int(rng.integers(0, 20))).tolist(),
             "meta": {"lang": "en" if i % 3 else "de", "n": int(i % 7)}} for i in range(n)]


@given(n=st.integers(1, 400), seed=st.integers(0, 1000), block=st.sampled_from([64, 1000, 5000, 1 << 20]),
       batch_rows=st.integers(1, 300), comp=st.sampled_from(["", ".gz", ".zst"]))
def test_jsonl_equals_pyarrow(tmp_path_factory, n, seed, block, batch_rows, comp):
    d = tmp_path_factory.mktemp("jsonl")
    raw = "".join(json.dumps(r) + "\n" for r in _rows(n, seed)).encode()
    plain = d / "t.jsonl"
    plain.write_bytes(raw)
    path = d / f"t.jsonl{comp}"
    if comp:
        with pa.output_stream(path, compression={".gz": "gzip", ".zst": "zstd"}[comp]) as out:
            out.write(raw)
    ref = pjson.read_json(plain)
    got, sizes = read_all(fastaxo.iter_batches(path, batch_rows=batch_rows, block_bytes=block))
    assert got.schema == ref.schema
    assert got.combine_chunks().equals(ref.combine_chunks())
    assert_batch_sizes(sizes, batch_rows, n)


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "text"])
def test_the_inference_block_is_parsed_once(tmp_path, monkeypatch, fmt):
    """The block that fixed the column types is the first block's rows: a file shorter than
    INFER_BYTES is parsed once, not twice (inference, then reading)."""
    rows = _rows(3000, 1)
    path = tmp_path / f"t.{ {'jsonl': 'jsonl', 'csv': 'csv', 'text': 'txt'}[fmt] }"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif fmt == "csv":
        pcsv.write_csv(pa.table({"row": [r["id"] for r in rows], "s": [str(r["ids"]) for r in rows]}), path)
    else:
        path.write_text("".join(f"line {r['id']}\n" for r in rows))
    calls = []
    real = R.TextDecoder._parse
    monkeypatch.setattr(R.TextDecoder, "_parse", lambda self, *a: calls.append(a[2]) or real(self, *a))
    got, _ = read_all(fastaxo.iter_batches(path, batch_rows=512, block_bytes=4096))
    assert got.num_rows == 3000
    assert len(calls) == 1, calls  # before: 2 (the inference parse, then the same block again)
    # a second epoch reads the file again (the kept parse was used once)
    r = fastaxo.iter_batches(path, batch_rows=512, block_bytes=4096)
    assert sum(b.num_rows for b in r) == 3000
    n_first = len(calls)
    r.set_epoch(1)
    assert sum(b.num_rows for b in r) == 3000 and len(calls) > n_first


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_chosen_columns_read_past_other_columns_changing_type(tmp_path, monkeypatch, fmt):
    """With columns chosen, only they are parsed after the inference block: a column that was
    empty there and holds strings later (or, in JSON, a field that appears later) no longer
    stops the read; without a choice it still does, naming the fix. ``file_schema`` has every
    column."""
    monkeypatch.setattr(R, "INFER_BYTES", 4096)
    path = tmp_path / f"t.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps({"a": i, "b": None}) + "\n" for i in range(1500))
                        + "".join(json.dumps({"a": i, "b": "x", "c": 1}) + "\n"
                                  for i in range(1500, 2000)))
    else:
        path.write_text("a,b\n" + "".join(f"{i},\n" for i in range(1500))
                        + "".join(f"{i},x{i}\n" for i in range(1500, 2000)))
    r = fastaxo.iter_batches(path, columns=["a"], batch_rows=100, block_bytes=1024)
    assert r.schema.names == ["a"] and r.file_schema.names == ["a", "b"]
    assert r.file_schema.field("b").type == pa.null()
    got, _ = read_all(r)
    assert got.column("a").to_pylist() == list(range(2000))
    with pytest.raises(FileFormatError, match="pass schema="):
        read_all(fastaxo.iter_batches(path, batch_rows=100, block_bytes=1024))


def test_a_new_field_inside_a_chosen_column_is_refused_not_dropped(tmp_path, monkeypatch):
    """Other columns may change after the first 16 MiB, a chosen one may not: a message
    struct that gains a field ("tool_calls") is refused, naming the column, with or without
    columns chosen (reading the chosen columns must never drop a field silently)."""
    monkeypatch.setattr(R, "INFER_BYTES", 4096)
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps({"m": [{"role": "user", "content": "hi"}], "x": None})
                            + "\n" for _ in range(1500))
                    + json.dumps({"m": [{"role": "user", "content": "hi", "tool_calls": [1]}],
                                  "x": "s"}) + "\n")
    with pytest.raises(SchemaMismatchError, match=r"column 'm' holds .*tool_calls"):
        read_all(fastaxo.iter_batches(path, columns=["m"], batch_rows=100, block_bytes=1024))
    with pytest.raises(FileFormatError, match="unexpected field"):
        read_all(fastaxo.iter_batches(path, batch_rows=100, block_bytes=1024))


def test_a_position_skips_rows_across_blocks(tmp_path):
    """(line start, rows after it) means the same rows whatever the block sizes: skipping more
    rows than the first block holds goes on into the next blocks."""
    path = tmp_path / "t.txt"
    path.write_text("".join(f"{i}\n" for i in range(1000)))
    opts = fastaxo.iter_batches(path, block_bytes=64)._src.opts
    h = R.TextDecoder(str(path), "text", None, opts, pa.schema([("text", pa.string())]))
    try:
        for offset in (0, 5, 31, 400, 999, 1000):
            got = [x for b, _, _ in h.pieces(0, offset) for x in b.column(0).to_pylist()]
            assert got == [str(i) for i in range(offset, 1000)], offset
    finally:
        h.close()


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
@given(n=st.integers(0, 400), seed=st.integers(0, 1000), block=st.sampled_from([64, 1000, 1 << 20]),
       batch_rows=st.integers(1, 300))
def test_csv_tsv_equal_pyarrow(tmp_path_factory, fmt, n, seed, block, batch_rows):
    rows = _rows(n, seed)
    t = pa.table({"id": [r["id"] for r in rows], "text": [r["text"] for r in rows],
                  "score": [r["score"] for r in rows], "code": [f"{r['id'] % 50:03d}" for r in rows]},
                 schema=pa.schema([("id", pa.int64()), ("text", pa.string()), ("score", pa.float64()),
                                   ("code", pa.string())]))
    path = tmp_path_factory.mktemp("csv") / f"t.{fmt}"
    delim = "\t" if fmt == "tsv" else ","
    pcsv.write_csv(t, path, write_options=pcsv.WriteOptions(delimiter=delim))
    # pyarrow infers per file; the streaming reader from the first block: give both the types
    po = pcsv.ParseOptions(delimiter=delim)
    ref = pcsv.read_csv(path, parse_options=po, convert_options=pcsv.ConvertOptions(column_types=t.schema))
    got, sizes = read_all(fastaxo.iter_batches(path, batch_rows=batch_rows, block_bytes=block, schema=t.schema))
    assert got.combine_chunks().equals(ref.combine_chunks())
    assert got.column("code").to_pylist() == t.column("code").to_pylist()  # "007" stays "007"
    assert_batch_sizes(sizes, batch_rows, n)
    if n > 20:  # inferred types match pyarrow's (same data in every block here)
        inferred, _ = read_all(fastaxo.iter_batches(path, block_bytes=1 << 20))
        assert inferred.combine_chunks().equals(pcsv.read_csv(path, parse_options=po).combine_chunks())


# --------------------------------------------------------------------------- shards, shuffle, resume

def _multi_parquet(tmp_path, n_files=3, n=700, seed=0) -> tuple[list, pa.Table]:
    paths, tables = [], []
    for i in range(n_files):
        t = typed_table(n + 37 * i, seed + i).drop_columns(["cat"])
        t = t.append_column("row", pa.array(np.arange(len(t)) + sum(len(x) for x in tables)))
        p = tmp_path / f"f{i}.parquet"
        write_parquet(t, p, 97 + i)
        paths.append(str(p))
        tables.append(t)
    return paths, pa.concat_tables(tables)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "arrow"])
@given(world=st.integers(1, 5), batch_rows=st.integers(1, 300), shuffle=st.sampled_from([0, 1, 150, 5000]))
def test_shards_are_disjoint_and_cover_every_row_once(tmp_path_factory, fmt, world, batch_rows, shuffle):
    d = tmp_path_factory.mktemp("shard")
    paths, full = _multi_parquet(d)
    if fmt == "jsonl":
        paths = []
        for i, t in enumerate(full.select(["row", "u16"]).to_batches(max_chunksize=800)):
            p = d / f"f{i}.jsonl"
            p.write_text("".join(json.dumps(r) + "\n" for r in t.to_pylist()))
            paths.append(str(p))
    elif fmt == "arrow":
        paths = [str(d / "f.arrows")]
        with pa.ipc.new_stream(paths[0], full.schema) as w:
            w.write_table(full, max_chunksize=333)
    seen = []
    sizes = []
    for rank in range(world):
        got, _ = read_all(fastaxo.iter_batches(paths, rank=rank, world_size=world, batch_rows=batch_rows,
                                               shuffle_buffer=shuffle, seed=5, block_bytes=3000))
        rows = got.column("row").to_pylist()
        seen.extend(rows)
        sizes.append(len(rows))
        if not shuffle:
            assert rows == sorted(rows)
    assert sorted(seen) == list(range(len(full)))
    assert max(sizes) - min(sizes) <= 1  # balanced to a row


def test_shuffle_is_seeded_bounded_and_complete(tmp_path):
    paths, full = _multi_parquet(tmp_path)

    def rows(**kw):
        return read_all(fastaxo.iter_batches(paths, batch_rows=64, **kw))[0].column("row").to_pylist()

    a, b, c = rows(shuffle_buffer=300, seed=1), rows(shuffle_buffer=300, seed=1), rows(shuffle_buffer=300, seed=2)
    assert a == b and a != c
    assert sorted(a) == list(range(len(full)))
    assert a != sorted(a)
    # bounded: a row moves at most one window (plus one decoded piece) away
    pos = np.empty(len(a), np.int64)
    pos[np.array(a)] = np.arange(len(a))
    assert np.abs(pos - np.arange(len(a))).max() < 300 + 2 * 4096
    r = fastaxo.iter_batches(paths, batch_rows=64, shuffle_buffer=300, seed=1)
    r.set_epoch(1)
    e1 = read_all(r)[0].column("row").to_pylist()
    assert e1 != a and sorted(e1) == sorted(a)


def _resume_cases():
    return st.tuples(st.sampled_from(["parquet", "jsonl.gz", "text", "arrows", "csv"]), st.integers(1, 200),
                     st.integers(0, 60), st.sampled_from([0, 90, 1000]), st.integers(1, 3), st.integers(0, 2))


@given(case=_resume_cases(), new_batch=st.integers(1, 200))
def test_resume_continues_exactly_where_the_consumer_stopped(tmp_path_factory, case, new_batch):
    fmt, batch_rows, stop_after, shuffle, world, rank_pick = case
    rank = rank_pick % world
    d = tmp_path_factory.mktemp("resume")
    paths, full = _multi_parquet(d, n=300)
    small = full.select(["row", "s"])
    if fmt == "jsonl.gz":
        paths = []
        for i, t in enumerate(small.to_batches(max_chunksize=500)):
            p = d / f"f{i}.jsonl.gz"
            with gzip.open(p, "wt") as fh:
                fh.write("".join(json.dumps(r) + "\n" for r in t.to_pylist()))
            paths.append(str(p))
    elif fmt in ("text", "csv"):
        p = d / f"f.{'txt' if fmt == 'text' else 'csv'}"
        if fmt == "text":
            p.write_text("".join(f"{i}\n" for i in small.column("row").to_pylist()))
        else:
            pcsv.write_csv(small.select(["row"]), p)
        paths = [str(p)]
    elif fmt == "arrows":
        paths = [str(d / "f.arrows")]
        with pa.ipc.new_stream(paths[0], full.schema) as w:
            w.write_table(full, max_chunksize=111)
    kw = dict(rank=rank, world_size=world, shuffle_buffer=shuffle, seed=3, block_bytes=700)
    col = "text" if fmt == "text" else "row"
    whole = read_all(fastaxo.iter_batches(paths, batch_rows=batch_rows, **kw))[0].column(col).to_pylist()
    r = fastaxo.iter_batches(paths, batch_rows=batch_rows, prefetch=2, **kw)
    head = []
    for _, b in zip(range(stop_after), r):
        head.extend(b.column(col).to_pylist())
    state = json.loads(json.dumps(r.state_dict()))  # survives JSON (a checkpoint file)
    r.close()
    assert state["rows"] == len(head)
    r2 = fastaxo.iter_batches(paths, batch_rows=new_batch, prefetch=1, **kw)
    r2.load_state_dict(state)
    tail = read_all(r2)[0].column(col).to_pylist() if len(head) < len(whole) else list(r2)
    assert head + list(tail) == whole
    assert r2.state_dict()["rows"] == len(whole)


def test_resume_does_not_reread_consumed_parquet_row_groups(tmp_path):
    t = pa.concat_tables(chat_batches(4000, chunk_rows=4000))
    path = tmp_path / "t.parquet"
    write_parquet(t, path, 500)
    r = fastaxo.iter_parquet(path, batch_rows=500, prefetch=0)
    for _, _b in zip(range(6), r):
        pass
    state = r.state_dict()
    assert state["position"]["unit"] == 6 and state["position"]["offset"] == 0
    r2 = fastaxo.iter_parquet(path, batch_rows=500, prefetch=0)
    r2.load_state_dict(state)
    opened = []
    orig = pq.ParquetFile.iter_batches

    def spy(self, *a, **kw):
        opened.append(tuple(kw["row_groups"]))
        return orig(self, *a, **kw)

    pq.ParquetFile.iter_batches = spy
    try:
        rest = read_all(r2)[0]
    finally:
        pq.ParquetFile.iter_batches = orig
    assert sorted(set(opened)) == [(6,), (7,)]  # one call per row group and column decoder
    assert rest.equals(t.slice(3000).combine_chunks())


def test_state_from_another_source_is_refused(tmp_path):
    paths, _ = _multi_parquet(tmp_path)
    r = fastaxo.iter_batches(paths, batch_rows=10)
    next(r)
    state = r.state_dict()
    r.close()
    with pytest.raises(InvalidInputError, match="state: it was saved for world_size=1"):
        fastaxo.iter_batches(paths, world_size=2).load_state_dict(state)
    with pytest.raises(InvalidInputError, match="state: it was saved for files="):
        fastaxo.iter_batches(paths[:2]).load_state_dict(state)
    with pytest.raises(InvalidInputError, match="state: expected a dict"):
        fastaxo.iter_batches(paths).load_state_dict({"rows": 3})


# --------------------------------------------------------------------------- errors

def test_errors_name_the_argument_the_file_and_the_place(tmp_path):
    with pytest.raises(SourceNotFoundError, match="no such file or directory: .*missing.parquet"):
        fastaxo.iter_batches(tmp_path / "missing.parquet")
    with pytest.raises(SourceNotFoundError, match="glob .* matches no file"):
        fastaxo.iter_batches(str(tmp_path / "*.parquet"))
    (tmp_path / "x.weird").write_text("a\n")
    with pytest.raises(InvalidInputError, match="cannot tell the format of .*x.weird.*pass format="):
        fastaxo.iter_batches(tmp_path / "x.weird")
    assert read_all(fastaxo.iter_batches(tmp_path / "x.weird", format="text"))[0].num_rows == 1
    with pytest.raises(InvalidInputError, match="format must be one of"):
        fastaxo.iter_batches(tmp_path / "x.weird", format="xml")
    for kw, msg in [({"batch_rows": 0}, "batch_rows must be > 0, got 0"),
                    ({"rank": 2, "world_size": 2}, r"rank must be in \[0, world_size=2\), got 2"),
                    ({"prefetch": -1}, "prefetch must be >= 0"),
                    ({"seed": -3}, "seed must be an int >= 0")]:
        with pytest.raises(InvalidInputError, match=msg):
            fastaxo.iter_batches(tmp_path / "x.weird", format="text", **kw)
    with pytest.raises(InvalidTypeError, match="batch_rows must be an int, got float"):
        fastaxo.iter_batches(tmp_path / "x.weird", format="text", batch_rows=1.5)
    with pytest.raises(InvalidTypeError, match="columns must be a list"):
        fastaxo.iter_batches(tmp_path / "x.weird", format="text", columns="text")


def test_truncated_and_corrupt_parquet(tmp_path):
    t = pa.concat_tables(chat_batches(3000, chunk_rows=3000))
    good = tmp_path / "good.parquet"
    # page CRCs: without them random bytes inside a snappy page can decode "fine" (for pyarrow too)
    pq.write_table(t, good, row_group_size=1000, compression="snappy", write_page_checksum=True)
    data = good.read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(FileFormatError, match=r"cut.parquet \(footer\): cannot open as Parquet") as e:
        fastaxo.iter_parquet(tmp_path / "cut.parquet")
    assert e.value.path.endswith("cut.parquet")
    md = pq.ParquetFile(good).metadata
    col = md.row_group(1).column(1)  # the text column of row group 1
    bad = bytearray(data)
    mid = col.data_page_offset + col.total_compressed_size // 2
    bad[mid: mid + 4096] = np.random.default_rng(0).bytes(4096)
    (tmp_path / "bad.parquet").write_bytes(bytes(bad))
    r = fastaxo.iter_parquet(tmp_path / "bad.parquet", batch_rows=500)
    got = 0
    with pytest.raises(FileFormatError, match=r"bad.parquet \(row group 1 of 3\)"):
        for b in r:
            got += b.num_rows
    assert got <= 1000  # what came before the damage, never a silently short read


def test_truncated_arrow_stream_and_file(tmp_path):
    t = pa.concat_tables(chat_batches(2000, chunk_rows=2000))
    with pa.ipc.new_stream(tmp_path / "s.arrow", t.schema) as w:
        w.write_table(t, max_chunksize=500)
    data = (tmp_path / "s.arrow").read_bytes()
    (tmp_path / "cut_mid.arrow").write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(FileFormatError, match=r"cut_mid.arrow \(message at byte \d+\)"):
        list(fastaxo.iter_batches(tmp_path / "cut_mid.arrow"))
    # cut exactly at a message boundary: only the missing end-of-stream marker tells
    r = pa.ipc.open_stream(tmp_path / "s.arrow")
    sink = pa.BufferOutputStream()
    w = pa.ipc.new_stream(sink, t.schema)
    w.write_batch(r.read_next_batch())
    cut = sink.getvalue().to_pybytes()  # no close(): no end-of-stream marker
    (tmp_path / "cut_edge.arrow").write_bytes(cut)
    with pytest.raises(FileFormatError, match="without its end-of-stream marker"):
        list(fastaxo.iter_batches(tmp_path / "cut_edge.arrow"))
    with pa.ipc.new_file(tmp_path / "f.arrow", t.schema) as w:
        w.write_table(t)
    fdata = (tmp_path / "f.arrow").read_bytes()
    (tmp_path / "fcut.arrow").write_bytes(fdata[:-100])
    with pytest.raises(FileFormatError, match=r"fcut.arrow"):
        list(fastaxo.iter_batches(tmp_path / "fcut.arrow"))


@pytest.mark.parametrize("where", ["value", "key", "nested"])
def test_a_lone_surrogate_in_jsonl_names_the_line_and_the_escape(tmp_path, where):
    """JSON may escape a lone surrogate (Python's json reads it), Arrow's strings cannot hold
    one: the error names the line and the escape, not a type hint that does not apply."""
    lines = [json.dumps({"messages": [{"role": "user", "content": f"hi {i}"}]})
             for i in range(3000)]
    bad = {"value": '{"messages": [{"role": "user", "content": "a\\udc80b"}]}',
           "key": '{"messages": [{"role": "user", "content": "x", "\\ud83d": 1}]}',
           "nested": '{"messages": [{"role": "user", "content": ["\\ud83dA"]}]}'}[where]
    lines[2345] = bad
    path = tmp_path / "sur.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(FileFormatError, match=r"sur.jsonl \(line 2346\): a string holds a lone "
                       r"surrogate \(the escape \\u(dc80|d83d) without its pair\)") as e:
        list(fastaxo.iter_batches(path, block_bytes=4096, batch_rows=100))
    assert "schema=" not in str(e.value)


def test_jsonl_and_csv_errors_name_the_line(tmp_path):
    lines = [json.dumps({"a": i, "b": "x"}) for i in range(2000)]
    lines[1234] = '{"a": 5, "b": "x"'  # broken JSON on line 1235
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(FileFormatError, match=r"bad.jsonl \(line 1235\): Expecting ',' delimiter") as e:
        list(fastaxo.iter_batches(tmp_path / "bad.jsonl", block_bytes=4096, batch_rows=100))
    assert e.value.location == "line 1235" and "schema=" not in str(e.value)
    # past the first 16 MiB (where the types are inferred), while reading
    big = [json.dumps({"a": i, "b": "x" * 200}) for i in range(90_000)]
    big[88_000] = '{"a": 1,, "b": "x"}'
    (tmp_path / "late.jsonl").write_text("\n".join(big) + "\n")
    r = fastaxo.iter_batches(tmp_path / "late.jsonl", batch_rows=10_000, block_bytes=1 << 20)
    got = 0
    with pytest.raises(FileFormatError, match=r"late.jsonl \(line 88001\)"):
        for b in r:
            got += b.num_rows
    assert got <= 88_000
    big[88_000] = json.dumps({"a": 5.5, "b": "x"})  # a float where the first 16 MiB had ints
    (tmp_path / "typed.jsonl").write_text("\n".join(big) + "\n")
    with pytest.raises(FileFormatError, match=r"typed.jsonl \(lines \d+-\d+\).*pass schema="):
        list(fastaxo.iter_batches(tmp_path / "typed.jsonl", block_bytes=1 << 20))
    ok = fastaxo.iter_batches(tmp_path / "typed.jsonl", block_bytes=1 << 20,
                              schema=pa.schema([("a", pa.float64()), ("b", pa.string())]))
    assert read_all(ok)[0].column("a")[88_000].as_py() == 5.5
    (tmp_path / "short.csv").write_text("a,b\n1,2\n3\n")
    with pytest.raises(FileFormatError, match=r"short.csv \(lines 2-3\)"):
        list(fastaxo.iter_batches(tmp_path / "short.csv"))
    (tmp_path / "bad.txt").write_bytes(b"fine\nbad \xff byte\n")
    with pytest.raises(FileFormatError, match=r"bad.txt \(lines 1-2\).*line 2 of the block"):
        list(fastaxo.iter_batches(tmp_path / "bad.txt"))


def test_schemas_that_differ_across_files(tmp_path):
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "1.parquet")
    pq.write_table(pa.table({"a": ["x"]}), tmp_path / "2.parquet")
    with pytest.raises(SchemaMismatchError, match=r"2.parquet has a different schema from .*1.parquet "
                                                  r"\(column 0: a: int64 vs a: string\)"):
        fastaxo.iter_batches(tmp_path)
    (tmp_path / "a.csv").write_text("x,y\n1,2\n")
    (tmp_path / "b.csv").write_text("x,z\n1,2\n")
    with pytest.raises(SchemaMismatchError, match=r"b.csv: the header names columns \['x', 'z'\]"):
        list(fastaxo.iter_batches([tmp_path / "a.csv", tmp_path / "b.csv"]))
    with pytest.raises(InvalidInputError, match="files of different formats"):
        fastaxo.iter_batches([tmp_path / "a.csv", tmp_path / "1.parquet"])


# --------------------------------------------------------------------------- threads, stats, views

def test_close_midway_exceptions_and_consumers_in_other_threads(tmp_path):
    t = pa.concat_tables(chat_batches(5000, chunk_rows=5000))
    write_parquet(t, tmp_path / "t.parquet", 700)
    def reader_threads():
        return {th for th in threading.enumerate() if th.name == "fastaxo-reader"}

    before = reader_threads()
    r = fastaxo.iter_parquet(tmp_path / "t.parquet", batch_rows=100, prefetch=3)
    next(r)
    time.sleep(0.05)
    assert reader_threads() - before  # read-ahead + two column decoders
    r.close()  # the threads stop (and are joined)
    assert not reader_threads() - before
    for prefetch in (3, 0):  # dropped half-way without close(): collected at once, threads stopped
        r = fastaxo.iter_parquet(tmp_path / "t.parquet", batch_rows=100, prefetch=prefetch)
        next(r)
        del r
        assert not reader_threads() - before
    out: list[int] = []
    r = fastaxo.iter_parquet(tmp_path / "t.parquet", batch_rows=333)
    th = threading.Thread(target=lambda: out.extend(b.num_rows for b in r))
    th.start()
    th.join()
    assert sum(out) == 5000


def test_start_reads_ahead_before_the_first_batch(tmp_path):
    """``start()`` runs the read-ahead before the first ``next`` (prepare reads the first input
    while its tokenizer loads): the batches are the same, a second call starts nothing new,
    and neither does a call after the last batch or without a read-ahead."""
    t = pa.concat_tables(chat_batches(3000, chunk_rows=3000))
    with open(tmp_path / "t.jsonl", "w") as fh:
        for row in t.select(["id", "text"]).to_pylist():
            fh.write(json.dumps(row) + "\n")
    def reader_threads():
        return {th for th in threading.enumerate() if th.name == "fastaxo-reader"}

    def ids(reader):
        return [int(x) for b in reader for x in b.column("id").to_numpy()]

    before = reader_threads()
    r = fastaxo.iter_batches(tmp_path / "t.jsonl", batch_rows=100, prefetch=2)
    assert r.start() is r
    time.sleep(0.05)
    started = reader_threads() - before
    assert started  # running, nothing taken yet (30 batches: the full queue holds it)
    assert r.stats.batches == 0
    r.start()
    assert reader_threads() - before == started
    assert ids(r) == list(range(3000))
    r.start()  # after the last batch: nothing to read
    assert not reader_threads() - before
    assert ids(r) == []
    r0 = fastaxo.iter_batches(tmp_path / "t.jsonl", batch_rows=100, prefetch=0)
    r0.start()
    assert not reader_threads() - before
    assert ids(r0) == list(range(3000))


def test_exit_with_a_live_reader_is_clean(tmp_path):
    write_parquet(pa.concat_tables(chat_batches(20000, chunk_rows=20000)), tmp_path / "t.parquet", 2000)
    code = ("import fastaxo, sys; r = fastaxo.iter_parquet(sys.argv[1], batch_rows=64, prefetch=8); "
            "next(r); print('ok')")
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "t.parquet")], capture_output=True, text=True,
                       cwd="/", timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr


def test_stats_measure_rows_stall_io_and_rss(tmp_path):
    write_parquet(pa.concat_tables(chat_batches(6000, chunk_rows=6000)), tmp_path / "t.parquet", 1000)
    r = fastaxo.iter_parquet(tmp_path / "t.parquet", batch_rows=1000)
    assert r.num_rows == 6000
    for b in r:
        time.sleep(0.01)  # a consumer slower than the reader barely waits
    s = r.stats
    assert (s.rows, s.batches) == (6000, 6)
    assert 0 <= s.stall_seconds <= s.seconds and s.rows_per_s > 0
    assert s.bytes > 6000 * 2000
    if os.path.exists("/proc/self/io"):
        assert s.io_rchar is not None and s.io_rchar > 0 and s.io_read_bytes is not None
    if sys.platform.startswith("linux"):
        assert s.peak_rss_bytes >= s.rss_bytes > 0
    else:  # VmRSS and VmHWM are read from Linux's /proc/self/status
        assert s.rss_bytes is None and s.peak_rss_bytes is None
    assert set(s.as_dict()) >= {"rows_per_s", "stall_fraction", "io_read_bytes", "peak_rss_bytes"}
    assert "rows/s" in str(s)


def test_list_column_views_without_copies(tmp_path):
    t = pa.concat_tables(chat_batches(3000, chunk_rows=3000))
    write_parquet(t, tmp_path / "t.parquet", 1000)
    for b in fastaxo.iter_parquet(tmp_path / "t.parquet", batch_rows=700):
        values, offsets = fastaxo.list_column(b, "input_ids")
        assert values.dtype == np.int32 and len(offsets) == b.num_rows + 1
        col = b.column("input_ids")
        assert np.shares_memory(values, np.frombuffer(col.buffers()[3], np.int32))
        for i in (0, b.num_rows - 1):
            assert values[offsets[i]:offsets[i + 1]].tolist() == col[i].as_py()
        data, toff = fastaxo.list_column(b, "text")
        assert bytes(data[toff[5]:toff[6]]).decode() == b.column("text")[5].as_py()
    with pytest.raises(ColumnNotFoundError, match="column: 'nope' not in"):
        fastaxo.list_column(b, "nope")
    with pytest.raises(InvalidTypeError, match="expected list<number> or string/binary, got int64"):
        fastaxo.list_column(b, "id")


def test_packing_straight_from_the_reader(tmp_path):
    t = pa.concat_tables(chat_batches(4000, chunk_rows=4000))
    write_parquet(t, tmp_path / "t.parquet", 1000)
    tokens = 0
    for b in fastaxo.iter_parquet(tmp_path / "t.parquet", columns=["input_ids"], batch_rows=1500):
        p = fastaxo.pack(b.column("input_ids"), 4096)
        tokens += int(p.bins.lengths.sum())
    assert tokens == sum(len(x) for x in t.column("input_ids").to_pylist())


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="/proc (VmRSS, VmHWM and clear_refs of /proc/self): Linux only")
def test_memory_is_bounded_by_the_batch_not_the_file(tmp_path):
    """A 16k-row file and a 160k-row file (~290 MB), each one row group: fastaxo's peak is
    about the same for both (pages stream; a batch plus the read-ahead is held), while
    pyarrow's default iter_batches holds the whole row group."""
    files = {}
    for n in (16_000, 160_000):
        files[n] = tmp_path / f"f{n}.parquet"
        for tb in chat_batches(n, chunk_rows=n):
            pq.write_table(tb, files[n], row_group_size=n)
    code = """
import sys, fastaxo, pyarrow.parquet as pq
def kib(f):
    return int([l for l in open('/proc/self/status') if l.startswith(f)][0].split()[1])
base = kib('VmRSS:'); open('/proc/self/clear_refs', 'w').write('5')
n = 0
if sys.argv[1] == 'fastaxo':
    for b in fastaxo.iter_parquet(sys.argv[2], batch_rows=2048, prefetch=2):
        n += b.num_rows
else:
    for b in pq.ParquetFile(sys.argv[2]).iter_batches():
        n += b.num_rows
print(n, (kib('VmHWM:') - base) * 1024)
"""

    def peak(who: str, n: int) -> int:
        best = None
        for _ in range(3):  # the lowest of three runs: RSS on a shared machine is noisy upwards
            p = subprocess.run([sys.executable, "-c", code, who, str(files[n])], capture_output=True, text=True,
                               cwd="/", timeout=300)
            assert p.returncode == 0, p.stderr
            rows, pk = map(int, p.stdout.split())
            assert rows == n
            best = pk if best is None else min(best, pk)
        return best

    small, big, pyarrow_big = peak("fastaxo", 16_000), peak("fastaxo", 160_000), peak("pyarrow", 160_000)
    assert big <= 1.35 * small + (8 << 20), (small, big)
    assert big < pyarrow_big / 2, (big, pyarrow_big)
    assert big < os.path.getsize(files[160_000]) / 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork: POSIX only")
def test_a_forked_child_goes_on_from_the_last_batch_returned(tmp_path):
    import multiprocessing

    t = pa.concat_tables(chat_batches(5000, chunk_rows=5000))
    write_parquet(t, tmp_path / "t.parquet", 700)
    r = fastaxo.iter_parquet(tmp_path / "t.parquet", batch_rows=100, prefetch=3)
    first = next(r)
    time.sleep(0.05)  # the read-ahead thread is running when the process forks
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()

    def child():
        q.put([int(x) for b in r for x in b.column("id").to_numpy()])

    p = ctx.Process(target=child)
    p.start()
    got = q.get(timeout=120)
    p.join(timeout=60)
    assert p.exitcode == 0
    assert first.column("id").to_pylist() == list(range(100))
    assert got == list(range(100, 5000))
    rest = [int(x) for b in r for x in b.column("id").to_numpy()]  # the parent is unaffected
    assert rest == list(range(100, 5000))
