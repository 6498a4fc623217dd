"""Fixtures for the browser tests: small synthetic stores, a served app, headless chromium.

The synthetic data are built with the public store API (``pipeline.store``), never copied from the
committed store, so the tests do not depend on which models happen to be computed.

``synthetic_orbits_dataset`` and ``write_synthetic_store`` are plain functions so other tests can
import them: ``from tests.browser.conftest import synthetic_orbits_dataset``.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from pipeline import store
from pipeline.schema import STATISTICS

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-gpu",
]

# How often a wait_for_function condition is evaluated, in ms. Playwright's default, every animation frame, keeps
# chromium drawing frames and walking the page's models (``find``) 60 times a second: 0.37-0.40 of a core for as
# long as a test waits on the served synthetic page, against 0.05 when polled every 100 ms. 50 ms costs about twice
# that and delays each wait by 25 ms on average; every condition waited for is a lasting state or a recorded history.
POLL_MS = 50

ROPE_MODEL = "synthetic-rope"
ABSOLUTE_MODEL = "synthetic-absolute"
EMPTY_MODEL = "synthetic-empty"


# ------------------------------------------------------------------------------------ synthetic data


def synthetic_orbits_dataset(n_frames: int = 12, n_heads: int = 32, n_tokens: int = 24, seed: int = 0) -> xr.Dataset:
    """An ``orbits`` group following the store contract, with heads moving on circles over the frames.

    Returns a Dataset with ``position`` (frame, head, panel, xy), coords ``epoch`` (frame) and
    ``panel`` (str), per-panel ``panel_kind`` ("QK"/"OV"), ``freq_a``, ``freq_b``, ``eps``,
    ``rotation``; per-frame metrics; ``M``, ``R`` (head, row, col) of size n_tokens; ``orbit`` (head);
    ``shift_image``, ``shift_error`` (shift, head). Frame f places head h at radius (f + 1) / n_frames
    and angle 2 pi (h + f) / n_heads in panel p (rotated by p), so every frame differs from the last.
    """
    rng = np.random.default_rng(seed)
    panels = ["QK k=1", "QK k=5", "OV k=1", "OV k=5"]
    kinds = ["QK", "QK", "OV", "OV"]
    f = np.arange(n_frames)[:, None, None]
    h = np.arange(n_heads)[None, :, None]
    p = np.arange(len(panels))[None, None, :]
    radius = (f + 1) / n_frames
    angle = 2 * np.pi * (h + f) / n_heads + p * np.pi / 7
    position = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=-1)  # (frame, head, panel, 2)
    epochs = np.arange(n_frames) * 10
    t = np.linspace(0, 1, n_frames)
    orbit = np.where(np.arange(n_heads) < 24, np.arange(n_heads) // 8, -1)
    shifts = np.arange(n_tokens)
    shift_image = (np.arange(n_heads)[None, :] + shifts[:, None]) % n_heads
    ds = xr.Dataset(
        {
            "position": (("frame", "head", "panel", "xy"), position),
            "panel_kind": (("panel",), np.array(kinds, dtype=object)),
            "freq_a": (("panel",), np.array([1, 5, 1, 5], dtype=np.int64)),
            "freq_b": (("panel",), np.array([1, 5, 2, 10], dtype=np.int64)),
            "eps": (("panel",), np.array([1, 1, -1, 1], dtype=np.int64)),
            "rotation": (("panel",), np.array([0, 1, 2, 3], dtype=np.int64)),
            "train_accuracy": (("frame",), 0.1 + 0.9 * t),
            "heldout_accuracy": (("frame",), 0.05 + 0.85 * t**2),
            "loss": (("frame",), 3.2 * np.exp(-3 * t)),
            "equivariance_error": (("frame",), np.exp(-2 * t)),
            "sharpened_error": (("frame",), 3e-4 + np.exp(-t)),
            "M": (("head", "row", "col"), rng.standard_normal((n_heads, n_tokens, n_tokens))),
            "R": (("head", "row", "col"), rng.standard_normal((n_heads, n_tokens, n_tokens))),
            "orbit": (("head",), orbit.astype(np.int64)),
            "shift_image": (("shift", "head"), shift_image.astype(np.int64)),
            "shift_error": (("shift", "head"), rng.uniform(0, 0.05, (n_tokens, n_heads))),
        },
        coords={
            "epoch": (("frame",), epochs),
            "panel": (("panel",), np.array(panels, dtype=object)),
            "head": np.arange(n_heads),
            "shift": shifts,
            "xy": np.array(["x", "y"], dtype=object),
        },
        attrs={"seed": seed, "n_tokens": n_tokens, "note": "synthetic orbits for tests"},
    )
    return ds


def _simplex_points(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, 4) points on the 3-simplex (Dirichlet(1,1,1,1))."""
    return rng.dirichlet(np.ones(4), size=n)


