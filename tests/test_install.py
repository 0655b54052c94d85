"""The build under test: installed (not the source tree), extension loaded, config reported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXT, REPO

import fastaxo


def test_imported_from_installed_package_not_source_tree():
    here = Path(fastaxo.__file__).resolve()
    assert REPO / "fastaxo" not in here.parents and here.parent != REPO / "fastaxo", (
        f"fastaxo was imported from the source tree ({here}); tests must run against the installed package"
    )


@pytest.mark.skipif(os.environ.get("FASTAXO_PURE_PYTHON") == "1", reason="the pure-Python leg tests the fallback")
def test_compiled_extension_loaded():
    # CI and the wheel tests set FASTAXO_REQUIRE_EXTENSION=1, so a missing extension fails
    # at import already; this test fails on its own too.
    assert EXT is not None, f"compiled extension did not load: {fastaxo.config()['extension_error']}"
    assert fastaxo.config()["extension"] is True
    assert Path(EXT.__file__).suffix in (".so", ".pyd")


def test_show_config_reports_version_openmp_threads_and_sha_path(capsys):
    info = fastaxo.show_config()
    out = capsys.readouterr().out
    assert info["version"] == fastaxo.__version__ and fastaxo.__version__ in out
    assert ("openmp           : on" in out) == info["openmp"]
    assert f"default threads  : {info['default_threads']}" in out
    assert f"sha256 path      : {info['sha256']}" in out
    if EXT is not None:
        assert info["sha256"] in [n for n, _, s in EXT.sha256_impls() if s]


def test_openmp_built_when_required():
    # FASTAXO_OPENMP=1 at build time makes OpenMP mandatory; CI builds that way.
    if os.environ.get("FASTAXO_EXPECT_OPENMP") == "1":
        assert fastaxo.config()["openmp"] is True


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, cwd="/",
                          timeout=120)


def test_cli_info_runs_as_module():
    r = subprocess.run([sys.executable, "-m", "fastaxo", "info"], capture_output=True, text=True, cwd="/",
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"fastaxo {fastaxo.__version__}" in r.stdout and "sha256 path" in r.stdout


@pytest.mark.skipif(EXT is None, reason="needs the compiled extension")
def test_env_var_forces_each_supported_sha_path():
    for name, _compiled, supported in EXT.sha256_impls():
        r = _run("import fastaxo, json; print(json.dumps(fastaxo.config()['sha256']))", FASTAXO_SHA256=name)
        if supported:
            assert r.returncode == 0, r.stderr
            assert json.loads(r.stdout.strip().splitlines()[-1]) == name
        else:
            assert r.returncode != 0
            assert "FASTAXO_SHA256" in r.stderr and name in r.stderr


@pytest.mark.skipif(EXT is None, reason="needs the compiled extension")
def test_env_var_unknown_sha_path_is_a_clear_error():
    r = _run("import fastaxo", FASTAXO_SHA256="md5")
    assert r.returncode != 0 and "FASTAXO_SHA256='md5'" in r.stderr and "unknown SHA-256 path" in r.stderr


def test_pure_python_fallback_gives_the_same_digests():
    code = (
        "import fastaxo, pyarrow as pa, json;"
        "t = pa.table({'a': ['x', None, 'yz'], 'b': [[1, 2], [], None]});"
        "print(json.dumps([fastaxo.hash_rows(t, hex=True), fastaxo.config()['extension'],"
        " fastaxo.dedupe(['a', 'b', 'a']).keep.tolist()]))"
    )
    r = _run(code, FASTAXO_PURE_PYTHON="1", FASTAXO_REQUIRE_EXTENSION="0")
    assert r.returncode == 0, r.stderr
    digests, ext_loaded, keep = json.loads(r.stdout.strip().splitlines()[-1])
    assert ext_loaded is False and keep == [0, 1]
    import pyarrow as pa

    t = pa.table({"a": ["x", None, "yz"], "b": [[1, 2], [], None]})
    assert digests == fastaxo.hash_rows(t, hex=True)


def test_require_extension_fails_loudly_when_pure_python_is_forced():
    r = _run("import fastaxo", FASTAXO_PURE_PYTHON="1", FASTAXO_REQUIRE_EXTENSION="1")
    assert r.returncode != 0 and "FASTAXO_REQUIRE_EXTENSION" in r.stderr


def test_import_does_not_import_frameworks():
    r = _run("import sys, fastaxo; print(sorted(m for m in ('torch','axolotl','transformers','datasets') if m in sys.modules))")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"


def test_typing_stubs_and_marker_are_installed():
    pkg = Path(fastaxo.__file__).parent
    assert (pkg / "py.typed").exists() and (pkg / "_hash.pyi").exists()


def test_hashing_does_not_import_pandas():
    # pyarrow's DataType.to_pandas_dtype() imports pandas (~50 MB, 0.2 s): never on the hot path.
    # Inputs are built from buffers: pa.array() and Array.to_numpy() import pandas by themselves.
    code = (
        "import sys, numpy as np, pyarrow as pa, fastaxo;"
        "buf = lambda a: pa.py_buffer(np.ascontiguousarray(a));"
        "vals = pa.Array.from_buffers(pa.int32(), 3, [None, buf(np.arange(3, dtype=np.int32))]);"
        "ids = pa.ListArray.from_buffers(pa.list_(pa.int32()), 2, [None, buf(np.array([0, 2, 3], np.int32))], children=[vals]);"
        "f = pa.Array.from_buffers(pa.float32(), 2, [None, buf(np.array([1.5, 2.5], np.float32))]);"
        "s = pa.StringArray.from_buffers(2, buf(np.array([0, 1, 3], np.int32)), pa.py_buffer(b'abc'));"
        "before = 'pandas' in sys.modules;"
        "fastaxo.hash_rows(ids); fastaxo.hash_rows(f); fastaxo.hash_rows(s);"
        "fastaxo.dedupe(pa.Table.from_arrays([ids, s], names=['a', 'b']));"
        "print(before, 'pandas' in sys.modules)"
    )
    r = _run(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "False False"
