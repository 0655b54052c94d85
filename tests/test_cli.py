"""The command line's manners: --version, quiet on a closed pipe, and one line for each
reader error a user meets (permissions, pipes, files of another format)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastaxo
from fastaxo._core.backend import child_env


def _fastaxo(*args: str, **kw) -> list[str]:
    return [sys.executable, "-m", "fastaxo", *args]


def test_version():
    r = subprocess.run(_fastaxo("--version"), capture_output=True, text=True, cwd="/",
                       timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"fastaxo {fastaxo.__version__}"


@pytest.mark.parametrize("stdout", [
    "buffered",  # a user's shell: the lines wait in stdout's buffer until the exit
    pytest.param("unbuffered", marks=pytest.mark.skipif(
        os.name == "nt", reason="Windows reports a closed pipe as EINVAL; with nothing left "
        "in a buffer to retry, it cannot be told from another EINVAL")),
])
def test_a_closed_pipe_is_not_an_error(stdout):
    """``fastaxo info | head -0``: the reader is gone before the first line. No traceback,
    nothing on stderr, exit 0 (what ``git log | head`` does). Before: with a buffered stdout
    (any shell; CI sets PYTHONUNBUFFERED) the pipe failed in Python's exit flush, which
    printed "Exception ignored ... BrokenPipeError" and exited 120."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if stdout == "unbuffered":
        env["PYTHONUNBUFFERED"] = "1"
    for cmd in (("info",), ("dedupe", "--quiet")):
        read, write = os.pipe()
        os.close(read)  # nobody will read
        p = subprocess.run(_fastaxo(*cmd), stdout=write, stderr=subprocess.PIPE, text=True,
                           cwd="/", env=env, timeout=300)
        os.close(write)
        assert p.returncode == 0, (cmd, p.returncode, p.stderr)
        assert p.stderr == "", (cmd, p.stderr)


# ------------------------------------------------------------------ reader errors, as a user

