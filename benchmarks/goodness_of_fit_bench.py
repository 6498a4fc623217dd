"""What the generalised gamma's fit of a model's spectra costs, this checkout against another revision, side by
side in one run.

    python benchmarks/goodness_of_fit_bench.py [--model SmolLM2-135M-Instruct] [--before fa314ff] [--rounds 5]

The samples are the four of ``pipeline.analyses.goodness_of_fit.samples`` for every head of ``--model`` in the
committed store (SmolLM2-135M-Instruct: 270 heads, up to 576 values each), the ones ``report`` and the profiles
page's Analyses tab fit. Each arm is a child process importing its own ``pipeline`` (``revisions.timed_child``: its
start and imports are not counted, one untimed fit first) on one BLAS thread; a timed call is one
``goodness_of_fit`` of all four samples. The arms alternate for ``--rounds`` rounds; printed are each round's wall
and process CPU time, the medians of the per-round ratios this / before, and the largest difference of the two
arms' fitted log-likelihoods.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from statistics import median

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from revisions import revision_tree, timed_child  # noqa: E402 - beside this file

FIT = r"""
import resource, sys, time
import numpy as np
from threadpoolctl import threadpool_limits
from pipeline.analyses import goodness_of_fit as gof

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

samples = dict(np.load(sys.argv[1]))
with threadpool_limits(1):
    for _ in sys.stdin:
        w, c = time.perf_counter(), cpu()
        fits = {name: gof.gengamma_fit(x) for name, x in samples.items()}
        w, c = time.perf_counter() - w, cpu() - c
        np.savez(sys.argv[1] + ".out.npz", **{name: f["loglik"] for name, f in fits.items()})
        print(w, c, flush=True)
"""  # timed_child's code: one fit of every sample per line read, the log-likelihoods saved beside the samples


def model_samples(model: str) -> dict[str, np.ndarray]:
    """The four samples of every head of ``model`` in the committed store."""
    from pipeline.analyses import goodness_of_fit as gof
    from pipeline.analyses import head_data
    from pipeline.store import Store
    from pipeline.store.backend import default_store_path

    data = head_data.from_dataset(Store.open(default_store_path(), mode="r").dataset("profiles"), model)
    return gof.samples(data.spectrum, data.spectrum_of("eig_abs"), data.spectrum_of("antisym_spectrum"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="SmolLM2-135M-Instruct", help="a model of the committed store")
    parser.add_argument("--before", default="fa314ff", help="the revision to compare with (default: the last "
                        "that fitted one grid point at a time)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of both arms")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    samples = model_samples(args.model)
    sizes = ", ".join(f"{name} {x.shape[0]}x{x.shape[1]}" for name, x in samples.items())
    print(f"{args.model}: samples (heads x values) {sizes}")
    with tempfile.TemporaryDirectory() as tmp, revision_tree(args.before) as before_tree:
        inputs = {arm: os.path.join(tmp, f"{arm}.npz") for arm in ("this", "before")}
        for path in inputs.values():
            np.savez(path, **samples)
        with timed_child(FIT, inputs["this"], ROOT, "this checkout's fit") as this, \
                timed_child(FIT, inputs["before"], before_tree, f"{args.before}'s fit") as before:
            ratios_wall, ratios_cpu = [], []
            for r in range(args.rounds):
                (bw, bc), (tw, tc) = before(), this()
                ratios_wall.append(tw / bw)
                ratios_cpu.append(tc / bc)
                print(f"round {r + 1}: {args.before} {bw:.3f} s wall {bc:.3f} s CPU; this {tw:.3f} s wall "
                      f"{tc:.3f} s CPU")
        logliks = {arm: np.load(path + ".out.npz") for arm, path in inputs.items()}
        gap = max(float(np.nanmax(np.abs(logliks["this"][n] - logliks["before"][n]) /
                                  np.maximum(np.abs(logliks["before"][n]), 1.0))) for n in samples)
    print(f"median ratio this / {args.before}: wall x{median(ratios_wall):.3f}, CPU x{median(ratios_cpu):.3f}")
    print(f"largest relative difference of the fitted log-likelihoods: {gap:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
