"""fastaxo.integrations.ray on a real local Ray cluster: a head node and a worker node started
with `ray start` (loopback only, each its own raylet and object store), stopped at the end.

Every result is compared with the single-machine `fastaxo.prepare` on the same input: the
shards read in order must equal its output file, row for row and token for token.

About 35 s on 2 cores (the two `ray start` take ~10 s).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastaxo
from fastaxo.errors import InvalidInputError, SequenceTooLongError

# Ray is installed by scripts/test.sh (the [ray] extra): there, and whenever CI=true, a missing Ray
# fails the import (a skipped test in CI is a test that does not exist); elsewhere it skips.
if os.environ.get("FASTAXO_EXPECT_RAY") == "1" or os.environ.get("CI"):
    import ray
else:
    ray = pytest.importorskip("ray")
from fastaxo.integrations import ray as fxray  # noqa: E402

pytestmark = pytest.mark.slow
SEQ = 256


# ---------------------------------------------------------------------------------------------
# the cluster

@pytest.fixture(scope="module")
def cluster():
    """A head (1 CPU) and one more worker node (1 CPU), started as separate `ray start`
    processes joined over 127.0.0.1 (tests/ray_harness.py: token auth with the cluster's own
    token); this process connects as the driver. Stopped at the end."""
    import ray_harness

    c = ray_harness.LocalCluster(nodes=2, cpus=1)
    saved = {k: os.environ.get(k) for k in c.env}
    os.environ.update(c.env)  # the driver (this process, and the CLI's subprocess) needs them too
    _reload_ray_auth()
    cwd = os.getcwd()
    try:
        # Ray puts the driver's working directory on its workers' sys.path: from the repo root
        # they would import the source tree (no compiled extension) instead of the installed
        # fastaxo. Connect from a neutral directory.
        os.chdir("/")
        ray.init(address=c.address, logging_level="ERROR", log_to_driver=False)
        deadline = time.monotonic() + 60
        while sum(1 for n in ray.nodes() if n["Alive"]) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sum(1 for n in ray.nodes() if n["Alive"]) == 2, ray.nodes()
        yield {"address": c.address}
    finally:
        os.chdir(cwd)
        if ray.is_initialized():
            ray.shutdown()
        c.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _reload_ray_auth()


def _reload_ray_auth() -> None:
    """This process imported ray before the fixture set RAY_AUTH_*: make Ray read them again
    (what ray does itself when it turns token auth on for a process)."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


# ---------------------------------------------------------------------------------------------
# data

