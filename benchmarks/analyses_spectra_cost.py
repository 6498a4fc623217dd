"""What the spectra of T and L at d = 0 cost a profiles run, side by side in one run.

    python benchmarks/analyses_spectra_cost.py [--shapes 5120x128,2048x64] [--heads 4] [--repeats 3]
        [--before 09eda08] [--rounds 3] [--opt-layers 6] [--rotary SmolLM2-135M-Instruct] [--sections 12]

1. **Per head** (CPU time of this thread, one BLAS thread, the best of ``--repeats``): for each (N, n) and each
   positional kind (rotary: the profile at the 129 offsets d = 0..128; position-free: d = 0 alone), a layer of
   ``--heads`` random heads profiled as a profiles run does (``pipeline.profile.head_profiles(..., at_zero=True)``:
   profile, statistics and spectra), with the spectra's step timed inside it (``TimedKernels``, the run's own
   ``Kernels.spectra``): the spectra's share of the whole. Beside it the same spectra by the SVDs alone (numpy's
   ``svd`` of T and of [A | B] and ``eigvals`` of A), the route before the squared one, for the record.
2. **Whole runs**: ``python -m pipeline profiles`` of (a) a position-free model, an opt-1.3b-shaped fp16 synthetic
   checkpoint (``--opt-layers`` layers of 32 heads, N = 2048, n = 64; benchmarks/synthetic_checkpoints.py), and (b)
   a rotary model of real size (``--rotary``: SmolLM2-135M-Instruct's pinned GGUF file, 30 layers x 9 heads, N =
   576, n = 64, 129 offsets; a Llama-shaped synthetic checkpoint of 1024 wide when that file is not installed), by
   this checkout and by revision ``--before`` (default 09eda08: the last one without the spectra; any other revision
   compares this checkout's route of the spectra with that revision's), each in a child
   process importing its own ``pipeline`` (one untimed run first), in ``--rounds`` interleaved rounds; wall and
   process CPU time of each run (reading, checks, profiles, statistics, spectra, writes) and the medians of the
   per-round ratios this / before.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))



def best(fn, repeats: int) -> float:
    """The least CPU time of this thread over ``repeats`` calls of fn."""
    out = float("inf")
    for _ in range(repeats):
        t0 = time.thread_time()
        fn()
        out = min(out, time.thread_time() - t0)
    return out


def per_head(shapes: str, heads: int, repeats: int) -> None:
    import numpy as np
    from timed_kernels import SPECTRA, TimedKernels

    from pipeline.families.rotary import rotation_matrices
    from pipeline.profile import head_profiles, span_cores
    from pipeline.profile.core_spectra import antisymmetric_part

    print("== 1. per head: CPU s per head, one BLAS thread; share = spectra / (profile + statistics + spectra)")
    print(f"{'N':>6} {'n':>5} {'offsets':>8} {'whole':>9} {'spectra':>9} {'share':>7}   {'by SVDs':>9}")
    for shape in shapes.split(","):
        N, n = (int(x) for x in shape.split("x"))
        rng = np.random.default_rng(0)
        W_Q = rng.standard_normal((heads, n, N)).astype(np.float32)
        W_K = rng.standard_normal((heads, n, N)).astype(np.float32)
        m = min(n, N)
        tops = np.stack([K[:m] @ P.T for K, P in (span_cores(W_Q[h], W_K[h]) for h in range(heads))])
        X = tops / np.linalg.norm(tops, axis=(1, 2), keepdims=True)
        T = antisymmetric_part(X)
        by_svd = best(lambda T=T, X=X, m=m: (np.linalg.svd(T, compute_uv=False), np.linalg.eigvals(X[:, :, :m]),
                                             np.linalg.svd(X, compute_uv=False)), repeats) / heads
        for offsets in (129, 1):
            R = rotation_matrices(n, n, 10000.0, offsets) if offsets > 1 else None
            whole, spectra = float("inf"), float("inf")
            for _ in range(repeats):
                kernels = TimedKernels()
                t0 = time.thread_time()
                head_profiles(W_Q, W_K, R, eigvalsh="numpy", threads=1, at_zero=True, kernels=kernels)
                t = time.thread_time() - t0
                if t < whole:
                    whole, spectra = t, kernels.seconds(SPECTRA)
            whole, spectra = whole / heads, spectra / heads
            print(f"{N:>6} {n:>5} {offsets:>8} {whole:>9.4f} {spectra:>9.4f} {spectra / whole:>7.3f}   "
                  f"{by_svd:>9.4f}", flush=True)


@contextlib.contextmanager
def child_runs(tree: str, model: str):
    """A function timing one whole run of ``model`` by the ``pipeline`` package in ``tree``: (wall s, CPU s),
    measured in a child process on one BLAS thread (its start and imports not counted, one untimed run first)."""
    from revisions import WHOLE_RUN, timed_child

    with timed_child(WHOLE_RUN, model, tree, f"the run of {model} by {tree}",
                     {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}) as one:
        yield one


def rotary_model(name: str, folder: str) -> tuple[str, str]:
    """(path, words) of the rotary model: the registry model's pinned file, else a synthetic checkpoint."""
    from synthetic_checkpoints import write_synthetic

    from pipeline.registry.models import MODELS
    from pipeline.sources.base import CheckpointError

    try:
        from pipeline.cli.real import weight_file

        path = str(weight_file(MODELS[name]))
        return path, f"{name} ({os.path.basename(path)})"
    except (CheckpointError, KeyError, TypeError, AttributeError):
        path = str(write_synthetic("rotary-1024", os.path.join(folder, "rotary"), 4))
        return path, "a Llama-shaped synthetic checkpoint, 4 layers x 16 heads, N = 1024, n = 64"


