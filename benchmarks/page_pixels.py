"""Screenshots of every exported page, and the pixels that differ between two exports.

    python benchmarks/page_pixels.py shoot EXPORT_DIR SHOTS_DIR   # one PNG per page of an export
    python benchmarks/page_pixels.py diff SHOTS_A SHOTS_B         # differing pixels per page; exit 1 if any

Make the export with ``python -m dashboard.export --self-contained OUT`` (the pages then load nothing from
the network). Each page is opened in Debian's headless chromium at a fixed viewport, waited on until
BokehJS has drawn, and captured whole once two screenshots taken a moment apart are equal. Used to show
that a restructuring leaves every page's pixels as they were.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--disable-gpu", "--force-device-scale-factor=1",
        "--font-render-hinting=none"]
VIEWPORT = {"width": 1400, "height": 1000}
DRAWN = ("() => window.Bokeh !== undefined && Bokeh.documents.length > 0"
         " && document.querySelector('.bk-Figure, .bk-Column, .bk-Row') !== null")
SETTLE_MS = 750  # two screenshots this far apart must be equal before one is kept
SETTLE_TRIES = 20


def shoot(export_dir: Path, shots_dir: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    shots_dir.mkdir(parents=True, exist_ok=True)
    pages = sorted(export_dir.glob("*.html"))
    if not pages:
        raise SystemExit(f"no .html pages in {export_dir}")
    out = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        for html in pages:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(html.resolve().as_uri())
            if "data-root-id" in html.read_text(errors="replace"):  # a Bokeh page (index.html is plain HTML)
                page.wait_for_function(DRAWN, timeout=120_000)
            path = shots_dir / (html.stem + ".png")
            path.write_bytes(_settled(page))
            page.close()
            out.append(path)
            print(f"{html.name}: {path}", flush=True)
        browser.close()
    return out


def _settled(page) -> bytes:
    """A full-page screenshot once two taken SETTLE_MS apart are equal (fonts, canvases and layout done)."""
    shot = page.screenshot(full_page=True)
    for _ in range(SETTLE_TRIES):
        page.wait_for_timeout(SETTLE_MS)
        again = page.screenshot(full_page=True)
        if again == shot:
            return shot
        shot = again
    raise RuntimeError(f"{page.url} kept changing for {SETTLE_TRIES * SETTLE_MS / 1000:.0f} s")


def _pixels(path: Path) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(path).convert("RGB"), dtype=np.int16)


def diff(a_dir: Path, b_dir: Path) -> int:
    names = sorted({p.name for p in a_dir.glob("*.png")} | {p.name for p in b_dir.glob("*.png")})
    changed = 0
    for name in names:
        a, b = a_dir / name, b_dir / name
        if not (a.exists() and b.exists()):
            print(f"{name}: only in {'the first' if a.exists() else 'the second'}")
            changed += 1
            continue
        if a.read_bytes() == b.read_bytes():
            print(f"{name}: 0 pixels differ (identical files)")
            continue
        pa, pb = _pixels(a), _pixels(b)
        if pa.shape != pb.shape:
            print(f"{name}: sizes differ {pa.shape[:2]} vs {pb.shape[:2]}")
            changed += 1
            continue
        n = int(np.any(pa != pb, axis=-1).sum())
        print(f"{name}: {n} pixels differ")
        changed += n > 0
    print(f"{len(names)} pages, {changed} with differences")
    return 1 if changed else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("shoot", help="one PNG per exported page")
    s.add_argument("export_dir", type=Path)
    s.add_argument("shots_dir", type=Path)
    d = sub.add_parser("diff", help="differing pixels per page of two screenshot folders")
    d.add_argument("a", type=Path)
    d.add_argument("b", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "shoot":
        shoot(args.export_dir, args.shots_dir)
        return 0
    return diff(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