def rope_profiles(n_layers: int, n_heads: int, seed: int = 1) -> np.ndarray:
    """(n_layers, n_heads, 129, 4) simplex points that move with d: a mixture of two fixed points."""
    rng = np.random.default_rng(seed)
    p0 = _simplex_points(rng, n_layers * n_heads).reshape(n_layers, n_heads, 1, 4)
    p1 = _simplex_points(rng, n_layers * n_heads).reshape(n_layers, n_heads, 1, 4)
    w = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(store.N_OFFSETS) / 64.0)  # 0 at d = 0, 1 at d = 32
    w = w[None, None, :, None]
    return (1 - w) * p0 + w * p1


def rope_statistics(n_layers: int, n_heads: int, d_head: int = 16, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Stand-ins for the rope model's head statistics (n_layers, n_heads, 17) and S spectra (n_layers, n_heads,
    2 d_head; unit norm, decreasing): values to find on the page, not the statistics of any form."""
    rng = np.random.default_rng(seed)
    stats = rng.uniform(0.05, 0.95, (n_layers, n_heads, len(STATISTICS)))
    spectra = -np.sort(-rng.standard_normal((n_layers, n_heads, 2 * d_head)), axis=-1)
    return stats, spectra / np.linalg.norm(spectra, axis=-1, keepdims=True)


def write_synthetic_store(path, rope_shape=(4, 8), absolute_shape=(3, 6), empty_shape=(2, 4),
                          with_orbits: bool = True) -> Path:
    """A store with one rope model (varies with d; with head statistics and spectra), one learned-absolute
    model (without them, as in a store written before them), one all-NaN model.

    The empty model is registered but never written (not complete), as the pipeline leaves a model
    whose run has not started. Returns the path.
    """
    path = Path(path)
    L, H = rope_shape
    store.Store.open(path).register(store.ModelRow(ROPE_MODEL, L, H, 64, 16, "rope", source="synthetic",
                                               family="gpt-neox", command=f"python -m pipeline profiles {ROPE_MODEL}"))
    prof = rope_profiles(L, H)
    stats, spectra = rope_statistics(L, H)
    for layer in range(L):
        store.Store.open(path).write_layer(ROPE_MODEL, layer, prof[layer], np.ones((H, store.N_OFFSETS)), stats[layer],
                          spectra[layer])
    store.Store.open(path).mark_complete(ROPE_MODEL, revision="synthetic")

    L, H = absolute_shape
    store.Store.open(path).register(store.ModelRow(ABSOLUTE_MODEL, L, H, 48, 8, "learned absolute", source="synthetic",
                                               family="gpt2", command=f"python -m pipeline profiles {ABSOLUTE_MODEL}"))
    rng = np.random.default_rng(2)
    for layer in range(L):
        store.Store.open(path).write_layer(ABSOLUTE_MODEL, layer, _simplex_points(rng, H), np.ones(H))
    store.Store.open(path).mark_complete(ABSOLUTE_MODEL, revision="synthetic")

    L, H = empty_shape
    store.Store.open(path).register(store.ModelRow(EMPTY_MODEL, L, H, 32, 8, "learned absolute", source="synthetic",
                                               family="gpt2", command=f"python -m pipeline profiles {EMPTY_MODEL}"))
    if with_orbits:
        store.Store.open(path).replace_group(store.ORBITS, synthetic_orbits_dataset())
    return path


# ---------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session", autouse=True)
def bokeh_backend():
    """Bokeh as HoloViews' backend for the pages built here, as the entry points make it."""
    from dashboard.common.render import use_bokeh

    use_bokeh()


