"""The package's shape (scripts/check_layout.py): the source tree passes, and each rule fails
on a tree that breaks it (a gate that cannot fail would prove nothing)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

SCRIPT = REPO / "scripts" / "check_layout.py"


def _checker():
    spec = importlib.util.spec_from_file_location("check_layout", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for d in {(root / rel).parent for rel in files}:  # every package dir gets an __init__
        while d != root:
            (d / "__init__.py").touch()
            d = d.parent
    return root


def test_the_source_tree_passes():
    r = subprocess.run([sys.executable, str(SCRIPT), "--root", str(REPO)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("files, expected", [
    ({"fastaxo/_core/a.py": "from fastaxo.pipeline import b\n", "fastaxo/pipeline/b.py": ""},
     "a layer above it"),
    ({"fastaxo/readers/a.py": "import fastaxo.readers.b\n",
      "fastaxo/readers/b.py": "def f():\n    import fastaxo.readers.a\n"},
     "import cycle: fastaxo.readers.a <-> fastaxo.readers.b"),
    ({"fastaxo/readers/a.py": "from fastaxo.readers.b import _helper\n",
      "fastaxo/readers/b.py": "def _helper():\n    pass\n"},
     "underscore name from another module: from fastaxo.readers.b import _helper"),
    ({"fastaxo/readers/a.py": "from fastaxo.readers import b\nb._helper()\n",
      "fastaxo/readers/b.py": "def _helper():\n    pass\n"},
     "underscore name from another module: b._helper"),
    ({"fastaxo/readers/a.py": "x = 1\n" * 801}, "801 lines (at most 800)"),
    ({"fastaxo/hashing.py": "from fastaxo import _hash\n"}, "imports the extension fastaxo._hash"),
    ({"fastaxo/__init__.py": "from fastaxo._bench import x\n", "fastaxo/_bench/x.py": ""},
     "import fastaxo reaches fastaxo._bench"),
    ({"fastaxo/integrations/x.py": "def f():\n    print('done')\n"},
     "fastaxo/integrations/x.py:2: print() in library code"),
    ({"fastaxo/readers/a.py": "class C:\n    def f(self):\n" + "        x = 1\n" * 100},
     "fastaxo/readers/a.py:2: C.f: 101 lines without its docstring (at most 100)"),
    ({"fastaxo/readers/a.py": 'def f():\n    """Doc."""\n' + "    x = 1\n" * 100},
     "fastaxo/readers/a.py:1: f: 101 lines without its docstring"),
    ({"fastaxo/readers/a.py": "def f(a, b, c, d, e, f, g, h, i=0, *, j=1):\n    pass\n"},
     "fastaxo/readers/a.py:1: f: 9 parameters that are not keyword-only"),
    ({"fastaxo/readers/a.py": "class C:\n    @staticmethod\n    def f(self, b, c, d, e, f, g, "
                              "h, i):\n        pass\n"},
     "C.f: 9 parameters that are not keyword-only"),
    ({"csrc/fx_big.c": "int x;\n" * 1001}, "csrc/fx_big.c: 1001 lines (at most 1000"),
])
def test_each_rule_fails_a_tree_that_breaks_it(tmp_path, files, expected):
    problems = _checker().check(_tree(tmp_path, files))
    assert any(expected in p for p in problems), problems


def test_the_shape_rules_spare_what_they_exempt(tmp_path):
    """A method's self, keyword-only parameters, fastaxo._bench, a DECLARATIVE table and a
    generated C table break no rule."""
    body = "    x = 1\n" * 100
    files = {"fastaxo/_bench/a.py": "def f():\n" + body,
             "fastaxo/readers/d.py": 'def f():\n    """' + "doc\n" * 200 + '"""\n' + body[:-10],
             "fastaxo/readers/b.py": "class C:\n    def m(self, a, b, c, d, e, f, g, h, *, i=1):"
                                     "\n        pass\n\n\ndef table():\n" + body,
             "csrc/fx_unicode_tables.h": "int x;\n" * 1001}
    checker = _checker()
    checker.PENDING = frozenset()  # (the repository's own entries are not in this tree)
    checker.DECLARATIVE = frozenset({"fastaxo.readers.b:table"})
    assert checker.check(_tree(tmp_path, files)) == []
    checker.DECLARATIVE = frozenset()
    assert [p.split(": ")[1] for p in checker.check(tmp_path)] == ["table"]


def test_pending_only_shrinks(tmp_path):
    """PENDING hides what still breaks a shape rule, and an entry that breaks none any more
    is itself a problem (the list cannot go stale)."""
    checker = _checker()
    _tree(tmp_path, {"fastaxo/readers/a.py": "def f(a, b, c, d, e, f, g, h, i):\n    pass\n",
                     "csrc/fx_ok.c": "int x;\n"})
    checker.PENDING = frozenset({"fastaxo/readers/a.py: f"})
    assert checker.check(tmp_path) == []
    checker.PENDING = frozenset({"fastaxo/readers/a.py: f", "csrc/fx_ok.c"})
    assert checker.check(tmp_path) == [
        "PENDING lists 'csrc/fx_ok.c', which breaks no rule now: remove it"]


def test_a_clean_tree_has_no_problems(tmp_path):
    files = {"fastaxo/_core/a.py": "from fastaxo.errors import InvalidInputError\n",
             "fastaxo/errors.py": "class InvalidInputError(ValueError):\n    pass\n",
             "fastaxo/readers/b.py": "from fastaxo._core import a\nfrom fastaxo._core.a import x\n"}
    checker = _checker()
    checker.PENDING = frozenset()
    assert checker.check(_tree(tmp_path, files)) == []


def test_nothing_in_the_repository_reads_beside_it():
    """Users clone the repository alone: no file may point at ../shared (the developers' notes)."""
    bad = []
    for p in REPO.rglob("*"):
        if (p.is_file() and p.suffix in (".py", ".sh", ".toml", ".cfg", ".txt", ".yml", ".yaml", "")
                and not any(part.startswith(".") or part in ("build", "dist", "wheelhouse")
                            for part in p.relative_to(REPO).parts)):
            try:
                text = p.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            if "../shared" in text or "/work/shared" in text:
                bad.append(str(p.relative_to(REPO)))
    bad = [b for b in bad if b != "tests/test_layout.py"]
    assert not bad, bad
