"""The command line's manners: --version, quiet on a closed pipe."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import fastaxo


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
