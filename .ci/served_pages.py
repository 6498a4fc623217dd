"""Open every page and tab of the served dashboard in Chromium and check that each draws its plots.

    python .ci/served_pages.py URL SCREENSHOTS/ [--chromium /usr/bin/chromium]

Run by ``.ci/run`` from a tools environment of its own (playwright only), never from the environment of the app it
checks, so the app's environment holds the base install alone. It imports nothing of the project: the tabs' names
are read from the dashboard's sources (``TABS`` in dashboard/app.py, ``PAGE_TABS`` in
dashboard/profiles/page_analyses.py), so a tab added there is checked here too.

Each tab is opened in a fresh browser context at ``URL?tab=NAME``, the served app's deep link. It passes when:
- every Bokeh root has finished drawing and no tab still says its page is being built (within LOAD_TIMEOUT_S: the
  first load waits for the server's first build), and the page has written its state into its link;
- the link names the tab asked for (the app applied the deep link). A tab the shown model's page does not have
  (a run's Training tab) is one the app names in its note ("tab = <code>NAME</code>: ..."); then each other model
  of the page's selector is tried with ``?model=MODEL&tab=NAME``, and the tab passes as "offered by no model of this
  store" when the app says so for every one. A link that falls back with no such note fails;
- at least one plot is shown, and every shown plot has a canvas with something painted on it (PAINTED_COLOURS);
- no model of the page holds the app's error line ("could not be drawn", or the ``store_error`` message), and no
  text of the page says it;
- the browser's console logged no error and the page raised none.
A full-page screenshot of each goes to SCREENSHOTS/NAME.png. One line a tab; exit status 1 if any failed.
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

REPO = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-gpu"]
VIEWPORT = {"width": 1400, "height": 1000}
LOAD_TIMEOUT_S = 180  # the first load of a fresh server waits for its pages' first build (seconds on 2 cores)
LINK_TIMEOUT_S = 30  # a drawn page writes its state into its link at once (debounced: well under a second)
POLL_MS = 100
ERROR_TEXT = "could not be drawn"  # dashboard/app.py, _failed_view
ERROR_MODEL = "store_error"  # dashboard/app.py, _error_view
BUILDING = "building"  # dashboard/app.py, building_view: a tab whose page the server is still building
PAINTED_COLOURS = 3  # distinct pixel colours on a plot's canvas that tell a drawn plot from a blank one (1 or 2)

# every root of every Bokeh document has a view that has finished drawing, and no tab shows its progress line (a
# model named BUILDING): the page is settled, drawn or failed
SETTLED_JS = """(building) => {
  if (!window.Bokeh || !Bokeh.documents.length) { return false; }
  for (const d of Bokeh.documents) {
    if (!d.roots().length) { return false; }
    for (const r of d.roots()) {
      const v = Bokeh.index.find_one(r);
      if (v == null || !v.has_finished()) { return false; }
      for (const m of r.references()) { if (m.name === building) { return false; } }
    }
  }
  return true;
}"""

# the page's plots as [name, shown, finished, canvas width, height, distinct colours (up to PAINTED_COLOURS)], the
# texts of its models that carry the error line, the shown notes that name the tab asked for (as text), and the
# models of the page's model selector
SURVEY_JS = """([errorText, errorModel, enough, tabNote]) => {
  const plots = [], errors = [], notes = [], models = [];
  const values = (o) => o instanceof Map ? [...o.values()] : (Array.isArray(o) ? o : Object.values(o ?? {}));
  for (const d of Bokeh.documents) {
    for (const r of d.roots()) {
      for (const m of r.references()) {
        if (m.name === errorModel || (typeof m.text === 'string' && m.text.includes(errorText))) {
          errors.push(String(m.text ?? m.name).slice(0, 300));
        }
        if (typeof m.text === 'string' && m.text.includes(tabNote) && m.visible !== false) {
          notes.push(m.text.replace(/<[^>]*>/g, '').slice(0, 300));
        }
        if (m.title === 'Model' && 'options' in m) {  // the app's model selector (Panel's; its options grouped)
          for (const group of values(m.options)) {
            for (const o of (Array.isArray(group) ? group : [group])) { models.push(Array.isArray(o) ? o[0] : o); }
          }
        }
        if (m.type !== 'Figure' && m.type !== 'Plot') { continue; }
        const v = Bokeh.index.find_one(m);
        if (v == null) { plots.push([m.name, false, false, 0, 0, 0]); continue; }
        const shown = v.el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true});
        const c = v.canvas_view.primary.canvas;
        const colours = new Set();
        if (c.width > 0 && c.height > 0) {
          const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          for (let i = 0; i < px.length && colours.size < enough; i += 4) {
            colours.add(`${px[i]},${px[i + 1]},${px[i + 2]},${px[i + 3]}`);
          }
        }
        plots.push([m.name, shown, v.has_finished(), c.width, c.height, colours.size]);
      }
    }
  }
  return {plots, errors, notes, models};
}"""


def names_of(path: Path, variable: str) -> tuple[str, ...]:
    """The tuple of strings assigned to ``variable`` at the top of the module ``path``, read without importing it."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == variable for t in node.targets):
            value = ast.literal_eval(node.value)
            if isinstance(value, tuple) and value and all(isinstance(v, str) for v in value):
                return value
    raise SystemExit(f"{path}: no tuple of names {variable} = (...): the dashboard changed, so must this check")


