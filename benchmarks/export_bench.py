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

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from revisions import parsed, print_medians, side_by_side, side_by_side_options  # noqa: E402

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
    args = parsed(side_by_side_options(__doc__.split("\n\n")[0], "pipeline and dashboard", "exports", 3), argv)
    times = side_by_side(EXPORT, json.dumps(args.store), args.before, ("pipeline", "dashboard"), args.rounds, "export")
    print(f"the export of {args.store}, {args.rounds} rounds; medians (ratio: median of before/after)")
    print_medians(times, args.before)
    return 0

if __name__ == "__main__":
    sys.exit(main())
