"""The command line's manners: --version, quiet on a closed pipe."""

from __future__ import annotations

import os
import subprocess
import sys

import fastaxo


def _fastaxo(*args: str, **kw) -> list[str]:
    return [sys.executable, "-m", "fastaxo", *args]


def test_version():
    r = subprocess.run(_fastaxo("--version"), capture_output=True, text=True, cwd="/",
                       timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"fastaxo {fastaxo.__version__}"


def test_a_closed_pipe_is_not_an_error():
    """``fastaxo info | head -0``: the reader is gone before the first line. No traceback,
    exit 0 (what ``git log | head`` does)."""
    for cmd in (("info",), ("dedupe", "--quiet")):
        read, write = os.pipe()
        os.close(read)  # nobody will read
        p = subprocess.run(_fastaxo(*cmd), stdout=write, stderr=subprocess.PIPE, text=True,
                           cwd="/", timeout=300)
        os.close(write)
        assert p.returncode == 0, (cmd, p.stderr)
        assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, (cmd, p.stderr)
