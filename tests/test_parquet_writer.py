"""fastaxo's Parquet writer for integer-list tables (prepare's output): its page bodies equal the
plain-Python twin byte for byte, and its files read back with pyarrow as the table written,
whatever the rows (empty, huge, sliced, chunked), the threads or the process (a forked child)."""

from __future__ import annotations

import multiprocessing
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EXT
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import ragged_lengths

from fastaxo._core import backend
from fastaxo._reference import parquet as reference
from fastaxo.pipeline import parquet as pqw
from fastaxo.pipeline.parquet import ListTableWriter
from fastaxo.pipeline.writer import Writer


def _lists(lengths: list[int], t: pa.DataType, seed: int, nullable_item: bool = True) -> pa.Array:
    rng = np.random.default_rng(seed)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    info = np.iinfo(t.to_pandas_dtype())
    values = rng.integers(info.min, info.max, size=int(offsets[-1]), dtype=t.to_pandas_dtype(),
                          endpoint=True)
    typ = pa.list_(pa.field("item", t, nullable=nullable_item))
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, type=t), type=typ)


@st.composite
def tables(draw) -> tuple[pa.Schema, list[list[pa.Array | pa.ChunkedArray]]]:
    """A schema of 1-3 integer-list columns and 0-3 row groups of them: rows empty, short and
    huge (past a page), arrays sliced, and columns split in chunks."""
    ncols = draw(st.integers(1, 3))
    fields = [pa.field(f"c{i}", pa.list_(pa.field("item", draw(st.sampled_from(
        [pa.int32(), pa.int64()])), nullable=draw(st.booleans()))), nullable=draw(st.booleans()))
        for i in range(ncols)]
    schema = pa.schema(fields, metadata={"fastaxo.test": "1"} if draw(st.booleans()) else None)
    groups = []
    for _ in range(draw(st.integers(0, 3))):
        lengths = draw(ragged_lengths(max_rows=12))
        cols: list[pa.Array | pa.ChunkedArray] = []
        for f in fields:
            extra = draw(st.integers(0, 3))
            arr = _lists([2] * extra + lengths + [1] * extra, f.type.value_type,
                          draw(st.integers(0, 2**32 - 1)), f.type.value_field.nullable)
            arr = arr.slice(extra, len(lengths)).cast(f.type)
            if len(arr) > 1 and draw(st.booleans()):
                cut = draw(st.integers(0, len(arr)))
                arr = pa.chunked_array([arr.slice(0, cut), arr.slice(cut)], type=f.type)
            cols.append(arr)
        groups.append(cols)
    return schema, groups


def _write(path: str, schema: pa.Schema, groups, threads: int = 1) -> None:
    w = ListTableWriter(path, schema, num_threads=threads)
    for cols in groups:
        w.write(cols)
    w.close()


def _expected(schema: pa.Schema, groups) -> pa.Table:
    if not groups:
        return schema.empty_table()
    return pa.concat_tables(pa.Table.from_arrays(cols, schema=schema) for cols in groups)


@pytest.mark.skipif(not EXT, reason="compares the C page maker with its twin")
@given(lengths=ragged_lengths(), start=st.integers(0, 5), width=st.sampled_from([4, 8]),
       levels=st.sampled_from([(1, 0), (2, 0), (2, 1), (3, 1)]))
def test_the_c_page_body_equals_the_reference(lengths, start, width, levels):
    max_def, empty_def = levels
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    offsets += start
    values = np.random.default_rng(len(lengths)).integers(
        0, 255, size=(int(offsets[-1]) + 3) * width, dtype=np.uint8)
    out = np.full(backend.pack_ext.parquet_page_bound(len(lengths),
                                                      int(offsets[-1] - start) * width),
                  7, dtype=np.uint8)
    n, count, lo, hi = backend.pack_ext.parquet_list_page(offsets, values, width, max_def,
                                                          empty_def, out)
    want, want_count, want_lo, want_hi = reference.list_page(offsets, values, width, max_def,
                                                             empty_def)
    assert bytes(out[:n]) == want
    assert count == want_count == sum(max(x, 1) for x in lengths)
    # the bounds of the page's values, read as signed integers of `width` bytes
    page = values[int(offsets[0]) * width:int(offsets[-1]) * width].view(f"<i{width}")
    if len(page):
        assert (lo, hi) == (want_lo, want_hi) == (int(page.min()), int(page.max()))
    else:
        assert lo is hi is want_lo is want_hi is None


