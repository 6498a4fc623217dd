"""python -m dashboard.export OUT/ : the dashboard as static HTML pages that need no server.

Writes ``OUT/index.html`` (every model of the store: a link to its page, or the command that computes
or repairs it; every training run), one ``OUT/profiles-<slug>-<hash>.html`` per drawable model and per training run
no drawable model names (its last frame, ``dashboard.training.model``; a run's frames are its page's Training tab),
``OUT/compare.html`` and ``OUT/orbits.html``. The
pages are the layouts the served app shows; every interaction runs client-side, so they work opened
with file://. By default they load BokehJS from the CDN; ``--self-contained`` inlines it for offline use.
A run's page holds every frame at every offset; ``--run-d0-only`` ships its frames at d = 0 alone (for large runs),
and the exporter and the page say what that left out.

File names are unique per model (a slug of at most 60 characters plus 8 hex digits of the name's
sha256). A page is written to a temporary file and renamed over its name, so an existing symbolic link
at that name is replaced, never written through.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import os
import re
import sys
import tempfile
from pathlib import Path

from bokeh.document import Document
from bokeh.embed import components
from bokeh.layouts import column
from bokeh.model import Model
from bokeh.resources import Resources

from dashboard import data
from dashboard.collector import collect_less_often
from dashboard.common.page_style import page_css
from dashboard.common.page_widgets import header, message, restore_on_ready
from dashboard.common.render import use_bokeh
from dashboard.compare.page import compare_content
from dashboard.orbits.page import orbits_content
from dashboard.profiles.page_texts import ORBIT_GROUP, is_orbit_experiment, todo_html
from dashboard.rendered import drawable_rows, profiles_layout
from dashboard.store_note import demo_note_html
from dashboard.training import runs
from pipeline.schema import trained_and_baselines
from pipeline.store.location import DEFAULT_HELP

SLUG_MAX = 60

PAGE_CSS = f"<style>\n{page_css('text', 'export', document=True)}</style>\n"  # dashboard/common/page.css


class ExportError(RuntimeError):
    """An output problem the user can fix (the message says what); the CLI prints it and exits 2."""


def slug(name: str) -> str:
    """A file-name-safe form of a model name, at most 60 characters: 'org/model-1' -> 'org_model-1'."""
    return (re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_.") or "model")[:SLUG_MAX]


def profile_page_name(name: str) -> str:
    """The page of model ``name``: unique per name (slug plus a short hash of the full name)."""
    return f"profiles-{slug(name)}-{hashlib.sha256(name.encode()).hexdigest()[:8]}.html"


def _nav(links: list[tuple[str, str]]) -> str:
    return '<nav class="hg">' + "".join(f'<a href="{html.escape(u)}">{html.escape(t)}</a>' for t, u in links) + "</nav>"


def bokeh_resources(self_contained: bool) -> Resources:
    """Resources for a static page: from the CDN (default) or inlined (``--self-contained``); BokehJS's own
    bundles only (``bokeh_internals.BokehOnly``, imported here: ``main`` checks the Bokeh and Panel releases
    first and says so in one line, where that module's own check at import would end in a traceback)."""
    from dashboard.bokeh_internals import BokehOnly

    return BokehOnly(mode="inline" if self_contained else "cdn", components=["bokeh", "bokeh-widgets", "bokeh-tables"])


def page_html(layout: Model, title: str, resources: Resources, nav_html: str = "") -> str:
    """A standalone page: the resources, the page CSS, a nav bar and the layout (its deep link, if it
    has one, restored once the page is drawn: ``dashboard.common.page_widgets.restore_on_ready``)."""
    doc = Document()
    doc.add_root(layout)
    restore_on_ready(doc, layout)
    script, div = components(layout)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n{resources.render_css()}\n{resources.render_js()}\n{PAGE_CSS}"
            f"</head>\n<body>\n{nav_html}\n{div}\n{script}\n</body>\n</html>\n")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_page(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed over it: a symlink there is replaced. The page
    gets the permissions a new file gets (0666 less the umask), not the temporary file's 0600, so that a web
    server running as another user can serve it."""
    fd, tmp = tempfile.mkstemp(prefix=".export-", suffix=".html", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            os.fchmod(f.fileno(), 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def runs_html(store: Path, pages: dict[str, str]) -> str:
    """The index's training runs: each with its frames, its steps and a link to its page (``pages``: {name: page}),
    or why it has none."""
    lines = []
    for r in runs.summaries(store):
        done = [f for f in r.frames if f.complete]
        steps = f"{done[0].step} to {done[-1].step}" if done else "none"
        link = (f'<a href="{html.escape(pages[r.name])}?tab=training">{html.escape(r.name)}</a>' if r.name in pages
                else html.escape(r.name))
        state = f"{len(r.missing)} not complete: <code>{html.escape(r.command)}</code> writes them" if r.missing else ""
        lines.append(f"<tr><td>{link}</td><td class='num'>{len(done)}</td><td>{steps}</td><td class='num'>"
                     f"{r.n_layers}</td><td class='num'>{r.n_heads}</td><td class='meta'>{state}</td></tr>")
    if not lines:
        return ""
    return ("<h2>Training runs</h2><p class='meta'>A run's frames are its page's Training tab (the page of the model "
            "of its name, or the run's own page, drawn as its last frame).</p><table class='models'><thead><tr>"
            "<th>run</th><th>frames</th><th>steps</th><th>layers</th><th>heads/layer</th><th>status</th></tr></thead>"
            f"<tbody>{''.join(lines)}</tbody></table>")


def index_html(store: Path, rows: list[data.ModelRow], problem: str | None, pages: dict[str, str] | None = None
               ) -> str:
    """The index: the demo's note when ``store`` is the demo (as on the served page), the models (layers, heads,
    N, n, positional) with links, then the ones to compute or repair, then the training runs (``pages``: the page of
    each name, runs included)."""
    lines = []
    for r in rows:
        if not r.computed or r.damaged:
            continue
        link = f'<a href="{profile_page_name(r.name)}">{html.escape(r.name)}</a>'
        state = "complete" if r.complete else f"incomplete: {r.layers_done} of {r.n_layers} layers"
        if is_orbit_experiment(r):
            state += f" · {ORBIT_GROUP}"
        dagger = "<sup>†</sup>" if r.rotary else ""
        lines.append(f"<tr><td>{link}</td><td class='num'>{r.n_layers}</td><td class='num'>{r.n_heads}</td>"
                     f"<td class='num'>{r.d_model}</td><td class='num'>{r.d_head}</td>"
                     f"<td class='num'>{r.n_layers * r.n_heads:,}</td><td>{html.escape(r.positional)}{dagger}</td>"
                     f"<td class='meta'>{state}</td></tr>")
    table = ("<table class='models'><thead><tr><th>model</th><th>layers</th><th>heads/layer</th><th>N</th>"
             "<th>n</th><th>heads</th><th>positional</th><th>status</th></tr></thead><tbody>"
             f"{''.join(lines)}</tbody></table>" if lines else "<p>no computed models in the store</p>")
    if any(r.rotary for r in rows):
        table += ("<p class='meta'><sup>†</sup> With rotary embeddings the form varies with the distance d between "
                  "the two tokens; those pages carry a slider over d = 0..128. For the other models the form does "
                  "not depend on position.</p>")
    body = f'<div class="error">{html.escape(problem)}</div>' if problem else ""
    body += f"<h2>Profiles</h2>{table}{todo_html(rows)}{runs_html(store, pages or {})}"
    body += ('<h2>Compare</h2><ul><li><a href="compare.html">Every computed model side by side: per-layer '
             "medians against relative depth, two models' histograms overlaid</a></li></ul>")
    body += ('<h2>Orbits</h2><ul><li><a href="orbits.html">The orbit experiment: the heads of one layer under '
             "C<sub>24</sub></a></li></ul>")
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Attention-head geometry</title>"
            f"{PAGE_CSS}</head><body><h1>Attention-head geometry</h1>{demo_note_html(store)}"
            f"<p class='meta'>Static pages exported from <code>{html.escape(store.name)}</code>; every view works "
            f"without a server.</p>{body}</body></html>")


def _check_out(out: Path) -> None:
    if out.is_symlink():
        raise ExportError(f"{out} is a symbolic link; give a real folder to write the pages into")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create the output folder {out}: {exc.strerror}") from None
    if not out.is_dir():
        raise ExportError(f"{out} exists and is not a folder")
    if not os.access(out, os.W_OK | os.X_OK):
        raise ExportError(f"the output folder {out} is not writable; choose another with `python -m "
                          "dashboard.export OUT/`")


def export(out, store=None, self_contained: bool = False, run_d0_only: bool = False) -> list[Path]:
    """Write the index, one page per drawable model and per training run of no drawable model's name, and the
    compare and orbits pages into ``out``; returns the paths. ``run_d0_only``: the runs' frames at d = 0 alone."""
    use_bokeh()  # the views' options are Bokeh options
    out = Path(out)
    _check_out(out)
    store = Path(store) if store else data.store_path([])
    resources = bokeh_resources(self_contained)
    rows: list[data.ModelRow] = []
    problem = None
    try:
        rows = drawable_rows(store)
    except data.StoreError as exc:
        problem = str(exc).replace(str(store), store.name)
    rows = trained_and_baselines(rows)[0]  # a random baseline is drawn on its model's Analyses tab
    drawable = [r for r in rows if r.computed and not r.damaged]
    damaged = [r for r in rows if r.computed and r.damaged]
    trained = runs.run_names(store) if problem is None else []
    names = [r.name for r in drawable] + [n for n in trained if n not in {r.name for r in drawable}]
    nav = {n: profile_page_name(n) for n in names}
    links = [("← index", "index.html"), ("compare", "compare.html"), ("orbits", "orbits.html")]
    written: list[Path] = []
    try:
        for name in names:
            layout = profiles_layout(store, name, run_d0_only=run_d0_only, nav=nav, current_url=nav[name],
                                     tabs={"profiles": "", "compare": "compare.html", "orbits": "orbits.html"})
            path = out / nav[name]
            write_page(path, page_html(layout, f"Profiles of attention heads · {name}", resources, _nav(links)))
            written.append(path)
        for r in damaged:  # its page says so, and a page of an earlier export there no longer shows old values
            path = out / profile_page_name(r.name)
            page = column(header(f"Profiles of attention heads · {html.escape(r.name)}", name="page_header"),
                          message(html.escape(r.damaged), "error", name="damaged"), name="profiles_page")
            write_page(path, page_html(page, f"Damaged · {r.name}", resources, _nav(links)))
            written.append(path)
        path = out / "compare.html"
        write_page(path, page_html(compare_content(store, shown=store.name), "Compare models", resources,
                                   _nav([("← index", "index.html")] + [(r.name, nav[r.name]) for r in drawable[:1]])))
        written.append(path)
        path = out / "orbits.html"
        write_page(path, page_html(orbits_content(store, shown=store.name), "Orbits of attention heads", resources,
                                   _nav([("← index", "index.html")] + [(r.name, nav[r.name]) for r in drawable[:1]])))
        written.append(path)
        path = out / "index.html"
        write_page(path, index_html(store, rows, problem, nav))
        written.append(path)
    except OSError as exc:
        raise ExportError(f"cannot write into {out}: {exc.strerror or exc}") from None
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboard.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write the pages into (created if needed)")
    parser.add_argument("--store", default=None, help=f"store to read (default: {DEFAULT_HELP}; the demo in "
                        "place of a user or current-folder store with no computed model)")
    parser.add_argument("--self-contained", action="store_true",
                        help="inline all JS and CSS (offline pages, ~+2 MB each) instead of loading them from the CDN")
    parser.add_argument("--run-d0-only", action="store_true",
                        help="a training run's page ships its frames at d = 0 alone (for large runs: the frames at d "
                             "= 1..128 are left out, and the page and this command say so)")
    args = parser.parse_args(argv)
    from dashboard.versions import VersionError, check_versions

    try:
        check_versions()  # the pages rely on the tested Bokeh/Panel releases
    except VersionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    collect_less_often()  # every page is built in this process
    store = data.store_path(["--store", args.store] if args.store else [])
    try:
        rows = drawable_rows(store)
        paths = export(args.out, store, self_contained=args.self_contained, run_d0_only=args.run_d0_only)
    except (data.StoreError, ExportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for p in paths:
        print(f"{p}  ({p.stat().st_size / 1e6:.2f} MB)")
    if args.run_d0_only:
        for line in left_out_lines(store):
            print(line)
    for r in rows:
        if r.computed and r.damaged:
            print(f"warning: {r.name} is damaged: {r.damaged}", file=sys.stderr)
    if not any(r.computed and not r.damaged for r in rows) and not runs.run_names(store) \
            and not _orbits_readable(store):
        print("error: nothing could be exported: no model has undamaged profiles, no run a complete frame and the "
              "orbits group cannot be read (index.html says why)", file=sys.stderr)
        return 1
    return 0


def left_out_lines(store) -> list[str]:
    """What ``--run-d0-only`` left out of each run's page: the frames at every other offset of a rotary run."""
    out = []
    for r in runs.summaries(store):
        done = sum(f.complete for f in r.frames)
        if done and str(runs.run(store, r.name).attrs.get("positional", "")) == "rope":
            out.append(f"{r.name}: exported at d = 0 alone (--run-d0-only); left out: the frames at d = 1 to 128 "
                       f"({done} frames x {r.n_layers * r.n_heads} heads x 128 offsets); export without the flag "
                       "for them")
    return out


def _orbits_readable(store) -> bool:
    try:
        data.orbits(store)
    except data.StoreError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
