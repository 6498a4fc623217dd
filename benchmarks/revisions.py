"""Another git revision's ``pipeline`` package (and ``dashboard``, where asked), for a benchmark's "before" arm
measured in the same run as "after".

``revision_tree(rev)`` unpacks it into a temporary folder (``git archive``). A child process imports it with that
folder on ``PYTHONPATH``; a dask worker spawned while :func:`first_on_path` holds gets it first on ``sys.path``
(multiprocessing hands a spawned process its parent's ``sys.path``), while this process keeps the package it has
imported already.

:func:`dask_runs` runs the dask arm of a revision wholly in a child process (planning, submission and workers all
importing that revision): a task submitted from this process names its function and classes by module, which
another revision may have elsewhere. The child uses only names both sides of a refactor keep in ``pipeline.run``
(``check_store``, ``open_store``, ``plan_model``, ``run_dask``) and makes its cluster with dask itself.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


WHOLE_RUN = r"""
import os, resource, sys, tempfile, time
from threadpoolctl import threadpool_limits
from pipeline.run import RunOptions, run

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

with tempfile.TemporaryDirectory() as tmp, threadpool_limits(1):
    for i, _ in enumerate(sys.stdin):
        w, c = time.perf_counter(), cpu()
        run(RunOptions(models=[sys.argv[1]], store=os.path.join(tmp, f"s{i}.zarr"), name="m", quiet=True),
            log=lambda *a: None)
        print(time.perf_counter() - w, cpu() - c, flush=True)
"""  # timed_child's code for one whole profiles run of the model argv[1] per line read, on one BLAS thread


@contextlib.contextmanager
def timed_child(code: str, arg: str, tree: str, what: str, env: dict | None = None):
    """A function timing one run in a child process (``python -c code arg`` in ``tree``, which is first on its
    ``PYTHONPATH``; ``env`` added to its environment): a call writes ``run`` to the child and reads back the
    ``wall CPU`` seconds it printed, so the child's start and imports are not counted. One untimed run first.
    ``what`` names the run in the error when the child stops answering."""
    child = subprocess.Popen([sys.executable, "-c", code, arg], cwd=tree, text=True,
                             env=dict(os.environ, PYTHONPATH=tree, **(env or {})),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def one() -> tuple[float, float]:
        child.stdin.write("run\n")
        child.stdin.flush()
        line = child.stdout.readline()
        if not line:
            raise RuntimeError(f"{what} failed (its error is above)")
        w, c = line.split()
        return float(w), float(c)

    try:
        one()
        yield one
    finally:
        child.stdin.close()
        child.wait()


@contextlib.contextmanager
def revision_tree(rev: str, packages: tuple[str, ...] = ("pipeline",)):
    """A temporary folder holding git revision ``rev``'s ``packages``."""
    with tempfile.TemporaryDirectory(prefix="headgeometry-before-") as tree:
        archive = subprocess.run(["git", "archive", rev, *packages], cwd=ROOT, capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        yield tree


@contextlib.contextmanager
def first_on_path(tree: str | None):
    """``tree`` first on ``sys.path`` while workers are spawned (nothing when None)."""
    if tree is None:
        yield
        return
    sys.path.insert(0, tree)
    try:
        yield
    finally:
        sys.path.remove(tree)


def pipeline_file() -> str:
    """The file of the ``pipeline`` package this process imports (run on workers by :func:`check_workers`)."""
    import pipeline

    return pipeline.__file__


def check_workers(client, tree: str | None) -> None:
    """Raise RuntimeError unless every worker of the dask ``client`` imports ``tree``'s ``pipeline`` (None: this
    checkout's)."""
    imported = set(client.run(pipeline_file).values())
    expected = os.path.join(tree or ROOT, "pipeline", "__init__.py")
    if imported != {expected}:
        raise RuntimeError(f"the workers imported {sorted(imported)}, not {expected}")


def worker_usage() -> tuple[float, float, int]:
    """(user s, system s, minor page faults) of the calling process so far (run on each worker)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime, r.ru_minflt


def warm_imports() -> None:
    """Run on each worker before a clock starts: the imports a layer task needs."""
    import safetensors.torch  # noqa: F401 - the reads: torch

    import pipeline.profile  # noqa: F401
    import pipeline.registry.checkpoints  # noqa: F401
    import pipeline.run  # noqa: F401
    import pipeline.store  # noqa: F401 - xarray, zarr


DASK_CHILD = r"""
import json, sys, time
from distributed import Client, LocalCluster
from revisions import check_workers, warm_imports, worker_usage
from pipeline.run import check_store, open_store, plan_model, run_dask

folder, name, workers, tree = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] or None
with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                  dashboard_address=None) as cluster, Client(cluster) as client:
    client.wait_for_workers(workers)
    client.run(warm_imports)
    check_workers(client, tree)
    for line in sys.stdin:
        location = line.strip()
        check_store(location)
        store = open_store(location)
        plans = [plan_model(folder, store, name=name)]
        u0, t0 = client.run(worker_usage), time.perf_counter()
        run_dask(plans, store, client, progress=False)
        seconds, u1 = time.perf_counter() - t0, client.run(worker_usage)
        print(json.dumps([seconds, [sum(u1[w][i] - u0[w][i] for w in u0) for i in range(3)]]), flush=True)
