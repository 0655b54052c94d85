"""Constants Python mirrors from the C headers (the pure-Python path needs them too) are the
extension's own: a copy that drifts would change every row digest (the column kinds), a
packing limit or the chat label modes without a word. The check fails when one copy is
changed (the second test changes each in turn). The C statuses have one vocabulary
(csrc/fx_status.h), read by every extension, and one funnel to exceptions."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import tokenizer_data as data

from fastaxo import Tokenizer
from fastaxo._core import arrow, backend, choices
from fastaxo._core.status import check_status, raise_status
from fastaxo.chat import engine
from fastaxo.errors import KernelError
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


# -- the one status vocabulary (csrc/fx_status.h) and the one funnel to exceptions ----------

CSRC = Path(__file__).resolve().parent.parent / "csrc"


def header_statuses() -> dict[str, int]:
    """fx_status.h's enum, read from the header itself."""
    body = re.search(r"enum \{(.*?)\};", (CSRC / "fx_status.h").read_text(), re.S)
    assert body is not None
    return {m[1]: int(m[2]) for m in re.finditer(r"\b(FX_\w+) = (\d+)", body[1])
            if m[1] != "FX_NSTATUS"}


def test_every_extension_has_the_headers_statuses_and_names():
    want = header_statuses()
    assert len(want) >= 12 and sorted(want.values()) == list(range(len(want)))
    for mod in (backend.ext, backend.pack_ext, backend.tok_ext):
        assert mod.STATUS == want, mod.__name__
        assert [mod.status_name(v) for v in want.values()] == list(want)
        assert mod.status_name(len(want)) == mod.status_name(-1) == "FX_UNKNOWN"


def test_no_other_header_numbers_statuses_of_its_own():
    """Each kernel family once had its own (FX_BPE_E*, FX_PACK_E*, FX_SEEN_*, FX_ROW_BAD_*):
    a second enum of statuses, or a #define of one, would number them apart again."""
    found = []
    for src in sorted(CSRC.glob("*.[ch]")):
        if src.name == "fx_status.h":
            continue
        text = src.read_text()
        found += [f"{src.name}: {m[0]}" for m in re.finditer(
            r"\bFX_\w*?(_OK|_E[A-Z0-9]+|NOMEM|_FULL|_BAD_\w+|_ERR_\w+)\b\s*(=\s*-?\d+|\s\d+)",
            text) if not m[0].startswith("FX_ROWSET_MAX_ENTRIES")]
    assert found == []


def test_the_funnel_raises_memory_error_and_kernel_error():
    with pytest.raises(MemoryError, match=r"^k: out of memory doing x$"):
        raise_status("FX_ENOMEM", kernel="k", what="doing x")
    with pytest.raises(KernelError, match=r"k: internal error \(FX_EINVAL, item 3\) doing x") as e:
        raise_status("FX_EINVAL", kernel="k", what="doing x", item=3, status=1)
    assert (e.value.kernel, e.value.status, e.value.item) == ("k", 1, 3)
    ext = backend.pack_ext
    check_status(ext, ext.STATUS["FX_OK"], kernel="k", what="x")
    with pytest.raises(MemoryError, match="packing 5 sequences"):
        check_status(ext, ext.STATUS["FX_ENOMEM"], kernel="k", what="packing 5 sequences")


def test_a_compiled_kernels_status_goes_through_the_funnel(monkeypatch):
    """The compiled modules raise through fastaxo._core.status.raise_status: replaced, it is
    handed the status of a kernel that ran out of memory (the tokenizer's model tables)."""
    from fastaxo._core import status

    seen = []

    def spy(name, **kw):
        seen.append((name, kw["kernel"], kw["what"]))
        raise MemoryError("spied")

    monkeypatch.setattr(status, "raise_status", spy)
    path = data.qwen3_json()
    assert backend.tok_ext._fail_big_allocs(True) is False
    try:
        with pytest.raises(MemoryError, match="spied"):
            Tokenizer.from_pretrained(path)
    finally:
        backend.tok_ext._fail_big_allocs(False)
    assert seen == [("FX_ENOMEM", "tokenizer", "building the BPE model")]
