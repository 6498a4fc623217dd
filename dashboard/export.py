"""python -m dashboard.export OUT/ : the dashboard as static HTML pages that need no server.

Writes ``OUT/index.html`` (every model of the store: a link to its page, or the command that computes
it), ``OUT/profiles-<model>.html`` per computed model and ``OUT/orbits.html``. The pages are the same
Bokeh layouts the served app shows; every interaction runs client-side, so they work opened with
file://. By default the pages load BokehJS (and, for a Panel orbits view, Panel's bundle) from the
CDN; ``--self-contained`` inlines all JS and CSS for offline use.
"""

from __future__ import annotations

import argparse
import html
import re
import sys
from pathlib import Path

from bokeh.embed import components
from bokeh.model import Model
from bokeh.resources import Resources

from dashboard import data
from dashboard.profiles_page import CSS, header, message, profiles_view

PAGE_CSS = """
<style>
  body { margin: 0; padding: 18px 28px 40px 28px; background: #fafbfc; color: #222831;
         font-family: "Source Sans 3", "Source Sans Pro", "Segoe UI", Helvetica, Arial, sans-serif; }
  nav.hg { font-size: 0.92em; margin-bottom: 6px; }
  nav.hg a { color: #1565c0; text-decoration: none; margin-right: 1.2em; }
  nav.hg a:hover { text-decoration: underline; }
</style>
"""


def orbits_content(store, shown: str | None = None):
    """The orbits page's content: ``dashboard.orbits_page.orbits_view`` over the store's orbits group.

    ``shown`` replaces the store's path in messages (the exporter shows only the store's name).

    A store without a (readable) orbits group gives a page with the fixing command; while
    ``dashboard/orbits_page.py`` does not exist, a placeholder says so.
    """
    from bokeh.layouts import column

    title = "Orbits of attention heads"
    try:
        ds = data.orbits(store)
    except data.StoreError as exc:
        text = str(exc).replace(str(store), shown) if shown else str(exc)  # no local paths in published pages
        return column(header(title, name="orbits_header"),
                      message(html.escape(text), "error", name="orbits_store_error"), name="orbits_page")
    try:
        from dashboard.orbits_page import orbits_view
    except ModuleNotFoundError as exc:
        if exc.name != "dashboard.orbits_page":
            raise
        text = "The orbits movie view is not part of this version of the dashboard yet (dashboard/orbits_page.py)."
        return column(header(title, name="orbits_header"), message(text, name="orbits_placeholder"),
                      name="orbits_page")
    return orbits_view(ds)


def slug(name: str) -> str:
    """A file-name-safe form of a model name: 'EleutherAI/pythia-70m' -> 'EleutherAI_pythia-70m'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"


def profile_page_name(name: str) -> str:
    return f"profiles-{slug(name)}.html"


def _nav(links: list[tuple[str, str]]) -> str:
    return '<nav class="hg">' + "".join(f'<a href="{html.escape(u)}">{html.escape(t)}</a>' for t, u in links) + "</nav>"


class BokehOnly(Resources):
    """BokehJS and its widgets only.

    Bokeh adds the ``__javascript__`` files of every model class registered in the process; once Panel
    is imported that includes Panel's bundles, with server-relative paths a static page cannot load.
    The pages hold only core Bokeh models, so they need none of them.
    """

    def _collect_external_resources(self, resource_attr) -> list[str]:
        return []


def bokeh_resources(self_contained: bool) -> Resources:
    """Resources for a static page: from the CDN (default) or inlined (``--self-contained``)."""
    return BokehOnly(mode="inline" if self_contained else "cdn", components=["bokeh", "bokeh-widgets"])


def page_html(layout: Model, title: str, resources: Resources, nav_html: str = "") -> str:
    """A standalone page: the resources, the page CSS, a nav bar and the layout."""
    script, div = components(layout)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n{resources.render_css()}\n{resources.render_js()}\n{PAGE_CSS}"
            f"</head>\n<body>\n{nav_html}\n{div}\n{script}\n</body>\n</html>\n")


def save_bokeh(layout: Model, path: Path, title: str, resources: Resources, nav_html: str = "") -> None:
    path.write_text(page_html(layout, title, resources, nav_html), encoding="utf-8")


def save_any(obj, path: Path, title: str, resources, nav_html: str = "") -> None:
    """Save a Bokeh layout with ``page_html``, or a Panel object with Panel's ``save`` (no embed)."""
    if isinstance(obj, Model):
        save_bokeh(obj, path, title, resources, nav_html)
        return
    import panel as pn

    pn.panel(obj).save(str(path), title=title, resources=resources.mode, embed=False)


