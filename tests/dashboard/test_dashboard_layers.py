"""The dashboard's three layers, and every private Bokeh/Panel name in one module of the serve layer.

``LAYERS`` is the one list of which module is in which layer (docs/architecture.md, "The views" says
why). A layer imports only from itself and the layers above it in ``ORDER`` (views, then pages, then
serve), counting imports inside functions; only the serve layer imports Panel. Outside
``dashboard/bokeh_internals.py`` no dashboard module, and no benchmark that imports Bokeh or Panel, may
reach a private Bokeh/Panel name: an attribute ``x._name`` that the project does not define itself (or
that Bokeh, Panel or param define), ``__new__`` or ``super(Class, obj)`` on a class, a ``_method``
overridden in a subclass of a class from outside the project, or such a name as a string (getattr).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.test_import_cycles import _modules, import_graph

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "dashboard"
INTERNALS = "dashboard.bokeh_internals"

LAYERS: dict[str, tuple[str, ...]] = {
    # the notebook API: HoloViews views over xarray, the numpy rules they draw, the store reader, and the
    # browser code (jscode) that views attach; no pages, no Panel
    "views": ("dashboard", "dashboard.views", "dashboard.geometry", "dashboard.baselines", "dashboard.data",
              "dashboard.jscode", "dashboard.orbits_frames"),
    # pages as pure Bokeh layouts linked in the browser: the same layout served and exported
    "pages": ("dashboard.profiles_page", "dashboard.profiles_views", "dashboard.compare_page",
              "dashboard.orbits_page", "dashboard.page_models", "dashboard.stylesheet"),
    # pages delivered to a reader: the Panel app and its per-process rendering and copies, the static
    # exporter, the entry points, the version check and the one module of Bokeh/Panel internals
    "serve": ("dashboard.app", "dashboard.rendered", "dashboard.clone", "dashboard.serialized",
              "dashboard.bokeh_internals", "dashboard.export", "dashboard.versions", "dashboard.cli",
              "dashboard.__main__", "dashboard.store_note"),
}
ORDER = ("views", "pages", "serve")


def layer_of() -> dict[str, str]:
    return {m: layer for layer, ms in LAYERS.items() for m in ms}


def dashboard_graph() -> dict[str, set[str]]:
    graph = import_graph(_modules())
    return {m: {t for t in ts if t.split(".")[0] == "dashboard"} for m, ts in graph.items()
            if m.split(".")[0] == "dashboard"}


def test_every_dashboard_module_is_in_exactly_one_layer():
    listed = [m for ms in LAYERS.values() for m in ms]
    assert len(listed) == len(set(listed)), "a module listed in two layers"
    on_disk = {m for m in _modules() if m.split(".")[0] == "dashboard"}
    assert on_disk - set(listed) == set(), "modules in no layer: add them to LAYERS"
    assert set(listed) - on_disk == set(), "LAYERS names modules that do not exist"


def layer_violations(graph: dict[str, set[str]], layers: dict[str, str]) -> list[str]:
    rank = {name: k for k, name in enumerate(ORDER)}
    return sorted(f"{m} ({layers[m]}) imports {t} ({layers[t]})" for m, ts in graph.items() for t in ts
                  if rank[layers[t]] > rank[layers[m]])


def test_a_layer_imports_only_itself_and_the_layers_below():
    layers = layer_of()
    graph = dashboard_graph()
    assert graph["dashboard.app"] >= {"dashboard.rendered", "dashboard.profiles_page"}  # the graph is read
    assert layer_violations(graph, layers) == []
    # the checker itself: a view importing a page, a page importing the app
    bad = dict(graph, **{"dashboard.views": {"dashboard.profiles_page"},
                         "dashboard.compare_page": {"dashboard.app"}})
    assert layer_violations(bad, layers) == [
        "dashboard.compare_page (pages) imports dashboard.app (serve)",
        "dashboard.views (views) imports dashboard.profiles_page (pages)"]


def imported_roots(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.split(".")[0])
    return out


def test_only_the_serve_layer_imports_panel():
    files = _modules()
    users = sorted(m for m in layer_of() if "panel" in imported_roots(files[m]))
    assert users and all(m in LAYERS["serve"] for m in users), users


# ------------------------------------------------------------------------------ private Bokeh/Panel names

def upstream_private_names() -> set[str]:
    """The private names (one leading underscore) of Bokeh's, Panel's and param's classes the dashboard uses."""
    import panel as pn
    import param
    from bokeh.core.has_props import HasProps
    from bokeh.core.property.descriptors import PropertyDescriptor
    from bokeh.core.property.wrappers import PropertyValueDict, PropertyValueList
    from bokeh.document import Document
    from bokeh.models import ColumnDataSource, CustomJS, GlyphRenderer, Slider
    from bokeh.plotting import figure
    from bokeh.resources import Resources

    classes = [HasProps, PropertyDescriptor, PropertyValueList, PropertyValueDict, Resources, param.Parameterized,
               pn.param.ParamFunction]
    instances = [Document(), ColumnDataSource(), CustomJS(), GlyphRenderer(), Slider(), figure(),
                 pn.pane.Bokeh(), pn.pane.HTML(), pn.Column(), pn.Tabs(), pn.widgets.Select()]  # instance attributes
    return {n for c in classes + instances for n in dir(c) if n.startswith("_") and not n.startswith("__")}