def _planted(n_files: int, rows_per_file: int, seed: int, labels: bool = True, max_len: int = 200):
    """Rows of token ids (some empty), and copies of earlier rows planted in every file (in
    the same file and across files). Returns [(ids, labs)] per file."""
    rng = np.random.default_rng(seed)
    pool = []
    files = []
    for f in range(n_files):
        ids = []
        for i in range(rows_per_file):
            if pool and rng.random() < 0.15:
                ids.append(pool[int(rng.integers(0, len(pool)))])
                continue
            L = 0 if rng.random() < 0.01 else int(rng.integers(1, max_len))
            row = rng.integers(0, 30_000, L).astype(np.int32)
            ids.append(row)
            pool.append(row)
        labs = [np.where(np.arange(len(r)) < len(r) // 3, -100, r).astype(np.int32) for r in ids] if labels else None
        files.append((ids, labs))
    return files


def _write_parquet(path: Path, ids, labs, row_group_size: int) -> str:
    cols = {"input_ids": pa.array(ids, pa.list_(pa.int32()))}
    if labs is not None:
        cols["labels"] = pa.array(labs, pa.list_(pa.int32()))
    pq.write_table(pa.table(cols), path, row_group_size=row_group_size)
    return str(path)


def _shards(out_dir) -> pa.Table:
    names = sorted(glob.glob(os.path.join(out_dir, "part-*.parquet")))
    assert names, f"no shards in {out_dir}"
    return pa.concat_tables([pq.read_table(n) for n in names])


def _same_as_single(out_dir, single_file) -> None:
    a = pq.read_table(single_file)
    b = _shards(out_dir)
    assert b.num_rows == a.num_rows
    assert b.schema.names == a.schema.names
    # the same value types (the standard layout's narrowest), in every shard alike: the
    # driver decides them from every unit's values before any shard is written
    for f in sorted(os.listdir(out_dir)):
        if f.endswith(".parquet"):
            assert pq.read_schema(os.path.join(out_dir, f)).remove_metadata().equals(
                a.schema.remove_metadata()), f
    for name in a.schema.names:
        assert b.column(name).to_pylist() == a.column(name).to_pylist(), name


def _sequences(table: pa.Table) -> list[tuple[int, ...]]:
    """The packed sequences of a packed table (split where position_ids restart)."""
    out = []
    ids = table.column("input_ids").to_pylist()
    pos = table.column("position_ids").to_pylist()
    for row, p in zip(ids, pos):
        starts = [k for k, v in enumerate(p) if v == 0] + [len(p)]
        out += [tuple(row[a:b]) for a, b in zip(starts, starts[1:])]
    return out


def _window_quality(rep) -> None:
    """Efficiency within 0.5% of each window's own lower bound (windows big enough to tell)."""
    assert len(rep.window_bins) == len(rep.window_lower_bound) == rep.windows
    for bins, lb in zip(rep.window_bins, rep.window_lower_bound):
        if lb >= 200:
            assert bins <= lb * 1.005, (bins, lb)


# ---------------------------------------------------------------------------------------------
# tests

def test_planted_duplicates_equal_single_machine(cluster, tmp_path, monkeypatch):
    """Four Parquet files (row groups of 700 rows) with duplicates planted within and across
    files, empty rows and labels: the Ray shards equal `fastaxo.prepare`'s output row for row,
    every first occurrence is packed exactly once, and the report counts agree. The driver
    reads each file's footer once (the plan's read gives the schema too)."""
    files = [_write_parquet(tmp_path / f"in{k}.parquet", ids, labs, 700)
             for k, (ids, labs) in enumerate(_planted(4, 5000, seed=1))]
    single = fastaxo.prepare(files, str(tmp_path / "single.parquet"), SEQ, pack_window=3000)
    footers = Counter()
    for name in ("read_metadata", "read_schema", "ParquetFile"):
        real = getattr(pq, name)
        monkeypatch.setattr(pq, name, lambda where, *a, _real=real, **kw: (
            footers.update([str(where)]), _real(where, *a, **kw))[1])
    rep = fxray.prepare(files, str(tmp_path / "out"), SEQ, pack_window=3000, unit_rows=1500,
                        address=cluster["address"])
    monkeypatch.undo()
    assert {f: footers[f] for f in files} == dict.fromkeys(files, 1), footers
    _same_as_single(tmp_path / "out", tmp_path / "single.parquet")
    for k in ("rows_in", "tokens_in", "duplicates", "empty_rows", "rows_packed", "tokens_out", "bins", "windows"):
        assert getattr(rep, k) == getattr(single, k), k
    assert rep.duplicates > 2000 and rep.empty_rows > 100 and rep.windows == len(rep.shards) >= 5
    assert rep.units == 12 and rep.nodes == 2  # 3 units (3 row groups of 700 each) a file
    # every first occurrence (by (file, row)), once, whole
    t = pa.concat_tables([pq.read_table(f) for f in files])
    firsts, seen = [], set()
    for ids, labs in zip(t.column("input_ids").to_pylist(), t.column("labels").to_pylist()):
        key = (tuple(ids), tuple(labs))
        if ids and key not in seen:
            seen.add(key)
            firsts.append(tuple(ids))
    assert sorted(_sequences(_shards(tmp_path / "out"))) == sorted(firsts)
    _window_quality(rep)
    man = json.loads((tmp_path / "out" / fxray.MANIFEST).read_text())
    assert man["shards"] == rep.shards
    assert not [n for n in os.listdir(tmp_path / "out") if n.startswith(".")]
    # the bounded reader reads the shards back in order
    back = pa.Table.from_batches(list(fastaxo.iter_batches(str(tmp_path / "out" / "part-*.parquet"))))
    assert back.column("input_ids").to_pylist() == pq.read_table(tmp_path / "single.parquet").column("input_ids").to_pylist()


def test_killed_worker_gives_the_same_output(cluster, tmp_path):
    """The worker running window 1's task is killed (SIGKILL, from outside, mid-task); Ray runs
    the task again and the output is identical: nothing lost, nothing doubled."""
    files = [_write_parquet(tmp_path / f"in{k}.parquet", ids, labs, 500)
             for k, (ids, labs) in enumerate(_planted(3, 3000, seed=2))]
    # (Axolotl's layout here; the other tests write the standard one)
    fastaxo.prepare(files, str(tmp_path / "single.parquet"), SEQ, pack_window=2000,
                    layout="axolotl")
    hold = tmp_path / "hold"
    hold.mkdir()
    killed = {}

    def killer():
        deadline = time.monotonic() + 240
        pid_file = hold / "hold-1.pid"
        while time.monotonic() < deadline:
            if pid_file.exists():
                pid = int(pid_file.read_text())
                time.sleep(0.3)  # let it sit inside the task
                os.kill(pid, signal.SIGKILL)
                killed["pid"] = pid
                return
            time.sleep(0.05)

    th = threading.Thread(target=killer, daemon=True)
    th.start()
    # the hook reaches the workers through this job's runtime_env (no option of prepare's)
    ray.shutdown()
    ray.init(address=cluster["address"], logging_level="ERROR", log_to_driver=False,
             runtime_env={"env_vars": {"FASTAXO_RAY_TEST_HOLD": f"pack:1:{hold}"}})
    try:
        rep = fxray.prepare(files, str(tmp_path / "out"), SEQ, pack_window=2000, unit_rows=1000,
                            address=cluster["address"], layout="axolotl")
    finally:
        ray.shutdown()
        ray.init(address=cluster["address"], logging_level="ERROR", log_to_driver=False)
    th.join(5)
    assert pq.read_schema(tmp_path / "single.parquet").names[-1] == "attention_mask"
    assert killed.get("pid"), "the task was never held, so nothing was killed"
    with pytest.raises(ProcessLookupError):
        os.kill(killed["pid"], 0)  # that worker is gone
    _same_as_single(tmp_path / "out", tmp_path / "single.parquet")
    assert rep.windows >= 3 and len(set(rep.shards)) == rep.windows
    assert not [n for n in os.listdir(tmp_path / "out") if "fastaxo-tmp" in n]


def test_dataset_input_and_no_dedupe(cluster, tmp_path):
    """A ray.data.Dataset (its row order is the global order) equals fastaxo.prepare on the
    same rows; with dedupe=False every non-empty row is packed."""
    (ids, labs), = _planted(1, 4000, seed=3)
    table = pa.table({"input_ids": pa.array(ids, pa.list_(pa.int32())), "labels": pa.array(labs, pa.list_(pa.int32()))})
    _write_parquet(tmp_path / "all.parquet", ids, labs, 4000)
    ds = ray.data.from_arrow([table.slice(0, 1300), table.slice(1300, 1500), table.slice(2800)])
    for dedupe in (True, False):
        single = fastaxo.prepare(str(tmp_path / "all.parquet"), str(tmp_path / f"single{dedupe}.parquet"), SEQ,
                                 pack_window=1000, dedupe=dedupe, strategy="ffd")
        rep = fxray.prepare(ds, str(tmp_path / f"out{dedupe}"), SEQ, pack_window=1000, dedupe=dedupe, strategy="ffd",
                            address=cluster["address"])
        _same_as_single(tmp_path / f"out{dedupe}", tmp_path / f"single{dedupe}.parquet")
        assert rep.units == 3 and rep.duplicates == single.duplicates
        assert (rep.duplicates > 0) == dedupe


def test_a_pad_id_run_is_dropped_on_ray_as_on_one_machine(cluster, tmp_path):
    """pad_token_id on Ray: the workers drop each row's trailing run of the pad id (labels
    -100 there) as one machine does; the files and the counts are equal."""
    rng = np.random.default_rng(11)
    ids, labs = [], []
    for i in range(900):
        n = int(rng.integers(1, 60))
        row = rng.integers(1, 900, n).tolist()
        pad = 0 if i % 7 == 0 else 64 - n
        ids.append(row + [0] * pad)
        labs.append([t if k % 2 else -100 for k, t in enumerate(row)] + [-100] * pad)
    src = _write_parquet(tmp_path / "padded.parquet", ids, labs, 200)
    single = fastaxo.prepare(src, str(tmp_path / "single.parquet"), SEQ, pack_window=400,
                             pad_token_id=0, progress=False)
    rep = fxray.prepare(src, str(tmp_path / "out"), SEQ, pack_window=400, unit_rows=200,
                        pad_token_id=0, address=cluster["address"])
    _same_as_single(tmp_path / "out", tmp_path / "single.parquet")
    assert (rep.pad_tokens_dropped, rep.padded_rows) == (single.pad_tokens_dropped,
                                                         single.padded_rows)
    assert single.pad_tokens_dropped == sum(len(r) for r in ids) - single.tokens_in > 0


def test_raw_text_with_a_local_tokenizer(cluster, tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    rng = np.random.default_rng(7)
    words = [f"w{k}" for k in range(60)]
    texts = [" ".join(rng.choice(words, int(rng.integers(1, 40)))) for _ in range(1500)]
    texts += texts[:300]
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=["[UNK]", "[EOS]"]))
    (tmp_path / "tok").mkdir()
    tok.save(str(tmp_path / "tok" / "tokenizer.json"))
    paths = []
    for k in range(2):
        p = tmp_path / f"raw{k}.jsonl"
        with open(p, "w") as fh:
            for t in texts[k::2]:
                fh.write(json.dumps({"body": t}) + "\n")
        paths.append(str(p))
    single = fastaxo.prepare(paths, str(tmp_path / "single.parquet"), 64, tokenizer=str(tmp_path / "tok"),
                             text_column="body", pack_window=400)
    rep = fxray.prepare(paths, str(tmp_path / "out"), 64, tokenizer=str(tmp_path / "tok"), text_column="body",
                        pack_window=400, address=cluster["address"])
    _same_as_single(tmp_path / "out", tmp_path / "single.parquet")
    assert rep.duplicates == single.duplicates >= 300 and rep.units == 2
    # the tokenizer options reach the tasks: an EOS per document, as on one machine
    opts = dict(tokenizer=str(tmp_path / "tok"), text_column="body", pack_window=400,
                eos_token="[EOS]", add_special_tokens=False)
    single_e = fastaxo.prepare(paths, str(tmp_path / "single_e.parquet"), 64, **opts)
    rep_e = fxray.prepare(paths, str(tmp_path / "out_e"), 64, address=cluster["address"], **opts)
    _same_as_single(tmp_path / "out_e", tmp_path / "single_e.parquet")
    assert rep_e.eos_appended == single_e.eos_appended == single_e.rows_in == single.rows_in
    assert single_e.tokens_in == single.tokens_in + single.rows_in
    assert "EOS '[EOS]' appended" in str(rep_e)


def test_raw_text_with_fastaxos_encoder(cluster, tmp_path, monkeypatch):
    """Qwen3 on real text: Ray's shards equal one machine's file with fastaxo's C encoder, and
    with FASTAXO_TOKENIZER=hf on the driver (the workers take the driver's choice)."""
    sys.path.insert(0, os.path.dirname(__file__))
    import chat_data
    import tokenizer_data

    docs = [*tokenizer_data.corpus("english", 60_000), *tokenizer_data.corpus("multi", 60_000)]
    docs += ["", "", *docs[:5]]
    paths = []
    for k in range(2):
        p = tmp_path / f"raw{k}.jsonl"
        p.write_text("".join(json.dumps({"text": t}) + "\n" for t in docs[k::2]))
        paths.append(str(p))
    tok = str(chat_data.qwen3_dir())
    opts = dict(tokenizer=tok, pack_window=40, overflow="split", append_eos=True)
    for mode in ("auto", "hf"):
        monkeypatch.setenv("FASTAXO_TOKENIZER", mode)
        single = fastaxo.prepare(paths, str(tmp_path / f"single-{mode}.parquet"), 1024,
                                 progress=False, **opts)
        rep = fxray.prepare(paths, str(tmp_path / f"out-{mode}"), 1024,
                            address=cluster["address"], **opts)
        _same_as_single(tmp_path / f"out-{mode}", tmp_path / f"single-{mode}.parquet")
        want = "hf" if mode == "hf" else "fastaxo"
        assert rep.tokenizer_settings["encoder"] == single.tokenizer_settings["encoder"] == want
        assert rep.tokens_in == single.tokens_in and rep.duplicates == single.duplicates >= 5
        assert f"encoder            {rep.tokenizer_settings['encoder_detail']}" in str(rep)
    a = pq.read_table(tmp_path / "single-auto.parquet")
    assert a.equals(pq.read_table(tmp_path / "single-hf.parquet"))


_COUNTS = ("rows_in", "tokens_in", "empty_rows", "rows_too_large", "eos_appended", "duplicates",
           "overlong", "dropped", "rows_packed", "sequences_out", "tokens_out", "bins", "windows")


def _same_file_and_counts(out_dir, single_file, rep, single) -> None:
    """One window: Ray's one shard is the single machine's file byte for byte; the report
    counts agree."""
    assert sorted(os.listdir(out_dir)) == ["_fastaxo_ray.json", "part-00000.parquet"]
    assert (Path(out_dir) / "part-00000.parquet").read_bytes() == Path(single_file).read_bytes()
    for k in _COUNTS:
        assert getattr(rep, k) == getattr(single, k), k


def test_json_lines_shards_with_no_rows_are_skipped_as_on_one_machine(cluster, tmp_path):
    """Empty JSON Lines shards (no rows, so no columns) are skipped and counted, first or
    later, as on one machine; before, the first fixed the columns to none."""
    paths = []
    for k, (ids, labs) in enumerate(_planted(2, 400, seed=21)):
        p = tmp_path / f"s{k}.jsonl"
        with open(p, "w") as fh:
            for a, b in zip(ids, labs):
                fh.write(json.dumps({"input_ids": a.tolist(), "labels": b.tolist()}) + "\n")
        paths.append(str(p))
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "blank.jsonl").write_bytes(b"\n\n")
    inputs = [str(tmp_path / "empty.jsonl"), paths[0], str(tmp_path / "blank.jsonl"), paths[1]]
    single = fastaxo.prepare(inputs, str(tmp_path / "single.parquet"), 256, pack_window=300)
    rep = fxray.prepare(inputs, str(tmp_path / "out"), 256, pack_window=300,
                        address=cluster["address"])
    _same_as_single(tmp_path / "out", tmp_path / "single.parquet")
    assert rep.empty_files == single.empty_files == 2 and rep.rows_in == single.rows_in == 800
    assert rep.inputs == inputs and "(2 with no rows, skipped)" in str(rep)
    with pytest.raises(InvalidInputError, match=r"no input has rows \(2 file"):
        fxray.prepare(inputs[::2], str(tmp_path / "none"), 256, address=cluster["address"])


