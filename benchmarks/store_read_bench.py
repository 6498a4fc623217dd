"""The time to read a store's models table, this checkout against another git revision, measured side by side in
one run.

    python benchmarks/store_read_bench.py --before REV [--rounds 7] [--store store.zarr]

Three reads, each timed in its own pair of child processes (``revisions.timed_child``: each arm imports its own
``pipeline``; the child's start and imports are not counted, and one untimed read comes first):

- ``Store.models``: every model's row (what ``Store.row`` and the run's planning read);
- ``Store.checked_models``: the rows with each written layer compared with its checksum (what the dashboard
  reads);
- ``list``: ``python -m pipeline list`` run in the child (``pipeline.__main__.main``), its output discarded.

The arms alternate read by read; the script prints each arm's median wall and CPU milliseconds and the median of
the per-round ratios before/after. Reads the store only.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from revisions import store_kinds_main  # noqa: E402

READ = r"""
import contextlib, io, json, resource, sys, time
from pipeline.__main__ import main
from pipeline.store import Store

store, what = json.loads(sys.argv[1])

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

def read():
    if what == "list":
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["list", "--store", store]) == 0
    else:
        getattr(Store.open(store, "r"), what)()

for _ in sys.stdin:
    w, c = time.perf_counter(), cpu()
    read()
    print(time.perf_counter() - w, cpu() - c, flush=True)
"""  # timed_child's code: one read per line read

READS = ("models", "checked_models", "list")


def main(argv=None) -> int:
    return store_kinds_main(__doc__, READ, READS, "reads of each read", lambda what, store: f"{what} of {store}",
                            argv)

if __name__ == "__main__":
    sys.exit(main())
