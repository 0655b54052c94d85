"""Every public function of ``fastaxo`` shows an ``Examples`` section, and the examples run
as written (doctest, on the installed build): documentation that cannot go stale unnoticed."""

from __future__ import annotations

import doctest
import inspect

import pytest

import fastaxo

FUNCTIONS = sorted(n for n in fastaxo.__all__ if inspect.isfunction(getattr(fastaxo, n)))


def test_every_public_function_is_covered():
    assert len(FUNCTIONS) >= 15, FUNCTIONS
    missing = [n for n in FUNCTIONS if "\nExamples\n--------\n" not in
               (inspect.getdoc(getattr(fastaxo, n)) or "")]
    assert missing == []


@pytest.mark.parametrize("name", FUNCTIONS)
def test_examples_run(name):
    obj = getattr(fastaxo, name)
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, globs={"fastaxo": fastaxo})
    assert tests and tests[0].examples, f"{name}: no examples"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for t in tests:
        runner.run(t)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
