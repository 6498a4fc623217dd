"""The time to build the dashboard's pages as Bokeh models, this checkout against another git revision, measured
side by side in one run.

    python benchmarks/page_build_bench.py --before REV [--rounds 5] [--store store.zarr]

Each arm is a child process importing its own ``dashboard`` and ``pipeline`` (``revisions.timed_child``: the
child's start and imports are not counted, and one untimed build comes first). A build is what a served session
or an export makes of the store: the profiles page of each model of ``--models``, the compare page and the
orbits page; nothing is serialised. The arms alternate round by round; the script prints each arm's median wall
and CPU seconds per build and the median of the per-round ratios before/after.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from revisions import parsed, print_medians, side_by_side, side_by_side_options  # noqa: E402

MODELS = ("gpt2", "SmolLM2-135M-Instruct", "all-MiniLM-L6-v2")  # absolute; rotary (129 offsets); an encoder

BUILD = r"""
import json, resource, sys, time
from dashboard import data
from dashboard.common.render import use_bokeh
from dashboard.compare.page import compare_content
from dashboard.orbits.page import orbits_content
from dashboard.profiles.page import profiles_view

store, models = json.loads(sys.argv[1])
use_bokeh()

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

for _ in sys.stdin:
    w, c = time.perf_counter(), cpu()
    for name in models:
        profiles_view(data.model_data(store, name), data.profiles(store).sel(model=name))
    compare_content(store)
    orbits_content(store)
    print(time.perf_counter() - w, cpu() - c, flush=True)
"""  # timed_child's code: one build of the pages per line read


def main(argv=None) -> int:
    ap = side_by_side_options(__doc__.split("\n\n")[0], "dashboard and pipeline", "builds", 5)
    ap.add_argument("--models", default=",".join(MODELS), help=f"models, comma-separated (default {','.join(MODELS)})")
    args = parsed(ap, argv)
    arg = json.dumps([args.store, args.models.split(",")])
    times = side_by_side(BUILD, arg, args.before, ("pipeline", "dashboard"), args.rounds, "pages")
    print(f"pages of {args.models} + compare + orbits, {args.rounds} rounds; medians (ratio: median of before/after)")
    print_medians(times, args.before)
    return 0

if __name__ == "__main__":
    sys.exit(main())
