"""The time of a store's structural writes, this checkout against another git revision, measured side by side in
one run.

    python benchmarks/store_write_bench.py --before REV [--rounds 7] [--store store.zarr]

Each arm's child process (``revisions.timed_child``: each arm imports its own ``pipeline``; the child's start and
imports are not counted, and one untimed write comes first) copies the store into a folder of its own and then,
per timed round:

- ``register``: registers a new model (a copy of the store's first row under a new name: a row is appended to
  every per-model variable), as ``python -m pipeline profiles`` does before its first layer;
- ``write_layer``: opens a layer writer for that model and writes one layer (its profile, norm, statistics and
  spectra), as a run does for each layer;
- ``mark_complete``: registers a model, writes its layers and marks it complete (a whole small run's store work).

The arms alternate write by write; the script prints each arm's median wall and CPU milliseconds and the median of
the per-round ratios before/after. The given store is only read (copied).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from revisions import store_kinds_main  # noqa: E402

WRITE = r"""
import dataclasses, json, os, resource, shutil, sys, tempfile, time
import numpy as np
from pipeline.schema import N_OFFSETS, STATISTICS, spectrum_width
from pipeline.store import Store

source, what = json.loads(sys.argv[1])
tmp = tempfile.mkdtemp()
shutil.copytree(source, os.path.join(tmp, "store.zarr"))
store = Store.open(os.path.join(tmp, "store.zarr"), "a")
first = store.models()[0]
rng = np.random.default_rng(0)

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

def layer(row):
    H, k = row.n_heads, spectrum_width(row.d_head)
    profile = rng.dirichlet(np.ones(4), (H, N_OFFSETS))
    return (profile, rng.uniform(1, 2, (H, N_OFFSETS)), rng.uniform(0, 1, (H, len(STATISTICS))),
            rng.standard_normal((H, k)), rng.standard_normal((3, H, k)))

def register(i):
    row = dataclasses.replace(first, name=f"bench-{i}", complete=False, damaged="")
    store.register(row)
    return row

def write(i):
    if what == "register":
        register(i)
    elif what == "write_layer":
        row = rows[i] if i in rows else register(i)
        rows[i] = row
        store.layer_writer(row.name).write(0, *values)
    else:
        row = register(i)
        w = store.layer_writer(row.name)
        for layer_ in range(row.n_layers):
            w.write(layer_, *values)
        store.mark_complete(row.name)

rows = {}
values = layer(first)
for i, _ in enumerate(sys.stdin):
    if what == "write_layer":
        rows[i] = register(i)  # untimed: the layer's model
    w, c = time.perf_counter(), cpu()
    write(i)
    print(time.perf_counter() - w, cpu() - c, flush=True)
shutil.rmtree(tmp)
"""  # timed_child's code: one write per line read, in the child's own copy of the store

WRITES = ("register", "write_layer", "mark_complete")


def main(argv=None) -> int:
    return store_kinds_main(__doc__, WRITE, WRITES, "writes of each kind",
                            lambda what, store: f"{what} into a copy of {store}", argv)


if __name__ == "__main__":
    sys.exit(main())
