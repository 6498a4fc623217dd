"""No import cycle among the modules of ``pipeline`` and ``dashboard``, counting imports inside functions too.

The graph is read from the source with ``ast`` (nothing is imported): an edge A -> B for every ``import B`` or
``from B import x`` anywhere in A, relative imports resolved against A's package, ``from P import m`` counted as
an import of the submodule ``P.m`` when that is a module of the tree (else of ``P``).
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("pipeline", "dashboard")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _is_package(name: str, modules: dict[str, Path]) -> bool:
    return modules[name].name == "__init__.py"


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph = {}
    for name, path in modules.items():
        package = name if _is_package(name, modules) else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module
                for a in node.names:
                    sub = f"{mod}.{a.name}"
                    targets.add(sub if sub in modules else mod)
        edges = set()
        for t in targets:  # the nearest enclosing module of the tree (``import a.b.c`` of a tree module a.b)
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != name:
                edges.add(t)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: one per strongly connected component of two or more modules, given as one cycle in it
    (its first module repeated at the end); sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def strong(v):  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(_path(graph, comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return sorted(out)


def _path(graph: dict[str, set[str]], comp: set[str]) -> list[str]:
    """A cycle inside one strongly connected component, from its first module back to it."""
    start = min(comp)
    prev, frontier = {start: None}, [start]
    while frontier:  # breadth-first inside the component, back to start
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & comp):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return path[::-1] + [start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError("not a strongly connected component")


# Cycles outside this test's reach, each with why it is still there; the test fails when one disappears, so that
# the entry is removed with it.
KNOWN: dict[frozenset[str], str] = {}


def test_the_cycle_finder_finds_a_cycle_and_resolves_relative_imports(tmp_path):
    """The checker itself: a function-level relative import that closes a cycle is found."""
    pkg = tmp_path / "pipeline"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import f\n")
    (pkg / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "c.py").write_text("def g():\n    from pipeline.a import f\n")
    modules = {f"pipeline.{p.stem}" if p.stem != "__init__" else "pipeline": p for p in pkg.glob("*.py")}
    graph = import_graph(modules)
    assert graph["pipeline.b"] == {"pipeline.c"} and graph["pipeline.c"] == {"pipeline.a"}
    assert cycles(graph) == [["pipeline.a", "pipeline.b", "pipeline.c", "pipeline.a"]]
    (pkg / "c.py").write_text("def g():\n    import numpy\n")
    assert cycles(import_graph(modules)) == []


def test_no_import_cycle_in_pipeline_or_dashboard():
    found = cycles(import_graph(_modules()))
    new = [c for c in found if frozenset(c) not in KNOWN]
    assert not new, "import cycles: " + "; ".join(" -> ".join(c) for c in new)
    gone = [", ".join(sorted(k)) for k in KNOWN if k not in map(frozenset, found)]
    assert not gone, f"no longer a cycle, remove it from KNOWN: {gone}"


# The store's parts meet through public seams: none of these modules imports another module's underscore names.
SEAMED = ("pipeline.store", "pipeline.sources", "pipeline.schema", "pipeline.registry", "pipeline.cli.real")


def private_imports(modules: dict[str, Path]) -> list[str]:
    """``module: from other import _name`` for every underscore name a module imports from another module of the
    tree (relative imports resolved as in :func:`import_graph`)."""
    out = []
    for name, path in sorted(modules.items()):
        package = name if _is_package(name, modules) else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = package.split(".")[:len(package.split(".")) - (node.level - 1)] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module
            private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
            if private and mod in modules and mod != name:
                out.append(f"{name}: from {mod} import {', '.join(private)}")
    return out


def test_the_private_import_finder_finds_one(tmp_path):
    pkg = tmp_path / "pipeline"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("_x = 1\ny = 2\n")
    (pkg / "b.py").write_text("from .a import _x, y\nfrom pipeline.a import y as z\n")
    modules = {f"pipeline.{p.stem}" if p.stem != "__init__" else "pipeline": p for p in pkg.glob("*.py")}
    assert private_imports(modules) == ["pipeline.b: from pipeline.a import _x"]


def test_the_store_parts_and_sources_import_no_private_names():
    modules = _modules()
    mine = {n: p for n, p in modules.items() if n.startswith(SEAMED)}
    assert "pipeline.store.journal" in mine and "pipeline.sources.gguf" in mine
    found = [line for line in private_imports(modules) if line.split(":")[0] in mine]
    assert found == [], found
