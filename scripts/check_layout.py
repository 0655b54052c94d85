"""The package's shape, checked: what a module may import and how big it may grow.

    python scripts/check_layout.py [--root DIR]      # exit 1 and one line per finding

Rules (ARCHITECTURE.md explains them):
- no module of fastaxo/ over MAX_LINES lines (.py, .pyx, .pyi, .pxd);
- no function over MAX_FUNCTION_LINES lines outside fastaxo._bench, its docstring not counted
  (documentation is not complexity; a declarative table may be exempted by name in
  DECLARATIVE), and none with more than MAX_POSITIONAL parameters
  that are not keyword-only (``self``/``cls`` of a method not counted);
- no C source of csrc/ over MAX_C_LINES lines (generated tables excepted: GENERATED_C);
- layers: a module imports only modules of its own layer or below (LAYERS, bottom first);
  the compiled extensions (fastaxo._hash, fastaxo._pack, fastaxo._tok) are loaded by
  _core.backend alone;
- no import cycle between fastaxo's modules (imports inside functions count: a lazy import is
  still a dependency);
- no underscore name taken from another module (``from m import _x`` or ``m._x`` where m is a
  fastaxo module and _x is not a submodule): a helper used in two places is public inside the
  package;
- ``import fastaxo`` never reaches fastaxo._bench or fastaxo.integrations;
- no ``print()`` in library code: the CLI (``__main__``), the benchmark (``_bench``) and
  ``show_config`` print; everything else logs through ``logging`` (progress goes through
  ``_core.progress``).
Only the package is checked; tests may reach into it.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

MAX_LINES = 800
MAX_FUNCTION_LINES = 100
MAX_POSITIONAL = 8
MAX_C_LINES = 1000
#: functions (module:qualified name) that are a declarative table, exempt from the length rule
DECLARATIVE: frozenset[str] = frozenset()
#: generated C (scripts/gen_unicode_tables.py): data, not code
GENERATED_C = frozenset({"fx_unicode_tables.h"})
#: what still breaks a rule, being mended (issue 29); each entry must still break it, so the
#: list only shrinks (test_layout checks)
PENDING: frozenset[str] = frozenset()
#: the modules that may print: the CLI, the benchmark, show_config
MAY_PRINT = ("fastaxo.__main__", "fastaxo._bench", "fastaxo._core.config")
PKG = "fastaxo"

# Bottom first. A module's layer is the first pattern that matches its dotted name
# (an exact name, or a prefix ending in ".").
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("fastaxo.errors", "fastaxo._version", "fastaxo._build_info", "fastaxo._hash",
              "fastaxo._pack", "fastaxo._tok")),
    ("core", ("fastaxo._core", "fastaxo._core.", "fastaxo._reference", "fastaxo._reference.")),
    ("kernels", ("fastaxo.chat", "fastaxo.chat.",
                 "fastaxo.hashing", "fastaxo.hashing.", "fastaxo.packing", "fastaxo.packing.",
                 "fastaxo.padding", "fastaxo.tokenizer", "fastaxo.tokenizer.")),
    ("readers", ("fastaxo.readers", "fastaxo.readers.")),
    ("pipeline", ("fastaxo.pipeline", "fastaxo.pipeline.")),
    ("top", ("fastaxo", "fastaxo.__main__", "fastaxo._cli_args", "fastaxo.integrations",
             "fastaxo.integrations.",
             "fastaxo._bench", "fastaxo._bench.")),
]
EXTENSIONS = {"fastaxo._hash", "fastaxo._pack", "fastaxo._tok"}
GENERATED = {"fastaxo._build_info"}  # written by setup.py at build time
EXTENSION_LOADER = "fastaxo._core.backend"
NEVER_FROM_INIT = ("fastaxo._bench", "fastaxo.integrations")


def layer_of(mod: str) -> int:
    for i, (_name, pats) in enumerate(LAYERS):
        for p in pats:
            if mod == p or (p.endswith(".") and mod.startswith(p)):
                return i
    raise SystemExit(f"check_layout: module {mod} has no layer; add it to LAYERS")


class Module:
    def __init__(self, name: str, path: Path, is_pkg: bool):
        self.name, self.path, self.is_pkg = name, path, is_pkg
        self.imports: list[tuple[str, int]] = []  # (module, line)
        self.private: list[tuple[str, int]] = []  # (what, line)


def discover(root: Path) -> dict[str, Module]:
    mods: dict[str, Module] = {g: Module(g, root / (g.replace(".", "/") + ".py"), False)
                               for g in GENERATED}
    base = root / PKG
    for path in sorted(base.rglob("*")):
        if path.suffix not in (".py", ".pyx") or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(root).with_suffix("")
        parts = list(rel.parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        mods[".".join(parts)] = Module(".".join(parts), path, is_pkg)
    return mods


def _in_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def analyse(m: Module, mods: dict[str, Module]) -> None:
    if m.path.suffix == ".pyx" or m.name in GENERATED:
        return  # Cython: cimports and the C layer; checked by the compiler
    tree = ast.parse(m.path.read_text(), str(m.path))
    parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    package = m.name if m.is_pkg else m.name.rpartition(".")[0]
    aliases: dict[str, str] = {}  # local name -> fastaxo module it is bound to
    for node in ast.walk(tree):
        if _in_type_checking(node, parents):
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == PKG or a.name.startswith(PKG + "."):
                    m.imports.append((a.name, node.lineno))
                    if a.asname:
                        aliases[a.asname] = a.name
                    else:
                        aliases[a.name.split(".")[0]] = PKG
        elif isinstance(node, ast.ImportFrom):
            src = node.module or ""
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                src = ".".join(base + ([src] if src else []))
            if not (src == PKG or src.startswith(PKG + ".")):
                continue
            for a in node.names:
                sub = f"{src}.{a.name}"
                if sub in mods or sub in EXTENSIONS:  # a submodule
                    m.imports.append((sub, node.lineno))
                    aliases[a.asname or a.name] = sub
                else:
                    m.imports.append((src, node.lineno))
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        m.private.append((f"from {src} import {a.name}", node.lineno))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            target = _module_of(node.value, aliases)
            if target is not None and f"{target}.{node.attr}" not in mods and target != m.name:
                m.private.append((f"{ast.unparse(node)}", node.lineno))


def _module_of(expr: ast.AST, aliases: dict[str, str]) -> str | None:
    if isinstance(expr, ast.Name):
        return aliases.get(expr.id)
    if isinstance(expr, ast.Attribute):
        base = _module_of(expr.value, aliases)
        return None if base is None else f"{base}.{expr.attr}"
    return None


def _resolve(name: str, mods: dict[str, Module]) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _package_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _functions(tree: ast.AST) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
    """Every function of ``tree``: (qualified name, node, is it a method)."""
    out: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef, bool]] = []

    def walk(node: ast.AST, prefix: str, in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + child.name, child, in_class))
                walk(child, f"{prefix}{child.name}.", False)
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.", True)
            else:
                walk(child, prefix, in_class)

    walk(tree, "", False)
    return out


def function_problems(m: Module, root: Path) -> list[str]:
    """The length and parameter rules for module m (a .py file outside fastaxo._bench)."""
    if m.path.suffix != ".py" or not m.path.exists() or m.name.startswith("fastaxo._bench"):
        return []
    got = []
    for qual, fn, method in _functions(ast.parse(m.path.read_text(), str(m.path))):
        where = f"{m.path.relative_to(root)}:{fn.lineno}: {qual}"
        lines = (fn.end_lineno or fn.lineno) - fn.lineno + 1
        doc = fn.body[0] if fn.body else None
        if (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
                and isinstance(doc.value.value, str)):
            lines -= (doc.end_lineno or doc.lineno) - doc.lineno + 1
        if lines > MAX_FUNCTION_LINES and f"{m.name}:{qual}" not in DECLARATIVE:
            got.append(f"{where}: {lines} lines without its docstring (at most "
                       f"{MAX_FUNCTION_LINES})")
        a = fn.args
        positional = [x.arg for x in a.posonlyargs + a.args]
        if method and positional and positional[0] in ("self", "cls") and not any(
                isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list):
            positional = positional[1:]
        if len(positional) > MAX_POSITIONAL:
            got.append(f"{where}: {len(positional)} parameters that are not keyword-only "
                       f"(at most {MAX_POSITIONAL}; make the rest keyword-only or an options "
                       "object)")
    return got


def c_problems(root: Path) -> list[str]:
    got = []
    for src in sorted((root / "csrc").glob("*.[ch]")):
        n = len(src.read_text().splitlines())
        if n > MAX_C_LINES and src.name not in GENERATED_C:
            got.append(f"{src.relative_to(root)}: {n} lines (at most {MAX_C_LINES}; split it "
                       "by concept)")
    return got


def _pending_key(problem: str) -> str:
    """A problem's PENDING key: its file and function, or its file, without line numbers."""
    parts = problem.split(": ")
    path = parts[0].split(":")[0]
    return f"{path}: {parts[1]}" if ":" in parts[0] else path


