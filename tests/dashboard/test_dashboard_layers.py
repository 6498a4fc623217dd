"""The dashboard's three layers, its pages one folder each, and every private Bokeh/Panel name in one module of
the serve layer.

A module's layer (docs/architecture.md, "The views" says why) is ``TOP``'s entry for the modules of the
``dashboard`` package itself; in a package below it (``common`` and each page's folder) it follows the
module's name: ``page`` and ``page_*`` are pages, every other module is views, so a new page's folder is
layered by its names alone. A layer imports only from itself and the layers above it in ``ORDER`` (views,
then pages, then serve), counting imports inside functions; only the serve layer imports Panel; a page's
folder imports no other page's. Outside ``dashboard/bokeh_internals.py`` no dashboard module, and no
benchmark that imports Bokeh or Panel, may reach a private Bokeh/Panel name: an attribute ``x._name`` that
the project does not define itself (or that Bokeh, Panel or param define), ``__new__`` or
``super(Class, obj)`` on a class, a ``_method`` overridden in a subclass of a class from outside the
project, or such a name as a string (getattr).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.test_import_cycles import _modules, import_graph

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "dashboard"
INTERNALS = "dashboard.bokeh_internals"
COMMON = "dashboard.common"

TOP: dict[str, str] = {
    # the notebook API (the views of every page, gathered) and the store reader; no pages, no Panel
    "dashboard": "views", "dashboard.views": "views", "dashboard.data": "views",
    # pages delivered to a reader: the Panel app and its per-process rendering and copies, the static
    # exporter, the entry points, the version check, the garbage collector's thresholds they set and the one
    # module of Bokeh/Panel internals
    **{f"dashboard.{m}": "serve" for m in ("app", "rendered", "clone", "serialized", "bokeh_internals", "export",
                                           "versions", "cli", "__main__", "store_note", "collector")},
}
ORDER = ("views", "pages", "serve")


def layer(module: str) -> str:
    """The layer of a dashboard module (the module doc says how)."""
    if module in TOP:
        return TOP[module]
    name = module.rpartition(".")[2]
    return "pages" if name == "page" or name.startswith("page_") else "views"


def dashboard_modules() -> list[str]:
    return sorted(m for m in _modules() if m.split(".")[0] == "dashboard")


def layer_of() -> dict[str, str]:
    return {m: layer(m) for m in dashboard_modules()}


def page_packages() -> list[str]:
    """The pages' folders: every package below ``dashboard`` but ``common``."""
    files = _modules()
    return sorted(m for m in dashboard_modules() if files[m].name == "__init__.py" and files[m].parent != DASHBOARD
                  and m != COMMON)


def dashboard_graph() -> dict[str, set[str]]:
    graph = import_graph(_modules())
    return {m: {t for t in ts if t.split(".")[0] == "dashboard"} for m, ts in graph.items()
            if m.split(".")[0] == "dashboard"}


def test_the_layers_cover_the_dashboard():
    files = _modules()
    assert {m for m in dashboard_modules() if files[m].parent == DASHBOARD} == set(TOP), (
        "a module of dashboard/ itself needs its layer in TOP")
    assert {"dashboard.compare", "dashboard.orbits", "dashboard.profiles"} <= set(page_packages())  # read
    layers = layer_of()
    for package in page_packages():  # each page: its views and its page builder
        assert {layers[m] for m in dashboard_modules() if m.startswith(package + ".")} == {"views", "pages"}, package
    assert {m for m, k in layers.items() if k == "pages" and m.startswith(COMMON)} == {
        "dashboard.common.page_models", "dashboard.common.page_style", "dashboard.common.page_widgets"}


def layer_violations(graph: dict[str, set[str]], layers: dict[str, str]) -> list[str]:
    rank = {name: k for k, name in enumerate(ORDER)}
    return sorted(f"{m} ({layers[m]}) imports {t} ({layers[t]})" for m, ts in graph.items() for t in ts
                  if rank[layers[t]] > rank[layers[m]])


def test_a_layer_imports_only_itself_and_the_layers_below():
    layers = layer_of()
    graph = dashboard_graph()
    assert graph["dashboard.app"] >= {"dashboard.rendered", "dashboard.profiles.page_texts"}  # the graph is read
    assert layer_violations(graph, layers) == []
    # the checker itself: a view importing a page, a page importing the app
    bad = dict(graph, **{"dashboard.profiles.tetrahedron": {"dashboard.profiles.page"},
                         "dashboard.compare.page": {"dashboard.app"}})
    assert layer_violations(bad, layers) == [
        "dashboard.compare.page (pages) imports dashboard.app (serve)",
        "dashboard.profiles.tetrahedron (views) imports dashboard.profiles.page (pages)"]


def page_crossings(graph: dict[str, set[str]]) -> list[str]:
    """Imports from one page's folder into another's."""
    packages = page_packages()

    def page(m: str) -> str | None:
        return next((p for p in packages if m == p or m.startswith(p + ".")), None)
    return sorted(f"{m} imports {t}" for m, ts in graph.items() for t in ts
                  if page(m) is not None and page(t) is not None and page(m) != page(t))


def test_a_page_imports_only_its_own_folder_and_what_pages_share():
    graph = dashboard_graph()
    assert page_crossings(graph) == []
    assert page_crossings(dict(graph, **{"dashboard.orbits.views": {"dashboard.profiles.tetrahedron"}})) == [
        "dashboard.orbits.views imports dashboard.profiles.tetrahedron"]


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
    layers = layer_of()
    users = sorted(m for m in layers if "panel" in imported_roots(files[m]))
    assert users and all(layers[m] == "serve" for m in users), users


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
    out = [p for p in sorted(DASHBOARD.rglob("*.py")) if p != DASHBOARD / "bokeh_internals.py"]
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
    for what in (".__new__", "super(HasProps, ...)", "._register_owner",
                 "overrides Bokeh._get_model", "._models", "overrides Resources._collect_external_resources",
                 "'_property_values'"):
        assert what in text, what
    made_up = ("class P(pn.pane.Bokeh):\n    def _update(self):\n        pass\n"
               "def f(m, _cache):\n    _cache.clear()\n    getattr(m, '_property_values')\n    return m._document\n")
    assert [u.split(": ", 1)[1] for u in private_uses(made_up, own, upstream, classes)] == [
        "overrides Bokeh._update", "'_property_values'", "._document"]