def test_token_columns_untyped_in_the_first_16_mib_as_on_one_machine(cluster, tmp_path):
    """A JSON Lines file whose first 16 MiB hold only empty token rows (input_ids inferred as
    list<null>) and a null column the pass does not read, a string there later: the workers
    read it to its end, as one machine does (before, both refused the file)."""
    (ids, labs), = _planted(1, 400, seed=23)
    line = (json.dumps({"input_ids": [], "labels": [], "meta": None}) + "\n").encode()
    n = (17 << 20) // len(line) + 1
    path = tmp_path / "late.jsonl"
    with open(path, "wb") as fh:
        fh.write(line * n)
        for a, b in zip(ids, labs):
            fh.write((json.dumps({"input_ids": a.tolist(), "labels": b.tolist(), "meta": "x"})
                      + "\n").encode())
    single = fastaxo.prepare(str(path), str(tmp_path / "single.parquet"), 256, pack_window=300)
    rep = fxray.prepare(str(path), str(tmp_path / "out"), 256, pack_window=300,
                        address=cluster["address"])
    _same_as_single(tmp_path / "out", tmp_path / "single.parquet")
    assert rep.empty_rows == single.empty_rows >= n and rep.rows_in == single.rows_in == n + 400


def test_rows_over_max_row_bytes_as_on_one_machine(cluster, tmp_path):
    """max_row_bytes reaches the workers: rows over it are refused naming the same file and row
    as one machine (the first in the global order, though two units fail), or with
    overflow="drop" left out and counted as rows_too_large (not empty rows, and given no EOS):
    the same file byte for byte, the same counts."""
    sys.path.insert(0, os.path.dirname(__file__))
    import random

    import chat_data

    from fastaxo.errors import RowTooLargeError

    rng = random.Random(31)
    docs = [chat_data.message(rng, 5, 60) for _ in range(300)]
    docs[10:13] = ["", docs[0], docs[1]]  # an empty row, duplicates
    for at in (3, 100, 220, 270):
        docs[at] = "".join(chat_data.message(rng, 400, 500) for _ in range(2)) + str(at)
        assert len(docs[at].encode()) > 3000
    assert max(len(d.encode()) for i, d in enumerate(docs) if i not in (3, 100, 220, 270)) < 3000
    a = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": docs[:150]}), a)
    b = tmp_path / "b.parquet"
    pq.write_table(pa.table({"text": docs[150:]}), b, row_group_size=50)
    tok = str(chat_data.qwen3_dir())
    opts = dict(tokenizer=tok, max_row_bytes=3000, pack_window=10_000)
    with pytest.raises(RowTooLargeError) as one:
        fastaxo.prepare([str(b)], str(tmp_path / "e.parquet"), 512, progress=False, **opts)
    with pytest.raises(RowTooLargeError) as on_ray:
        fxray.prepare([str(b)], str(tmp_path / "e"), 512, unit_rows=50, address=cluster["address"],
                      **opts)
    assert str(on_ray.value) == str(one.value)
    assert "b.parquet row 70 (0-based): text is " in str(one.value)
    opts.update(overflow="drop", append_eos=True)
    single = fastaxo.prepare([str(a), str(b)], str(tmp_path / "single.parquet"), 512,
                             progress=False, **opts)
    rep = fxray.prepare([str(a), str(b)], str(tmp_path / "out"), 512, unit_rows=50,
                        address=cluster["address"], **opts)
    _same_file_and_counts(tmp_path / "out", tmp_path / "single.parquet", rep, single)
    assert rep.rows_too_large == 4 and rep.eos_appended == 296 and rep.empty_rows == 0
    assert rep.duplicates == 2 and rep.units == 4
    assert "rows over max_row_bytes left out 4" in str(rep)