TABLE_CSS = """
table.models { border-collapse: collapse; font-size: 0.93em; margin: 0.4em 0; }
table.models th, table.models td { padding: 0.25em 0.8em; white-space: nowrap; text-align: left;
  border-bottom: 1px solid #e3e7ec; }
table.models th { font-weight: 600; border-bottom: 2px solid #c9d0d8; }
table.models td.num { text-align: right; font-variant-numeric: tabular-nums; }
"""


def index_html(store: Path, models: list[data.ModelSummary], problem: str | None, resources) -> str:
    """The index: the seed page's table of models (layers, heads, N, n, positional) with links and status."""
    rows = []
    for m in models:
        name = html.escape(m.name)
        if m.computed:
            link = f'<a href="{profile_page_name(m.name)}">{name}</a>'
            state = "complete" if m.complete else f"incomplete: {m.layers_done} of {m.n_layers} layers"
        else:
            link = name
            state = f"not computed: <code>{html.escape(m.fix_command)}</code>"
        dagger = "<sup>†</sup>" if m.positional == "rope" else ""
        rows.append(f"<tr><td>{link}</td><td class='num'>{m.n_layers}</td><td class='num'>{m.n_heads}</td>"
                    f"<td class='num'>{m.d_model}</td><td class='num'>{m.d_head}</td>"
                    f"<td class='num'>{m.n_layers * m.n_heads:,}</td><td>{html.escape(m.positional)}{dagger}</td>"
                    f"<td class='meta'>{state}</td></tr>")
    table = ("<table class='models'><thead><tr><th>model</th><th>layers</th><th>heads/layer</th><th>N</th>"
             "<th>n</th><th>heads</th><th>positional</th><th>status</th></tr></thead><tbody>"
             f"{''.join(rows)}</tbody></table>" if rows else "<p>no models in the store</p>")
    if any(m.positional == "rope" for m in models):
        table += ("<p class='meta'><sup>†</sup> With rotary embeddings the form varies with the distance d between "
                  "the two tokens; those pages carry a slider over d = 0..128. For the other models the form does "
                  "not depend on position.</p>")
    body = f'<div class="error">{html.escape(problem)}</div>' if problem else ""
    body += f"<h2>Profiles</h2>{table}"
    body += ('<h2>Orbits</h2><ul><li><a href="orbits.html">The orbit experiment: the heads of one layer under '
             "C<sub>24</sub></a></li></ul>")
    css = CSS.replace(":host", "body") + TABLE_CSS
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Attention-head geometry</title>"
            f"{PAGE_CSS}<style>{css}</style></head><body><h1>Attention-head geometry</h1>"
            f"<p class='meta'>Static pages exported from <code>{html.escape(store.name)}</code>; every view works "
            f"without a server.</p>{body}</body></html>")


def export(out, store=None, self_contained: bool = False) -> list[Path]:
    """Write the index, one page per computed model and the orbits page into ``out``; returns the paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    store = Path(store) if store else data.store_path([])
    resources = bokeh_resources(self_contained)
    written: list[Path] = []
    models: list[data.ModelSummary] = []
    problem = None
    try:
        ds = data.profiles(store)
        models = data.summaries(ds)
    except data.StoreError as exc:
        problem = str(exc)
    computed = [m for m in models if m.computed]
    nav = {m.name: profile_page_name(m.name) for m in computed}
    links = [("← index", "index.html"), ("orbits", "orbits.html")]
    for m in computed:
        layout = profiles_view(m, data.model_profile(ds, m), nav=nav, current_url=nav[m.name], models=models)
        path = out / nav[m.name]
        save_bokeh(layout, path, f"Profiles of attention heads · {m.name}", resources, _nav(links))
        written.append(path)
    path = out / "orbits.html"
    save_any(orbits_content(store, shown=store.name), path, "Orbits of attention heads", resources,
             _nav([("← index", "index.html")] + [(m.name, nav[m.name]) for m in computed[:1]]))
    written.append(path)
    path = out / "index.html"
    path.write_text(index_html(store, models, problem, resources), encoding="utf-8")
    written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboard.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write the pages into (created if needed)")
    parser.add_argument("--store", default=None, help=f"store to read (default: ${data.ENV_VAR}, else the "
                        f"committed {data.DEFAULT_STORE.name})")
    parser.add_argument("--self-contained", action="store_true",
                        help="inline all JS and CSS (offline pages, ~+2 MB each) instead of loading them from the CDN")
    args = parser.parse_args(argv)
    store = data.store_path(["--store", args.store] if args.store else [])
    try:
        data.profiles(store)
    except data.StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    paths = export(args.out, store, self_contained=args.self_contained)
    for p in paths:
        print(f"{p}  ({p.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
