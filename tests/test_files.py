"""Files (issue 18, class 4): no input overwritten, no partial output, nothing left behind, one
clear line and the documented exit code for every user error. Each test failed before its fix
(``fastaxo dedupe X -o X`` destroyed X; a symlinked input was overwritten; Ctrl-C or a full disk
left a partial file; a truncated .gz ended in a message without the file's name; an edited
reader state resumed silently at the wrong place)."""

from __future__ import annotations

import bz2
import contextlib
import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastaxo
from fastaxo.errors import InvalidInputError

ENV = {**os.environ, "FASTAXO_REQUIRE_EXTENSION": os.environ.get("FASTAXO_REQUIRE_EXTENSION", "0")}


def _cli(*args: str, preexec=None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fastaxo", *args], capture_output=True, text=True,
                          cwd="/", env=ENV, timeout=timeout, preexec_fn=preexec)


def _one_line_error(r: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    """Exit ``code``, no traceback, one line on stderr that says each needle."""
    assert r.returncode == code, (r.returncode, r.stderr[-3000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    for n in needles:
        assert n.lower() in lines[0].lower(), (n, lines[0])


def _table(n: int = 6_000, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    rows = [rng.integers(0, 1000, int(k)).tolist() for k in rng.integers(1, 60, n)]
    rows += rows[: n // 10]  # duplicates
    return pa.table({"input_ids": rows})


def _md5(p) -> str:
    return hashlib.md5(open(p, "rb").read()).hexdigest()


def _temporaries(d) -> list[str]:
    return sorted(n for n in os.listdir(d) if ".fastaxo-tmp-" in n)


@pytest.fixture
def src(tmp_path):
    p = tmp_path / "in.parquet"
    pq.write_table(_table(), p, row_group_size=500)
    return p


def _symlink(target, link) -> None:
    try:
        os.symlink(target, link)
    except OSError as e:
        if os.name != "nt":
            raise
        pytest.skip(f"Windows lets only an elevated shell or Developer Mode create symlinks: {e}")


# ------------------------------------------------------------------ outputs that are inputs
@pytest.mark.parametrize("how", ["same", "symlink_in", "symlink_out", "hardlink"])
@pytest.mark.parametrize("cmd", ["dedupe", "prepare"])
def test_an_output_that_is_an_input_is_refused_and_the_input_kept(tmp_path, src, how, cmd):
    before = _md5(src)
    inp, out = str(src), str(src)
    if how == "symlink_in":
        inp = str(tmp_path / "link.parquet")
        _symlink(src, inp)
    elif how == "symlink_out":
        out = str(tmp_path / "link.parquet")
        _symlink(src, out)
    elif how == "hardlink":
        out = str(tmp_path / "hard.parquet")
        os.link(src, out)
    extra = ["--max-length", "128", "-q"] if cmd == "prepare" else []
    r = _cli(cmd, inp, "-o", out, *extra)
    _one_line_error(r, 1, "is also an input")
    assert _md5(src) == before
    assert _temporaries(tmp_path) == []


def test_report_json_that_is_an_input_is_refused_before_the_run(tmp_path, src):
    out = tmp_path / "out.parquet"
    r = _cli("prepare", str(src), "-o", str(out), "--max-length", "128", "-q",
             "--report-json", str(src))
    _one_line_error(r, 1, "--report-json", "is also an input")
    assert not out.exists()


def test_dedupe_output_is_complete_and_equals_the_library(tmp_path, src):
    out = tmp_path / "out.parquet"
    r = _cli("dedupe", str(src), "-o", str(out), "--batch-rows", "700")
    assert r.returncode == 0, r.stderr
    t = pq.read_table(src)
    want = fastaxo.dedupe(t).apply(t)
    assert pq.read_table(out).equals(want)
    assert _temporaries(tmp_path) == []


def test_dedupe_of_no_rows_writes_an_empty_file_with_the_columns(tmp_path):
    src = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"input_ids": pa.array([], pa.list_(pa.int64()))}), src)
    out = tmp_path / "out.parquet"
    r = _cli("dedupe", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    t = pq.read_table(out)
    assert t.num_rows == 0 and t.column_names == ["input_ids"]


# ------------------------------------------------------------------ signals, kills, full disk
def _start(cmd: list[str], tmp_path) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-m", "fastaxo", *cmd], cwd="/", env=ENV,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and p.poll() is None:
        if _temporaries(tmp_path):
            time.sleep(0.05)
            if p.poll() is None:
                return p
            break  # done before it could be signalled: not a test of anything
        time.sleep(0.005)
    p.kill()
    out, err = p.communicate()
    raise AssertionError("the run ended before it could be signalled, or no temporary file "
                         f"appeared: make the input bigger\n{err[-2000:]}")


def _long_run(tmp_path, cmd: str) -> list[str]:
    src = tmp_path / "big.parquet"
    if not src.exists():
        # big enough that the run outlives the signal on a busy machine (~1 s of work)
        pq.write_table(_table(180_000, seed=3), src, row_group_size=500)
    out = str(tmp_path / "out.parquet")
    if cmd == "dedupe":
        return ["dedupe", str(src), "-o", out, "--batch-rows", "200", "--threads", "1"]
    return ["prepare", str(src), "-o", out, "--max-length", "128", "--batch-rows", "200",
            "--pack-window", "200", "-q", "--threads", "1"]


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals: Windows has no SIGHUP, and one "
                    "process cannot send another a SIGTERM or SIGINT it can handle")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT"])
@pytest.mark.parametrize("cmd", ["dedupe", "prepare"])
def test_a_signal_mid_write_leaves_the_old_output_and_no_temporary(tmp_path, cmd, sig):
    argv = _long_run(tmp_path, cmd)
    out = tmp_path / "out.parquet"
    out.write_bytes(b"old")
    p = _start(argv, tmp_path)
    signum = getattr(signal, sig)
    p.send_signal(signum)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 128 + signum, (p.returncode, err[-3000:])
    assert "Traceback" not in err, err[-3000:]
    assert "no output written" in err
    assert out.read_bytes() == b"old"
    assert _temporaries(tmp_path) == []


@pytest.mark.parametrize("cmd", ["dedupe", "prepare"])
def test_after_sigkill_the_next_run_removes_the_dead_process_temporary(tmp_path, cmd):
    argv = _long_run(tmp_path, cmd)
    p = _start(argv, tmp_path)
    p.kill()  # SIGKILL; TerminateProcess on Windows
    p.communicate(timeout=60)
    stale = _temporaries(tmp_path)
    assert stale, "SIGKILL leaves the temporary behind (nothing can remove it then)"
    # a temporary of a process that still runs is not touched
    alive = tmp_path / f".out.parquet.fastaxo-tmp-{os.getpid()}-0badc0de"
    alive.write_bytes(b"x")
    small = tmp_path / "small.parquet"
    pq.write_table(_table(100), small)
    argv[1] = str(small)
    r = _cli(*argv)
    assert r.returncode == 0, r.stderr
    assert _temporaries(tmp_path) == [alive.name]
    assert pq.read_metadata(tmp_path / "out.parquet").num_rows > 0


def test_the_sweep_removes_the_temporaries_of_dead_processes_only(tmp_path, monkeypatch):
    """Liveness is asked without signalling anything: kill(pid, 0) on POSIX, the process
    handle's exit code on Windows, where os.kill(pid, 0) sends a console Ctrl-C (and any other
    value terminates the process). Before: on Windows every temporary looked alive and the
    probe sent Ctrl-C; everywhere a PID no process can have ended the run in OverflowError."""
    from fastaxo._core.files import remove_stale_temporaries

    kills: list[tuple[int, int]] = []
    real_kill = os.kill

    def kill(pid: int, sig: int) -> None:
        kills.append((pid, sig))
        if os.name == "nt":
            raise AssertionError(f"os.kill({pid}, {sig}) on Windows")
        real_kill(pid, sig)

    monkeypatch.setattr(os, "kill", kill)
    out = tmp_path / "out.parquet"

    def temporary(pid: int) -> str:
        name = f".out.parquet.fastaxo-tmp-{pid}-{os.urandom(4).hex()}"
        (tmp_path / name).write_bytes(b"x")
        return name

    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        running = temporary(child.pid)
        assert remove_stale_temporaries(str(out)) == []
    finally:
        child.communicate(timeout=60)  # ends it (stdin closed), and reaps it
    # init (PID 1) / System (PID 4): always running (another user's, unless this is root)
    others = [temporary(os.getpid()), temporary(4 if os.name == "nt" else 1)]
    dead = [running] + [temporary(pid) for pid in (0, 2**31, 10**20)]  # no process has these
    removed = remove_stale_temporaries(str(out))
    assert sorted(os.path.basename(p) for p in removed) == sorted(dead)
    assert _temporaries(tmp_path) == sorted(others)
    if os.name != "nt":
        assert (child.pid, 0) in kills and all(sig == 0 for _, sig in kills)


def _file_size_limit(nbytes: int):
    def apply() -> None:
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return apply


@pytest.mark.skipif(os.name == "nt", reason="RLIMIT_FSIZE and SIGXFSZ are POSIX resource "
                    "limits; Windows has no per-process file size limit")
@pytest.mark.parametrize("cmd", ["dedupe", "prepare"])
def test_a_full_disk_is_one_line_and_leaves_no_partial_file(tmp_path, cmd):
    # RLIMIT_FSIZE makes every write past 64 KiB fail as a full disk would (EFBIG)
    argv = _long_run(tmp_path, cmd)
    r = _cli(*argv, preexec=_file_size_limit(64 << 10))
    _one_line_error(r, 1, "fastaxo " + cmd, "too large")
    assert not (tmp_path / "out.parquet").exists()
    assert _temporaries(tmp_path) == []


# ------------------------------------------------------------------ one line per user error
@pytest.mark.parametrize("ext", ["gz", "bz2", "zst"])
def test_a_truncated_compressed_file_names_the_file(tmp_path, ext):
    lines = "".join(json.dumps({"input_ids": list(range(i % 50 + 1))}) + "\n"
                    for i in range(20_000)).encode()
    if ext == "gz":
        data = gzip.compress(lines)
    elif ext == "bz2":
        data = bz2.compress(lines)
    else:
        buf = pa.BufferOutputStream()
        with pa.CompressedOutputStream(buf, "zstd") as f:
            f.write(lines)
        data = buf.getvalue().to_pybytes()
    p = tmp_path / f"chat.jsonl.{ext}"
    p.write_bytes(data[: len(data) // 2])
    out = tmp_path / "out.parquet"
    r = _cli("prepare", str(p), "-o", str(out), "--max-length", "128", "-q")
    _one_line_error(r, 1, str(p), "truncated")
    assert not out.exists() and _temporaries(tmp_path) == []


def test_a_truncated_parquet_file_names_the_file_in_dedupe(tmp_path, src):
    bad = tmp_path / "cut.parquet"
    bad.write_bytes(src.read_bytes()[:3000])
    r = _cli("dedupe", str(bad), "-o", str(tmp_path / "o.parquet"))
    _one_line_error(r, 1, str(bad), "not a readable parquet file")


@contextlib.contextmanager
def _unwritable_dir(tmp_path):
    """A directory that refuses this process a new file, even as root or an elevated
    Administrator (chmod does not stop root, and means nothing on Windows)."""
    if sys.platform.startswith("linux"):
        if os.access("/sys", os.W_OK) and os.geteuid() != 0:
            pytest.fail("expected /sys to be unwritable")
        yield "/sys"  # sysfs: no new files, root included
    elif sys.platform == "darwin":
        yield "/System"  # the sealed, read-only system volume
    elif os.name == "nt":
        d = tmp_path / "locked"
        d.mkdir()
        # a deny entry for Everyone (S-1-1-0): Administrators are refused too
        deny = ["icacls", str(d), "/deny", "*S-1-1-0:(WD,AD)"]
        subprocess.run(deny, check=True, capture_output=True, timeout=60)
        try:
            yield str(d)
        finally:
            subprocess.run(["icacls", str(d), "/remove:d", "*S-1-1-0"], check=True,
                           capture_output=True, timeout=60)
    else:
        pytest.fail(f"no unwritable directory known for {sys.platform}")


def test_an_unwritable_output_says_so_before_the_run(tmp_path, src):
    with _unwritable_dir(tmp_path) as bad:
        for argv in (["dedupe", str(src), "-o", os.path.join(bad, "out.parquet")],
                     ["prepare", str(src), "-o", os.path.join(bad, "out.parquet"),
                      "--max-length", "128", "-q"],
                     ["prepare", str(src), "-o", str(tmp_path / "o.parquet"), "--max-length",
                      "128", "-q", "--report-json", os.path.join(bad, "r.json")]):
            r = _cli(*argv)
            # (the directory by name: Windows may spell it long or short, C:\Users\RUNNER~1)
            _one_line_error(r, 1, "cannot write in", os.path.basename(bad))
    assert not (tmp_path / "o.parquet").exists()


def test_a_missing_input_and_bad_arguments(tmp_path, src):
    r = _cli("dedupe", str(tmp_path / "nope.parquet"), "-o", str(tmp_path / "o.parquet"))
    _one_line_error(r, 1, "nope.parquet")
    r = _cli("prepare", str(src), "-o", str(tmp_path / "o.parquet"), "--max-length", "128",
             "--format", "xml")
    assert r.returncode == 2 and "--format" in r.stderr and "Traceback" not in r.stderr
    r = _cli("dedupe", str(src), "--threads", "0")
    assert r.returncode == 2 and "--threads" in r.stderr
    r = _cli("dedupe", str(src), "--threads", "100000")
    _one_line_error(r, 1, "at most")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced by "
                    "Linux only (macOS does not limit the address space; Windows has no rlimits)")
def test_out_of_memory_is_one_line(tmp_path):
    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (1200 << 20, 1200 << 20))
    r = _cli("dedupe", "--rows", "3000000", preexec=limit)
    _one_line_error(r, 1, "out of memory")


def test_a_closed_pipe_is_not_an_error():
    # ``fastaxo info | head -c 10``, without a shell (Windows has no head)
    p = subprocess.Popen([sys.executable, "-m", "fastaxo", "info"], cwd="/", env=ENV,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    head = subprocess.run([sys.executable, "-c", "import sys; sys.stdin.buffer.read(10)"],
                          stdin=p.stdout, capture_output=True, timeout=120)
    p.stdout.close()  # only head held the reading end
    with p.stderr:
        err = p.stderr.read()  # to the end: fastaxo has exited
    p.wait(timeout=120)
    assert head.returncode == 0
    assert "Traceback" not in err and "BrokenPipe" not in err, err


# ------------------------------------------------------------------ reader state
def test_a_state_that_does_not_fit_the_source_is_refused(tmp_path):
    a = tmp_path / "a.parquet"
    pq.write_table(_table(3_000), a, row_group_size=400)
    r = fastaxo.BatchReader(str(a), batch_rows=256)
    next(iter(r))
    next(iter(r))
    good = r.state_dict()
    bad_cases = {
        "row past the end": {"row": 10**9},
        "inconsistent row": {"row": good["position"]["row"] + 1},
        "unit past the file": {"unit": 99, "offset": 0},
        "offset past the unit": {"offset": 10_000},
        "negative skip": {"skip": -1},
        "missing field": None,
    }
    for name, change in bad_cases.items():
        st = json.loads(json.dumps(good))
        if change is None:
            del st["position"]["window"]
        else:
            st["position"].update(change)
        fresh = fastaxo.BatchReader(str(a), batch_rows=256)
        with pytest.raises(InvalidInputError, match="state: "):
            fresh.load_state_dict(st)
        fresh.close()
    # the saved state itself resumes where it was
    fresh = fastaxo.BatchReader(str(a), batch_rows=256)
    fresh.load_state_dict(good)
    rest = pa.Table.from_batches(list(fresh)).column("input_ids").to_pylist()
    whole = pq.read_table(a).column("input_ids").to_pylist()
    assert rest == whole[good["rows"]:]