@pytest.mark.skipif(not EXT, reason="the C page maker's argument checks")
def test_the_c_page_maker_refuses_what_it_cannot_read():
    make = backend.pack_ext.parquet_list_page
    values = np.zeros(40, dtype=np.uint8)
    out = np.zeros(1000, dtype=np.uint8)
    good = np.array([0, 2, 5], dtype=np.int32)
    with pytest.raises(ValueError, match="at least one entry"):
        make(np.zeros(0, np.int32), values, 4, 3, 1, out)
    with pytest.raises(ValueError, match="width"):
        make(good, values, 3, 3, 1, out)
    with pytest.raises(ValueError, match="empty_def"):
        make(good, values, 4, 1, 1, out)
    with pytest.raises(ValueError, match="values holds 10"):
        make(np.array([0, 11], np.int32), values, 4, 3, 1, out)
    with pytest.raises(ValueError, match="must not decrease"):
        make(np.array([0, 5, 2, 6], np.int32), values, 4, 3, 1, out)
    with pytest.raises(ValueError, match=">= 0"):
        make(np.array([-1, 2], np.int32), values, 4, 3, 1, out)
    with pytest.raises(ValueError, match="out holds 10 bytes"):
        make(good, values, 4, 3, 1, np.zeros(10, np.uint8))
    with pytest.raises(ValueError, match="rows and value_bytes"):
        backend.pack_ext.parquet_page_bound(-1, 0)


@settings(max_examples=60, deadline=None)
@given(case=tables(), threads=st.sampled_from([1, 2]))
def test_files_read_back_as_the_table(tmp_path_factory, case, threads):
    schema, groups = case
    path = str(tmp_path_factory.mktemp("pq") / "t.parquet")
    _write(path, schema, groups, threads)
    want = _expected(schema, groups)
    f = pq.ParquetFile(path)
    assert f.metadata.num_row_groups == len(groups)
    back = f.read()
    assert back.equals(want)
    # The same schema, metadata and all, as pyarrow's writer gives the same table.
    ref = path + ".pyarrow"
    pq.write_table(want, ref, compression="zstd", use_dictionary=False)
    assert back.schema.equals(pq.read_table(ref).schema, check_metadata=True)
    for i, cols in enumerate(groups):
        assert f.read_row_group(i).equals(pa.Table.from_arrays(cols, schema=schema))
    batches = list(f.iter_batches(batch_size=3))
    assert pa.Table.from_batches(batches, schema=back.schema).equals(back)


def test_pages_split_at_rows_and_many_pages_read_back(tmp_path, monkeypatch):
    monkeypatch.setattr(pqw, "PAGE_VALUE_BYTES", 64)  # a page per few rows
    lengths = [0, 3, 40, 0, 0, 17, 1, 100, 5] * 30
    arr = _lists(lengths, pa.int32(), 1)
    schema = pa.schema([pa.field("input_ids", arr.type), pa.field("labels", arr.type)])
    path = str(tmp_path / "p.parquet")
    _write(path, schema, [[arr, arr], [arr.slice(7), arr.slice(7)]], threads=2)
    f = pq.ParquetFile(path)
    col = f.metadata.row_group(0).column(0)
    assert col.num_values == sum(max(n, 1) for n in lengths)
    assert col.compression == "ZSTD" and set(col.encodings) == {"PLAIN", "RLE"}
    assert f.read().equals(_expected(schema, [[arr, arr], [arr.slice(7), arr.slice(7)]]))


def test_threads_and_the_reference_pages_write_the_same_bytes(tmp_path, monkeypatch):
    lengths = [5, 0, 300_000, 2, 0, 70_000, 1] * 3
    arr = _lists(lengths, pa.int32(), 2)
    schema = pa.schema([pa.field("input_ids", arr.type), pa.field("position_ids", arr.type)],
                       metadata={"k": "v"})
    groups = [[arr, arr], [arr.slice(3), arr.slice(3)]]
    paths = [str(tmp_path / f"{i}.parquet") for i in range(3)]
    _write(paths[0], schema, groups, threads=1)
    _write(paths[1], schema, groups, threads=2)
    monkeypatch.setattr(backend, "pack_ext", None)
    _write(paths[2], schema, groups, threads=2)
    data = [open(p, "rb").read() for p in paths]
    assert data[0] == data[1] == data[2]
    assert pq.read_table(paths[0]).equals(_expected(schema, groups))


