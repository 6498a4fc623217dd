"""Per-layer tasks on dask workers: one checkpoint profiled three ways, measured side by side in one run.

    python benchmarks/scaling_bench.py [--seconds 60] [--layers N] [--dir DIR] [--quick] [--rounds R] [--before REV]

One synthetic rotary checkpoint (``rotary-1024`` of benchmarks/synthetic_checkpoints.py: Llama-shaped bf16,
1024 wide, 16 query heads over 4 key heads of 64, every offset d = 0..128) with at least ``--seconds`` of
single-thread work (the layer count is chosen from the timing of one layer unless ``--layers`` is given),
profiled through the pipeline's own run path (``pipeline.run``):

1. inline, one thread: ``run_inline``;
2. a local dask cluster of 1 worker x 1 thread: ``run_dask``;
3. a local dask cluster of 2 workers x 1 thread: ``run_dask``.

The dask ways run in a child process (``revisions.dask_runs``: planning, the cluster and the submission there,
as the inline way does them here), so that the before arm below runs the same way on another revision.

Every BLAS/LAPACK pool is one thread (``OMP_NUM_THREADS`` and friends are set to 1 before numpy is imported;
the worker processes inherit them). Each way writes its own store in ``--dir``. The clock runs from the
submission of the tasks to the last layer written; the cluster's start-up and the workers' imports are not
timed (the workers import the pipeline first), each worker's opening of the checkpoint (its first task) is.

Printed: the three wall times; the ratios 1 worker / inline (dask's overhead per layer) and the speed-up of
2 workers over 1 (target >= 1.8); the CPU time (user, system) and minor page faults of the processes that did
the work (this one inline, the workers on dask: ``resource.getrusage`` before and after), which show what a
worker's process does differently (dask starts workers with ``MALLOC_TRIM_THRESHOLD_`` set, so every block
``malloc`` serves by ``mmap`` is faulted in afresh: ``pipeline.profile.span.span_work``); then, from the inline run
with ``Store`` instrumented, what a layer's
store write costs and which part of it is serialised: a layer's write's time (``LayerWriter.write``, which the
inline run calls through one writer per model and each dask task through ``write_layer``: region writes to
chunks no other layer shares, taken without a lock, so workers do them in parallel) and the store lock's
measured hold time per layer (``Locks.store_lock``, a file lock every writer process shares), times the
layers, against the compute each of 8 and 64 workers gets through in the same time. Last, a check that
every store holds every layer, marked complete, with profiles bit-equal across the three ways.

``--rounds R``: every way R times (the dask ways in an order rotated each round), the medians and the median of
the per-round ratios printed: on a machine whose speed drifts by 10-20 % over minutes, one round's ratio moves
with it.

``--before REV``: the two dask ways also run with git revision REV's ``pipeline`` package (``git archive``; the
child process and its workers import it, and each worker reports the file it imported), in the same run, for before
and after side by side.

The 2-worker figure needs two otherwise idle cores: on a loaded machine it measures the load.
``--quick``: a 4-layer ``rotary-256`` checkpoint (seconds): checks the script and the stores, not the scaling.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy: one BLAS thread here and in every worker process

import argparse  # noqa: E402
import contextlib  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _folder in (ROOT, os.path.join(ROOT, "benchmarks")):
    if _folder not in sys.path:  # a spawned worker runs this again with its parent's sys.path (first_on_path)
        sys.path.insert(0, _folder)
from revisions import dask_runs, revision_tree, worker_usage  # noqa: E402

NAME = "scaling"
TARGET = 1.8


def seconds_per_layer(folder) -> float:
    """Single-thread time of one layer of the checkpoint in ``folder`` (the second of two, imports warm)."""
    from pipeline.families import layout_from_config, rotations
    from pipeline.registry.checkpoints import open_checkpoint
    from pipeline.run import compute_layer

    ckpt = open_checkpoint(str(folder))
    layout = layout_from_config(ckpt.config)
    R = rotations(layout)
    compute_layer(ckpt, layout, 0, False, R)
    t0 = time.perf_counter()
    compute_layer(ckpt, layout, 0, False, R)
    return time.perf_counter() - t0


class StoreTimer:
    """Wraps ``LayerWriter.write`` (every layer's write, inline or through ``Store.write_layer``) and
    ``Locks.store_lock`` (the store lock of every handle: ``Store.locks``) in this process, recording their
    durations."""

    def __init__(self):
        from pipeline.store.layer_writer import LayerWriter
        from pipeline.store.locks import Locks

        self.cls, self.writer, self.writes, self.holds, self.in_layer = Locks, LayerWriter, [], [], False
        self.orig_write, self.orig_lock = LayerWriter.write, Locks.store_lock

    def __enter__(self):
        timer = self

        def write(store, *args, **kwargs):
            timer.in_layer = True
            t0 = time.perf_counter()
            try:
                return timer.orig_write(store, *args, **kwargs)
            finally:
                timer.writes.append(time.perf_counter() - t0)
                timer.in_layer = False

        @contextlib.contextmanager
        def store_lock(locks):
            with timer.orig_lock(locks):
                t0 = time.perf_counter()
                try:
                    yield
                finally:
                    timer.holds.append((timer.in_layer, time.perf_counter() - t0))

        self.writer.write, self.cls.store_lock = write, store_lock
        return self

    def __exit__(self, *exc):
        self.writer.write, self.cls.store_lock = self.orig_write, self.orig_lock


def plan(folder, location: str):
    from pipeline.run import check_store, open_store, plan_model

    check_store(location)
    store = open_store(location)
    return store, [plan_model(str(folder), store, name=NAME)]


def run_way(way: str, folder, location: str, tree: str | None = None) -> tuple[float, tuple[float, float, int]]:
    """Profile the checkpoint into ``location`` one way ("inline", "1", "2" workers; on the workers, ``tree``'s
    pipeline package when given): the timed seconds, and the (user s, system s, minor page faults) of the
    processes that did the work in that time (summed over the workers)."""
    from pipeline.run import run_inline

    if way != "inline":
        return dask_runs(tree, str(folder), NAME, int(way), [location])[0]
    store, plans = plan(folder, location)
    u0, t0 = worker_usage(), time.perf_counter()
    run_inline(plans, store, progress=False)
    seconds, u1 = time.perf_counter() - t0, worker_usage()
    return seconds, tuple(b - a for a, b in zip(u0, u1, strict=True))


def check_stores(locations: list[str], layers: int) -> bool:
    """Every store holds every layer of the model, marked complete; the profiles are bit-equal across them."""
    from pipeline.store import Store

    values = []
    for loc in locations:
        store = Store.open(loc, mode="r")
        done = store.layers_done(NAME)
        if done.shape != (layers,) or not done.all() or not store.is_complete(NAME):
            print(f"store {loc}: layers written {int(done.sum())} of {layers}, complete {store.is_complete(NAME)}")
            return False
        ds = store.dataset("profiles")
        values.append(np.asarray(ds["profile"].sel(model=NAME).values))
    return all(np.array_equal(v, values[0], equal_nan=True) for v in values[1:])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0,
                    help="single-thread work to aim for; sets the layer count from one layer's time (default 60)")
    ap.add_argument("--layers", type=int, help="layer count (overrides --seconds)")
    ap.add_argument("--dir", help="folder for the checkpoint and the three stores (default: a temporary folder)")
    ap.add_argument("--quick", action="store_true",
                    help="a 4-layer rotary-256 checkpoint: checks the script in seconds, measures no scaling")
    ap.add_argument("--rounds", type=int, default=1, help="run every way this many times, the dask ways in rotated "
                    "order; medians and the median of per-round ratios are printed (default 1)")
    ap.add_argument("--before", metavar="REV", help="also run the two dask ways with git revision REV's pipeline "
                    "package on the workers, in the same run")
    args = ap.parse_args(argv)
    from synthetic_checkpoints import write_synthetic

    family = "rotary-256" if args.quick else "rotary-1024"
    with contextlib.ExitStack() as stack:
        root = args.dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="scaling-bench-"))
        os.makedirs(root, exist_ok=True)
        per_layer = seconds_per_layer(write_synthetic(family, os.path.join(root, f"{family}-1"), 1))
        layers = args.layers or (4 if args.quick else max(2, 2 * math.ceil(args.seconds / per_layer / 2)))
        folder = write_synthetic(family, os.path.join(root, f"{family}-{layers}"), layers, layers_per_shard=4)
        print(f"checkpoint: {family}, {layers} layers, {per_layer:.3f} s per layer single-thread "
              f"(~{layers * per_layer:.1f} s of work); load average before: {os.getloadavg()[0]:.2f}")
        stamp = time.strftime("%H%M%S")
        ways = ("inline", "1", "2") + (("1 before", "2 before") if args.before else ())
        locations = {(r, way): os.path.join(root, f"{way.replace(' ', '-')}-{stamp}-{r}.zarr")
                     for r in range(args.rounds) for way in ways}
        t: dict[str, list[float]] = {way: [] for way in ways}
        usage: dict[str, list[tuple]] = {way: [] for way in ways}
        timer = StoreTimer()  # wraps the store in the first round's inline run
        with revision_tree(args.before) if args.before else contextlib.nullcontext() as tree:
            for r in range(args.rounds):
                dask_ways = ways[1:][r % (len(ways) - 1):] + ways[1:][:r % (len(ways) - 1)]  # rotated per round
                for way in ("inline",) + dask_ways:
                    with timer if way == "inline" and r == 0 else contextlib.nullcontext():
                        seconds, used = run_way(way.split()[0], folder, locations[r, way],
                                                tree if way.endswith("before") else None)
                    t[way].append(seconds)
                    usage[way].append(used)

        def med(way: str) -> float:
            return float(np.median(t[way]))

        def ratio(a: str, b: str) -> float:  # the median over rounds of t[a] / t[b]
            return float(np.median([x / y for x, y in zip(t[a], t[b], strict=True)]))

        rounds = f" (medians of {args.rounds} rounds)" if args.rounds > 1 else ""
        print(f"times{rounds}: inline 1 thread {med('inline'):.2f} s; 1 worker x 1 thread {med('1'):.2f} s; "
              f"2 workers x 1 thread {med('2'):.2f} s")
        for way in ways:
            label = {"inline": "inline"}.get(way, f"{way.split()[0]} worker(s)") + (
                f", revision {args.before}" if way.endswith("before") else "")
            for seconds, (user, system, faults) in zip(t[way], usage[way], strict=True):
                print(f"  {label:32} wall {seconds:7.2f} s   CPU user {user:7.2f} s, system {system:6.2f} s, "
                      f"minor page faults {faults:9d}")
        speedup = ratio("1", "2")
        print(f"ratios{rounds}: 1 worker / inline {ratio('1', 'inline'):.3f} (dask's overhead: "
              f"{(med('1') - med('inline')) / layers * 1e3:+.1f} ms per layer); 2 workers speed-up over 1 worker "
              f"{speedup:.3f} (target >= {TARGET}: {'met' if speedup >= TARGET else 'MISSED'}); "
              f"inline / 2 workers {ratio('inline', '2'):.3f}; load average after: {os.getloadavg()[0]:.2f}")
        if args.before:
            print(f"  revision {args.before} on the workers: 1 worker / inline {ratio('1 before', 'inline'):.3f} "
                  f"({(med('1 before') - med('inline')) / layers * 1e3:+.1f} ms per layer); 2 workers speed-up "
                  f"over 1 {ratio('1 before', '2 before'):.3f}")

        write = float(np.median(timer.writes))
        in_layer = sum(d for inside, d in timer.holds if inside)
        n_in = sum(1 for inside, _ in timer.holds if inside)
        per_model = sum(d for inside, d in timer.holds if not inside)
        hold = in_layer / layers
        compute = med("inline") / layers - write
        print(f"store writes (inline run): a layer's write {write * 1e3:.2f} ms per layer (median of "
              f"{len(timer.writes)}; region writes, no lock, in parallel on the workers); store lock held during "
              f"layer writes "
              f"{n_in} times, {hold * 1e3:.3f} ms per layer x {layers} layers = {in_layer * 1e3:.2f} ms serialised; "
              f"outside them {len(timer.holds) - n_in} times, {per_model * 1e3:.1f} ms once per model "
              f"(register, mark complete)")
        for workers in (8, 64):
            share = layers * compute / workers
            busy = in_layer / share if share > 0 else float("nan")
            print(f"lock at {workers} workers: {layers} layers x {hold * 1e3:.3f} ms = {in_layer * 1e3:.2f} ms of "
                  f"store lock, serialised, against {share:.2f} s of compute per worker ({busy:.2%}); "
                  f"{per_model * 1e3:.1f} ms once per model")
        ok = check_stores(list(locations.values()), layers)
        print(f"stores: every layer of {layers} written and complete in each of the {len(locations)} stores, profiles "
              "bit-equal "
              f"across them: {'yes' if ok else 'NO'}")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
