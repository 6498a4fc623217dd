"""The served dashboard and the exported pages, timed side by side with the dashboard before this tree's
per-process rendering and with a one-figure Panel app (the floor of any Panel page on this machine).

    python benchmarks/dashboard_bench.py [--sessions 100] [--before-sessions 20] [--layers 40] [--heads 32]
    python benchmarks/dashboard_bench.py --screenshots docs/   # only the two screenshots of the docs
    python benchmarks/dashboard_bench.py --only pages [--rounds 9] [--many-rounds 3]

``--only pages``: the served profiles page against the same page exported self-contained and opened
from disk, interleaved served/disk: warm loads to a drawn tetrahedron and 20 loads at once, with the
ratios (medians of per-round ratios), chromium's (for 20 at once by process kind), the server's and
playwright's driver's CPU seconds, and the median timeline
of one load of each from chromium's performance timeline (navigation and resource entries, paints) and
the page's own marks (the websocket's creation, opening and messages, the first Bokeh document, the
drawn tetrahedron). Only remote requests are routed there, so the pages' own requests do not wait for
this process.

Builds a synthetic store in a temporary folder (a 40 x 32 rotary model with all 129 offsets, a small
absolute-position model and an orbits group), serves it with ``panel serve`` on 127.0.0.1 and drives
headless chromium (every request outside 127.0.0.1 refused, BokehJS served from the installed
package). The same measurements run on three apps, each served alone: this tree's ("now"), the
dashboard of the parent of the commit that added ``dashboard/rendered.py`` ("before", where git can
check it out) and ``floor``: a Panel page holding one 2-point figure named ``tetrahedron``.

- session build, server side (``bokeh_session.py``): the GET that runs the app script and the pull of
  the session's document over its websocket, as a browser does them, without a browser; median of 7
  after a first session, and 20 sessions opened at once (until every document has arrived);
- page load in chromium: median time from navigation to a drawn tetrahedron after a first session, and
  20 pages opened at once (until every one is drawn, each checked every MANY_POLL_MS). Chromium's own work is
  in these: compare with the floor;
- resident memory of the server after N sequential sessions (each closed; sessions expire after 1 s);
- the document's model count in the browser after 10 switches of the model selector, against the first;
- on the exported pages: page size; a d-slider step and a movie frame, each as its JavaScript alone (the
  slider's callbacks run and awaited, the views' data updates included, not the paint) and until painted
  (callbacks, Bokeh's update and the paint); the movie's frame interval while it plays.

Needs Debian's chromium at /usr/bin/chromium and the playwright package.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

STEP_JS = """
async ([name, steps, stride]) => {
  // move the slider ``name`` ``steps`` times by ``stride`` (wrapping at its end); per step, the time until
  // the next paint is done: its callbacks (CustomJS runs them asynchronously), Bokeh's update and the paint
  const s = find(name);
  const frame = [];
  const raf = () => new Promise(r => requestAnimationFrame(() => r()));
  await raf();
  for (let i = 1; i <= steps; i++) {
    const t0 = performance.now();
    s.value = s.start + (s.value - s.start + stride) % (s.end - s.start + 1);
    // Bokeh paints in an animation-frame callback queued after ours; a task queued from ours runs
    // once that frame's callbacks (the paint included) are done
    await raf(); await new Promise(r => setTimeout(r, 0));
    frame.push(performance.now() - t0);
  }
  return frame;
}
"""

CALLBACK_JS = """
async ([name, steps, stride]) => {
  // the JavaScript of one step alone: set the slider ``name`` silently, then run its value callbacks and
  // wait for them (decoding, projecting, recounting and the views' updates of their data), not the paint
  const s = find(name);
  const m = s.js_property_callbacks;
  const cbs = (m instanceof Map ? m.get('change:value') : m['change:value']) || [];
  const times = [];
  for (let i = 1; i <= steps; i++) {
    s.setv({value: s.start + (s.value - s.start + stride) % (s.end - s.start + 1)}, {silent: true});
    const t0 = performance.now();
    for (const cb of cbs) { await cb.execute(s, {}); }
    times.push(performance.now() - t0);
    await new Promise(r => requestAnimationFrame(() => r()));
  }
  return times;
}
"""

MOVIE_JS = """
async (ms) => {
  const s = find('orbits_frame'), times = [];
  let last = s.value;
  const t_end = performance.now() + ms;
  while (performance.now() < t_end) {
    await new Promise(r => requestAnimationFrame(() => r()));
    if (s.value !== last) { times.push(performance.now()); last = s.value; }
  }
  return times;
}
"""

# Whether the tetrahedron is drawn (its view has finished). The model is looked up once, by a walk over the
# documents' models, and kept on the window: each later check is one view lookup, so a check costs the page
# nearly nothing however often it runs.
IDLE_JS = ("() => { const w = window; if (!w.__tetra) { if (!w.Bokeh) { return false; }"
           " for (const d of Bokeh.documents) { for (const r of d.roots()) { for (const m of r.references()) {"
           " if (m.name === 'tetrahedron') { w.__tetra = m; } } } } if (!w.__tetra) { return false; } }"
           " const v = Bokeh.index.find_one(w.__tetra); return v != null && v.has_finished(); }")
MANY_POLL_MS = 200  # how often each of the pages loaded at once is checked for a drawn tetrahedron


# Installed before any page script: timestamps (performance.now(), ms from navigation start) of the
# websocket's creation, opening and every message it receives, of the first Bokeh document with roots and
# of the drawn tetrahedron (checked once per animation frame, as IDLE_JS checks it).
TIMELINE_INIT = """
(() => {
  const T = window.__hg = {ws_new: null, ws_open: null, ws_msgs: [], doc: null, drawn: null};
  const WS = window.WebSocket;
  window.WebSocket = class extends WS {
    constructor(...a) {
      super(...a);
      T.ws_new = performance.now();
      this.addEventListener('open', () => { T.ws_open = performance.now(); });
      this.addEventListener('message', () => { T.ws_msgs.push(performance.now()); });
    }
  };
  const idle = IDLE;
  const tick = () => {
    if (T.doc === null && window.Bokeh && Bokeh.documents && Bokeh.documents.some(d => d.roots().length)) {
      T.doc = performance.now();
    }
    if (T.drawn === null && idle()) { T.drawn = performance.now(); return; }
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();
"""

TIMELINE_JS = """
() => {
  // the performance timeline of a drawn page, in ms from its navigation's start
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  const paint = Object.fromEntries(performance.getEntriesByType('paint').map(e => [e.name, e.startTime]));
  const kinds = {};
  for (const r of res) {
    const ext = r.name.split('?')[0].match(/\\.(js|css)$/);
    const k = ext ? ext[1] : r.initiatorType;
    kinds[k] = kinds[k] || {n: 0, bytes: 0, end: 0, busy: 0};
    kinds[k].n += 1; kinds[k].bytes += r.decodedBodySize || 0;
    kinds[k].end = Math.max(kinds[k].end, r.responseEnd); kinds[k].busy += r.responseEnd - r.startTime;
  }
  const T = window.__hg;
  let docs = 0;
  for (const d of Bokeh.documents) { docs += d.all_models.size; }
  return {html_start: nav.responseStart, html_end: nav.responseEnd, html_bytes: nav.decodedBodySize,
          dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd, kinds, paint,
          ws_new: T.ws_new, ws_open: T.ws_open, ws_msgs: T.ws_msgs, doc: T.doc, drawn: T.drawn, models: docs};
}
"""


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


FLOOR_APP = """import panel as pn
from bokeh.plotting import figure

fig = figure(width=300, height=300, name="tetrahedron")
fig.scatter([1, 2], [3, 4])
pn.Column(pn.pane.Bokeh(fig)).servable()
"""


def floor_tree(tmp: Path) -> Path:
    """A folder whose dashboard/app.py is the one-figure Panel page."""
    out = tmp / "floor"
    (out / "dashboard").mkdir(parents=True)
    (out / "dashboard" / "app.py").write_text(FLOOR_APP)
    return out


def old_tree(tmp: Path) -> Path | None:
    """The dashboard package before per-process rendering (git archive of the parent of the commit that
    added dashboard/rendered.py), or None without git."""
    try:
        revs = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H", "--", "dashboard/rendered.py"],
                              cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
        if not revs:
            return None
        out = tmp / "before"
        out.mkdir()
        archive = subprocess.run(["git", "archive", f"{revs[-1]}~1", "dashboard"], cwd=REPO, capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
        return out
    except (OSError, subprocess.CalledProcessError):
        return None


def rev_tree(tmp: Path, rev: str) -> Path:
    """The dashboard package of git revision ``rev`` in a folder of ``tmp`` (the rest imported from this tree)."""
    out = tmp / f"rev-{rev}"
    out.mkdir()
    archive = subprocess.run(["git", "archive", rev, "dashboard"], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def serve(root: Path, store: Path, port: int, script: Path | None = None, args: tuple[str, ...] = ()):
    """``panel serve ROOT/dashboard/app.py`` (or ``script``) on 127.0.0.1 with ROOT first on the import path, then
    benchmarks/, ``args`` after the store's; (process, url)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, (root, REPO, REPO / "benchmarks"))))
    script = script or root / "dashboard" / "app.py"
    cmd = [sys.executable, "-m", "panel", "serve", str(script), "--port", str(port),
           "--address", "127.0.0.1", "--allow-websocket-origin", f"127.0.0.1:{port}", "--log-level", "warning",
           "--liveness", "--unused-session-lifetime", "1000", "--check-unused-sessions", "500",
           "--args", "--store", str(store), *args]
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, when_live(proc, port, f"http://127.0.0.1:{port}/{script.stem}", 90, "panel serve")


def when_live(proc: subprocess.Popen, port: int, url: str, seconds: float, what: str) -> str:
    """``url`` once the server ``proc`` answers on its ``/liveness`` endpoint (polled every 0.5 s: a server
    answers nothing sooner to await), or ``proc`` killed and a RuntimeError after ``seconds``."""
    for _ in range(int(seconds * 2)):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/liveness", timeout=2):
                return url
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"{what} did not start")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure_server(browser, root: Path, store: Path, port: int, sessions: int, models: tuple[str, str] | None,
                   ) -> dict:
    """Every served measurement of one app; ``models`` None (the floor) skips memory and model switches."""
    from bokeh_session import sessions as open_sessions
    from bokeh_session import sessions_at_once

    from tests.browser.conftest import route_offline, stop

    proc, url = serve(root, store, port)
    out = {}
    try:
        def load(page):
            t0 = time.perf_counter()
            page.goto(url)
            page.wait_for_function(IDLE_JS, timeout=120_000)
            return time.perf_counter() - t0

        open_sessions(url, 1, at_once=False)  # the first session pays the imports and the first rendering
        out["server"] = statistics.median(open_sessions(url, 7, at_once=False))
        print(f"  session build (server side), median of 7: {out['server']:.3f} s", flush=True)
        out["server20"] = sessions_at_once(url, 20)
        print(f"  20 sessions at once (server side), all documents sent: {out['server20']:.2f} s", flush=True)

        times = []
        for _ in range(7):
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            route_offline(page)
            times.append(load(page))
            page.close()
        out["warm"] = statistics.median(times)
        print(f"  page load to a drawn tetrahedron, median of 7: {out['warm']:.2f} s", flush=True)

        pages = []
        for _ in range(20):
            p = browser.new_page(viewport={"width": 1400, "height": 900})
            route_offline(p)
            pages.append(p)
        t0 = time.perf_counter()
        for p in pages:  # navigations start without waiting for each other
            p.evaluate("(u) => { window.location.href = u; }", url)
        for p in pages:
            p.wait_for_function(IDLE_JS, timeout=300_000, polling=MANY_POLL_MS)
        out["twenty"] = time.perf_counter() - t0
        print(f"  20 pages at once, all drawn: {out['twenty']:.1f} s", flush=True)
        for p in pages:
            p.close()
        if models is None:
            return out

        time.sleep(3)  # closed sessions expire (1 s) and are collected
        before = rss_mb(proc.pid)
        for _ in range(sessions):
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            route_offline(page)
            load(page)
            page.close()
        time.sleep(3)
        out["rss"] = (before, rss_mb(proc.pid), sessions)
        print(f"  server RSS {before:.0f} -> {out['rss'][1]:.0f} MB over {sessions} sessions", flush=True)

        page = browser.new_page(viewport={"width": 1400, "height": 900})
        route_offline(page)
        try:
            load(page)
        except Exception as exc:  # noqa: BLE001 - reported in the table
            print(f"  the session for the model count did not draw: {type(exc).__name__}", flush=True)
            out["models"] = (float("nan"), float("nan"))
            return out
        count = "() => Bokeh.documents[0].all_models.size"
        first = page.evaluate(count)
        select = page.locator("select").first
        for i in range(10):
            name = models[(i + 1) % 2]
            select.select_option(label=name)
            page.wait_for_function(
                "(n) => { for (const r of Bokeh.documents[0].roots()) { for (const m of r.references()) {"
                " if (m.name === 'model_line' && m.text.includes('<b>' + n + '</b>')) { return true; } } }"
                " return false; }", arg=name, timeout=120_000)
            page.wait_for_timeout(300)
        out["models"] = (first, page.evaluate(count))
        print(f"  document models {first} -> {out['models'][1]} after 10 switches", flush=True)
        page.close()
    finally:
        stop(proc)
    return out


def measure_pages(browser, root: Path, store: Path, out_dir: Path, steps: int) -> dict:
    """Export with the tree at ``root``; page size, d-slider step and movie frame on the exported pages."""
    from tests.browser.conftest import FIND_JS, ROPE_MODEL, route_offline, wait_for_bokeh

    env = dict(os.environ, PYTHONPATH=f"{root}{os.pathsep}{REPO}")
    subprocess.run([sys.executable, "-m", "dashboard.export", str(out_dir), "--store", str(store)], cwd=root, env=env,
                   check=True, capture_output=True)
    page_file = next(p for p in out_dir.glob("profiles-*.html") if ROPE_MODEL.split("-")[-1] in p.name)
    out = {"size": page_file.stat().st_size / 1e6}
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    route_offline(page)
    page.goto(page_file.as_uri())
    wait_for_bokeh(page, "heads")
    frame = page.evaluate("(a) => {" + FIND_JS + "return (" + STEP_JS + ")(a); }", ["d_slider", steps, 3])
    out["step"] = (statistics.median(frame), pct(frame, 0.9))
    frame = page.evaluate("(a) => {" + FIND_JS + "return (" + CALLBACK_JS + ")(a); }", ["d_slider", steps, 3])
    out["step_js"] = (statistics.median(frame), pct(frame, 0.9))
    page.goto((out_dir / "orbits.html").as_uri())
    wait_for_bokeh(page, "orbits_frame")
    frame = page.evaluate("(a) => {" + FIND_JS + "return (" + STEP_JS + ")(a); }", ["orbits_frame", steps, 1])
    out["frame"] = (statistics.median(frame), pct(frame, 0.9))
    frame = page.evaluate("(a) => {" + FIND_JS + "return (" + CALLBACK_JS + ")(a); }", ["orbits_frame", steps, 1])
    out["frame_js"] = (statistics.median(frame), pct(frame, 0.9))
    asked = page.evaluate("() => {" + FIND_JS + "return find('orbits_interval_ms').value; }")
    page.evaluate("() => {" + FIND_JS + "find('orbits_play').active = true; }")
    times = page.evaluate("(ms) => {" + FIND_JS + "return (" + MOVIE_JS + ")(ms); }", 5000)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    out["movie"] = (statistics.median(gaps) if gaps else float("nan"), asked)
    page.close()
    return out


def _cpu(procs) -> float:
    """CPU seconds (user + system, with reaped children's) of ``procs`` (psutil processes) still alive."""
    return sum(_cpu_by_kind(procs).values())


def _cpu_by_kind(procs) -> dict[str, float]:
    """``_cpu`` of ``procs`` by the kind of each (``_kind``)."""
    out: dict[str, float] = {}
    for pr in procs:
        try:
            t, kind = pr.cpu_times(), _kind(pr)
        except Exception:  # noqa: BLE001 - a process gone since listed
            continue
        out[kind] = out.get(kind, 0.0) + t.user + t.system + t.children_user + t.children_system
    return out


def _kind(proc) -> str:
    """What a process below this one is: chromium's ``browser``, ``renderer``, ``gpu-process``, ``utility`` (the
    network service among them) or ``zygote`` (by its ``--type``), ``playwright`` (the node driver that this
    process talks to, which chromium sends every event of the pages it drives: requests, websocket frames), or
    ``server`` (anything else)."""
    if proc.name().startswith("node"):
        return "playwright"
    line = " ".join(proc.cmdline())
    if "chrom" not in proc.name():
        return "server"
    for kind in ("renderer", "gpu-process", "utility", "zygote"):
        if f"--type={kind}" in line:
            return kind
    return "browser"


def _chromium():
    """The chromium processes below this one (the browser, its zygotes and the renderers they reap) and
    playwright's driver."""
    import psutil

    out = []
    for c in psutil.Process().children(recursive=True):
        try:
            if "chrom" in c.name() or c.name().startswith("node"):
                out.append(c)
        except psutil.NoSuchProcess:  # a renderer gone between the listing and its name
            continue
    return out


def _marks(tl: dict) -> dict:
    """Named points of one load's timeline (ms from navigation start); None where the page has none."""
    kinds = tl["kinds"]
    reply = [t for t in tl["ws_msgs"] if tl["doc"] is not None and t <= tl["doc"]]
    return {"HTML received (GET; served: runs the app script)": tl["html_end"],
            "CSS received (last)": kinds.get("css", {}).get("end"),
            "JS received (last)": kinds.get("js", {}).get("end"),
            "DOMContentLoaded done": tl["dcl"],
            "websocket created": tl["ws_new"],
            "websocket open": tl["ws_open"],
            "document pulled (last message before the document)": reply[-1] if reply else None,
            "Bokeh document with roots": tl["doc"],
            "first contentful paint": tl["paint"].get("first-contentful-paint"),
            "tetrahedron drawn (has_finished)": tl["drawn"],
            "load event done": tl["load"]}


REMOTE = re.compile(r"^(?!(file:|data:|blob:|about:|https?://127\.0\.0\.1[:/]|ws://127\.0\.0\.1[:/]))")


def _route_remote(page) -> None:
    """Like ``route_offline``, but only remote requests are routed (a CDN file from the installed packages,
    anything else refused): playwright holds a routed request until this process answers it, which a page's
    own requests to 127.0.0.1 or file:// should not pay in a timing."""
    from tests.browser.conftest import _local_resource

    def handle(route):
        path = _local_resource(route.request.url)
        if path is None:
            return route.abort()
        ctype = "text/css" if path.suffix == ".css" else "application/javascript"
        return route.fulfill(status=200, body=path.read_bytes(), headers={"content-type": ctype,
                                                                           "access-control-allow-origin": "*"})

    page.route(REMOTE, handle)


def _new_page(browser, context=None, timeline: bool = True):
    """A new page in a context of its own (empty caches, remote requests routed), or in ``context`` (not
    routed: playwright turns a page's HTTP cache off once any of its requests are routed; neither page asks
    for a remote file: tests/browser/test_app.py). ``timeline``: with TIMELINE_INIT (a check in every
    animation frame until the tetrahedron is drawn)."""
    page = (context or browser).new_page(**({} if context else {"viewport": {"width": 1400, "height": 900}}))
    if context is None:
        _route_remote(page)
    if timeline:
        page.add_init_script(TIMELINE_INIT.replace("IDLE", IDLE_JS))
    return page


def _cpu_spent(procs, before: dict[str, float]) -> dict[str, float]:
    """CPU seconds of ``procs`` by kind since ``before`` (``_cpu_by_kind``)."""
    return {k: v - before.get(k, 0.0) for k, v in _cpu_by_kind(procs).items()}


def _chromium_cpu(by_kind: dict[str, float]) -> float:
    return sum(v for k, v in by_kind.items() if k != "playwright")


DRAWN = "() => window.__hg && window.__hg.drawn !== null"


def _one_load(browser, url: str, server, context=None) -> dict:
    """One load of ``url`` in a new page (in ``context``: sharing its HTTP cache): wall seconds to a drawn
    tetrahedron, the page's timeline, CPU seconds of chromium and of the server (None for a page from disk)
    over the load."""
    page = _new_page(browser, context)
    procs = _chromium()
    c0, s0 = _cpu_by_kind(procs), (_cpu([server]) if server else 0.0)
    t0 = time.perf_counter()
    page.goto(url)
    page.wait_for_function(DRAWN, timeout=120_000)
    wall = time.perf_counter() - t0
    spent, s1 = _cpu_spent(procs, c0), (_cpu([server]) if server else 0.0)
    tl = page.evaluate(TIMELINE_JS)
    page.close()
    return {"wall": wall, "tl": tl, "chromium_cpu": _chromium_cpu(spent), "server_cpu": (s1 - s0) if server else None}


def _many_loads(browser, url: str, server, n: int, timeout_s: float = 300) -> dict:
    """``n`` pages navigated at once (none waits for another); wall seconds until every one is drawn.
    Each page is first on an empty page of the same origin: a file:// page's folder (chromium refuses a script's
    navigation from about:blank to a file), the server's /liveness for a served page. So both kinds of page start
    on a page of their own origin, and neither makes its first navigation to that origin inside the timing.

    The pages have no timeline and are checked every MANY_POLL_MS, not in every animation frame: a check in every
    frame of 20 pages costs chromium CPU for as long as they wait, so the slower kind of page would pay more of
    it, a cost of the measurement rather than of the page. CPU seconds are kept by process kind (``_kind``)."""
    pages = [_new_page(browser, timeline=False) for _ in range(n)]
    if url.startswith("file:"):
        blank = Path(urllib.request.url2pathname(url[len("file:"):])).with_name("blank.html")
        blank.write_text("<html></html>")
        blank_url = blank.as_uri()
    else:
        blank_url = url.rsplit("/", 1)[0] + "/liveness"  # panel serve --liveness (``serve``)
    for p in pages:
        p.goto(blank_url)
    procs = _chromium()
    c0, s0 = _cpu_by_kind(procs), (_cpu([server]) if server else 0.0)
    t0 = time.perf_counter()
    for p in pages:
        p.evaluate("(u) => { window.location.href = u; }", url)
    for p in pages:
        p.wait_for_function(IDLE_JS, timeout=timeout_s * 1000, polling=MANY_POLL_MS)
    wall = time.perf_counter() - t0
    spent, s1 = _cpu_spent(procs, c0), (_cpu([server]) if server else 0.0)
    for p in pages:
        p.close()
    return {"wall": wall, "chromium_cpu": _chromium_cpu(spent), "server_cpu": (s1 - s0) if server else None,
            "by_kind": spent}


def compare_pages(browser, root: Path, store: Path, tmp: Path, rounds: int, many_rounds: int, n_at_once: int = 20,
                  before: Path | None = None) -> dict:
    """The served profiles page against the same page exported self-contained and opened from disk (file://,
    BokehJS inline: the page asks for nothing), interleaved: per round (``rounds``) one warm load of each in a
    new browser context (empty caches: every script fetched) and one repeat view (in a context of each page's
    own whose HTTP cache a first load filled: the served page's scripts, sent with a ten-year max-age, come
    from it); then ``n_at_once`` pages of each at once (``many_rounds``); medians, the ratios, and the
    median timeline of one load of each. ``before``: a tree whose dashboard is served too ("served before"),
    timed in the same rounds."""
    import psutil

    from tests.browser.conftest import ROPE_MODEL, free_port, stop

    out_dir = tmp / "pages-compare"
    env = dict(os.environ, PYTHONPATH=f"{root}{os.pathsep}{REPO}")
    subprocess.run([sys.executable, "-m", "dashboard.export", str(out_dir), "--store", str(store), "--self-contained"],
                   cwd=root, env=env, check=True, capture_output=True)
    disk = next(p for p in out_dir.glob("profiles-*.html") if ROPE_MODEL.split("-")[-1] in p.name).as_uri()
    trees = {"served": root} | ({"served before": before} if before is not None else {})
    procs, urls = [], {}
    for label, tree in trees.items():
        proc, served = serve(tree, store, free_port())
        procs.append(proc)
        urls[label] = (served, psutil.Process(proc.pid))
    urls["disk"] = (disk, None)
    res = {k: {"one": [], "repeat": [], "many": []} for k in urls}
    contexts = {k: browser.new_context(viewport={"width": 1400, "height": 900}) for k in urls}
    try:
        for k, (u, srv) in urls.items():  # the first session pays the imports and the first rendering
            _one_load(browser, u, srv, contexts[k])  # and fills the repeat views' cache
        for i in range(rounds):
            for k in (list(urls) if i % 2 == 0 else list(urls)[::-1]):
                res[k]["one"].append(_one_load(browser, *urls[k]))
                res[k]["repeat"].append(_one_load(browser, *urls[k], contexts[k]))
            print(f"  round {i + 1}: " + ", ".join(f"{k} {res[k]['one'][-1]['wall']:.2f} s "
                                                   f"(repeat {res[k]['repeat'][-1]['wall']:.2f} s)" for k in urls)
                  + f"; load average {os.getloadavg()[0]:.1f}", flush=True)
        for i in range(many_rounds):
            for k in (list(urls) if i % 2 == 0 else list(urls)[::-1]):
                res[k]["many"].append(_many_loads(browser, *urls[k], n_at_once))
            print(f"  {n_at_once} at once, round {i + 1}: "
                  + ", ".join(f"{k} {res[k]['many'][-1]['wall']:.1f} s" for k in urls), flush=True)
    finally:
        for c in contexts.values():
            c.close()
        for proc in procs:
            stop(proc)
    return res


def print_compare(res: dict, n_at_once: int = 20) -> None:
    """The table of ``compare_pages``: each served page (column) against the page from disk."""
    med = statistics.median
    arms = [k for k in res if k != "disk"]
    cols = arms + ["disk"]

    def m(k, part, key):
        vals = [r[key] for r in res[k][part] if r[key] is not None]
        return med(vals) if vals else None

    def ratio(k, part, get):
        return med(get(s) / get(d) for s, d in zip(res[k][part], res["disk"][part], strict=True))

    print()
    print(f"{'served profiles page against the same page from disk':62s}" + "".join(f"{c:>15s}" for c in cols)
          + "".join(f"{'ratio ' + a:>20s}" for a in arms) + "   target")
    rows = [("warm load to a drawn tetrahedron, wall, median (s)", "one", "wall", True, "<= 1.1"),
            ("  in-page time to drawn (performance.now), median (s)", "one", "drawn", True, ""),
            ("  chromium CPU per load, median (s)", "one", "chromium_cpu", False, ""),
            ("  server CPU per load, median (s)", "one", "server_cpu", False, ""),
            ("repeat view (scripts from the browser's cache), wall, median (s)", "repeat", "wall", True, "<= 1.1"),
            ("  in-page time to drawn (performance.now), median (s)", "repeat", "drawn", True, ""),
            (f"{n_at_once} loads at once, all drawn, wall, median (s)", "many", "wall", True, "<= 1.5"),
            (f"  chromium CPU for the {n_at_once}, median (s)", "many", "chromium_cpu", False, ""),
            (f"  server CPU for the {n_at_once}, median (s)", "many", "server_cpu", False, "")]
    kinds = sorted({kind for r in res.values() for x in r["many"] for kind in x.get("by_kind", {})})
    at = next(i for i, row in enumerate(rows) if row[1:3] == ("many", "chromium_cpu")) + 1
    rows[at:at] = [(f"    of which {kind}", "many", f"cpu:{kind}", False, "") for kind in kinds if kind != "playwright"]
    rows += [(f"  playwright's driver CPU for the {n_at_once}, median (s)", "many", "cpu:playwright", False, "")
             ] if "playwright" in kinds else []
    for r in res.values():
        for x in r["one"] + r["repeat"]:
            x["drawn"] = x["tl"]["drawn"] / 1000
        for x in r["many"]:
            x.update({f"cpu:{kind}": x.get("by_kind", {}).get(kind, 0.0) for kind in kinds})
    for name, part, key, with_ratio, target in rows:
        cells = "".join(f"{(f'{v:.2f}' if (v := m(c, part, key)) is not None else '-'):>15s}" for c in cols)
        ratios = "".join(f"{(f'{ratio(a, part, lambda x, key=key: x[key]):.2f}' if with_ratio else ''):>20s}"
                         for a in arms)
        print(f"{name:62s}{cells}{ratios}   {target}")
    print("  (ratios: medians of the per-round ratios; the pages interleaved in each round)")

    for part, title in (("one", "one warm load"), ("repeat", "one repeat view")):
        print()
        print(f"{title + ', median time of each point (ms from navigation)':62s}" + "".join(f"{c:>15s}" for c in cols))
        marks = {k: [_marks(r["tl"]) for r in res[k][part]] for k in cols}
        for name in marks["disk"][0]:
            cells = []
            for k in cols:
                vals = [mk[name] for mk in marks[k] if mk[name] is not None]
                cells.append(f"{med(vals):.0f}" if vals else "-")
            print(f"{name:62s}" + "".join(f"{c:>15s}" for c in cells))
    for k in cols:
        tl = res[k]["one"][len(res[k]["one"]) // 2]["tl"]
        kinds = ", ".join(f"{e}: {v['n']} ({v['bytes'] / 1e6:.2f} MB)" for e, v in tl["kinds"].items())
        print(f"  {k}: HTML {tl['html_bytes'] / 1e6:.2f} MB; resources {kinds or 'none'}; websocket messages "
              f"before the document {sum(1 for t in tl['ws_msgs'] if tl['doc'] is not None and t <= tl['doc'])}, "
              f"after {sum(1 for t in tl['ws_msgs'] if tl['doc'] is not None and t > tl['doc'])}; models in the "
              f"document {tl['models']}")


# ------------------------------------------------------------------------------------ the serve layer's pieces

# Each piece of the serve layer switched off in turn (``rendered.Pages``' parameters): a session's page copied
# from one rendered once per process (``clone.py``), its form serialised once (``serialized.py``).
# docs/architecture.md ("The serve layer's pieces") has the figures, and those of the piece this measure removed
# (the page's defaults written as values before the first copy).
ARMS = {"all pieces": {}, "no copies (a page rendered per session)": {"copies": False},
        "no pre-serialisation": {"preserialise": False}}

# The app of one arm: dashboard/app.py's script with the arm's pages (``arm_pages``: one per server process).
ARM_APP = """import sys
from dashboard import app, data
from dashboard_bench import arm_pages
app.serve_settings()
store = data.store_path(sys.argv[1:])
pages = arm_pages(sys.argv[sys.argv.index("--arm") + 1])
app.serve(store, pages)
app.warm(store, pages)
"""


@functools.cache
def arm_pages(arm: str):
    """The served pages of one arm of ARMS (by its index), one per process (the app script runs per session)."""
    from dashboard import rendered

    return rendered.Pages(**list(ARMS.values())[int(arm)])


def compare_pieces(browser, store: Path, tmp: Path, rounds: int, many_rounds: int, n_at_once: int = 20) -> dict:
    """The served profiles page with each piece of ARMS switched off in turn, each arm its own server, interleaved:
    per round one warm load of each (a new browser context), then ``n_at_once`` loads at once of each
    (``many_rounds``); also each server's session build (``bokeh_session``, median of 7, and 20 at once)."""
    import psutil
    from bokeh_session import sessions as open_sessions
    from bokeh_session import sessions_at_once

    from tests.browser.conftest import free_port, stop

    script = tmp / "arm.py"
    script.write_text(ARM_APP)
    procs, urls = [], {}
    for i, arm in enumerate(ARMS):
        proc, url = serve(REPO, store, free_port(), script, ("--arm", str(i)))
        procs.append(proc)
        urls[arm] = (url, psutil.Process(proc.pid))
    res = {k: {"one": [], "many": [], "server": [], "server20": []} for k in urls}
    try:
        for u, srv in urls.values():  # the first session pays the imports and the first rendering
            _one_load(browser, u, srv)
        for i in range(rounds):
            for k in (list(urls) if i % 2 == 0 else list(urls)[::-1]):
                res[k]["one"].append(_one_load(browser, *urls[k]))
                res[k]["server"].append(statistics.median(open_sessions(urls[k][0], 3, at_once=False)))
            print(f"  round {i + 1}: " + ", ".join(f"{k} {res[k]['one'][-1]['wall']:.2f} s" for k in urls)
                  + f"; load average {os.getloadavg()[0]:.1f}", flush=True)
        for i in range(many_rounds):
            for k in (list(urls) if i % 2 == 0 else list(urls)[::-1]):
                res[k]["many"].append(_many_loads(browser, *urls[k], n_at_once, timeout_s=1200))
                res[k]["server20"].append(sessions_at_once(urls[k][0], n_at_once))
            print(f"  {n_at_once} at once, round {i + 1}: "
                  + ", ".join(f"{k} {res[k]['many'][-1]['wall']:.1f} s" for k in urls), flush=True)
    finally:
        for proc in procs:
            stop(proc)
    return res


def print_pieces(res: dict, n_at_once: int = 20) -> None:
    """The table of ``compare_pieces``: each arm against all pieces on (ratios: medians of per-round ratios; above
    1, the piece switched off in that arm makes the page slower by that factor)."""
    med = statistics.median
    base = next(iter(res))
    rows = [("warm load to a drawn tetrahedron, wall, median (s)", "one", lambda x: x["wall"]),
            ("  server CPU per load, median (s)", "one", lambda x: x["server_cpu"]),
            ("session build, server side (GET and pull), median (s)", "server", lambda x: x),
            (f"{n_at_once} loads at once in chromium, all drawn, wall, median (s)", "many", lambda x: x["wall"]),
            (f"  server CPU for the {n_at_once}, median (s)", "many", lambda x: x["server_cpu"]),
            (f"{n_at_once} sessions at once, server side, all sent, median (s)", "server20", lambda x: x)]
    print()
    print(f"{'the served profiles page, each piece switched off in turn':62s}"
          + "".join(f"{k[:24]:>26s}" for k in res))
    for name, part, get in rows:
        cells = []
        for k in res:
            value = med(get(x) for x in res[k][part])
            ratio = med(get(a) / get(b) for a, b in zip(res[k][part], res[base][part], strict=True))
            cells.append(f"{value:.3f}" + ("" if k == base else f" (x{ratio:.2f})"))
        print(f"{name:62s}" + "".join(f"{c:>26s}" for c in cells))
    print("  (x: the arm's time over all pieces', median of the per-round ratios; a piece earns its place where "
          "switching it off costs at least x1.10)")


# ---------------------------------------------------------------------------------------- each tab's first load

# The model each tab's page is drawn with, by the tab's name in a deep link.
TAB_DRAWN = {"profiles": "tetrahedron", "compare": "compare_depth", "orbits": "orbits_frame"}

# Installed before any page script: whether the page's loading line was there when its HTML was parsed.
LOADING_INIT = ("document.addEventListener('DOMContentLoaded', () => {"
                " window.__loadingLine = document.getElementById('loading') !== null; });")


def _tab_load(browser, url: str, tab: str) -> tuple[float, bool]:
    """Seconds from navigating to ``url`` until the model TAB_DRAWN[tab] is drawn with every view of the page, and
    whether the loading line showed meanwhile."""
    from tests.browser.conftest import DRAWN_JS, FIND_JS

    page = _new_page(browser, timeline=False)
    page.add_init_script(LOADING_INIT)
    t0 = time.perf_counter()
    page.goto(url)
    page.wait_for_function("(n) => {" + FIND_JS + "return find(n) != null && (" + DRAWN_JS + ")(); }",
                           arg=TAB_DRAWN[tab], timeout=600_000, polling=100)
    wall = time.perf_counter() - t0
    seen = page.evaluate("() => window.__loadingLine === true")
    page.close()
    return wall, seen


def compare_tabs(browser, store: Path, command: str) -> dict:
    """Each tab's first and warm served load, as a first visitor meets it: per tab a fresh server (``command``:
    ``panel serve dashboard/app.py``, or with ``--warm`` as ``python -m dashboard`` starts it), the profiles page
    loaded once, then the tab's deep link twice (``?tab=...``)."""
    from tests.browser.conftest import free_port, stop

    out = {}
    for tab in TAB_DRAWN:
        proc, url = serve(REPO, store, free_port(), args=()) if command == "panel serve" else _serve_warm(store)
        try:
            profiles, seen = _tab_load(browser, url, "profiles")
            first, seen_first = _tab_load(browser, f"{url}?tab={tab}", tab)
            warm, _ = _tab_load(browser, f"{url}?tab={tab}", tab)
        finally:
            stop(proc)
        out[tab] = {"profiles": profiles, "first": first, "warm": warm, "loading": seen and seen_first}
        print(f"  {tab}: the profiles page {profiles:.2f} s, then ?tab={tab} first {first:.2f} s, warm {warm:.2f} s"
              f"; load average {os.getloadavg()[0]:.1f}", flush=True)
    return out


def _serve_warm(store: Path):
    """The app served as ``python -m dashboard`` serves it (``dashboard.__main__.serve_command``), on a free port of
    127.0.0.1 with --liveness; (process, url)."""
    from dashboard.__main__ import serve_command
    from tests.browser.conftest import free_port

    port = free_port()
    cmd = serve_command(store, port, "127.0.0.1", show=False)
    cmd[cmd.index("--args"):cmd.index("--args")] = ["--liveness", "--log-level", "warning"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    return proc, when_live(proc, port, f"http://127.0.0.1:{port}/app", 300, "python -m dashboard")


def print_tabs(results: dict[str, dict]) -> None:
    """The table of ``compare_tabs`` for each way of starting the server."""
    print()
    for command, res in results.items():
        print(f"{'each tab served fresh (' + command + '), the profiles page loaded once':70s}"
              f"{'first (s)':>12s}{'warm (s)':>12s}{'first / profiles first':>26s}{'loading line':>15s}")
        base = res["profiles"]["profiles"]
        for tab, r in res.items():
            print(f"{'  ?tab=' + tab:70s}{r['first']:12.2f}{r['warm']:12.2f}{r['first'] / base:26.2f}"
                  f"{'yes' if r['loading'] else 'no':>15s}")
        print(f"{'  the profiles page, first load of a fresh server':70s}{base:12.2f}")
    print("  (target: every tab's first load within 1.5 x the profiles page's first load)")


def screenshots(out: Path) -> int:
    """docs/profiles_page.png and docs/orbits_page.png from the app served over the committed store."""
    from playwright.sync_api import sync_playwright

    from pipeline.store import default_store_path
    from tests.browser.conftest import (
        CHROMIUM,
        CHROMIUM_ARGS,
        FIND_JS,
        console_errors,
        route_offline,
        serve_app,
        stop,
        wait_for_bokeh,
    )

    out.mkdir(parents=True, exist_ok=True)
    store = Path(default_store_path())
    errors = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        proc, url = serve_app(store)
        try:
            for shot in ("profiles_page.png", "orbits_page.png"):
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                errors += console_errors(page)
                route_offline(page)
                page.goto(url)
                wait_for_bokeh(page, "heads")
                if shot == "profiles_page.png":
                    page.evaluate("() => {" + FIND_JS + "const h = find('heads'); const n = h.data.layer.length;"
                                  " h.selected.indices = [...Array(n).keys()].filter(i => h.data.layer[i] >= "
                                  "Math.max(...h.data.layer) - 1); }")
                else:
                    page.get_by_text("Orbits", exact=True).first.click()
                    wait_for_bokeh(page, "orbits_frame")
                page.wait_for_timeout(1500)
                page.screenshot(path=str(out / shot), full_page=True)
                print(f"wrote {out / shot} ({store.name})")
                page.close()
        finally:
            stop(proc)
        browser.close()
    if errors:
        print("console errors:", errors)
    return 1 if errors else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=40)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--frames", type=int, default=167, help="orbit movie frames")
    ap.add_argument("--steps", type=int, default=40, help="d-slider steps to time")
    ap.add_argument("--sessions", type=int, default=100, help="sequential sessions for the memory figure")
    ap.add_argument("--before-sessions", type=int, default=20, help="the same for the dashboard before (slower)")
    ap.add_argument("--no-before", action="store_true", help="time only this tree's dashboard and the floor")
    ap.add_argument("--screenshots", type=Path, default=None, help="write the docs screenshots here and stop")
    ap.add_argument("--store", type=Path, default=None,
                    help="--only tabs: the store to serve (default: the committed store)")
    ap.add_argument("--only", choices=["pages", "pieces", "tabs"], default=None,
                    help="pieces: the served profiles page with each piece of the serve layer (copies, "
                         "pre-serialisation) switched off in turn (warm loads and 20 at once, interleaved); tabs: "
                         "each tab's first and warm load on a fresh server, served as `panel serve "
                         "dashboard/app.py` and as `python -m dashboard`; "
                         "pages: only the served profiles page against the same page from disk (warm loads and "
                         "20 at once, interleaved, with CPU and each load's timeline)")
    ap.add_argument("--rounds", type=int, default=9, help="--only pages: warm loads of each page")
    ap.add_argument("--many-rounds", type=int, default=3, help="--only pages: rounds of 20 loads at once")
    ap.add_argument("--before", metavar="REV", default=None,
                    help="--only pages: also serve the dashboard package of git revision REV in the same rounds")
    args = ap.parse_args(argv)
    if args.screenshots:
        return screenshots(args.screenshots)

    from playwright.sync_api import sync_playwright

    if args.only == "tabs":
        from pipeline.store import default_store_path
        from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS

        store = args.store or Path(default_store_path())
        print(f"{store}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            results = {command: compare_tabs(browser, store, command)
                       for command in ("panel serve", "python -m dashboard")}
            browser.close()
        print_tabs(results)
        return 0

    from pipeline import store as st
    from tests.browser.conftest import (
        ABSOLUTE_MODEL,
        CHROMIUM,
        CHROMIUM_ARGS,
        ROPE_MODEL,
        free_port,
        synthetic_orbits_dataset,
        write_synthetic_store,
    )

    tmp = Path(tempfile.mkdtemp(prefix="dashboard-bench-"))
    path = write_synthetic_store(tmp / "store.zarr", rope_shape=(args.layers, args.heads), absolute_shape=(6, 12),
                                 empty_shape=(1, 2), with_orbits=False)
    st.Store.open(path).replace_group(st.ORBITS, synthetic_orbits_dataset(n_frames=args.frames))
    n = args.layers * args.heads
    print(f"synthetic store: a rotary model of {args.layers} x {args.heads} = {n} heads x 129 offsets, a 6 x 12 "
          f"model, orbits of {args.frames} frames; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    if args.only == "pages":
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            res = compare_pages(browser, REPO, path, tmp, args.rounds, args.many_rounds,
                                before=rev_tree(tmp, args.before) if args.before else None)
            browser.close()
        print_compare(res)
        return 0
    if args.only == "pieces":
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            res = compare_pieces(browser, path, tmp, args.rounds, args.many_rounds)
            browser.close()
        print_pieces(res)
        return 0
    trees = {"now": REPO}
    before = None if args.no_before else old_tree(tmp)
    if before is not None:
        trees["before"] = before
    trees["floor"] = floor_tree(tmp)
    results = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        for label, root in trees.items():
            sessions = args.sessions if label == "now" else args.before_sessions
            print(f"[{label}] serving{' and exporting' if label != 'floor' else ''} ...", flush=True)
            models = None if label == "floor" else (ROPE_MODEL, ABSOLUTE_MODEL)
            results[label] = measure_server(browser, root, path, free_port(), sessions, models)
            if label != "floor":
                results[label] |= measure_pages(browser, root, path, tmp / f"pages-{label}", args.steps)
        browser.close()

    cols = list(results)
    print()
    print(f"{'measure':58s}" + "".join(f"{c:>18s}" for c in cols) + "   target")

    def line(name, key, fmt, target=""):
        cells = "".join(f"{(fmt(results[c][key]) if key in results[c] else '-'):>18s}" for c in cols)
        print(f"{name:58s}{cells}   {target}")

    line("session build, server side, median of 7 (s)", "server", lambda v: f"{v:.3f}", "<= 0.3")
    line("20 sessions at once, server side, all sent (s)", "server20", lambda v: f"{v:.2f}", "<= 5")
    line("page load to a drawn tetrahedron, median of 7 (s)", "warm", lambda v: f"{v:.2f}")
    line("20 pages at once in chromium, all drawn (s)", "twenty", lambda v: f"{v:.1f}")
    line("server RSS growth over N sequential sessions (MB)", "rss", lambda v: f"{v[1] - v[0]:+.0f} (N={v[2]})",
         "<= 50 for N=100")
    line("document models: first -> after 10 switches", "models", lambda v: f"{v[0]} -> {v[1]}", "within 10%")
    line(f"exported rotary page, CDN resources ({n} heads) (MB)", "size", lambda v: f"{v:.2f}", "<= 2")
    line("d-slider step: its JavaScript, median / p90 (ms)", "step_js", lambda v: f"{v[0]:.1f} / {v[1]:.1f}", "< 50")
    line("movie frame: its JavaScript, median / p90 (ms)", "frame_js", lambda v: f"{v[0]:.1f} / {v[1]:.1f}", "< 50")
    line("d-slider step to painted, median / p90 (ms)", "step", lambda v: f"{v[0]:.1f} / {v[1]:.1f}")
    line("movie frame to painted, median / p90 (ms)", "frame", lambda v: f"{v[0]:.1f} / {v[1]:.1f}")
    line("movie playing: frame interval, median (ms; the page asks for)", "movie", lambda v: f"{v[0]:.1f} ({v[1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