"""  # one run per store location read, its (seconds, [user s, system s, faults] summed over workers) printed


def dask_runs(tree: str | None, folder: str, name: str, workers: int,
              locations: list[str]) -> list[tuple[float, tuple[float, float, int]]]:
    """Profile ``folder`` (as model ``name``) into each store of ``locations`` on a new loopback dask cluster of
    ``workers`` one-thread workers, all in a child process importing ``tree``'s ``pipeline`` (None: this
    checkout's); per run, the seconds of ``run_dask`` (from submission to the last layer written; the cluster's
    start and the workers' imports not counted) and the workers' (user s, system s, minor page faults)."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tree or ROOT, here]))
    child = subprocess.run([sys.executable, "-c", DASK_CHILD, folder, name, str(workers), tree or ""],
                           input="".join(f"{loc}\n" for loc in locations), capture_output=True, text=True,
                           cwd=tree or ROOT, env=env)
    if child.returncode != 0:
        raise RuntimeError(f"the dask run of {tree or ROOT} failed:\n{child.stderr[-3000:]}")
    out = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("[")]
    return [(seconds, tuple(used)) for seconds, used in out]


def alternate(before, after, rounds: int, label: str) -> dict[str, list[tuple[float, float]]]:
    """``rounds`` timed runs of each arm (functions returning (wall, CPU) seconds, as :func:`timed_child` gives),
    alternating before and after; each round's times are printed to stderr under ``label``."""
    times: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
    for k in range(rounds):
        times["before"].append(before())
        times["after"].append(after())
        print(f"{label}, round {k + 1}/{rounds}: before {times['before'][-1][0]:.3f} s, "
              f"after {times['after'][-1][0]:.3f} s", file=sys.stderr, flush=True)
    return times


def print_medians(times: dict[str, list[tuple[float, float]]], rev: str, unit: float = 1.0,
                  unit_name: str = "s") -> None:
    """Each arm's median wall and CPU time (in ``unit`` seconds) and the median of the per-round ratios
    before/after."""
    for i, what in enumerate(("wall", "CPU")):
        b, a = (statistics.median(t[i] for t in times[arm]) / unit for arm in ("before", "after"))
        ratio = statistics.median(x[i] / y[i] for x, y in zip(times["before"], times["after"], strict=True))
        print(f"  {what:4s}: before ({rev}) {b:.2f} {unit_name}, after {a:.2f} {unit_name}, x{ratio:.2f}")


def side_by_side_options(description: str, packages: str, timed: str, rounds: int) -> argparse.ArgumentParser:
    """The options of a benchmark of this checkout against a git revision: ``--before REV`` (its ``packages``, in
    words), ``--rounds`` (the ``timed`` runs of each arm, default ``rounds``) and ``--store`` (default: the committed
    store); read them with :func:`parsed`."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--before", required=True, help=f"the git revision to compare with (its {packages})")
    ap.add_argument("--rounds", type=int, default=rounds, help=f"timed {timed} of each arm (default {rounds})")
    ap.add_argument("--store", default=os.path.join(ROOT, "store.zarr"), help="the store (default: the committed one)")
    return ap


def parsed(ap: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
    """``ap``'s options (:func:`side_by_side_options`), ``--rounds`` at least 1 and ``--store`` a folder there,
    made absolute."""
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    args.store = os.path.abspath(args.store)
    if not os.path.isdir(args.store):
        ap.error(f"no store at {args.store}")
    return args


def side_by_side(code: str, arg: str, rev: str, packages: tuple[str, ...], rounds: int,
                 label: str) -> dict[str, list[tuple[float, float]]]:
    """:func:`alternate`'s times of ``rounds`` runs of ``code`` (:func:`timed_child`'s, given ``arg``) in git revision
    ``rev``'s ``packages`` and in this checkout; ``label`` names the runs."""
    with revision_tree(rev, packages) as tree, \
            timed_child(code, arg, tree, f"the {label} of revision {rev}") as before, \
            timed_child(code, arg, ROOT, f"the {label} of this checkout") as after:
        return alternate(before, after, rounds, label)


def store_kinds_main(doc: str, code: str, kinds: tuple[str, ...], timed: str, heading, argv=None) -> int:
    """The whole of a benchmark of this checkout against ``--before REV`` on ``--store``: for each kind of
    ``kinds``, ``code`` (:func:`timed_child`'s, given ``[store, kind]`` as JSON) timed side by side, under the line
    ``heading(kind, store)``, in milliseconds. ``doc``'s first paragraph describes the options; ``timed`` names the
    runs in ``--rounds``' help."""
    args = parsed(side_by_side_options(doc.split("\n\n")[0], "pipeline", timed, 7), argv)
    for what in kinds:
        times = side_by_side(code, json.dumps([args.store, what]), args.before, ("pipeline",), args.rounds, what)
        print(f"{heading(what, args.store)}, {args.rounds} rounds; medians (ratio: median of before/after)")
        print_medians(times, args.before, unit=1e-3, unit_name="ms")
    return 0
