"""The time of the exporter's command (``python -m dashboard.export``), this checkout against another git revision,
measured side by side in one run.

    python benchmarks/export_bench.py --before REV [--rounds 3] [--store store.zarr]

Each arm is a child process importing its own ``pipeline`` and ``dashboard`` (``revisions.timed_child``: the
child's start and imports are not counted, and one untimed export comes first, as the command's own first
export of the process would set its process-wide settings). Each round runs ``dashboard.export.main`` into a new
folder, its output discarded; the arms alternate. The script prints each arm's median wall and CPU seconds and the
median of the per-round ratios before/after. Reads the store only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from revisions import ROOT, alternate, print_medians, revision_tree, timed_child  # noqa: E402

EXPORT = r"""
import contextlib, io, json, os, resource, sys, tempfile, time
from dashboard.export import main

store = json.loads(sys.argv[1])

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

with tempfile.TemporaryDirectory() as tmp:
    for i, _ in enumerate(sys.stdin):
        w, c = time.perf_counter(), cpu()
        with contextlib.redirect_stdout(io.StringIO()):
            assert main([os.path.join(tmp, f"site{i}"), "--store", store]) == 0
        print(time.perf_counter() - w, cpu() - c, flush=True)
"""  # timed_child's code: one export per line read


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the git revision to compare with (its pipeline and dashboard)")
    ap.add_argument("--rounds", type=int, default=3, help="timed exports of each arm (default 3)")
    ap.add_argument("--store", default=os.path.join(ROOT, "store.zarr"), help="the store (default: the committed one)")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    store = os.path.abspath(args.store)
    if not os.path.isdir(store):
        ap.error(f"no store at {store}")
    arg = json.dumps(store)
    with revision_tree(args.before, ("pipeline", "dashboard")) as tree, \
            timed_child(EXPORT, arg, tree, f"the export of revision {args.before}") as before, \
            timed_child(EXPORT, arg, ROOT, "the export of this checkout") as after:
        times = alternate(before, after, args.rounds, "export")
    print(f"the export of {store}, {args.rounds} rounds; medians (ratio: median of before/after)")
    print_medians(times, args.before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