def test_nulls_and_other_types_are_refused_by_name(tmp_path, monkeypatch):
    t = pa.list_(pa.int32())
    schema = pa.schema([pa.field("input_ids", t)])
    assert ListTableWriter.takes(pa.schema([pa.field("x", pa.list_(pa.int16()))]))
    assert not ListTableWriter.takes(pa.schema([pa.field("x", pa.list_(pa.uint16()))]))
    assert not ListTableWriter.takes(pa.schema([pa.field("x", pa.int32())]))
    assert not ListTableWriter.takes(pa.schema([]))
    monkeypatch.setattr(pqw.sys, "byteorder", "big")  # (pages copy values as they are)
    assert not ListTableWriter.takes(schema)
    monkeypatch.undo()
    with pytest.raises(ValueError, match="lists of int8, int16, int32 or int64"):
        ListTableWriter(str(tmp_path / "a.parquet"), pa.schema([pa.field("x", pa.string())]))
    w = ListTableWriter(str(tmp_path / "b.parquet"), schema)
    with pytest.raises(ValueError, match="'input_ids' holds 1 null rows"):
        w.write([pa.array([[1], None], type=t)])
    with pytest.raises(ValueError, match="'input_ids' holds null values"):
        w.write([pa.array([[1, None]], type=t)])
    with pytest.raises(ValueError, match="must hold 1 arrays, got 2"):
        w.write([pa.array([[1]], type=t)] * 2)
    w.abort()
    # the file is never created over an existing one (a temporary's name is new)
    with pytest.raises(FileExistsError):
        ListTableWriter(str(tmp_path / "b.parquet"), schema)


def test_a_row_past_a_pages_int32_sizes_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.setattr(pqw, "MAX_PAGE_BYTES", 1000)  # (2 GiB rows are too big for a test)
    monkeypatch.setattr(pqw, "PAGE_VALUE_BYTES", 64)  # (the long row alone in its page)
    arr = _lists([10, 300, 10], pa.int32(), 6)
    w = ListTableWriter(str(tmp_path / "big.parquet"), pa.schema([pa.field("input_ids",
                                                                           arr.type)]))
    with pytest.raises(ValueError, match="'input_ids': 1 row.s. of 300 values make a page of 1,"):
        w.write([arr])
    w.abort()


def test_a_writer_refuses_unequal_columns(tmp_path):
    t = pa.list_(pa.int32())
    schema = pa.schema([pa.field("a", t), pa.field("b", t)])
    w = ListTableWriter(str(tmp_path / "c.parquet"), schema)
    with pytest.raises(ValueError, match="'b' holds 1 rows, not 2"):
        w.write([pa.array([[1], [2]], type=t), pa.array([[1]], type=t)])
    w.abort()


def _child_writes(path: str, q) -> None:
    arr = _lists([3, 0, 50_000, 7] * 20, pa.int32(), 3)
    schema = pa.schema([pa.field("a", arr.type), pa.field("b", arr.type)])
    _write(path, schema, [[arr, arr]] * 3, threads=2)
    q.put(pq.read_table(path).equals(_expected(schema, [[arr, arr]] * 3)))


def test_a_forked_child_writes_without_the_parents_pool(tmp_path):
    # The parent's writer starts its pool of threads; a forked child has none of them.
    arr = _lists([4, 0, 9] * 200, pa.int32(), 4)
    schema = pa.schema([pa.field("a", arr.type)])
    w = ListTableWriter(str(tmp_path / "parent.parquet"), schema, num_threads=2)
    w.write([arr])
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_writes, args=(str(tmp_path / "child.parquet"), q))
    p.start()
    p.join(120)
    alive = p.is_alive()
    if alive:
        p.kill()
    assert not alive, "the forked child hung"
    assert p.exitcode == 0 and q.get(timeout=5) is True
    w.write([arr])
    w.close()
    assert pq.read_table(str(tmp_path / "parent.parquet")).num_rows == 2 * len(arr)


def test_the_writer_commits_whole_files_or_none(tmp_path):
    arr = _lists([4, 0, 9], pa.int32(), 5)
    schema = pa.schema([pa.field("input_ids", arr.type)])
    out = str(tmp_path / "out.parquet")
    w = Writer(out, schema, num_threads=2)
    w.write([arr])
    w.abort()
    assert os.listdir(tmp_path) == []
    w = Writer(out, schema, num_threads=2)
    w.write([arr])
    assert w.commit() == os.path.getsize(out)
    assert os.listdir(tmp_path) == ["out.parquet"]
    assert pq.read_table(out).column(0).combine_chunks().equals(arr)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([pa.int8(), pa.int16(), pa.int32()]),
                          st.integers(-(2**31), 2**31 - 1), st.integers(0, 2**31)),
                min_size=1, max_size=3),
       ragged_lengths(max_rows=12), st.booleans())
