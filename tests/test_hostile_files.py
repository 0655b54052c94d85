"""Files that lie, change or kill: a damaged Parquet footer, JSON nested past what pyarrow's
parser survives, an Arrow file truncated under a memory map, an input still being written,
a resume state that is damaged or stale, and inputs that are not what they say. Each one is
a one-line fastaxo error naming the file, never a crash, never a silently different read."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EXT
from hypothesis import given
from hypothesis import strategies as st

import fastaxo
from fastaxo._core import backend
from fastaxo._core.backend import child_env
from fastaxo._reference import text as reference_text
from fastaxo.errors import FileFormatError, InvalidInputError
from fastaxo.readers.text import MAX_JSON_DEPTH

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


# --------------------------------------------------------------------------- deep JSON

def _depth_spec(block: bytes, limit: int) -> int:
    """csrc/fx_json.h's rules, byte by byte: the first line deeper than ``limit``, or -1."""
    for i, line in enumerate(block.split(b"\n")):
        depth, in_string, escaped = 0, False, False
        for c in line:
            if escaped:
                escaped = False
            elif c == 0x5C:
                escaped = True
            elif c == 0x22:
                in_string = not in_string
            elif not in_string and c in b"[{":
                depth += 1
                if depth > limit:
                    return i
            elif not in_string and c in b"]}":
                depth -= 1
    return -1


@given(st.lists(st.sampled_from([b"[", b"]", b"{", b"}", b'"', b"\\", b"\n", b"a", b" ", b",",
                                 b"\\\\", b'\\"', b"[[[", b"xxxxxxxxxxxx"]), max_size=300),
       st.integers(0, 6))
def test_the_depth_scan_and_its_twin_follow_the_rules(parts, limit):
    block = b"".join(parts)
    want = _depth_spec(block, limit)
    assert reference_text.json_too_deep(block, limit) == want
    if EXT is not None:
        assert backend.pack_ext.json_too_deep(block, limit) == want
        assert backend.pack_ext.json_too_deep(bytearray(block), limit) == want


def test_the_depth_scan_on_long_lines_and_the_block_edges():
    """The compiled scan skips eight bytes at a time: specials at every offset mod 8, and at
    the very end of the block."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(0, 80))
        block = bytes(rng.choice(list(b'ab []{}"\\\n'), n, p=[.3, .3, .1, .05, .05, .05, .05,
                                                              .04, .03, .03]).astype(np.uint8))
        for limit in (0, 1, 3):
            want = _depth_spec(block, limit)
            assert reference_text.json_too_deep(block, limit) == want
            if EXT is not None:
                assert backend.pack_ext.json_too_deep(block, limit) == want


_DEEP_CHILD = r"""
import sys, fastaxo
from fastaxo.errors import FastaxoError
path, use_schema = sys.argv[1], sys.argv[2] == "1"
import pyarrow as pa
kw = {"schema": pa.schema([("id", pa.int64()), ("a", pa.list_(pa.int64())), ("s", pa.string()),
                           ("deep", pa.list_(pa.int64()))]),
      "block_bytes": 4096} if use_schema else {}
try:
    print("rows", sum(b.num_rows for b in fastaxo.iter_batches(path, **kw)))
except FastaxoError as e:
    print("error", type(e).__name__, e)
