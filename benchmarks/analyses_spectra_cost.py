"""What the three d = 0 spectra (pipeline.analyses.spectra) add to a head's profile, side by side in one run.

    python benchmarks/analyses_spectra_cost.py [--shapes 5120x128,768x64] [--heads 2] [--repeats 3] [--run MODEL]

For each (N, n) and each positional kind (rotary: the profile at the 129 offsets d = 0..128; position-free: d = 0
alone) it times, per head and in CPU time on one BLAS thread, (1) the profile with its statistics, as a profiles
run computes it (``pipeline.profile.head_profiles(..., at_zero=True)``), and (2) ``core_spectra`` on the same
heads' d = 0 top core rows ([A | B], which the profile route already holds), and prints the ratio (2) / (1). The
spectra's own three parts (svd of T, eigenvalues of A, svd of [A | B]) are timed apart as well. Best of
``--repeats``.

With ``--run MODEL`` (default all-MiniLM-L6-v2, whose weights ship with the test extra; "" to skip) it also times a
whole profiles run of that model into a temporary store (``pipeline.run.run_profiles``: reading the weights, the
profiles with statistics, the writes) against the spectra of all its heads at d = 0, in CPU time of this process.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def best(fn, repeats: int) -> float:
    """The least CPU time of ``repeats`` calls of fn (process time: other processes on the machine do not count)."""
    out = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        out = min(out, time.process_time() - t0)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="5120x128,768x64", help="comma-separated NxN_head list")
    ap.add_argument("--heads", type=int, default=2, help="heads per timing (default 2)")
    ap.add_argument("--repeats", type=int, default=3, help="repeats of each timing; the least is kept")
    ap.add_argument("--run", default="all-MiniLM-L6-v2", help="time a whole profiles run of this model too")
    args = ap.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    import numpy as np

    from pipeline.analyses.spectra import core_spectra
    from pipeline.profile import head_profiles, span_cores
    from pipeline.rotary import rotation_matrices

    print("CPU seconds per head, one BLAS thread; ratio = spectra / profile")
    print(f"{'N':>6} {'n':>5} {'offsets':>8} {'profile':>9} {'spectra':>9} {'ratio':>7}   "
          f"{'svd T':>7} {'eig A':>7} {'svd [A|B]':>9}")
    for shape in args.shapes.split(","):
        N, n = (int(x) for x in shape.split("x"))
        rng = np.random.default_rng(0)
        W_Q = rng.standard_normal((args.heads, n, N)).astype(np.float32)
        W_K = rng.standard_normal((args.heads, n, N)).astype(np.float32)
        k, m = min(N, 2 * n), min(n, N)
        tops = np.stack([K[:m] @ P.T for K, P in (span_cores(W_Q[h], W_K[h]) for h in range(args.heads))])
        X = tops / np.linalg.norm(tops, axis=(1, 2), keepdims=True)
        T = np.zeros((args.heads, k, k))
        T[:, :m] = X
        T = (T - np.swapaxes(T, 1, 2)) / 2
        t_spec = best(lambda tops=tops: [core_spectra(t) for t in tops], args.repeats) / args.heads
        parts = [best(lambda f=f: f(), args.repeats) / args.heads for f in (
            lambda T=T: np.linalg.svd(T, compute_uv=False), lambda X=X, m=m: np.linalg.eigvals(X[:, :, :m]),
            lambda X=X: np.linalg.svd(X, compute_uv=False))]
        for offsets in (129, 1):
            R = rotation_matrices(n, n, 10000.0, offsets) if offsets > 1 else None
            t_prof = best(lambda R=R, W_Q=W_Q, W_K=W_K: head_profiles(W_Q, W_K, R, eigvalsh="numpy", threads=1,
                                                                    at_zero=True), args.repeats) / args.heads
            print(f"{N:>6} {n:>5} {offsets:>8} {t_prof:>9.4f} {t_spec:>9.4f} {t_spec / t_prof:>7.3f}   "
                  f"{parts[0]:>7.4f} {parts[1]:>7.4f} {parts[2]:>9.4f}", flush=True)
    if args.run:
        whole_run(args.run)
    return 0


def whole_run(model: str) -> None:
    """A profiles run of ``model`` into a temporary store against the d = 0 spectra of all its heads."""
    import tempfile

    import numpy as np

    from pipeline.analyses.spectra import core_spectra
    from pipeline.architectures import layer_qk, layout_from_config
    from pipeline.checkpoints import open_checkpoint
    from pipeline.profile import span_cores
    from pipeline.run import run_profiles

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.process_time()
        run_profiles([model], store_path=f"{tmp}/store.zarr", progress=False, log=lambda *a: None)
        t_run = time.process_time() - t0
    ckpt = open_checkpoint(model)
    layout = layout_from_config(ckpt.config)
    tops = []
    for layer in range(layout.n_layers):
        qk = layer_qk(ckpt, layout, layer)
        for h in range(layout.n_heads):
            K, P = span_cores(np.asarray(qk.W_Q[h], np.float64), np.asarray(qk.W_K[qk.kv_of_head[h]], np.float64))
            tops.append(K[:min(layout.d_head, len(K))] @ P.T)
    t0 = time.process_time()
    for top in tops:
        core_spectra(top)
    t_spec = time.process_time() - t0
    print(f"whole profiles run of {model} ({len(tops)} heads, {layout.positional}): {t_run:.2f} s; spectra of its "
          f"heads at d = 0: {t_spec:.2f} s; ratio {t_spec / t_run:.3f}")


if __name__ == "__main__":
    sys.exit(main())
