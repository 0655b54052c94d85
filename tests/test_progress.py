"""Progress by default: the CLI always shows it (a bar on a terminal, a plain line every few
seconds otherwise, with or without tqdm); prepare() shows it in interactive sessions."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import fastaxo
from fastaxo._core import progress as P


class Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_plain_lines_when_redirected():
    s = Stream(tty=False)
    p = P.Progress("job", 1000, "rows", stream=s, first=0.0, every=3600)
    p.update(250, "3 bins")
    p.update(250)  # within `every`: no second line
    p.close()
    lines = s.getvalue().splitlines()
    assert len(lines) == 1 and "\r" not in s.getvalue()
    assert lines[0].startswith("job: 250/1,000 rows (25.0%), ") and lines[0].endswith("3 bins")
    assert "s left" in lines[0]


def test_a_line_rewritten_in_place_on_a_terminal_without_tqdm(monkeypatch):
    monkeypatch.setenv("FASTAXO_NO_TQDM", "1")
    s = Stream(tty=True)
    p = P.Progress("job", None, "rows", stream=s, first=0.0)
    p.update(10)
    p.close()
    out = s.getvalue()
    assert out.startswith("\rjob: 10 rows, ") and out.endswith("\n") and out.count("\r") == 2


def test_tqdm_bar_on_a_terminal_when_installed(monkeypatch):
    tqdm = __import__("pytest").importorskip("tqdm")  # a test dependency: installed in CI
    monkeypatch.delenv("FASTAXO_NO_TQDM", raising=False)
    s = Stream(tty=True)
    p = P.Progress("job", 100, "rows", stream=s)
    assert isinstance(p._bar, tqdm.tqdm)
    p.update(100)
    p.close()
    assert "job" in s.getvalue() and "100/100" in s.getvalue()


def test_a_closed_stream_is_not_an_error():
    s = Stream(tty=False)
    s.close()
    p = P.Progress("job", 10, stream=s, first=0.0)
    p.update(5)
    p.close()


def test_prepare_progress_default_follows_the_session(tmp_path, monkeypatch, capsys):
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"input_ids": [[1, 2, 3]] * 100}), src)
    mod = sys.modules["fastaxo.pipeline.prepare"]  # (the package's name is the function)
    made = []
    monkeypatch.setattr(sys.modules["fastaxo.pipeline.meter"], "Progress",
                        lambda *a, **k: made.append(a) or P.Progress(*a, **k))
    monkeypatch.setattr(mod, "interactive", lambda: False)
    fastaxo.prepare(str(src), str(tmp_path / "a.parquet"), 8)
    assert made == []
    monkeypatch.setattr(mod, "interactive", lambda: True)
    fastaxo.prepare(str(src), str(tmp_path / "b.parquet"), 8)
    assert made == [("fastaxo prepare", 100, "rows")]
    fastaxo.prepare(str(src), str(tmp_path / "c.parquet"), 8, progress=False)
    assert len(made) == 1


def test_a_multi_million_row_prepare_redirected_shows_progress_in_its_first_half(tmp_path):
    """The CLI with stderr to a pipe and tqdm unimportable: a plain progress line appears
    before half of the run has passed."""
    n = 6_000_000
    rng = np.random.default_rng(0)
    lens = rng.integers(4, 29, n).astype(np.int32)
    off = np.zeros(n + 1, np.int32)
    np.cumsum(lens, out=off[1:])
    vals = rng.integers(0, 50_000, int(off[-1]), dtype=np.int32)
    src = tmp_path / "big.parquet"
    pq.write_table(pa.table({"input_ids": pa.ListArray.from_arrays(pa.array(off),
                                                                   pa.array(vals))}),
                   src, row_group_size=262_144)
    del vals, off, lens
    no_tqdm = tmp_path / "shadow"
    no_tqdm.mkdir()
    (no_tqdm / "tqdm.py").write_text("raise ImportError('tqdm hidden by the test')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(no_tqdm)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    stamps: list[tuple[float, str]] = []
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "fastaxo", "prepare", str(src), "-o",
                             str(tmp_path / "out.parquet"), "--max-length", "2048"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd="/", env=env)

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            stamps.append((time.monotonic() - t0, line.rstrip("\n")))

    reader = threading.Thread(target=read)
    reader.start()
    assert proc.wait(timeout=600) == 0, stamps
    total = time.monotonic() - t0
    reader.join()
    lines = [(t, s) for t, s in stamps if s.startswith("fastaxo prepare: ")]
    assert lines, stamps
    assert "\r" not in "".join(s for _, s in stamps)
    assert f"/{n:,} rows (" in lines[0][1]
    assert lines[0][0] < total / 2, (lines, total)


def test_a_stage_shows_on_time_while_nothing_is_counted():
    """The ticker writes the line on time during a long stage (a batch being tokenized), with
    the stage named, though update() is not called."""
    s = Stream(tty=False)
    p = P.Progress("job", 10, "rows", stream=s, first=0.0, every=0.2)
    p.stage("tokenizing 3/8 rows of the batch")
    deadline = time.monotonic() + 10
    while "tokenizing 3/8" not in s.getvalue() and time.monotonic() < deadline:
        time.sleep(0.05)
    p.close()
    assert "tokenizing 3/8 rows of the batch" in s.getvalue()
    assert not p._ticker.is_alive()


def test_bytes_are_shown_in_megabytes():
    s = Stream(tty=False)
    p = P.Progress("job", 272_135_161, "bytes", stream=s, first=0.0, every=3600)
    p.update(96_500_000)
    p.close()
    assert s.getvalue().startswith("job: 96.5 MB/272.1 MB (35.5%), ")


def test_jsonl_progress_has_a_total_in_bytes_and_names_tokenization(tmp_path, monkeypatch):
    """Text inputs give no row count: prepare's total is the files' bytes, each file's share
    from its reader's position, ending at 100%; a tokenizing run names its stage as the
    batch's parts are done."""
    from fastaxo.pipeline import meter

    shown = []

    class Spy(P.Progress):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            shown.append(self)

        def stage(self, text):
            self.stages = [*getattr(self, "stages", []), text]
            super().stage(text)

    monkeypatch.setattr(meter, "Progress", Spy)
    rng = np.random.default_rng(0)
    with open(tmp_path / "a.jsonl", "w") as fh:
        for _ in range(30_000):
            ids = rng.integers(0, 999, int(rng.integers(1, 60))).tolist()
            fh.write(json.dumps({"input_ids": ids}) + "\n")
    (tmp_path / "b.jsonl").write_text('{"input_ids": [1, 2]}\n' * 10)
    size = os.path.getsize(tmp_path / "a.jsonl") + os.path.getsize(tmp_path / "b.jsonl")
    fastaxo.prepare([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")],
                    str(tmp_path / "o.parquet"), 64, progress=True, batch_rows=4096,
                    reader_options={"block_bytes": 1 << 16})
    bar = shown[-1]
    assert (bar.unit, bar.total, bar.done) == ("bytes", size, size)
    assert any("packing and writing window 1" in t for t in bar.stages)
    # a tokenizer: the stage counts the batch's rows as they are done
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1, "b": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    (tmp_path / "tok").mkdir()
    tok.save(str(tmp_path / "tok" / "tokenizer.json"))
    with open(tmp_path / "t.jsonl", "w") as fh:
        for i in range(5000):
            fh.write(json.dumps({"text": " ".join("ab"[(i >> k) & 1] for k in range(12))}) + "\n")
    fastaxo.prepare(str(tmp_path / "t.jsonl"), str(tmp_path / "t.parquet"), 64, progress=True,
                    tokenizer=str(tmp_path / "tok"), batch_rows=2048)
    stages = shown[-1].stages
    assert "tokenizing 2,048 rows" in stages
    assert "tokenizing 2,048/2,048 rows of the batch" in stages
    assert shown[-1].done == os.path.getsize(tmp_path / "t.jsonl")