def test_a_type_narrowed_at_close_reads_back_as_pyarrow_writes_it(tmp_path_factory, cols,
                                                                   lengths, at_open):
    """Columns written as int32 and typed int8 / int16 / int32 in the footer (given at close,
    or at open) read back as the narrow table, with pyarrow's own Parquet schema; a value the
    type does not hold is refused at close, naming the column."""
    tmp = tmp_path_factory.mktemp("narrow")
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    arrays, narrow = [], []
    for t, centre, seed in cols:
        bits = t.bit_width
        lo = max(-(1 << (bits - 1)), min(centre, (1 << (bits - 1)) - 1) - 5)
        hi = min((1 << (bits - 1)) - 1, lo + 10)
        vals = np.random.default_rng(seed).integers(lo, hi, int(offsets[-1]), endpoint=True,
                                                    dtype=np.int32)
        arrays.append(pa.ListArray.from_arrays(pa.array(offsets), pa.array(vals)))
        narrow.append(t)
    wide = pa.schema([pa.field(f"c{i}", pa.list_(pa.int32())) for i in range(len(cols))])
    final = pa.schema([pa.field(f"c{i}", pa.list_(t)) for i, t in enumerate(narrow)],
                      metadata={"k": "v"})
    w = ListTableWriter(str(tmp / "ours.parquet"), final if at_open else wide)
    w.write(arrays)
    w.close(None if at_open else final)
    want = pa.Table.from_arrays([a.cast(f.type) for a, f in zip(arrays, final)], schema=final)
    got = pq.read_table(tmp / "ours.parquet")
    assert got.equals(want) and got.schema.metadata == final.metadata
    assert [f.type.value_type for f in got.schema] == narrow
    pq.write_table(want, tmp / "pyarrow.parquet", use_dictionary=False,
                   write_statistics=False)
    assert pq.ParquetFile(tmp / "ours.parquet").schema.equals(
        pq.ParquetFile(tmp / "pyarrow.parquet").schema)
    # one value past int8 in a column declared int8: refused, nothing written after it
    big = pa.ListArray.from_arrays(pa.array([0, 1], pa.int32()), pa.array([128], pa.int32()))
    w = ListTableWriter(str(tmp / "bad.parquet"), pa.schema([pa.field("x", big.type)]))
    w.write([big])
    with pytest.raises(ValueError, match=r"column 'x' holds values in \[128, 128\], outside "
                                         "int8"):
        w.close(pa.schema([pa.field("x", pa.list_(pa.int8()))]))
    if any(t.bit_width < 32 for t in narrow):  # narrow values are not pages: refused
        w = ListTableWriter(str(tmp / "n.parquet"), final)
        with pytest.raises(ValueError, match="values must be int32"):
            w.write([a.cast(f.type) for a, f in zip(arrays, final)])
        w.abort()


@pytest.mark.parametrize("extension", [True, False])
def test_the_prepare_writer_narrows_with_and_without_the_extension(tmp_path, monkeypatch,
                                                                      extension):
    """Writer.commit(schema): the extension's writer types the footer; pyarrow's (no
    extension) writes the file again under the final schema. Both read back equal, and a
    value the type cannot hold fails the commit, leaving no file."""
    if not extension:
        monkeypatch.setattr(backend, "pack_ext", None)
    elif not EXT:
        pytest.skip("the compiled writer")
    arr = pa.ListArray.from_arrays(pa.array([0, 2, 5], pa.int32()),
                                   pa.array([1, -100, 300, 4, 5], pa.int32()))
    wide = pa.schema([pa.field("a", arr.type)])
    final = pa.schema([pa.field("a", pa.list_(pa.int16()))])
    w = Writer(str(tmp_path / "o.parquet"), wide)
    w.write([arr])
    w.commit(final)
    got = pq.read_table(tmp_path / "o.parquet")
    assert got.schema.field("a").type == pa.list_(pa.int16())
    assert got.column("a").to_pylist() == [[1, -100], [300, 4, 5]]
    w = Writer(str(tmp_path / "p.parquet"), wide)
    w.write([arr])
    with pytest.raises((ValueError, pa.ArrowInvalid), match="300|int8"):
        try:
            w.commit(pa.schema([pa.field("a", pa.list_(pa.int8()))]))
        except BaseException:
            w.abort()
            raise
    assert sorted(os.listdir(tmp_path)) == ["o.parquet"]


@pytest.mark.skipif(not EXT, reason="the compiled bounds kernel")
@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=50), st.integers(0, 3),
       st.integers(1, 3))
def test_int32_bounds_equal_numpys(values, blocks, threads):
    """``_pack.int32_bounds`` (the standard layout's type decision) against NumPy: any values,
    across its blocks of PAR_MIN_ELEMS (the values repeated past them)."""
    a = np.array(values, np.int32)
    if blocks and len(a):
        a = np.resize(a, (1 << 18) * blocks + len(values))
        a[-1] = -(2**31) if blocks % 2 else 2**31 - 1  # an extreme in the last, short block
    got = backend.pack_ext.int32_bounds(a, threads)
    assert got == ((int(a.min()), int(a.max())) if len(a) else None)