def whole_runs(before: str, rounds: int, opt_layers: int, rotary: str) -> None:
    from revisions import revision_tree
    from synthetic_checkpoints import write_synthetic

    print(f"\n== 2. whole runs (python -m pipeline profiles): this checkout against revision {before}; {rounds} "
          "interleaved rounds, medians")
    with tempfile.TemporaryDirectory() as tmp, revision_tree(before) as tree:
        models = [(str(write_synthetic("opt-1.3b", os.path.join(tmp, "opt"), opt_layers)),
                   f"opt-1.3b-shaped fp16 synthetic checkpoint, {opt_layers} layers x 32 heads (position-free)"),
                  rotary_model(rotary, tmp)]
        for model, words in models:
            with child_runs(ROOT, model) as after, child_runs(tree, model) as prior:
                pairs = [(prior(), after()) for _ in range(rounds)]
            print(f"{words}:")
            for k, unit in ((0, "wall"), (1, "CPU")):
                b, a = median(p[0][k] for p in pairs), median(p[1][k] for p in pairs)
                ratio = median(p[1][k] / p[0][k] for p in pairs)
                print(f"  {unit:4}: {before} {b:7.2f} s, this checkout {a:7.2f} s -> RATIO {ratio:.3f} "
                      f"({100 * (ratio - 1):+.1f}%)", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="5120x128,2048x64,576x64", help="comma-separated NxN_head list")
    ap.add_argument("--heads", type=int, default=4, help="heads per timing (default 4)")
    ap.add_argument("--repeats", type=int, default=3, help="repeats of each per-head timing; the least is kept")
    ap.add_argument("--before", default="09eda08", help="the revision to compare whole runs with (default 09eda08, "
                    "the last without the spectra)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of whole runs (default 3)")
    ap.add_argument("--opt-layers", type=int, default=6, help="layers of the opt-1.3b-shaped checkpoint (default 6)")
    ap.add_argument("--rotary", default="SmolLM2-135M-Instruct", help="the rotary model (a pinned registry model)")
    ap.add_argument("--sections", default="12", help="1: per head, 2: whole runs (default both)")
    args = ap.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    if "1" in args.sections:
        per_head(args.shapes, args.heads, args.repeats)
    if "2" in args.sections:
        whole_runs(args.before, args.rounds, args.opt_layers, args.rotary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
