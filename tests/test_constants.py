"""Constants Python mirrors from the C headers (the pure-Python path needs them too) are the
extension's own: a copy that drifts would change every row digest (the column kinds), a
packing limit or the chat label modes without a word. The check fails when one copy is
changed (the second test changes each in turn)."""

from __future__ import annotations

from typing import Any

import pytest

from fastaxo._core import arrow, backend, choices
from fastaxo.chat import engine
from fastaxo.packing import bins

pytestmark = pytest.mark.skipif(backend.pack_ext is None or backend.ext is None,
                                reason="compiled extension not loaded")

# (module, name, how the extension says it)
MIRRORED: list[tuple[Any, str, Any]] = [
    *[(arrow, f"COL_{k}", lambda k=k: backend.ext.COL_KINDS[k])
      for k in ("NULL", "FIXED", "BOOL", "BINARY32", "BINARY64", "LIST32", "LIST64",
                "FIXED_LIST", "STRUCT", "DICT")],
    (bins, "BFD_MAX_CAPACITY", lambda: backend.pack_ext.BFD_MAX_CAPACITY),
    (choices, "STRATEGIES", lambda: tuple(backend.pack_ext.STRATEGIES)),
    (engine, "_MODES", lambda: {"turn": backend.pack_ext.CHAT_TRAIN_TURN,
                                "all": backend.pack_ext.CHAT_TRAIN_ALL,
                                "last": backend.pack_ext.CHAT_TRAIN_LAST}),
]


def drifted() -> list[str]:
    """The mirrored constants whose Python value is not the extension's."""
    return [f"{mod.__name__}.{name}: {getattr(mod, name)!r} != {want()!r}"
            for mod, name, want in MIRRORED if getattr(mod, name) != want()]


def test_every_mirrored_constant_is_the_extensions():
    assert drifted() == []
    assert len(backend.ext.COL_KINDS) == 10  # every column kind of fx_rows.h is mirrored


@pytest.mark.parametrize("i", range(len(MIRRORED)), ids=[n for _, n, _ in MIRRORED])
def test_a_changed_copy_is_caught(i, monkeypatch):
    mod, name, _ = MIRRORED[i]
    value = getattr(mod, name)
    changed = (value + 1 if isinstance(value, int) else value[::-1] if isinstance(value, tuple)
               else {**value, "turn": -1})
    monkeypatch.setattr(mod, name, changed)
    assert [d for d in drifted() if d.startswith(f"{mod.__name__}.{name}:")]