"""


@pytest.mark.parametrize("use_schema", [False, True])
def test_a_row_nested_20000_deep_is_refused_by_line(tmp_path, use_schema):
    """A row nested 20,000 deep in the middle of a JSON Lines file crashed pyarrow's parser
    (SIGSEGV); it is refused, naming the file and the line, in the inference block and in a
    later block. Rows nested up to the limit, and brackets inside strings, still read."""
    path = tmp_path / "deep.jsonl"
    ok_deep = "[" * (MAX_JSON_DEPTH - 1) + "1" + "]" * (MAX_JSON_DEPTH - 1)
    lines = [json.dumps({"id": i, "a": [i]}) for i in range(2000)]
    lines[10] = json.dumps({"id": 10, "a": [10], "s": "[" * 30000})  # inside a string
    lines[1000] = '{"id": 1000, "a": [1], "deep": ' + "[" * 20000 + "]" * 20000 + "}"
    path.write_text("\n".join(lines) + "\n")
    p = subprocess.run([sys.executable, "-c", _DEEP_CHILD, str(path), str(int(use_schema))],
                       capture_output=True, text=True, cwd="/", env=child_env(), timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().startswith(f"error FileFormatError {path} (line 1001): a JSON value "
                                       f"nested more than {MAX_JSON_DEPTH} levels deep"), p.stdout
    assert len(p.stdout.strip().splitlines()) == 1
    del lines[1000]
    if not use_schema:  # (the schema has no room for it)
        lines[20] = '{"id": 20, "a": [20], "deep": ' + ok_deep + "}"  # MAX_JSON_DEPTH deep
    path.write_text("\n".join(lines) + "\n")
    p = subprocess.run([sys.executable, "-c", _DEEP_CHILD, str(path), str(int(use_schema))],
                       capture_output=True, text=True, cwd="/", env=child_env(), timeout=300)
    assert p.returncode == 0 and p.stdout.split() == ["rows", "1999"], (p.stdout, p.stderr[-2000:])


# --------------------------------------------------------------------------- truncated Arrow

_TRUNCATE_CHILD = r"""
import os, sys, warnings
import numpy as np
import fastaxo
from fastaxo.errors import FastaxoError
warnings.simplefilter("ignore", DeprecationWarning)
path, kind = sys.argv[1], sys.argv[2]
r = fastaxo.iter_batches(path, batch_rows=1000, memory_map=True, prefetch=2)
held = [next(r) for _ in range(3)]  # handed to the consumer, kept
os.truncate(path, os.path.getsize(path) // 3)  # cut under the reader
try:
    for b in r:
        held.append(b)
    print("read", sum(b.num_rows for b in held))
except FastaxoError as e:
    print("error", type(e).__name__, str(e).replace("\n", " | "))
total = 0
for b in held:  # the batches already handed over must still be readable
    v, o = fastaxo.list_column(b, "input_ids")
    total += int(v[o[0]:o[-1]].sum())
print("held", len(held), total)
"""


def _big_arrow(path, kind: str) -> list[int]:
    """An Arrow IPC file (or stream) of 40 batches of 1,000 rows; the per-batch token sums."""
    rng = np.random.default_rng(3)
    schema = pa.schema([("input_ids", pa.list_(pa.int32()))])
    sums = []
    with pa.OSFile(str(path), "wb") as f, (pa.ipc.new_file if kind == "file"
                                            else pa.ipc.new_stream)(f, schema) as w:
        for _ in range(40):
            lens = rng.integers(100, 400, 1000)
            off = np.concatenate(([0], np.cumsum(lens))).astype(np.int32)
            vals = rng.integers(0, 50000, int(off[-1]), dtype=np.int32)
            w.write_batch(pa.record_batch([pa.ListArray.from_arrays(off, vals)], schema=schema))
            sums.append(int(vals.sum()))
    return sums


@pytest.mark.parametrize("kind", ["file", "stream"])
def test_an_arrow_file_truncated_during_the_read_is_an_error_not_sigbus(tmp_path, kind):
    """memory_map=True handed out batches that pointed into a mapping of the file: cut the
    file while they are alive (or while the reader runs) and touching them raised SIGBUS,
    which kills the process. The batches handed over stay readable, and the rest of the read
    is a FileFormatError naming the file (or, when the read-ahead already had it, rows)."""
    path = tmp_path / f"big.{'arrow' if kind == 'file' else 'arrows'}"
    sums = _big_arrow(path, kind)
    p = subprocess.run([sys.executable, "-c", _TRUNCATE_CHILD, str(path), kind],
                       capture_output=True, text=True, cwd="/", env=child_env(), timeout=300)
    assert p.returncode == 0, f"exit {p.returncode}: {p.stderr[-2000:]}"
    first, held = p.stdout.strip().splitlines()
    assert first.startswith(f"error FileFormatError {path}"), first
    n = int(held.split()[1])
    assert 3 <= n < 40 and held == f"held {n} {sum(sums[:n])}", (held, first)


def test_memory_map_is_deprecated_and_reads_the_same(tmp_path):
    path = tmp_path / "t.arrow"
    sums = _big_arrow(path, "file")
    with pytest.warns(DeprecationWarning, match=r"memory_map=True\) no longer maps"):
        r = fastaxo.iter_batches(path, batch_rows=1000, memory_map=True)
    with r:
        got = [int(fastaxo.list_column(b, "input_ids")[0].sum()) for b in r]
    assert got == sums


# --------------------------------------------------------------------------- resume states

def _state_sources(d) -> dict[str, tuple[list[str], str]]:
    """One small source per format (several files where it matters): paths, key column."""
    rows = [{"row": i, "s": f"r{i}" * (i % 5)} for i in range(260)]
    out: dict[str, tuple[list[str], str]] = {}
    t = pa.Table.from_pylist(rows)
    ps = []
    for i in range(2):
        p = d / f"p{i}.parquet"
        pq.write_table(t.slice(130 * i, 130), p, row_group_size=40)
        ps.append(str(p))
    out["parquet"] = (ps, "row")
    p = d / "a.arrow"
    with pa.ipc.new_file(p, t.schema) as w:
        w.write_table(t, max_chunksize=30)
    out["arrow"] = ([str(p)], "row")
    p = d / "a.arrows"
    with pa.ipc.new_stream(p, t.schema) as w:
        w.write_table(t, max_chunksize=30)
    out["arrows"] = ([str(p)], "row")
    js = []
    for i in range(2):
        p = d / f"j{i}.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in rows[130 * i:130 * (i + 1)]))
        js.append(str(p))
    out["jsonl"] = (js, "row")
    p = d / "j.jsonl.gz"
    with gzip.open(p, "wt") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in rows))
    out["jsonl.gz"] = ([str(p)], "row")
    p = d / "t.txt"
    p.write_text("".join(f"{i}\n" for i in range(260)))
    out["text"] = ([str(p)], "text")
    return out


def _rest(paths, col, state, **kw) -> list:
    r = fastaxo.iter_batches(paths, batch_rows=23, prefetch=0, block_bytes=300, **kw)
    try:
        if state is not None:
            r.load_state_dict(state)
        return [v for b in r for v in b.column(col).to_pylist()]
    finally:
        r.close()


def _mutations(value):
    """What a damaged or careless state holds instead of ``value``: missing, wrong types,
    huge, negative, and (for numbers) the neighbours."""
    out = [("missing", _MISSING), ("str", "x"), ("float", 1.5), ("None", None), ("list", []),
           ("bool", not value if isinstance(value, bool) else True), ("-1", -1),
           ("huge", 2**62), ("huger", 10**30)]
    if isinstance(value, int) and not isinstance(value, bool):
        out += [("+1", value + 1), ("-1 off", value - 1)]
    return out


_MISSING = object()


def _fields(state):
    """(name, getter-path) of every field of a state, nested ones included."""
    for k in state:
        if k == "position":
            for p in state[k]:
                yield f"position {p}", (k, p), p
        elif k == "source":
            for s in state[k]:
                yield f"source {s}", (k, s), s
        else:
            yield k, (k,), k


def _with(state, path, value):
    st = json.loads(json.dumps(state))
    holder = st
    for key in path[:-1]:
        holder = holder[key]
    if value is _MISSING:
        del holder[path[-1]]
    else:
        holder[path[-1]] = value
    return st


@pytest.mark.parametrize("shuffle,world", [(0, 1), (90, 2)])
def test_damaged_states_are_refused_naming_the_field_or_resume_the_same(tmp_path, shuffle,
                                                                          world):
    """Every field of a resume state (top level, position, source) replaced by a missing value,
    a wrong type, a huge or negative number or a neighbour, with and without the state's
    check digest: load_state_dict plus the rest of the read either raise InvalidInputError
    naming the field (or the check), or give exactly the rows the intact state gives. A
    huge skip used to drop the rest of the window silently; a done flag set early, the rest
    of the source."""
    silent, refused, same = [], 0, 0
    for fmt, (paths, col) in _state_sources(tmp_path).items():
        kw = {"shuffle_buffer": shuffle, "seed": 7, "world_size": world, "rank": world - 1}
        r = fastaxo.iter_batches(paths, batch_rows=23, prefetch=0, block_bytes=300, **kw)
        for _ in range(4):
            next(r)
        good = json.loads(json.dumps(r.state_dict()))
        r.close()
        want = _rest(paths, col, good, **kw)
        assert 0 < len(want) and want != _rest(paths, col, None, **kw)[:len(want)]
        for with_check in (True, False):
            base = good if with_check else {k: v for k, v in good.items() if k != "check"}
            for name, path, word in _fields(base):
                value = base
                for key in path:
                    value = value[key]
                for how, bad in _mutations(value):
                    st = _with(base, path, bad)
                    try:
                        got = _rest(paths, col, st, **kw)
                    except InvalidInputError as e:
                        msg = str(e)
                        assert "\n" not in msg and msg.startswith("state: "), msg
                        # a wrong type or range names the field; a plausible neighbour may
                        # show as the field it contradicts (or the check)
                        plausible = how in ("+1", "-1 off", "bool") or (
                            name == "position unit" and how == "None")
                        assert plausible or word in msg or (with_check and "check" in msg), (
                            fmt, name, how, msg)
                        refused += 1
                        continue
                    if got == want:
                        same += 1
                    else:
                        silent.append((fmt, with_check, name, how))
    # Without the check (a state from before it existed) a number moved to a neighbour, or a
    # unit set to None (a file's start), can still look right where only the file could tell
    # (text, Arrow): only those may differ, never a wrong type, a huge or a negative value.
    assert [s for s in silent if s[1] or (s[3] not in ("+1", "-1 off") and
                                          s[2:] != ("position unit", "None"))] == [], silent
    assert refused > 500 and same > 10, (refused, same)


def test_a_file_changed_since_the_state_is_refused(tmp_path):
    """A file rewritten in place at the same size resumed into the new content; now the
    state's size, modification time and digest of the file's ends are compared."""
    for name in ("t.txt", "t.parquet"):
        path = tmp_path / name

        def write(offset: int) -> None:
            if name.endswith(".txt"):
                path.write_text("".join(f"{i + offset:06d}\n" for i in range(400)))
            else:
                pq.write_table(pa.table({"text": [f"{i + offset:06d}" for i in range(400)]}),
                               path, row_group_size=50, compression="none",
                               use_dictionary=False, write_statistics=False)

        write(0)
        r = fastaxo.iter_batches(path, batch_rows=50, prefetch=0, block_bytes=500)
        next(r), next(r)
        state = json.loads(json.dumps(r.state_dict()))
        r.close()
        size, mtime = os.path.getsize(path), os.stat(path).st_mtime_ns
        write(500_000)  # the same size, other rows
        assert os.path.getsize(path) == size
        os.utime(path, ns=(mtime + 10**9, mtime + 10**9))
        fresh = fastaxo.iter_batches(path, batch_rows=50, block_bytes=500)
        with pytest.raises(InvalidInputError, match=rf"state: {path} changed since the state "
                                                    r"was saved: its modification time"):
            fresh.load_state_dict(state)
        os.utime(path, ns=(mtime, mtime))  # even with the old time: the content
        fresh = fastaxo.iter_batches(path, batch_rows=50, block_bytes=500)
        with pytest.raises(InvalidInputError, match="same size and time, but its first or last "
                                                    "bytes differ"):
            fresh.load_state_dict(state)
        write(0)  # back as it was, only the time differs (a copy): the hint says how
        fresh = fastaxo.iter_batches(path, batch_rows=50, block_bytes=500)
        with pytest.raises(InvalidInputError, match=r"os\.utime\(path, ns="):
            fresh.load_state_dict(state)
        os.utime(path, ns=(mtime, mtime))
        fresh = fastaxo.iter_batches(path, batch_rows=50, block_bytes=500)
        fresh.load_state_dict(state)
        assert next(fresh).column(0).to_pylist()[0] == "000100"
        fresh.close()


def test_a_state_written_before_the_fingerprint_still_resumes(tmp_path):
    """States in checkpoints written by the previous release have files as [path, size] and
    no check: they resume as before."""
    for fmt, (paths, col) in _state_sources(tmp_path).items():
        r = fastaxo.iter_batches(paths, batch_rows=23, prefetch=0, block_bytes=300)
        for _ in range(3):
            next(r)
        state = json.loads(json.dumps(r.state_dict()))
        r.close()
        old = dict(state, source=dict(state["source"],
                                      files=[f[:2] for f in state["source"]["files"]]))
        del old["check"]
        assert _rest(paths, col, old) == _rest(paths, col, state), fmt


# --------------------------------------------------------------------------- growing inputs

_GROWING = {"text": ("g.txt", lambda i: f"line {i}"),
            "jsonl": ("g.jsonl", lambda i: json.dumps({"text": f"line {i}"})),
            "csv": ("g.csv", lambda i: f"line {i}")}


@pytest.mark.parametrize("fmt", sorted(_GROWING))
@pytest.mark.parametrize("threads", [1, None])
def test_an_input_still_being_written_is_refused_not_cut(tmp_path, fmt, threads):
    """A writer appends to the file while the reader reads it (between two batches the
    consumer takes): the half-written last line used to come out as a row. The reader sees
    the file changed when it reaches the end and refuses it, naming the file. The same file,
    complete but without a final newline, still reads its last line."""
    name, line = _GROWING[fmt]
    path = tmp_path / name
    head = "text\n" if fmt == "csv" else ""
    path.write_text(head + "".join(line(i) + "\n" for i in range(3000)))
    schema = pa.schema([("text", pa.string())])  # no inference block: 4 KiB blocks from the start
    kw = {"batch_rows": 100, "block_bytes": 4096, "schema": schema, "prefetch": 0,
          "threads": threads}
    r = fastaxo.iter_batches(path, **kw)
    got = next(r).column("text").to_pylist()
    with open(path, "a") as fh:  # the writer, mid-row
        fh.write(line(3000)[:5])
    with pytest.raises(FileFormatError, match=rf"^{path} changed while it was read: its size went "
                                              r"from [\d,]+ to [\d,]+ bytes; it is still being "
                                              "written"):
        for b in r:
            got += b.column("text").to_pylist()
    assert all(x.startswith("line ") and len(x) > 5 for x in got)  # nothing half-written
    r.close()
    with open(path, "a") as fh:  # the writer finishes the row, without a final newline
        fh.write(line(3000)[5:])
    rows = [v for b in fastaxo.iter_batches(path, **kw) for v in b.column("text").to_pylist()]
    assert rows == [f"line {i}" for i in range(3001)]


def test_an_input_changed_before_its_turn_is_refused(tmp_path):
    """The second file of a source grows while the first is read: refused when it is opened
    (its rows would not be the ones the reader measured and a state would count)."""
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("".join(f"a{i}\n" for i in range(500)))
    b.write_text("".join(f"b{i}\n" for i in range(500)))
    r = fastaxo.iter_batches([a, b], batch_rows=100, prefetch=0)
    next(r)
    with open(b, "a") as fh:
        fh.write("b500\n")
    with pytest.raises(FileFormatError, match=rf"^{b} changed while it was read"):
        list(r)


# --------------------------------------------------------------------------- names

@pytest.mark.parametrize("kind", ["parquet", "arrow", "arrows"])
def test_a_column_name_that_is_not_utf8_is_one_named_error(tmp_path, kind):
    """pyarrow decodes names lazily: a non-UTF-8 one (nested too) raised UnicodeDecodeError
    mid-read, or at open, instead of an error naming the file."""
    path = tmp_path / f"names.{kind}"
    t = pa.table({"input_ids": [[1, 2]], "meta": [{"zqzqzq": 1}]})
    if kind == "parquet":
        pq.write_table(t, path)
    else:
        with (pa.ipc.new_file if kind == "arrow" else pa.ipc.new_stream)(path, t.schema) as w:
            w.write_table(t)
    path.write_bytes(path.read_bytes().replace(b"zqzqzq", b"\xff\xfezqzq"))
    with pytest.raises(FileFormatError, match=rf"^{path} \((footer|schema)\): .*a column name or "
                                              r"other text in its metadata is not valid UTF-8"):
        list(fastaxo.iter_batches(path))


def test_text_that_begins_like_a_magic_number_is_still_text(tmp_path):
    """The format check reads magic numbers only in front of binary bytes: a text file whose
    first line is "PAR1" (or "ARROW1", or bz2's printable "BZh") reads as text."""
    for first in ("PAR1", "ARROW1 x", "BZh9 not bz2"):
        path = tmp_path / "t.txt"
        path.write_text(f"{first}\nsecond\n")
        assert [v for b in fastaxo.iter_batches(path) for v in b.column(0).to_pylist()] == [
            first, "second"]