def check(root: Path) -> list[str]:
    mods = discover(root)
    problems: list[str] = []
    shape = [p for m in mods.values() for p in function_problems(m, root)] + c_problems(root)
    problems.extend(p for p in shape if _pending_key(p) not in PENDING)
    for key in sorted(PENDING - {_pending_key(p) for p in shape}):
        problems.append(f"PENDING lists {key!r}, which breaks no rule now: remove it")
    for m in mods.values():
        analyse(m, mods)
    for ext in (root / PKG).rglob("*"):
        if ext.suffix in (".py", ".pyx", ".pxi", ".pyi", ".pxd") and "__pycache__" not in ext.parts:
            n = len(ext.read_text().splitlines())
            if n > MAX_LINES:
                problems.append(f"{ext.relative_to(root)}: {n} lines (at most {MAX_LINES})")
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for m in mods.values():
        for target, line in m.imports:
            dep = target if target in EXTENSIONS else _resolve(target, mods)
            if dep is None or dep == m.name:
                continue
            where = f"{m.path.relative_to(root)}:{line}"
            if dep in EXTENSIONS and m.name != EXTENSION_LOADER:
                problems.append(f"{where}: imports the extension {dep}; use {EXTENSION_LOADER}")
            if dep not in EXTENSIONS and dep not in _package_parents(m.name):
                graph[m.name].add(dep)
            if layer_of(dep) > layer_of(m.name):
                problems.append(
                    f"{where}: {m.name} ({LAYERS[layer_of(m.name)][0]}) imports {dep} "
                    f"({LAYERS[layer_of(dep)][0]}), a layer above it"
                )
        for what, line in m.private:
            problems.append(f"{m.path.relative_to(root)}:{line}: underscore name from another "
                            f"module: {what}")
    for m in mods.values():
        if m.name.startswith(MAY_PRINT) or m.path.suffix != ".py" or not m.path.exists():
            continue
        for node in ast.walk(ast.parse(m.path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == "print"):
                problems.append(f"{m.path.relative_to(root)}:{node.lineno}: print() in library "
                                "code; log through logging")
    for comp in find_cycles(graph):
        problems.append("import cycle: " + " <-> ".join(comp))
    # what `import fastaxo` reaches: its __init__ and the closure of module imports
    seen, todo = set(), [PKG]
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        todo.extend(graph.get(v, ()))
        todo.extend(p for p in _package_parents(v) if p in mods)
    for v in sorted(seen):
        if v.startswith(NEVER_FROM_INIT):
            problems.append(f"import fastaxo reaches {v}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=str(Path(__file__).resolve().parent.parent))
    args = ap.parse_args(argv)
    problems = check(Path(args.root))
    for p in problems:
        print(p)
    print(f"check_layout: {len(problems)} problem(s)" if problems else "check_layout: ok",
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