def own_private_names(upstream: set[str]) -> set[str]:
    """Private names the project's own code defines (functions, classes, assignments, arguments, imports),
    except the methods of subclasses of outside classes (overrides) and names Bokeh/Panel/param define too."""
    own = set()
    trees = [ast.parse(p.read_text(encoding="utf-8")) for d in ("dashboard", "pipeline", "benchmarks", "tests")
             for p in (ROOT / d).rglob("*.py")]
    classes = {n.name for t in trees for n in ast.walk(t) if isinstance(n, ast.ClassDef)}
    overrides = set()
    for t in trees:
        for n in ast.walk(t):
            if isinstance(n, ast.ClassDef) and any(_base_name(b) not in classes for b in n.bases):
                overrides.update(id(f) for f in n.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)))
    for t in trees:
        for n in ast.walk(t):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and id(n) not in overrides:
                own.add(n.name)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                own.add(n.id)
            elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
                own.add(n.attr)
            elif isinstance(n, ast.arg):
                own.add(n.arg)
            elif isinstance(n, ast.alias):
                own.add(n.asname or n.name.split(".")[-1])
    return {n for n in own if n.startswith("_") and not n.startswith("__")} - upstream


def _base_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def private_uses(source: str, own: set[str], upstream: set[str], classes: set[str]) -> list[str]:
    """Each private Bokeh/Panel use in ``source``, as 'line N: what'."""
    out = []
    tree = ast.parse(source)
    in_fstrings = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr.startswith("_"):
            if n.attr == "__new__":
                out.append(f"line {n.lineno}: .__new__")
            elif not n.attr.startswith("__") and (n.attr in upstream or n.attr not in own):
                out.append(f"line {n.lineno}: .{n.attr}")
        elif isinstance(n, ast.Call) and getattr(n.func, "id", None) == "super" and n.args:
            out.append(f"line {n.lineno}: super({ast.unparse(n.args[0])}, ...)")
        elif isinstance(n, ast.ClassDef) and any(_base_name(b) not in classes for b in n.bases):
            for f in n.body:
                if (isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name.startswith("_")
                        and not f.name.startswith("__")):
                    out.append(f"line {f.lineno}: overrides {_base_name(n.bases[0])}.{f.name}")
        elif (isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in upstream
              and id(n) not in in_fstrings):
            out.append(f"line {n.lineno}: '{n.value}'")
    return sorted(set(out), key=lambda s: int(s.split()[1].rstrip(":")))


@pytest.fixture(scope="module")
def names():
    upstream = upstream_private_names()
    classes = {n.name for d in ("dashboard", "pipeline", "benchmarks", "tests") for p in (ROOT / d).rglob("*.py")
               for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))) if isinstance(n, ast.ClassDef)}
    return own_private_names(upstream), upstream, classes


def checked_files() -> list[Path]:
    """Every dashboard module but the internals one, and the benchmarks that import Bokeh or Panel."""
    out = [p for p in sorted(DASHBOARD.glob("*.py")) if p.stem != INTERNALS.rpartition(".")[2]]
    out += [p for p in sorted((ROOT / "benchmarks").glob("*.py")) if imported_roots(p) & {"bokeh", "panel"}]
    return out


def test_no_private_bokeh_or_panel_name_outside_the_internals_module(names):
    own, upstream, classes = names
    assert {"_property_values", "_set_value", "_get_model", "_models"} <= upstream
    found = {str(p.relative_to(ROOT)): private_uses(p.read_text(encoding="utf-8"), own, upstream, classes)
             for p in checked_files()}
    assert "benchmarks/bokeh_session.py" in found and "dashboard/clone.py" in found
    found = {k: v for k, v in found.items() if v}
    assert not found, f"private Bokeh/Panel names outside {INTERNALS}: {found}"


def test_the_internals_module_holds_them(names):
    """The checker finds each kind of use, in the internals module itself and in made-up code."""
    own, upstream, classes = names
    got = private_uses((DASHBOARD / "bokeh_internals.py").read_text(encoding="utf-8"), own, upstream, classes)
    text = " ".join(got)
    for what in (".__new__", "super(HasProps, ...)", "._register_owner", "._set_value", "._property_values",
                 "overrides Bokeh._get_model", "._models", "overrides Resources._collect_external_resources",
                 "'_property_values'"):
        assert what in text, what
    made_up = ("class P(pn.pane.Bokeh):\n    def _update(self):\n        pass\n"
               "def f(m, _cache):\n    _cache.clear()\n    getattr(m, '_property_values')\n    return m._document\n")
    assert [u.split(": ", 1)[1] for u in private_uses(made_up, own, upstream, classes)] == [
        "overrides Bokeh._update", "'_property_values'", "._document"]
