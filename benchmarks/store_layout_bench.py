"""Reads of a store as this checkout writes it against the same store as another git revision wrote it, both read by
this checkout, measured side by side in one run: what the store's layout (its chunks) costs a reader.

    python benchmarks/store_layout_bench.py --before REV [--models 21] [--layers 4] [--rounds 9]

The same models (the committed store's first ``--models`` rows, cut to ``--layers`` layers, random profiles of seed
0, each completed) are written into two stores in a temporary folder: one by revision REV's ``pipeline`` (a child
process with that revision's package first on its path), one by this checkout's. Then ``Store.models``,
``Store.checked_models`` and ``python -m pipeline list`` are timed on each, the stores alternating, in this process
(one untimed read of each first); the script prints each store's median CPU milliseconds and the median of the
per-round ratios REV's store / this checkout's.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from revisions import ROOT, revision_tree  # noqa: E402

WRITE = r"""
import dataclasses, sys
import numpy as np
from pipeline.schema import N_OFFSETS
from pipeline.store import Store

source, target, n_models, n_layers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
store = Store.open(target, "a")
rng = np.random.default_rng(0)
for row in Store.open(source, "r").models()[:n_models]:
    row = dataclasses.replace(row, n_layers=min(row.n_layers, n_layers), complete=False, damaged="")
    store.register(row)
    writer = store.layer_writer(row.name)
    for layer in range(row.n_layers):
        H = row.n_heads
        writer.write(layer, rng.dirichlet(np.ones(4), (H, N_OFFSETS)), rng.uniform(1, 2, (H, N_OFFSETS)))
    store.mark_complete(row.name)
"""  # run in a child with the writing revision's package first on its path


def write(tree: str, target: str, args) -> None:
    subprocess.run([sys.executable, "-c", WRITE, os.path.join(ROOT, "store.zarr"), target, str(args.models),
                    str(args.layers)], cwd=tree, env=dict(os.environ, PYTHONPATH=tree), check=True)


def reads(path: str):
    from pipeline.__main__ import main
    from pipeline.store import Store

    def listed():
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["list", "--store", path]) == 0

    return {"models": lambda: Store.open(path, "r").models(),
            "checked_models": lambda: Store.open(path, "r").checked_models(), "list": listed}


def cpu_ms(read) -> float:
    start = time.process_time()
    read()
    return (time.process_time() - start) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the git revision whose pipeline writes the other store")
    ap.add_argument("--models", type=int, default=21, help="models written into each store (default 21)")
    ap.add_argument("--layers", type=int, default=4, help="layers of each model at most (default 4)")
    ap.add_argument("--rounds", type=int, default=9, help="timed reads of each store (default 9)")
    args = ap.parse_args(argv)
    if min(args.models, args.layers, args.rounds) < 1:
        ap.error("--models, --layers and --rounds must be at least 1")
    with tempfile.TemporaryDirectory() as tmp, revision_tree(args.before) as tree:
        before, after = os.path.join(tmp, "before.zarr"), os.path.join(tmp, "after.zarr")
        write(tree, before, args)
        write(ROOT, after, args)
        arms = {"before": reads(before), "after": reads(after)}
        for what in arms["after"]:
            times = {arm: [] for arm in arms}
            for arm in arms:
                arms[arm][what]()  # untimed
            for _ in range(args.rounds):
                for arm in arms:
                    times[arm].append(cpu_ms(arms[arm][what]))
            ratio = statistics.median(b / a for b, a in zip(times["before"], times["after"], strict=True))
            print(f"{what} of {args.models} models written by {args.before} / by this checkout, {args.rounds} "
                  f"rounds: CPU {statistics.median(times['before']):.0f} ms / "
                  f"{statistics.median(times['after']):.0f} ms, x{ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
