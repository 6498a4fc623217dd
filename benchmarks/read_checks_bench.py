"""The cost of the read-side checksum checks, side by side: with and without them, in one process.

    python benchmarks/read_checks_bench.py [--store PATH] [--repeat 5]

Two timings, each taken with the check (``Store.checked_models``: every written layer of every model read
and compared with its ``layer_checksum`` and ``statistics_checksum``) and without it (``Store.models``
in its place), alternating, median of ``--repeat`` runs each, in wall time and in CPU time (this process's
threads and its children: less disturbed by other work on the machine):

- ``list``: ``python -m pipeline list`` as a user runs it (a new interpreter each time), and the same
  command run in this process (``pipeline.__main__.main``: no interpreter start or imports), its output
  discarded;
- page build: what a page of the store's largest model costs from a cold cache: ``dashboard.data.rows``,
  ``data.model_data`` and ``profiles.page.profiles_view`` (the Bokeh layout), the data caches cleared
  before each run.

Prints the medians, the difference and the ratio. Reads the store only.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import resource
import statistics
import subprocess
import sys
import time

from pipeline.store import Store, default_store_path


def timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process and its finished children) of ``fn()``."""
    def cpu() -> float:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    t, c = time.perf_counter(), cpu()
    fn()
    return time.perf_counter() - t, cpu() - c


@contextlib.contextmanager
def checks(on: bool):
    """The read-side check as shipped (on) or replaced by the plain rows (off)."""
    saved = Store.checked_models
    if not on:
        Store.checked_models = Store.models
    try:
        yield
    finally:
        Store.checked_models = saved


LIST_CODE = ("import sys\nfrom pipeline.store import Store\nif sys.argv[2] == 'off':\n"
             "    Store.checked_models = Store.models\nfrom pipeline.__main__ import main\n"
             "sys.exit(main(['list', '--store', sys.argv[1]]))")


def list_command(store: str) -> None:
    """``python -m pipeline list`` in a new interpreter, with the checks on or off (as ``checks`` set them)."""
    on = Store.checked_models is not Store.models
    subprocess.run([sys.executable, "-c", LIST_CODE, store, "on" if on else "off"], check=True,
                   stdout=subprocess.DEVNULL)


def run_list(store: str) -> None:
    from pipeline.__main__ import main

    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["list", "--store", store]) == 0


def page_build(store: str, name: str) -> None:
    from dashboard import data
    from dashboard.common.render import use_bokeh
    from dashboard.profiles.page import profiles_view

    use_bokeh()

    for cache in (data._profiles, data._rows, data._model_data):
        cache.cache_clear()
    data.rows(store)
    profiles_view(data.model_data(store, name), data.profiles(store).sel(model=name))


def compare(label: str, fn, repeat: int) -> None:
    fn()  # imports and first-use costs out of the way
    times = {True: [], False: []}
    for _ in range(repeat):
        for on in (False, True):
            with checks(on):
                times[on].append(timed(fn))
    for k, kind in enumerate(("wall", "CPU")):
        before = statistics.median(t[k] for t in times[False])
        after = statistics.median(t[k] for t in times[True])
        print(f"{label}, {kind}: without checks {before * 1e3:.0f} ms, with checks {after * 1e3:.0f} ms, "
              f"{(after - before) * 1e3:+.0f} ms ({(after / before - 1) * 100:+.1f}%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default=default_store_path())
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows = [r for r in Store.open(args.store, "r").models() if r.computed]
    largest = max(rows, key=lambda r: r.n_layers * r.n_heads)
    layers = sum(r.layers_done for r in rows)
    print(f"store {args.store}: {len(rows)} computed models, {layers} written layers; largest "
          f"{largest.name} ({largest.n_layers} x {largest.n_heads} heads)")
    compare("python -m pipeline list", lambda: list_command(args.store), args.repeat)
    compare("list in this process", lambda: run_list(args.store), args.repeat)
    compare(f"page build of {largest.name}", lambda: page_build(args.store, largest.name), args.repeat)


if __name__ == "__main__":
    main()