# The CLI as an unprivileged user: root (every CI container) passes every permission check,
# so a root parent drops the child to nobody (65534) once it has imported what the command
# needs (the interpreter's own files may sit where nobody cannot read, e.g. under /root).
_AS_USER = r"""
import os, shutil, sys, tempfile
import pwd  # noqa: F401
import pyarrow.csv, pyarrow.json, pyarrow.parquet  # noqa: F401
import fastaxo.__main__ as cli
if os.geteuid() == 0:
    # one run first, as root: it imports every module the command imports lazily
    d = tempfile.mkdtemp()
    with open(os.path.join(d, "w.jsonl"), "w") as fh:
        fh.write('{"input_ids": [1, 2]}\n')
    with open(os.devnull, "w") as sys.stdout:
        cli.main(["prepare", os.path.join(d, "w.jsonl"), "-o", os.path.join(d, "w.parquet"),
                  "--max-length", "16", "-q"])
    sys.stdout = sys.__stdout__
    shutil.rmtree(d)
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.fixture
def shared_dir():
    """A directory the unprivileged child can reach (pytest's tmp_path is root's, 0700)."""
    d = tempfile.mkdtemp(prefix="fastaxo-cli-")
    os.chmod(d, 0o777)
    try:
        yield d
    finally:
        for root, dirs, _ in os.walk(d):
            for x in dirs:
                os.chmod(os.path.join(root, x), 0o755)
        os.chmod(d, 0o755)
        shutil.rmtree(d, ignore_errors=True)


def _prepare_as_user(*args: str) -> subprocess.CompletedProcess:
    return _as_user("prepare", *args, "--max-length", "16")


def _as_user(cmd: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _AS_USER, cmd, *args, "-q"], capture_output=True,
                          text=True, cwd="/", env=child_env(), timeout=300)


def _one_line(r: subprocess.CompletedProcess, *needles: str, cmd: str = "prepare") -> str:
    assert r.returncode == 1, (r.returncode, r.stderr[-3000:])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"fastaxo {cmd}: error: "), r.stderr[-3000:]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def _rows_file(path: str) -> str:
    with open(path, "w") as fh:
        fh.write("".join(json.dumps({"input_ids": [1, 2, i]}) + "\n" for i in range(20)))
    os.chmod(path, 0o644)
    return path


def test_permission_problems_say_permission_denied_with_the_path(shared_dir):
    """An unreadable file, a file under a directory the user cannot search, a directory it
    cannot list (at the top or below): each is one line saying "permission denied" and the
    path, not "no such file" or "holds no data files"."""
    out = os.path.join(shared_dir, "out.parquet")
    cases = []
    f = _rows_file(os.path.join(shared_dir, "unreadable.jsonl"))
    os.chmod(f, 0o000)
    cases.append((f, f, "cannot read"))
    hidden = os.path.join(shared_dir, "nosearch")
    os.mkdir(hidden)
    g = _rows_file(os.path.join(hidden, "a.jsonl"))
    os.chmod(hidden, 0o644)  # listable, not searchable
    cases.append((g, g, "cannot reach"))
    unlisted = os.path.join(shared_dir, "nolist")
    os.mkdir(unlisted)
    _rows_file(os.path.join(unlisted, "a.jsonl"))
    os.chmod(unlisted, 0o311)  # searchable, not listable
    cases.append((unlisted, unlisted, "cannot list the directory"))
    tree = os.path.join(shared_dir, "tree")
    os.makedirs(os.path.join(tree, "sub"))
    _rows_file(os.path.join(tree, "a.jsonl"))
    _rows_file(os.path.join(tree, "sub", "b.jsonl"))
    os.chmod(os.path.join(tree, "sub"), 0o000)
    cases.append((tree, os.path.join(tree, "sub"), "cannot list the directory"))
    for source, named, what in cases:
        r = _prepare_as_user(source, "-o", out)
        _one_line(r, "source: permission denied: ", f"{what} {named!r}")
        assert not os.path.exists(out)
    # dedupe (Parquet files): the same lines, where it used to say "no such input file"
    unreadable = os.path.join(shared_dir, "unreadable.parquet")
    pq.write_table(pa.table({"input_ids": [[1, 2]]}), unreadable)
    os.chmod(unreadable, 0o000)
    os.chmod(hidden, 0o755)
    unreachable = os.path.join(hidden, "a.parquet")
    pq.write_table(pa.table({"input_ids": [[1, 2]]}), unreachable)
    os.chmod(hidden, 0o644)
    for path, what in ((unreadable, "cannot read"), (unreachable, "cannot reach")):
        r = _as_user("dedupe", path, "-o", out)
        _one_line(r, "source: permission denied: ", f"{what} {path!r}", cmd="dedupe")
        assert not os.path.exists(out)


def test_a_fifo_input_is_refused_before_it_is_read(shared_dir):
    """A named pipe was read to its end, then "lseek failed": refused up front, unread."""
    fifo = os.path.join(shared_dir, "rows.jsonl")
    os.mkfifo(fifo, 0o666)
    r = _prepare_as_user(fifo, "-o", os.path.join(shared_dir, "out.parquet"))
    _one_line(r, f"source: {fifo!r} is a named pipe (FIFO), not a regular file",
              "save the data to a file")
    r = _as_user("dedupe", fifo)
    _one_line(r, f"source: {fifo!r} is a named pipe (FIFO), not a regular file", cmd="dedupe")


def test_a_file_of_another_format_says_what_it_is(shared_dir):
    """--format forced on the wrong kind of file (and a column name that is not UTF-8): one line
    naming the file, what it is, and what to pass."""
    t = pa.table({"input_ids": pa.array([[1, 2, 3], [4, 5]], pa.list_(pa.int32()))})
    pqf, arrow = os.path.join(shared_dir, "a.parquet"), os.path.join(shared_dir, "a.arrow")
    pq.write_table(t, pqf)
    with pa.ipc.new_file(arrow, t.schema) as w:
        w.write_table(t)
    js = _rows_file(os.path.join(shared_dir, "a.jsonl"))
    bad = os.path.join(shared_dir, "names.parquet")
    pq.write_table(pa.table({"input_ids": [[1]], "zqzqzq": [1]}), bad)
    with open(bad, "rb") as fh:
        data = fh.read().replace(b"zqzqzq", b"\xff\xfezqzq")
    with open(bad, "wb") as fh:
        fh.write(data)
    for p in (pqf, arrow, bad):
        os.chmod(p, 0o644)
    out = os.path.join(shared_dir, "out.parquet")
    for source, fmt, needles in [
        (pqf, "csv", ("cannot read as csv; the file is a Parquet file", "--format parquet")),
        (pqf, "jsonl", ("the file is a Parquet file, not jsonl",)),
        (arrow, "text", ("the file is an Arrow IPC file, not text", "--format arrow")),
        (js, "parquet", ("cannot open as Parquet; the file is text", "--format")),
        (js, "arrow", ("the file is text, not arrow",)),
        (bad, None, ("a column name or other text in its metadata is not valid UTF-8",)),
    ]:
        r = _prepare_as_user(source, "-o", out, *(("--format", fmt) if fmt else ()))
        _one_line(r, source, *needles)