# a template that counts words: its output depends on the contents, so the engine places
# turns (and a row) by Axolotl's own renders (fallback_turns, fallback_rows)
_WORDCOUNT = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
              "{{ m.content | wordcount }}<|im_end|>\n{% endfor %}")


def test_chat_data_as_on_one_machine(cluster, tmp_path):
    """Chat data with Qwen3's tokenizer: Ray's shard is one machine's file byte for byte, with
    its template (conversations over max_row_bytes dropped and counted, by their contents or
    their render) and with a template file whose rows and turns fall back to Axolotl's
    algorithm (the same counts); a conversation over the bound and a bad message are refused
    naming the same file and row as one machine."""
    sys.path.insert(0, os.path.dirname(__file__))
    import chat_data

    from fastaxo.errors import RowTooLargeError

    convs = chat_data.conversations(seed=41, n=70, turns=(1, 6), hi=40)
    convs[5], convs[6] = convs[1], convs[2]  # duplicates
    big = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "é" * 3_000}]
    convs[30] = big  # contents over the bound: never rendered
    convs[55] = [{"role": "user", "content": "é" * 1_990}]  # contents under it, render over
    convs[62] = big
    for c in convs:
        for m in c:
            m["name"] = None
    rows = [[dict(m) for m in c] for c in convs]
    bad = [[dict(m) for m in c] for c in convs]
    bad[48][0]["name"] = "x"  # a field Axolotl's mapping does not take
    a, b, b_bad = tmp_path / "a.parquet", tmp_path / "b.parquet", tmp_path / "b_bad.parquet"
    pq.write_table(pa.table({"messages": rows[:20]}), a)
    pq.write_table(pa.table({"messages": rows[20:]}), b, row_group_size=20)
    pq.write_table(pa.table({"messages": bad[20:]}), b_bad, row_group_size=20)
    tok = str(chat_data.qwen3_dir())
    tpl = tmp_path / "wordcount.jinja"
    tpl.write_text(_WORDCOUNT)
    ray_opts = dict(unit_rows=20, batch_rows=8, address=cluster["address"])

    def both(name, inputs, **opts):
        opts = dict(tokenizer=tok, max_row_bytes=4_000, pack_window=10_000, **opts)
        single = fastaxo.prepare(inputs, str(tmp_path / f"{name}.parquet"), 1024, progress=False,
                                 **opts)
        rep = fxray.prepare(inputs, str(tmp_path / name), 1024, **ray_opts, **opts)
        _same_file_and_counts(tmp_path / name, tmp_path / f"{name}.parquet", rep, single)
        for k in ("fallback_rows", "fallback_turns", "one_pass", "max_row_bytes"):
            assert rep.tokenizer_settings[k] == single.tokenizer_settings[k], k
        return rep

    rep = both("drop", [str(a), str(b)], overflow="drop")
    assert rep.rows_too_large == 3 and rep.duplicates == 2 and rep.labels and rep.units == 4
    assert rep.tokenizer_settings["fallback_rows"] == {}
    rep = both("fallbacks", [str(a), str(b)], overflow="drop",
               chat={"chat_template": str(tpl), "train_on_eos": "last"})
    assert rep.tokenizer_settings["fallback_rows"] and rep.tokenizer_settings["fallback_turns"]
    assert rep.tokenizer_settings["chat_template"] == str(tpl)
    # the command line takes chat data on Ray, with its options (it refused them once)
    env = {**os.environ, "FASTAXO_REQUIRE_EXTENSION": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("FASTAXO_RAY_TEST_HOLD", None)
    r = subprocess.run([sys.executable, "-m", "fastaxo", "prepare", "--ray", cluster["address"],
                        str(a), str(b), "-o", str(tmp_path / "cli"), "--max-length", "1024",
                        "--pack-window", "10000", "--tokenizer", tok, "--messages-column",
                        "messages", "--chat-template", str(tpl), "--train-on-eos", "last",
                        "--max-row-bytes", "4000", "--overflow", "drop", "--ray-unit-rows", "20",
                        "--batch-rows", "8"],
                       capture_output=True, text=True, cwd="/", env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert ((tmp_path / "cli" / "part-00000.parquet").read_bytes()
            == (tmp_path / "fallbacks.parquet").read_bytes())
    assert "rows over max_row_bytes left out 3" in r.stdout
    for inputs, overflow, error, says in (
            ([str(b)], "error", RowTooLargeError,
             "b.parquet row 10 (0-based): the conversation's messages hold 6,001 bytes"),
            ([str(b_bad)], "drop", InvalidInputError, "b_bad.parquet row 28 (0-based): messages message 0 has field 'name'")):
        opts = dict(tokenizer=tok, max_row_bytes=4_000, overflow=overflow)
        with pytest.raises(error) as one:
            fastaxo.prepare(inputs, str(tmp_path / "e.parquet"), 1024, progress=False, **opts)
        with pytest.raises(error) as on_ray:
            fxray.prepare(inputs, str(tmp_path / "e"), 1024, **ray_opts, **opts)
        assert says in str(one.value)
        assert str(on_ray.value) == str(one.value)


def test_the_workers_take_the_drivers_encoder(monkeypatch):
    """units.unit_tokenizer follows the driver's encoder (Cfg.encoder for text, Cfg.chat for
    chat data), not the worker's FASTAXO_TOKENIZER."""
    import dataclasses

    sys.path.insert(0, os.path.dirname(__file__))
    import chat_data

    from fastaxo.integrations.ray import units

    cfg = units.Cfg(256, "bfd", "error", "segments", True, ("input_ids",), False,
                    str(chat_data.qwen3_dir()), "text", 1, 1, "{}")
    monkeypatch.setattr(units, "_TOKENIZERS", {})
    monkeypatch.setenv("FASTAXO_TOKENIZER", "hf")
    assert units.unit_tokenizer(dataclasses.replace(cfg, encoder="fastaxo")).encoder == "fastaxo"
    assert units.unit_tokenizer(cfg).encoder == "hf"  # None: the worker's environment
    monkeypatch.delenv("FASTAXO_TOKENIZER")
    assert units.unit_tokenizer(dataclasses.replace(cfg, encoder="hf")).encoder == "hf"
    # chat data: the driver's encoder travels in Cfg.chat
    from fastaxo.pipeline.columns import chat_tokenizer

    for driver, worker in (("hf", "fastaxo"), ("fastaxo", "hf")):
        monkeypatch.setenv("FASTAXO_TOKENIZER", driver)
        ct = chat_tokenizer(str(chat_data.qwen3_dir()), None)
        assert ct.settings()["encoder"] == driver
        chat = dataclasses.replace(cfg, chat=units.chat_options(ct))
        monkeypatch.setenv("FASTAXO_TOKENIZER", worker)
        monkeypatch.setattr(units, "_TOKENIZERS", {})
        assert units.unit_tokenizer(chat).spec.encoder == driver


@pytest.mark.parametrize("encoder", ["hf", "fastaxo"])
def test_a_unit_is_tokenized_batch_rows_at_a_time(tmp_path, monkeypatch, encoder):
    """A unit (here a whole JSON Lines file) reaches HF's tokenizer batch_rows rows at a time,
    as one machine's batches (it makes Python objects of them); the columns are the same (and
    with fastaxo's encoder, which reads the slices in place)."""
    sys.path.insert(0, os.path.dirname(__file__))
    import dataclasses

    import chat_data

    from fastaxo.integrations.ray import units
    from fastaxo.pipeline import columns

    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps({"text": f"row {i} " * (i % 7)}) + "\n" for i in range(100)))
    cfg = units.Cfg(256, "bfd", "error", "segments", True, ("input_ids",), False,
                    str(chat_data.qwen3_dir()), "text", 1, 1, "{}", encoder=encoder)
    seen: list[int] = []
    real = columns.pylist_without
    monkeypatch.setattr(columns, "pylist_without",
                        lambda arr, skip: seen.append(len(arr)) or real(arr, skip))
    unit = units.Unit("file", str(p), "jsonl")
    whole = units.checked_unit(unit, cfg)
    assert seen == ([100] if encoder == "hf" else [])
    seen.clear()
    got = units.checked_unit(unit, dataclasses.replace(cfg, batch_rows=16))
    assert seen == ([16] * 6 + [4] if encoder == "hf" else [])
    assert got.work["input_ids"].to_pylist() == whole.work["input_ids"].to_pylist()
    assert got.lens.tolist() == whole.lens.tolist() and got.counts == whole.counts == {}


