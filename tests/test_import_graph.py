"""The import graph of the project's code: ``lib`` (the science), ``lib.book`` (the book's
machinery), ``tools`` and ``benchmarks``, read from the source with ``ast`` (every ``import``,
those inside functions included: a lazy import is an arrow like any other).

* ``lib`` has no cycle: every module sits above the modules it imports (the models below their
  training steps, the steps below the architecture registry, the registry below the trainer);
  nor has the whole graph;
* the science never imports the book's machinery, the tools or the benchmarks, and the book's
  machinery never imports the tools or the benchmarks;
* no module of ``lib`` imports a private name (``_name``) of another module of ``lib``.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("lib", "tools", "benchmarks")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of the project's packages: dotted name -> file."""
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))
            if "__pycache__" not in p.parts}


def _is_package(name: str, known: dict[str, Path]) -> bool:
    return name in known and known[name].name == "__init__.py"


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every import of the module ``name``
    that reaches one of the project's modules.  ``from pkg import sub`` is an arrow to the
    submodule ``pkg.sub``, not to the package."""
    here = name if _is_package(name, known) else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names if a.name in known]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[:len(here.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            names = [a.name for a in node.names]
            subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in known]
            out += [(s, [], node.lineno) for s in subs]
            rest = [n for n in names if f"{target}.{n}" not in known]
            if target in known and rest:
                out.append((target, rest, node.lineno))
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: {t for t, _, _ in imports(name, path, known) if t != name} for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_cycle_finder_finds_a_cycle():
    """The check below can fail: a two-module cycle and a three-module one are found, a chain is not."""
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": set()}) == [["a", "b"]]
    assert cycles({"x": {"y"}, "y": {"z"}, "z": {"x", "w"}, "w": set()}) == [["x", "y", "z"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_sees_lazy_and_relative_imports():
    """An import inside a function and a relative one are arrows of the graph."""
    known = modules()
    edges = graph()
    assert "lib.gated" in edges["lib.recurrent_cells"]                 # from .gated import GatedLinearRNN
    assert "lib.attention" in edges["lib.gated"]                       # a lazy import inside a function
    assert "lib.architectures" in edges["lib.book.experiments"]        # an absolute one
    assert len(known) > 30


def test_lib_has_no_import_cycle():
    lib_edges = {m: {t for t in ts if _in(t, "lib")} for m, ts in graph().items() if _in(m, "lib")}
    assert cycles(lib_edges) == []


def test_no_import_cycle_anywhere():
    """Nor do the tools and the benchmarks, among themselves or through lib."""
    assert cycles(graph()) == []


def test_the_science_imports_neither_the_book_nor_the_tools():
    edges = graph()
    wrong = sorted((m, t) for m, ts in edges.items() for t in ts
                   if _in(m, "lib") and not _in(m, "lib.book") and (_in(t, "lib.book") or not _in(t, "lib")))
    wrong += sorted((m, t) for m, ts in edges.items() for t in ts
                    if _in(m, "lib.book") and not _in(t, "lib"))
    assert wrong == []


def test_no_private_name_crosses_a_lib_module():
    known = modules()
    found = [f"{name}:{line} takes {', '.join(n for n in names if n.startswith('_'))} from {target}"
             for name, path in known.items() if _in(name, "lib")
             for target, names, line in imports(name, path, known)
             if _in(target, "lib") and target != name and any(n.startswith("_") for n in names)]
    assert found == []


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_is_read(package):
    assert any(_in(m, package) for m in modules())
