"""The pipeline's layers: every import runs down, never back up, and few modules lie loose in ``pipeline/``.

Each unit is a package of the tree (or a loose module); a unit may import its own modules and those of units in
lower layers only. Imports inside functions count (the graph is ``tests.test_import_cycles.import_graph``, read
from the source with ``ast``). docs/architecture.md, "Layout", draws the same layers.
"""

from pathlib import Path

from tests.test_import_cycles import ROOT, _modules, import_graph

# Bottom to top. A unit names a module and everything under it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("pipeline", "pipeline.version", "pipeline.optional_imports", "pipeline.cli_args"),  # foundations
    ("pipeline.schema",),                                                # the store's format, one home
    ("pipeline.families",),                                              # the family table and R(d)
    ("pipeline.sources", "pipeline.store", "pipeline.profile"),          # weights in, the store, the maths
    ("pipeline.registry",),                                              # named models -> checkpoints
    ("pipeline.run",),                                                   # the one run path
    ("pipeline.analyses", "pipeline.orbits", "pipeline.induction",       # what is computed over runs and stores,
     "pipeline.check"),                                                  # and a checkpoint against its forward pass
    ("pipeline.cli", "dashboard"),                                       # the commands; the views
    ("pipeline.__main__",),                                              # python -m pipeline
)
MAX_LOOSE = 8  # modules directly in pipeline/, __init__ and __main__ included


def unit_of(module: str) -> str | None:
    """The longest unit of LAYERS that names ``module`` or a package above it (``pipeline`` names only itself)."""
    units = [u for layer in LAYERS for u in layer]
    found = [u for u in units if module == u or (u != "pipeline" and module.startswith(u + "."))]
    return max(found, key=len) if found else None


def rank(unit: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if unit in layer)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``importer -> imported`` for every import that does not run down (nor stay inside its unit)."""
    out = []
    for a, targets in sorted(graph.items()):
        ua = unit_of(a)
        for b in sorted(targets):
            ub = unit_of(b)
            if ua is None or ub is None or ua == ub:
                continue
            if rank(ub) >= rank(ua):
                out.append(f"{a} ({ua}, layer {rank(ua)}) -> {b} ({ub}, layer {rank(ub)})")
    return out


def test_the_layer_check_finds_an_import_back_up(tmp_path):
    pkg = tmp_path / "pipeline"
    for sub in ("store", "run"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "run" / "plan.py").write_text("from pipeline.store import x\n")
    (pkg / "store" / "backend.py").write_text("def f():\n    from pipeline.run import plan\n")
    modules = {".".join(p.relative_to(tmp_path).with_suffix("").parts).removesuffix(".__init__"): p
               for p in pkg.rglob("*.py")}
    found = upward_imports(import_graph(modules))
    assert found == ["pipeline.store.backend (pipeline.store, layer 3) -> pipeline.run.plan (pipeline.run, layer 5)"]
    (pkg / "store" / "backend.py").write_text("x = 1\n")
    assert upward_imports(import_graph(modules)) == []


def test_every_module_belongs_to_a_layer():
    assert [m for m in _modules() if unit_of(m) is None] == []


def test_no_import_runs_back_up():
    found = upward_imports(import_graph(_modules()))
    assert found == [], "imports against the layers:\n" + "\n".join(found)


def test_few_modules_lie_loose_in_pipeline():
    loose = sorted(p.name for p in Path(ROOT, "pipeline").glob("*.py"))
    assert len(loose) <= MAX_LOOSE, loose