ORBIT_FRAMES = 8  # frames of the session store's orbit run (``orbits_with_profiles``)
TRAIL_EPOCHS = 25  # its trails: up to 3 frames (epochs 0, 10, ..., 70)


def orbits_with_profiles() -> xr.Dataset:
    """An ``orbits`` group of ORBIT_FRAMES frames with every head's W_K^T W_Q profile at each frame
    (``with_profiles``: head 31 dead) and trails of TRAIL_EPOCHS epochs."""
    from tests.dashboard.test_dashboard_orbits import with_profiles  # that module imports this one

    ds = with_profiles(synthetic_orbits_dataset(n_frames=ORBIT_FRAMES))
    ds.attrs["trail_epochs"] = TRAIL_EPOCHS
    return ds


@pytest.fixture(scope="session")
def synthetic_store(tmp_path_factory) -> Path:
    """The synthetic store with ``orbits_with_profiles`` as its orbits group, shared by the whole session
    (read-only for the tests)."""
    path = write_synthetic_store(tmp_path_factory.mktemp("store") / "store.zarr", with_orbits=False)
    store.Store.open(path).replace_group(store.ORBITS, orbits_with_profiles())
    return path


def _exported(synthetic_store, tmp_path_factory, self_contained: bool) -> Path:
    from dashboard.export import export

    out = tmp_path_factory.mktemp("export_inline" if self_contained else "export_cdn")
    export(out, synthetic_store, self_contained=self_contained)
    return out


@pytest.fixture(scope="session")
def exported_site(synthetic_store, tmp_path_factory) -> Path:
    """The synthetic store exported as static pages that load BokehJS from its CDN (``dashboard.export``), shared
    by the whole session (read-only for the tests)."""
    return _exported(synthetic_store, tmp_path_factory, self_contained=False)


@pytest.fixture(scope="session")
def exported_inline(synthetic_store, tmp_path_factory) -> Path:
    """The synthetic store exported as self-contained static pages (``--self-contained``), shared by the whole
    session (read-only for the tests)."""
    return _exported(synthetic_store, tmp_path_factory, self_contained=True)


@pytest.fixture(scope="session")
def browser():
    """Debian's chromium, headless, driven by playwright (sync API)."""
    if not os.path.exists(CHROMIUM):
        reason = f"browser tests need Debian's chromium at {CHROMIUM} (apt-get install chromium)"
        if os.environ.get("HEADGEOMETRY_REQUIRE_BROWSER"):
            pytest.fail(reason + "; HEADGEOMETRY_REQUIRE_BROWSER is set, so they may not be skipped")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(autouse=True)