def test_errors_name_the_file_and_row(cluster, tmp_path):
    (ids, labs), = _planted(1, 2000, seed=4, max_len=100)
    ids[1234] = np.arange(SEQ + 5, dtype=np.int32)
    labs[1234] = ids[1234]
    f = _write_parquet(tmp_path / "long.parquet", ids, labs, 300)
    with pytest.raises(SequenceTooLongError, match=r"long\.parquet row 1,234 \(0-based\): input_ids has 261 tokens"):
        fxray.prepare([f], str(tmp_path / "out"), SEQ, unit_rows=500, address=cluster["address"])
    rep = fxray.prepare([f], str(tmp_path / "out2"), SEQ, overflow="truncate", unit_rows=500,
                        address=cluster["address"])
    assert rep.overlong == 1 and rep.truncated == 1
    with pytest.raises(InvalidInputError, match="already holds shards"):
        fxray.prepare([f], str(tmp_path / "out2"), SEQ, overflow="truncate", address=cluster["address"])
    with pytest.raises(InvalidInputError, match="num_cpus_per_task must be a number > 0"):
        fxray.prepare([f], str(tmp_path / "out3"), SEQ, num_cpus_per_task=0, address=cluster["address"])


def test_an_empty_output_is_refused_before_ray_starts(tmp_path, monkeypatch):
    # (issue 27) abspath("") is the working directory: `prepare --ray IN -o ""` wrote shards there
    monkeypatch.chdir(tmp_path)  # (were it back: no input exists, nothing is written here)
    with pytest.raises(InvalidInputError, match="output: the path is empty"):
        fxray.prepare([str(tmp_path / "nothing.parquet")], "", SEQ)
    assert os.listdir(tmp_path) == []


