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
# FASTAXO_HYPOTHESIS=thorough pytest ...: a long bug hunt before a change lands
settings.register_profile("thorough", parent=settings.get_profile("fastaxo"), max_examples=3000)
settings.load_profile(os.environ.get("FASTAXO_HYPOTHESIS") or ("ci" if os.environ.get("CI") else "fastaxo"))

REPO = Path(__file__).resolve().parent.parent
EXT = _backend.ext


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
