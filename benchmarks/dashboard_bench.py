"""The dashboard on a synthetic 40-layer x 32-head rotary model: page size, d-slider step, first render, movie.

    python benchmarks/dashboard_bench.py [--steps 40] [--layers 40] [--heads 32] [--frames 167]
    python benchmarks/dashboard_bench.py --screenshots docs/   # only the two screenshots of the docs

Builds a synthetic store in a temporary folder (a 40 x 32 rope model with all 129 offsets and an orbits
group of ``--frames`` frames), then reports, all in one run on this machine:

- export: size of the model's page (CDN and self-contained) and of the orbits page;
- d-slider step in headless chromium on the exported page: the time from setting the slider's value
  to the end of the animation frame in which Bokeh paints it (the callback's decode + projection +
  histograms, then the repaint; median and 90th percentile over ``--steps`` steps). It includes the
  wait for the next frame (up to 16.7 ms at 60 Hz);
- served first render: ``panel serve`` already running, time from navigation to the tetrahedron's
  dots being drawn;
- movie frame interval: the orbits movie playing on the exported page, the median time between frame
  changes against the interval the page asks for.

With ``--screenshots DIR`` it only writes DIR/profiles_page.png (the served app over the committed
store, a few heads selected) and DIR/orbits_page.png (the committed store's orbits if it has them,
else the synthetic orbits group).

Needs Debian's chromium at /usr/bin/chromium and the playwright package.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

STEP_JS = """
async (steps) => {
  const s = find('d_slider');
  const cb = [], frame = [];
  const raf = () => new Promise(r => requestAnimationFrame(() => r()));
  await raf();
  for (let i = 1; i <= steps; i++) {
    const t0 = performance.now();
    s.value = (s.value + 3) % 129;          // queues the CustomJS (decode, project, histograms)
    const t1 = performance.now();
    // Bokeh paints in an animation-frame callback queued after ours; a task queued from ours runs
    // once that frame's callbacks (the paint included) are done
    await raf(); await new Promise(r => setTimeout(r, 0));
    frame.push(performance.now() - t0); cb.push(t1 - t0);
  }
  return [cb, frame];
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


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def screenshots(out: Path) -> int:
    """docs/profiles_page.png and docs/orbits_page.png from the served app."""
    from playwright.sync_api import sync_playwright

    from dashboard import data
    from pipeline import store as st
    from tests.browser.conftest import (
        CHROMIUM,
        CHROMIUM_ARGS,
        FIND_JS,
        console_errors,
        route_offline,
        serve_app,
        stop,
        synthetic_orbits_dataset,
        wait_for_bokeh,
        write_synthetic_store,
    )

    out.mkdir(parents=True, exist_ok=True)
    committed = data.DEFAULT_STORE
    try:
        st.open_orbits(committed)
        orbits_store = committed
    except st.StoreError:
        orbits_store = write_synthetic_store(Path(tempfile.mkdtemp(prefix="shots-")) / "store.zarr",
                                             rope_shape=(1, 2), absolute_shape=(1, 2), empty_shape=(1, 2),
                                             with_orbits=False)
        st.write_group(orbits_store, st.ORBITS, synthetic_orbits_dataset(n_frames=40))
    errors = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        for store, shot in ((committed, "profiles_page.png"), (orbits_store, "orbits_page.png")):
            proc, url = serve_app(store)
            try:
                height = 1240 if shot == "profiles_page.png" else 960
                page = browser.new_page(viewport={"width": 1480, "height": height})
                errors += console_errors(page)
                route_offline(page)
                page.goto(url)
                if shot == "profiles_page.png":
                    wait_for_bokeh(page, "heads")
                    page.evaluate("() => {" + FIND_JS + "const h = find('heads'); const n = h.data.layer.length;"
                                  " h.selected.indices = [...Array(n).keys()].filter(i => h.data.layer[i] >= "
                                  "Math.max(...h.data.layer) - 1); }")
                else:
                    wait_for_bokeh(page, "heads")
                    page.get_by_text("Orbits", exact=True).first.click()
                    wait_for_bokeh(page, "orbits_frame")
                    page.evaluate("() => {" + FIND_JS + "const s = find('orbits_frame'); s.value = s.end; }")
                page.wait_for_timeout(1500)
                page.screenshot(path=str(out / shot), full_page=True)
                print(f"wrote {out / shot} ({store})")
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
    ap.add_argument("--frames", type=int, default=167, help="orbit movie frames (the pipeline stores 167)")
    ap.add_argument("--steps", type=int, default=40, help="d-slider steps to time")
    ap.add_argument("--screenshots", type=Path, default=None, help="write the docs screenshots here and stop")
    args = ap.parse_args(argv)
    if args.screenshots:
        return screenshots(args.screenshots)

    from playwright.sync_api import sync_playwright

    from dashboard.export import export, profile_page_name
    from pipeline import store as st
    from tests.browser.conftest import (
        CHROMIUM,
        CHROMIUM_ARGS,
        FIND_JS,
        ROPE_MODEL,
        console_errors,
        route_offline,
        serve_app,
        stop,
        synthetic_orbits_dataset,
        wait_for_bokeh,
        write_synthetic_store,
    )

    tmp = Path(tempfile.mkdtemp(prefix="dashboard-bench-"))
    path = write_synthetic_store(tmp / "store.zarr", rope_shape=(args.layers, args.heads), absolute_shape=(1, 2),
                                 empty_shape=(1, 2), with_orbits=False)
    st.write_group(path, st.ORBITS, synthetic_orbits_dataset(n_frames=args.frames))
    n = args.layers * args.heads
    print(f"synthetic rope model: {args.layers} layers x {args.heads} heads = {n} heads x 129 offsets; "
          f"orbits: {args.frames} frames x 32 heads")
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.1f} at start (browser timings scale with contention)")

    t0 = time.perf_counter()
    export(tmp / "cdn", path)
    t_export = time.perf_counter() - t0
    export(tmp / "inline", path, self_contained=True)
    page_name = profile_page_name(ROPE_MODEL)
    mb = lambda p: p.stat().st_size / 1e6  # noqa: E731
    print(f"export ({t_export:.1f} s for all pages): model page {mb(tmp / 'cdn' / page_name):.2f} MB with CDN "
          f"resources, {mb(tmp / 'inline' / page_name):.2f} MB self-contained; orbits page "
          f"{mb(tmp / 'cdn' / 'orbits.html'):.2f} MB (CDN)")
    print(f"  raw uint16 profile data: {n * 129 * 4 * 2 / 1e6:.2f} MB (base64 {n * 129 * 4 * 2 * 4 / 3 / 1e6:.2f} MB "
          "before bokeh gzips it)")

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        errors = console_errors(page)
        route_offline(page)
        t0 = time.perf_counter()
        page.goto((tmp / "cdn" / page_name).as_uri())
        wait_for_bokeh(page, "heads")
        t_static = time.perf_counter() - t0
        _, frame = page.evaluate("(steps) => {" + FIND_JS + "return (" + STEP_JS + ")(steps); }", args.steps)
        print(f"exported page first render: {t_static * 1000:.0f} ms (file://, CDN served from disk)")
        print(f"d-slider step (browser, {args.steps} steps): median {statistics.median(frame):.1f} ms from the value "
              f"change to the end of the paint (p90 {pct(frame, 0.9):.1f} ms) [target < 50 ms]")

        page.goto((tmp / "cdn" / "orbits.html").as_uri())
        wait_for_bokeh(page, "orbits_frame")
        asked = page.evaluate("() => {" + FIND_JS + "const s = find('orbits_interval_ms'); return s && s.value; }")
        page.get_by_text("Play").first.click()
        times = page.evaluate("(ms) => {" + FIND_JS + "return (" + MOVIE_JS + ")(ms); }", 6000)
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        if gaps:
            print(f"movie frame interval: median {statistics.median(gaps):.1f} ms (p90 {pct(gaps, 0.9):.1f} ms) over "
                  f"{len(gaps)} frames; the page asks for {asked} ms")
        page.close()

        proc, url = serve_app(path)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            served_errors = console_errors(page)
            route_offline(page)
            page.goto(url)  # a first session warms the server's imports; time the second
            wait_for_bokeh(page, "heads")
            page.close()
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            route_offline(page)
            t0 = time.perf_counter()
            page.goto(url)
            wait_for_bokeh(page, "heads")
            page.wait_for_function("() => {" + FIND_JS + "const v = Bokeh.index.find_one(find('tetrahedron'));"
                                   " return v != null && v.is_idle; }", timeout=60_000)
            t_served = time.perf_counter() - t0
            print(f"served first render (warm server, new session): {t_served * 1000:.0f} ms to the idle "
                  "tetrahedron")
        finally:
            stop(proc)
        browser.close()
    if errors or served_errors:
        print("console errors:", errors + served_errors)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