def test_command_line(cluster, tmp_path):
    files = [_write_parquet(tmp_path / f"in{k}.parquet", ids, labs, 400)
             for k, (ids, labs) in enumerate(_planted(2, 1500, seed=5))]
    fastaxo.prepare(files, str(tmp_path / "single.parquet"), SEQ, pack_window=1000)
    env = {**os.environ, "FASTAXO_REQUIRE_EXTENSION": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("FASTAXO_RAY_TEST_HOLD", None)
    r = subprocess.run([sys.executable, "-m", "fastaxo", "prepare", "--ray", cluster["address"], *files,
                        "-o", str(tmp_path / "out"), "--max-length", str(SEQ), "--pack-window", "1000",
                        "--report-json", str(tmp_path / "r.json")],
                       capture_output=True, text=True, cwd="/", env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "fastaxo prepare on Ray (2 node(s)" in r.stdout
    _same_as_single(tmp_path / "out", tmp_path / "single.parquet")
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["windows"] == len(rep["shards"]) >= 2


def test_workers_importing_an_uncompiled_fastaxo_are_refused(cluster, tmp_path):
    """A driver started in a fastaxo source checkout: Ray puts its working directory on the
    workers' sys.path, so they import the uncompiled tree. prepare refuses with the reason and
    the remedy instead of running the pure-Python fallback ~20x slower."""
    checkout = tmp_path / "checkout"
    src = Path(fastaxo.__file__).parent
    for f in src.rglob("*.py"):  # the package's Python files, no compiled extension
        dst = checkout / "fastaxo" / f.relative_to(src)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dst)
    (ids, labs), = _planted(1, 500, seed=6)
    f = _write_parquet(tmp_path / "in.parquet", ids, labs, 250)
    script = Path(sys.executable).with_name("fastaxo")
    assert script.exists(), f"the console script {script} is not installed"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("FASTAXO_RAY_TEST_HOLD", None)
    r = subprocess.run([str(script), "prepare", "--ray", cluster["address"], f, "-o", str(tmp_path / "out"),
                        "--max-length", str(SEQ)], capture_output=True, text=True, cwd=checkout, env=env, timeout=600)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    # the workers either import the checkout and report it, or (FASTAXO_REQUIRE_EXTENSION=1 on the
    # cluster, as in CI) fail to import it: both name the remedy
    assert ("Ray workers import fastaxo from " + str(checkout / "fastaxo") + " without its compiled extension"
            in r.stderr or "Ray workers cannot import fastaxo with its compiled extension" in r.stderr), r.stderr[-3000:]
    assert f"Ray puts the driver's working directory ({checkout}) on its workers' sys.path" in r.stderr
    assert not list(tmp_path.glob("out/part-*.parquet"))


def test_both_drivers_check_their_options_with_one_checker(monkeypatch):
    """prepare and its Ray form hand their options to one checker (check_prepare_options),
    which makes one frozen PrepareOptions: same arguments, same defaults, same object."""
    import dataclasses
    import importlib
    import inspect

    from fastaxo.integrations.ray import driver
    from fastaxo.pipeline import options

    local = importlib.import_module("fastaxo.pipeline.prepare")  # (the package exports a function)

    fields = {f.name for f in dataclasses.fields(options.PrepareOptions)}
    checker = inspect.signature(options.check_prepare_options).parameters
    assert set(checker) == fields
    for fn in (local.prepare, driver.prepare):
        params = inspect.signature(fn).parameters
        assert fields <= set(params), fn.__module__
        assert {f: params[f].default for f in fields - {"max_length"}} == \
            {f: checker[f].default for f in fields - {"max_length"}}, fn.__module__

    made = []

    class Stop(Exception):
        pass

    real = options.check_prepare_options

    def spy(**kw):
        made.append(real(**kw))
        raise Stop

    monkeypatch.setattr(options, "check_prepare_options", spy)
    kw = dict(strategy="ffd", overflow="drop", attention=None, dedupe_columns=["input_ids"],
              pack_window=7, batch_rows=9, max_row_bytes=1000)
    for fn in (local.prepare, driver.prepare):
        with pytest.raises(Stop):
            fn("in.parquet", "out", 16, **kw)
    assert made[0] == made[1] and made[0].attention == "none"
    with pytest.raises(dataclasses.FrozenInstanceError):
        made[0].max_length = 1  # type: ignore[misc]


def test_padded_input_as_on_one_machine(cluster, tmp_path):
    """Rows padded as HF's padding="max_length" pads, with their attention_mask (issue 30): the
    Ray shards equal one machine's output, no pad token packed, and both reports count the
    same padding dropped."""
    rng = np.random.default_rng(11)
    ids, mask = [], []
    for i in range(1500):
        n = int(rng.integers(1, 48))
        pad = 48 - n
        row = rng.integers(1, 50_000, n).tolist()
        ids.append(row + [0] * pad if i % 2 else [0] * pad + row)
        mask.append([1] * n + [0] * pad if i % 2 else [0] * pad + [1] * n)
    t = pa.table({"input_ids": pa.array(ids, pa.list_(pa.int32())),
                  "attention_mask": pa.array(mask, pa.list_(pa.int8()))})
    f = str(tmp_path / "padded.parquet")
    pq.write_table(t, f, row_group_size=250)
    single = fastaxo.prepare(f, str(tmp_path / "single.parquet"), SEQ, pack_window=600,
                             progress=False)
    rep = fxray.prepare([f], str(tmp_path / "out"), SEQ, pack_window=600, unit_rows=500,
                        address=cluster["address"])
    _same_as_single(tmp_path / "out", tmp_path / "single.parquet")
    pads = sum(m.count(0) for m in mask)
    assert (rep.pad_tokens_dropped, rep.padded_rows) == (single.pad_tokens_dropped,
                                                         single.padded_rows)
    assert rep.pad_tokens_dropped == pads and rep.tokens_in == single.tokens_in
    assert 0 not in [tok for row in _shards(tmp_path / "out").column("input_ids").to_pylist()
                     for tok in row]


def test_wrapped_as_on_one_machine(cluster, tmp_path):
    """strategy="wrapped" (issue 30) on the cluster: the shards equal one machine's file, the
    documents cut counted the same."""
    files = [_write_parquet(tmp_path / f"in{k}.parquet", ids, labs, 400)
             for k, (ids, labs) in enumerate(_planted(2, 1200, seed=9))]
    single = fastaxo.prepare(files, str(tmp_path / "single.parquet"), SEQ, pack_window=700,
                             strategy="wrapped", progress=False)
    rep = fxray.prepare(files, str(tmp_path / "out"), SEQ, pack_window=700, unit_rows=400,
                        strategy="wrapped", address=cluster["address"])
    _same_as_single(tmp_path / "out", tmp_path / "single.parquet")
    assert (rep.split, rep.split_pieces, rep.bins) == (single.split, single.split_pieces,
                                                       single.bins)


def test_a_tokenizer_object_is_refused_on_ray_before_it_starts(tmp_path):
    """Ray's workers load the tokenizer from a directory every node can read: an object is
    refused, naming it, before Ray starts."""
    import tokenizers
    from chat_data import qwen3_dir

    from fastaxo.errors import InvalidTypeError

    tok = tokenizers.Tokenizer.from_file(str(qwen3_dir() / "tokenizer.json"))
    with pytest.raises(InvalidTypeError, match="on Ray, a tokenizer directory .* got a "
                       "Tokenizer object"):
        fxray.prepare([str(tmp_path / "in.parquet")], str(tmp_path / "out"), SEQ, tokenizer=tok)
