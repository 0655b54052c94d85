"""The build itself: OpenMP probe, loud serial fallback, FASTAXO_OPENMP=1 as a hard requirement.

These compile fastaxo from the source tree (a copy in a temporary directory) with a real
compiler wrapper that rejects -fopenmp, i.e. a compiler without OpenMP.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = [
    pytest.mark.slow,
    # The compiler wrapper is a POSIX shell script; MSVC builds are covered by the wheel job.
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX compiler wrapper"),
]


def _copy_source(dst: Path) -> Path:
    src = Path(os.environ.get("FASTAXO_SOURCE_TREE", REPO))
    if not (src / "setup.py").exists():
        pytest.fail(f"source tree not found at {src} (set FASTAXO_SOURCE_TREE)")
    dst.mkdir(parents=True)
    for name in ("setup.py", "pyproject.toml", "README.md"):
        if (src / name).exists():
            shutil.copy(src / name, dst / name)
    shutil.copytree(src / "csrc", dst / "csrc", ignore=shutil.ignore_patterns("test"))
    shutil.copytree(src / "fastaxo", dst / "fastaxo", ignore=shutil.ignore_patterns("*.so", "*.c", "__pycache__", "_build_info.py"))
    return dst


def _no_openmp_cc(tmp: Path) -> Path:
    cc = tmp / "cc-without-openmp"
    real = shutil.which("cc") or shutil.which("gcc")
    cc.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in -fopenmp|-fopenmp=*) '
        'echo "cc-without-openmp: error: unsupported option -fopenmp" >&2; exit 1;; esac; done\n'
        f'exec {real} "$@"\n'
    )
    cc.chmod(0o755)
    return cc


def _build(src: Path, cc: Path, openmp_flag: str | None) -> subprocess.CompletedProcess:
    env = {**os.environ, "CC": str(cc)}
    env.pop("FASTAXO_OPENMP", None)
    if openmp_flag is not None:
        env["FASTAXO_OPENMP"] = openmp_flag
    return subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=src, env=env,
                          capture_output=True, text=True, timeout=600)


def test_serial_build_without_openmp_warns_loudly_and_works(tmp_path):
    src = _copy_source(tmp_path / "src")
    r = _build(src, _no_openmp_cc(tmp_path), None)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "WARNING: this compiler has no OpenMP" in r.stderr and "SERIAL version" in r.stderr
    code = (
        "import fastaxo, hashlib, json;"
        "rows = [b'x' * i for i in range(3000)];"
        "ok = fastaxo.hash_rows(rows, hex=True, num_threads=4) == [hashlib.sha256(r).hexdigest() for r in rows];"
        "c = fastaxo.config(); print(json.dumps([ok, c['openmp'], c['extension'], c['extension_path']]))"
    )
    env = {**os.environ, "PYTHONPATH": str(src), "FASTAXO_REQUIRE_EXTENSION": "1"}
    run = subprocess.run([sys.executable, "-c", code], cwd=src, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    import json

    ok, openmp, loaded, path = json.loads(run.stdout.strip().splitlines()[-1])
    assert ok and loaded and openmp is False and path.startswith(str(src))
    info = subprocess.run([sys.executable, "-m", "fastaxo", "info"], cwd=src, env=env, capture_output=True, text=True, timeout=120)
    assert "openmp           : OFF (serial build: one core)" in info.stdout


def test_openmp_required_fails_the_build_without_openmp(tmp_path):
    src = _copy_source(tmp_path / "src")
    r = _build(src, _no_openmp_cc(tmp_path), "1")
    assert r.returncode != 0
    assert "FASTAXO_OPENMP=1 but OpenMP does not compile here" in r.stderr


def test_c_packing_harness():
    """csrc/test/run_pack.sh --quick: fx_pack (and fx_pack_ff_index fed by a producer thread)
    against its naive C reference, the C99/pedantic builds, the portable and int64 paths,
    injected allocation failures, ASan + UBSan and ThreadSanitizer."""
    src = Path(os.environ.get("FASTAXO_SOURCE_TREE", REPO))
    script = src / "csrc" / "test" / "run_pack.sh"
    if not script.exists():
        pytest.fail(f"{script} not found (set FASTAXO_SOURCE_TREE)")
    if shutil.which("gcc") is None:
        pytest.fail("gcc is needed for the C harness")
    r = subprocess.run(["bash", str(script), "--quick", "--no-bench"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "pack: " in r.stdout and ", 0 failed" in r.stdout.splitlines()[-1], r.stdout[-2000:]


def test_portable_c():
    """scripts/check_c.sh: every csrc/*.c warning-free (-Wall -Wextra -Werror) with gcc and
    clang, as is, with -DFX_PORTABLE (no compiler builtins) and as C99 -pedantic; the
    FX_PORTABLE SHA-256 build against the NIST vectors."""
    src = Path(os.environ.get("FASTAXO_SOURCE_TREE", REPO))
    r = subprocess.run(["bash", str(src / "scripts" / "check_c.sh"), sys.executable],
                       capture_output=True, text=True, timeout=900, env={**os.environ, "CI": "true"})
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "clang version" in r.stdout and "passes NIST" in r.stdout, r.stdout


def test_check_sdist_finds_what_a_link_misses(tmp_path):
    """scripts/check_sdist.py (run by scripts/test.sh on the real sdist) names a missing
    LICENSE and a linked file the archive lacks."""
    import importlib.util
    import tarfile

    spec = importlib.util.spec_from_file_location("check_sdist", REPO / "scripts" / "check_sdist.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    src = tmp_path / "fastaxo-9"
    (src / "docs").mkdir(parents=True)
    (src / "README.md").write_text("[guide](docs/guide.md) ![chart](docs/c.png) [web](https://x.y)")
    (src / "docs" / "guide.md").write_text("[back](../README.md) [gone](../BENCHMARKS.md#top)")
    sdist = tmp_path / "fastaxo-9.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(src, arcname="fastaxo-9")
    got = mod.missing(str(sdist))
    assert "LICENSE" in got
    assert "docs/c.png (linked from README.md)" in got
    assert "BENCHMARKS.md (linked from docs/guide.md)" in got
    assert not any("guide.md (linked" in g or "README.md (linked" in g for g in got), got