def closes_the_pages_it_opened(request):
    """Close every page (browser context) a test opened and left open. An open page keeps running, its
    timers, websocket and redraws taking CPU from every later test of the session; the pages of a module's
    fixture, opened before the test, stay open for the module's other tests."""
    if "browser" not in request.fixturenames:
        yield
        return
    browser = request.getfixturevalue("browser")
    before = set(browser.contexts)
    yield
    for context in browser.contexts:
        if context not in before:
            context.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_app(store_path, port: int | None = None, timeout: float = 90.0, script: Path | None = None,
              args: tuple[str, ...] = (), server_args: tuple[str, ...] = ()):
    """Start ``panel serve dashboard/app.py`` (or another app ``script``) on 127.0.0.1 in a subprocess, ``args``
    after the store's, ``server_args`` as ``panel serve``'s own options (after its defaults here, so they win);
    returns (process, url) once the server says it is running. Its output goes to the file ``process.log_path``."""
    port = port or free_port()
    script = Path(script or REPO / "dashboard" / "app.py")
    cmd = [sys.executable, "-m", "panel", "serve", str(script), "--port", str(port),
           "--address", "127.0.0.1", "--allow-websocket-origin", f"127.0.0.1:{port}", "--log-level", "info",
           *server_args, "--args", "--store", str(store_path), *args]
    log = tempfile.NamedTemporaryFile(prefix="panel-serve-", suffix=".log", delete=False)
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    proc.log_path = log.name
    url = f"http://127.0.0.1:{port}/{script.stem}"
    # the server's output, copied to the log; the line that says the app is running is awaited (its socket is
    # bound by then), or the end of the output (the server failed)
    answered, running = threading.Event(), []

    def copy() -> None:
        with open(log.name, "w", encoding="utf-8") as out:
            for line in proc.stdout:
                out.write(line)
                out.flush()
                if f"Bokeh app running at: {url}" in line:
                    running.append(True)
                    answered.set()
        answered.set()

    threading.Thread(target=copy, daemon=True).start()
    if not answered.wait(timeout) or not running:
        stop(proc)
        out = Path(proc.log_path).read_text(errors="replace")
        raise RuntimeError(f"panel serve did not start on port {port} within {timeout} s "
                           f"(exit status {proc.returncode}):\n{out}")
    return proc, url


def stop(proc: subprocess.Popen) -> None:
    """End a server started by ``serve_app`` at once: it keeps nothing a graceful shutdown would save, and Bokeh's
    takes seconds."""
    proc.kill()
    proc.wait()


@pytest.fixture(scope="session")
def served_app(synthetic_store):
    """The app served over the synthetic store; yields its URL."""
    proc, url = serve_app(synthetic_store)
    try:
        yield url
    finally:
        stop(proc)


def console_errors(page) -> list[str]:
    """Attach a collector of console errors and page errors to ``page``; returns the (live) list."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


def _local_resource(url: str) -> Path | None:
    """The installed file behind a BokehJS / Panel CDN url, or None."""
    import bokeh
    import panel

    name = url.split("?")[0].rsplit("/", 1)[-1]
    if "cdn.bokeh.org" in url:
        base = re.sub(r"-\d+\.\d+\.\d+(\.\w+)?(?=(\.min)?\.(js|css)$)", "", name)
        path = Path(bokeh.__file__).parent / "server" / "static" / "js" / base
        return path if path.exists() else None
    if "cdn.holoviz.org" in url or "cdn.jsdelivr.net" in url or "unpkg.com" in url:
        rel = re.sub(r"^https?://[^/]+/panel/[^/]+/dist/", "", url.split("?")[0])
        path = Path(panel.__file__).parent / "dist" / rel
        return path if path.exists() else None
    return None


def route_offline(page, requested: list[str] | None = None) -> None:
    """Serve CDN requests from the installed bokeh/panel files and refuse every other remote request.

    Every remote url asked for is appended to ``requested`` (when given), so a test can check that a
    page asks for nothing it cannot get.
    """

    def handle(route):
        url = route.request.url
        if url.startswith(("file://", "data:", "http://127.0.0.1", "http://localhost", "ws://127.0.0.1")):
            return route.continue_()
        if requested is not None:
            requested.append(url)
        path = _local_resource(url)
        if path is None:
            return route.abort()
        ctype = "text/css" if path.suffix == ".css" else "application/javascript"
        return route.fulfill(status=200, body=path.read_bytes(), headers={"content-type": ctype,
                                                                           "access-control-allow-origin": "*"})

    page.route("**/*", handle)


# JS: the model named n among those reachable from the documents' roots (BokehJS keeps replaced models in
# its index for a while, so get_model_by_name can see a view the served app has already swapped out).
FIND_JS = """
const find = (n) => {
  if (!window.Bokeh) { return null; }
  for (const d of Bokeh.documents) {
    const hits = new Set();
    for (const r of d.roots()) { for (const m of r.references()) { if (m.name === n) { hits.add(m); } } }
    if (hits.size > 1) { throw new Error(`${hits.size} models named ${n} in the document`); }
    if (hits.size === 1) { return [...hits][0]; }
  }
  return null;
};
"""


def js(page, body: str, arg=None):
    """Evaluate ``body`` (a function body that may use ``find(name)`` and ``arg``) in the page."""
    return page.evaluate("(arg) => {" + FIND_JS + body + "}", arg)


def wait_for_bokeh(page, name: str, timeout: float = 60_000) -> None:
    """Wait until the page's Bokeh documents hold a model named ``name`` (the page has rendered)."""
    page.wait_for_function("(arg) => {" + FIND_JS + "return find(arg) != null; }", arg=name, timeout=timeout,
                           polling=POLL_MS)


