"""The exported profiles page of a large model with its Analyses tab: its size against the issue's 2.5 MB.

    python benchmarks/analyses_page_size.py [--layers 40] [--heads 32] [--dir DIR]

Writes a synthetic store with one rotary model of Mistral-Small's shape (40 layers x 32 heads = 1,280 heads,
N = 5120, n = 128, 129 offsets), stand-in statistics and spectra (random, of the stored shapes) and an
i.i.d.-tagged baseline row of the same shape, exports it (``python -m dashboard.export``, CDN resources) and
prints the model page's size against the limit.

The page's arrays are gzip-compressed, so its size depends on the values too: the stand-in profiles move
smoothly along d, and a real model's compress less (the committed SmolLM2's packed profiles take about 660 bytes
a head in its page, these about 370; its spectra about 1.9 bytes an eigenvalue, these about 1.7): at SmolLM2's
rates this page would be about 2.4 MB.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from pipeline import store
from pipeline.schema import N_OFFSETS, SPECTRA, STATISTICS

MB = 1e6


def write_store(path: Path, L: int, H: int, N: int = 5120, n: int = 128) -> tuple[str, str]:
    """A store with model ``big`` and its baseline row ``big~iid-seed0``; returns both names."""
    rng = np.random.default_rng(0)
    names = ("big", "big~iid-seed0")
    for name in names:
        tag = {"baseline_of": "big", "baseline_kind": "iid", "baseline_seed": 0} if "~" in name else {}
        store.Store.open(path).register(store.ModelRow(name, L, H, N, n, "rope", source="synthetic", family="mistral",
                                                       command=f"python -m pipeline profiles {name}", **tag))
        writer = store.Store.open(path).layer_writer(name)
        for layer in range(L):
            p0, p1 = rng.dirichlet(np.ones(4), size=(2, H))
            w = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_OFFSETS) / 64.0))[None, :, None]
            stats = rng.uniform(0.05, 0.95, (H, len(STATISTICS)))
            stats[:, STATISTICS.index("rho")] = rng.uniform(0.3, 2.5, H)
            spectrum = -np.sort(-rng.standard_normal((H, 2 * n)), axis=-1)
            spectrum /= np.linalg.norm(spectrum, axis=-1, keepdims=True)
            spectra = -np.sort(-np.abs(rng.standard_normal((len(SPECTRA), H, 2 * n))), axis=-1)
            writer.write(layer, (1 - w) * p0[:, None] + w * p1[:, None], np.ones((H, N_OFFSETS)), stats, spectrum,
                         spectra)
        store.Store.open(path).mark_complete(name, revision="synthetic")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=40)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--dir", default=None, help="where to write the store and the pages (default: a temp dir)")
    args = parser.parse_args()
    from dashboard.export import export, profile_page_name

    root = Path(args.dir or tempfile.mkdtemp(prefix="analyses-page-"))
    path = root / "store.zarr"
    if not path.exists():
        write_store(path, args.layers, args.heads)
    t = time.perf_counter()
    written = export(root / "pages", path)
    took = time.perf_counter() - t
    page = root / "pages" / profile_page_name("big")
    size = page.stat().st_size
    print(f"{args.layers * args.heads} heads: exported in {took:.1f} s; {page.name}: {size / MB:.2f} MB "
          f"(limit 2.5 MB: ratio {size / 2.5e6:.2f}); {len(written)} files, no baseline page: "
          f"{not any('iid' in p.name for p in written)}")
    text = page.read_text()
    for name in ("analyses_bound_heads", "analyses_sigma", "analyses_p"):
        print(f"  {name} appears in the page: {name in text}")


if __name__ == "__main__":
    main()