def tabs() -> list[str]:
    """Every tab a deep link can open: the profiles page's own tabs, then the app's others."""
    page_tabs = names_of(REPO / "dashboard" / "profiles" / "page_analyses.py", "PAGE_TABS")
    app_tabs = names_of(REPO / "dashboard" / "app.py", "TABS")
    return list(dict.fromkeys([*page_tabs, *app_tabs]))


@dataclass
class Checked:
    """What one load of a tab found: its problems; the app's note when the shown model's page does not have the tab
    (then ``problems`` do not count); the models of the page's selector."""

    problems: list[str] = field(default_factory=list)
    not_here: str = ""
    models: list[str] = field(default_factory=list)


def check(browser, url: str, tab: str, shots: Path, model: str | None = None) -> Checked:
    """Open ``url?tab=TAB`` (``&model=MODEL`` first where given); print its line and return what it found."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: console.append(str(e)))
    start = time.monotonic()
    found = Checked()
    problems = found.problems
    label = tab if model is None else f"{tab} (model {model})"
    try:
        page.goto(f"{url}?tab={tab}" if model is None else f"{url}?model={quote(model)}&tab={tab}")
        page.wait_for_function(SETTLED_JS, arg=BUILDING, timeout=LOAD_TIMEOUT_S * 1000, polling=POLL_MS)
        # the page applies the link once its document is ready and writes its whole state back (model= among it)
        try:
            page.wait_for_function("() => new URLSearchParams(window.location.search).has('model')",
                                   timeout=LINK_TIMEOUT_S * 1000, polling=POLL_MS)
        except PlaywrightTimeout:
            problems.append(f"the page did not write its state into its link within {LINK_TIMEOUT_S} s: {page.url}")
        # the paint after the last drawing: Bokeh paints its canvases in animation-frame callbacks
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)))")
        seconds = time.monotonic() - start
        survey = page.evaluate(SURVEY_JS, [ERROR_TEXT, ERROR_MODEL, PAINTED_COLOURS, f"tab = <code>{tab}</code>"])
        link = parse_qs(urlsplit(page.url).query)
        found.models = [m for m in survey["models"] if m not in link.get("model", [])]
        shown = [p for p in survey["plots"] if p[1]]
        if link.get("tab") != [tab]:
            if survey["notes"]:
                found.not_here = " ".join(n[n.find(f"tab = {tab}"):] for n in survey["notes"])
            else:
                problems.append(f"the page's link names tab={link.get('tab')}, not {tab}, and no note says why: "
                                f"{page.url}")
        if not shown:
            problems.append(f"no plot shown (plots in the document: {[p[0] for p in survey['plots']]})")
        for name, _, finished, width, height, colours in shown:
            if not finished or width == 0 or height == 0 or colours < PAINTED_COLOURS:
                problems.append(f"plot {name} not drawn: finished {finished}, canvas {width}x{height}, "
                                f"{colours} colour(s)")
        problems += [f"error line: {text}" for text in survey["errors"]]
        if page.get_by_text(ERROR_TEXT).count():
            problems.append(f"the page's text says {ERROR_TEXT!r}")
        summary = f"{len(shown)} plots drawn in {seconds:.1f} s"
    except Exception as exc:  # noqa: BLE001 - a page that never draws is reported with the others
        problems.append(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
        summary = f"not drawn after {time.monotonic() - start:.1f} s"
    problems += [f"console error: {text}" for text in console]
    if found.not_here:
        context.close()
        print(f"{label}: not this model's tab, the page says: {found.not_here}", flush=True)
        return found
    shot = shots / f"{tab}.png"
    page.screenshot(path=str(shot), full_page=True)
    context.close()
    print(f"{label}: {summary}; {'ok' if not problems else 'FAILED'}; screenshot {shot}", flush=True)
    for problem in problems:
        print(f"    {problem}", flush=True)
    return found


def check_tab(browser, url: str, tab: str, shots: Path) -> bool:
    """Check ``tab`` on the model the app shows first, or else on the first other model whose page has it; True when
    it passes (or the app says for every model that its page does not have the tab)."""
    found = check(browser, url, tab, shots)
    others = iter(found.models)
    while found.not_here:
        model = next(others, None)
        if model is None:
            print(f"{tab}: offered by no model of this store, as the app says for each; nothing to draw", flush=True)
            return True
        found = check(browser, url, tab, shots, model)
    return not found.problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the served app, e.g. http://127.0.0.1:5006/app")
    parser.add_argument("screenshots", type=Path, help="folder for one screenshot a tab")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="the browser (default: Debian's)")
    args = parser.parse_args(argv)
    args.screenshots.mkdir(parents=True, exist_ok=True)
    failed = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            for tab in tabs():
                if not check_tab(browser, args.url, tab, args.screenshots):
                    failed.append(tab)
        finally:
            browser.close()
    if failed:
        print(f"served pages: {', '.join(failed)} failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