def wait_for_link(page, part: str, timeout: float = 10_000) -> None:
    """Wait until the page's link (its query string) holds ``part``, e.g. ``tab=analyses``."""
    page.wait_for_function("(part) => window.location.search.includes(part)", arg=part, timeout=timeout,
                           polling=POLL_MS)


def wait_js(page, body: str, arg=None, timeout: float = 10_000) -> None:
    """Wait until ``body`` (a function body that may use ``find(name)`` and ``arg``) returns a true value."""
    page.wait_for_function("(arg) => {" + FIND_JS + body + "}", arg=arg, timeout=timeout, polling=POLL_MS)


# JS: whether the values ``got`` (nested arrays and typed arrays, flattened) are ``want`` (a flat list: numbers,
# null for NaN or null, or other values compared with ===) within atol + rtol * |want|.
CLOSE_JS = """
const flat = (v) => (v != null && typeof v !== 'string' && v.length !== undefined)
  ? Array.from(v).flatMap(flat) : [v];
const close = (got, want, atol, rtol) => {
  if (got == null) { return false; }
  const g = flat(got);
  if (g.length !== want.length) { return false; }
  return want.every((w, i) => {
    const x = g[i];
    if (w === null) { return x === null || Number.isNaN(x); }
    if (typeof w !== 'number') { return x === w; }
    return typeof x === 'number' && Math.abs(x - w) <= atol + rtol * Math.abs(w);
  });
};
"""


def _flat(values) -> list:
    """``values`` (nested lists or an array) as a flat list, NaN as None."""
    out = np.asarray(values, dtype=object).ravel().tolist()
    return [None if isinstance(v, float) and np.isnan(v) else (v.item() if hasattr(v, "item") else v) for v in out]


def wait_for_column(page, name: str, column: str, expected, atol: float = 0.0, rtol: float = 0.0,
                    timeout: float = 10_000) -> None:
    """Wait until ``data[column]`` of the ColumnDataSource named ``name`` holds ``expected`` (flattened; NaN as
    null) within ``atol + rtol * |expected|``: the page's callbacks have run."""
    wait_js(page, CLOSE_JS + "const m = find(arg[0]);"
            " return m != null && close(m.data[arg[1]], arg[2], arg[3], arg[4]);",
            [name, column, _flat(expected), atol, rtol], timeout)


def wait_for_prop(page, name: str, prop: str, value, timeout: float = 10_000) -> None:
    """Wait until property ``prop`` of the model named ``name`` equals ``value`` (JSON-able; arrays compared by
    their items)."""
    wait_js(page, CLOSE_JS + "const m = find(arg[0]); return m != null && close([m[arg[1]]], arg[2], 0, 0);",
            [name, prop, _flat([value])], timeout)


# JS: whether every root of every Bokeh document on the page has a view that has finished drawing.
DRAWN_JS = ("() => { if (!window.Bokeh || !Bokeh.documents.length) { return false; }"
            " for (const d of Bokeh.documents) { if (!d.roots().length) { return false; }"
            " for (const r of d.roots()) { const v = Bokeh.index.find_one(r);"
            " if (v == null || !v.has_finished()) { return false; } } } return true; }")


def next_paint(page) -> None:
    """Return once the page has painted a frame after everything it has been asked so far (an animation frame,
    then a task queued from it: Bokeh paints its canvases in animation-frame callbacks)."""
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)))")


