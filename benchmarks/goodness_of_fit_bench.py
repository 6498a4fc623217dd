"""What the generalised gamma's fit of a model's spectra costs, this checkout against another git revision,
measured side by side in one run.

    python benchmarks/goodness_of_fit_bench.py --before REV [--rounds 5] [--store store.zarr]
        [--model SmolLM2-135M-Instruct]

The samples are the four of ``pipeline.analyses.goodness_of_fit.samples`` for every head of ``--model`` (in the
committed store SmolLM2-135M-Instruct: 270 heads, up to 128 values each), the ones ``report`` and the profiles
page's Analyses tab fit. Each arm is a child process importing its own ``pipeline`` (``revisions.timed_child``: its
start and imports are not counted, one untimed fit first) on one BLAS thread; a timed call is one ``gengamma_fit``
of each of the four samples. The arms alternate round by round; the script prints each arm's median wall and CPU
seconds, the median of the per-round ratios before/after, and the largest relative difference of the two arms'
fitted log-likelihoods.
"""

from __future__ import annotations

import glob
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from revisions import parsed, print_medians, side_by_side, side_by_side_options  # noqa: E402

FIT = r"""
import hashlib, json, os, resource, sys, time
import numpy as np
from threadpoolctl import threadpool_limits
import pipeline
from pipeline.analyses import goodness_of_fit as gof

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

folder = json.loads(sys.argv[1])
samples = dict(np.load(os.path.join(folder, "samples.npz")))
arm = hashlib.sha1(pipeline.__file__.encode()).hexdigest()[:12]  # one output file per arm
with threadpool_limits(1):
    for _ in sys.stdin:
        w, c = time.perf_counter(), cpu()
        fits = {name: gof.gengamma_fit(x) for name, x in samples.items()}
        w, c = time.perf_counter() - w, cpu() - c
        np.savez(os.path.join(folder, f"loglik-{arm}.npz"), **{name: f["loglik"] for name, f in fits.items()})
        print(w, c, flush=True)
"""  # timed_child's code: one fit of every sample per line read, its log-likelihoods saved beside the samples


def model_samples(store: str, model: str) -> dict[str, np.ndarray]:
    """The four samples of every head of ``model`` in ``store``."""
    from pipeline.analyses import goodness_of_fit as gof
    from pipeline.analyses import head_data
    from pipeline.store import Store

    data = head_data.from_dataset(Store.open(store, mode="r").dataset("profiles"), model)
    return gof.samples(data.spectrum, data.spectrum_of("eig_abs"), data.spectrum_of("antisym_spectrum"))


def main(argv=None) -> int:
    ap = side_by_side_options(__doc__.split("\n\n")[0], "pipeline", "fits", 5)
    ap.add_argument("--model", default="SmolLM2-135M-Instruct", help="a model of the store with its spectra")
    args = parsed(ap, argv)
    samples = model_samples(args.store, args.model)
    sizes = ", ".join(f"{name} {x.shape[0]}x{x.shape[1]}" for name, x in samples.items())
    with tempfile.TemporaryDirectory() as folder:
        np.savez(os.path.join(folder, "samples.npz"), **samples)
        times = side_by_side(FIT, json.dumps(folder), args.before, ("pipeline",), args.rounds, "fits")
        arms = [np.load(path) for path in sorted(glob.glob(os.path.join(folder, "loglik-*.npz")))]
        gap = max(float(np.nanmax(np.abs(arms[0][n] - arms[1][n]) / np.maximum(np.abs(arms[1][n]), 1.0)))
                  for n in samples)
    print(f"{args.model}: samples (heads x values) {sizes}; {args.rounds} rounds; medians (ratio: median of "
          "before/after)")
    print_medians(times, args.before)
    print(f"largest relative difference of the two arms' fitted log-likelihoods: {gap:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
