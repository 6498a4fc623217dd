"""The training view's step change costs one frame's data, not the run's: runs of growing length, their page served
and exported, a step change timed in Chromium side by side with a d change (which decodes the run's frames at the new
offset) and with the run's packed frames.

    python benchmarks/training_step_bench.py [--frames 30 120 480] [--layers 2] [--heads 4] [--steps 15]

For each run length F (synthetic runs of ``--layers`` x ``--heads`` rotary heads, written through the store's run
writer into a temporary store), the run's page is exported (CDN BokehJS, answered from the installed files) and
served (``panel serve``), and in headless Chromium, ``--steps`` times each:

- a step change: the step slider moved by one frame, timed from the change to the next paint done (its callback, the
  sources' updates and the paint), and its JavaScript alone (the callback run and awaited, no paint);
- on the served page, the bytes the page sends to the server and receives from it over the websocket from the change
  until the paint (the slider's new value goes to the server; the rewritten sources are not synced);
- a d change (the d slider moved by one offset, from offset 100 on), timed the same way: it decodes every frame of
  the run at the new offset, so its cost grows with F, where a step change's stays flat.

Printed: the packed frames' size (the run's data the page holds), then per F the medians, served and exported side
by side. Needs Debian's chromium at /usr/bin/chromium and the playwright package.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipeline.schema import N_OFFSETS, SPECTRA, STATISTICS  # noqa: E402
from pipeline.store import Store  # noqa: E402

RUN = "bench-run"

TIMED_JS = """
async ([name, steps, what]) => {
  // move the slider ``name`` by one ``steps`` times (wrapping at its end): ``what`` = 'paint': the time from the
  // change until the next paint is done; 'callback': its value callbacks alone, run and awaited (no paint)
  const s = find(name), out = [];
  const raf = () => new Promise((r) => requestAnimationFrame(() => r()));
  const cbs = () => {
    const m = s.js_property_callbacks;
    return (m instanceof Map ? m.get('change:value') : m['change:value']) || [];
  };
  await raf();
  for (let i = 0; i < steps; i++) {
    const next = s.start + (s.value - s.start + 1) % (s.end - s.start + 1);
    if (what === 'paint') {
      const t0 = performance.now();
      s.value = next;
      await raf(); await new Promise((r) => setTimeout(r, 0));
      out.push(performance.now() - t0);
    } else {
      s.setv({value: next}, {silent: true});
      const t0 = performance.now();
      for (const cb of cbs()) { await cb.execute(s, {}); }
      out.push(performance.now() - t0);
      await raf();
    }
  }
  return out;
}
"""


def write_run(path: Path, F: int, L: int, H: int, seed: int = 0) -> Path:
    """A store holding run RUN: F frames (steps 0, then log-spaced to 10^4) of L x H heads drifting over the simplex
    and moving with d, with statistics, spectra and two metrics, written through ``Store.add_frames`` and
    ``Store.frame_writer``."""
    rng = np.random.default_rng(seed)
    steps = np.unique(np.concatenate([[0], np.geomspace(1, 1e4, F - 1).astype(int)]))
    while steps.size < F:  # log spacing repeats small steps: fill in with the next integers
        steps = np.unique(np.concatenate([steps, [steps.max() + 1]]))
    start, end, wiggle = (rng.dirichlet(np.ones(4), (L, H)) for _ in range(3))
    t = np.linspace(0, 1, F)[:, None, None, None]
    w = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_OFFSETS) / 37.0))[None, None, None, :, None]
    at0 = ((1 - t) * start + t * end)[:, :, :, None, :]
    profile = (1 - w) * at0 + w * wiggle[None, :, :, None, :]
    n = 8
    store = Store.open(path)
    header = {"attrs": {"family": "llama", "n_layers": L, "n_heads": H, "n_kv_heads": H, "d_model": 4 * n,
                        "d_head": n, "positional": "rope", "rotary_dim": n, "tower": "", "qk_norm": "", "scale": 0.35,
                        "scale_rule": "1/sqrt(head_dim)", "softcap": 0.0, "layernorm_folded": False,
                        "source": "synthetic", "format": "safetensors", "command": "synthetic"},
              "layers": {"layer_positional": ["rope"] * L, "layer_rope_theta": [1e4] * L,
                         "layer_rope_scaling": [""] * L}}
    frames = [{"step": int(s), "revision": f"checkpoint-{s}", "commit": "",
               "metrics": {"scalars": {"loss": float(3 - f / F)}, "heads": {"score": rng.uniform(0, 1, (L, H))
                                                                          .tolist()}}}
              for f, s in enumerate(steps)]
    at = store.add_frames(RUN, header, frames)
    writer = store.frame_writer(RUN)
    for f, s in enumerate(steps):
        for layer in range(L):
            spectrum = -np.sort(-rng.standard_normal((H, 2 * n)), axis=-1)
            spectrum /= np.linalg.norm(spectrum, axis=-1, keepdims=True)
            spectra = -np.sort(-np.abs(rng.standard_normal((len(SPECTRA), H, 2 * n))), axis=-1)
            writer.write(at[int(s)], layer, hashlib.sha256(f"{s} {layer}".encode()).hexdigest(), profile[f, layer],
                         np.ones((H, N_OFFSETS)), rng.uniform(0, 1, (H, len(STATISTICS))), spectrum, spectra)
    store.finish_run(RUN)
    return path


def measure(page, steps: int) -> dict:
    """The medians (ms) of a step change and of a d change on an open run page, and the websocket bytes of a step
    change (served pages: recorded by ``page.__ws``)."""
    from tests.browser.conftest import FIND_JS, wait_for_drawn

    def timed(name: str, what: str) -> float:
        return statistics.median(page.evaluate("async (arg) => {" + FIND_JS + "return await (" + TIMED_JS + ")(arg);}",
                                               [name, steps, what]))

    wait_for_drawn(page)
    out = {"step paint": timed("training_step", "paint"), "step callback": timed("training_step", "callback")}
    # the d changes from offset 100 on: decoding offset d sums each (head, frame)'s values up to d
    page.evaluate("() => {" + FIND_JS + "find('training_d').value = 100; }")
    out |= {"d paint": timed("training_d", "paint"), "d callback": timed("training_d", "callback")}
    ws = getattr(page, "ws_bytes", None)
    if ws is not None:
        sizes = []
        for _ in range(steps):
            before = list(ws)
            page.evaluate("async () => {" + FIND_JS + "const s = find('training_step');"
                          " s.value = s.start + (s.value - s.start + 1) % (s.end - s.start + 1);"
                          " await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));"
                          " await new Promise((r) => setTimeout(r, 100)); }")
            sizes.append((ws[0] - before[0]) + (ws[1] - before[1]))
        out["ws bytes per step"] = statistics.median(sizes)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, nargs="+", default=[30, 120, 480])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--steps", type=int, default=15, help="changes timed per measurement (medians printed)")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from dashboard.common.render import use_bokeh
    from dashboard.export import export, profile_page_name
    from dashboard.training import frames as tf
    from dashboard.training import runs
    from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, route_offline, serve_app, stop, wait_for_bokeh

    use_bokeh()
    rows = []
    with tempfile.TemporaryDirectory(prefix="training-bench-") as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        for F in args.frames:
            store = write_run(Path(tmp) / f"f{F}.zarr", F, args.layers, args.heads)
            packed = tf.frame_cube(tf.run_frames(runs.run(store, RUN), RUN).profile)
            out = Path(tmp) / f"site{F}"
            export(out, store)
            row = {"F": F, "packed": packed.nbytes, "page": (out / profile_page_name(RUN)).stat().st_size}
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            route_offline(page)
            page.goto((out / profile_page_name(RUN)).as_uri() + "?tab=training")
            wait_for_bokeh(page, "training_step")
            row["exported"] = measure(page, args.steps)
            page.close()
            proc, url = serve_app(store)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1100})
                route_offline(page)
                ws_bytes = [0, 0]

                def opened(ws, counts=ws_bytes) -> None:
                    size = lambda p: len(p) if isinstance(p, (bytes, str)) else 0  # noqa: E731
                    ws.on("framesent", lambda p: counts.__setitem__(0, counts[0] + size(p)))
                    ws.on("framereceived", lambda p: counts.__setitem__(1, counts[1] + size(p)))

                page.on("websocket", opened)
                page.ws_bytes = ws_bytes
                page.goto(url + f"?model={RUN}&tab=training")
                wait_for_bokeh(page, "training_step", timeout=120_000)
                row["served"] = measure(page, args.steps)
                page.close()
            finally:
                stop(proc)
            rows.append(row)
            print(f"F = {F}: done", file=sys.stderr)
        browser.close()
    print(f"\nA run of {args.layers} x {args.heads} rotary heads, 129 offsets; medians of {args.steps} changes (ms; "
          "paint: until the next paint is done; callback: its JavaScript alone); load average "
          f"{os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} cores\n")
    head = ("frames", "packed frames", "run's page", "exported step paint", "served step paint", "exported step cb",
            "served step cb", "served ws bytes/step", "exported d paint", "served d paint", "exported d cb")
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for r in rows:
        e, s = r["exported"], r["served"]
        print(" | ".join([str(r["F"]), f"{r['packed'] / 1e3:.0f} kB", f"{r['page'] / 1e6:.2f} MB",
                          f"{e['step paint']:.1f}", f"{s['step paint']:.1f}", f"{e['step callback']:.2f}",
                          f"{s['step callback']:.2f}", f"{s['ws bytes per step']:.0f}", f"{e['d paint']:.1f}",
                          f"{s['d paint']:.1f}", f"{e['d callback']:.2f}"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