def wait_for_drawn(page, timeout: float = 60_000) -> None:
    """Wait until every view of the page has finished drawing, and for the paint after that."""
    page.wait_for_function(DRAWN_JS, timeout=timeout, polling=POLL_MS)
    next_paint(page)


def model_data(page, name: str, column: str) -> list:
    """``data[column]`` of the ColumnDataSource named ``name``, as a list (NaN -> None)."""
    return js(page, "const m = find(arg[0]); if (m == null) { return null; }"
              " return Array.from(m.data[arg[1]], v => ArrayBuffer.isView(v) ? Array.from(v)"
              " : ((v === null || Number.isNaN(v)) ? null : v));", [name, column])


def histogram(page, coordinate: str, selected: bool = False, bins: int = 40) -> list:
    """The bars of one coordinate ("a".."d") in the profiles page's histogram of all heads, or of the
    selected heads: its sources hold the four coordinates' bars, coordinate-major."""
    k = "abcd".index(coordinate)
    return model_data(page, "hist_selected" if selected else "hist_all", "top")[k * bins:(k + 1) * bins]


def model_prop(page, name: str, prop: str):
    """A property of the Bokeh model named ``name`` (JSON-able), or None where there is no such model."""
    return js(page, "const m = find(arg[0]); if (m == null) { return null; } const v = m[arg[1]];"
              " return (v != null && typeof v !== 'string' && v.length !== undefined) ? Array.from(v) : v;",
              [name, prop])


def set_prop(page, name: str, prop: str, value) -> None:
    """Set a property of the Bokeh model named ``name`` as a script (or a widget) would."""
    js(page, "find(arg[0])[arg[1]] = arg[2];", [name, prop, value])


def selected(page, source: str) -> list[int]:
    return js(page, "return Array.from(find(arg).selected.indices);", source)


def set_selected(page, source: str, indices: list[int]) -> None:
    js(page, "find(arg[0]).selected.indices = arg[1];", [source, list(indices)])


def frame_box(page, name: str) -> tuple[float, float, float, float]:
    """(left, top, width, height) in page pixels of the plotting frame of the figure named ``name``."""
    return tuple(js(page, "const v = Bokeh.index.find_one(find(arg)); const r = v.el.getBoundingClientRect();"
                    " const f = v.frame.bbox; return [r.left + f.left, r.top + f.top, f.width, f.height];", name))


def screen_positions(page, figure: str, source: str):
    """Page-pixel positions (sx, sy arrays) of the (x, y) points of ``source`` as drawn in ``figure``."""
    sx, sy = js(page, "const v = Bokeh.index.find_one(find(arg[0])); const src = find(arg[1]).data;"
                " const r = v.el.getBoundingClientRect();"
                " return [Array.from(src.x, x => r.left + v.frame.x_scale.compute(x)),"
                " Array.from(src.y, y => r.top + v.frame.y_scale.compute(y))];", [figure, source])
    return np.array(sx, dtype=float), np.array(sy, dtype=float)


def drag(page, x0: float, y0: float, x1: float, y1: float, steps: int = 12) -> None:
    """Press at (x0, y0), move to (x1, y1) in ``steps``, release."""
    page.mouse.move(x0, y0)
    page.mouse.down()
    for i in range(1, steps + 1):
        page.mouse.move(x0 + (x1 - x0) * i / steps, y0 + (y1 - y0) * i / steps)
    page.mouse.up()


def assert_movie_plays_and_loops(page, play_button) -> None:
    """Press play on the orbits movie: the dots move, the frame reaches the last one, then loops back."""
    last = model_prop(page, "orbits_frame", "end")
    x0 = model_data(page, "orbits_dots_0", "x")
    play_button.click()
    wait_js(page, "return find('orbits_frame').value > 0;")
    wait_js(page, CLOSE_JS + "return !close(find('orbits_dots_0').data.x, arg, 0, 0);", _flat(x0))  # the dots moved
    assert model_data(page, "orbits_dots_0", "x") != x0
    wait_js(page, f"return find('orbits_frame').value === {last};", timeout=20_000)
    wait_js(page, f"return find('orbits_frame').value < {last};", timeout=20_000)
