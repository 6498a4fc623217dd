"""The per-head statistics of i.i.d. Gaussian heads, the baseline the dashboard states beside each statistic.

    python benchmarks/gaussian_baseline.py                    # the (N, n) of the store's computed models
    python benchmarks/gaussian_baseline.py --pairs 768x64,384x32 --samples 400

For each (N = d_model, n = d_head) it samples ``--samples`` heads with W_Q, W_K of shape (n, N) and i.i.d.
standard normal entries, computes every statistic of ``pipeline.schema.STATISTICS`` at d = 0 with the
definitions of the store (S, T = symmetric and antisymmetric parts of L = W_K^T W_Q scaled to ||L||_F = 1;
the 2n eigenvalues of S on the span of W_K^T and W_Q^T; h = singular values of L), and prints the mean and
the standard deviation over the samples, then the means as a Python table for ``dashboard/common/baselines.py``.

The computation works on the span: with Q an orthonormal basis of [W_K^T | W_Q^T] (N x 2n), L = Q M Q^T with
M = (W_K Q)^T (W_Q Q), so S, the singular values and the trace are those of the 2n x 2n M.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

TOL = 1e-9  # |lambda| <= TOL * max|lambda| counts as zero


def statistics_of(M: np.ndarray) -> dict[str, float]:
    """Every statistic of the form L = Q M Q^T (Q orthonormal columns) from its 2n x 2n block M."""
    M = M / np.linalg.norm(M)
    S = (M + M.T) / 2
    lam = np.linalg.eigvalsh(S)[::-1]
    cut = TOL * np.abs(lam).max()
    n_pos, n_neg = int((lam > cut).sum()), int((lam < -cut).sum())
    k = lam.size
    lp = np.zeros(k)
    lm = np.zeros(k)
    pos, neg = np.sort(lam[lam > 0])[::-1], np.sort(-lam[lam < 0])[::-1]
    lp[: pos.size], lm[: neg.size] = pos, neg
    u = lp - lm
    sym = float((S**2).sum())
    b, c, d = 2 * float(lp @ lm), float((u[u > 0] ** 2).sum()), float((u[u < 0] ** 2).sum())
    norm_p, norm_m = np.linalg.norm(lp), np.linalg.norm(lm)
    rho = norm_m / norm_p
    h2 = np.linalg.svd(M, compute_uv=False) ** 2
    out = dict(symmetric_energy=sym, n_pos=n_pos, n_neg=n_neg, n_zero=k - n_pos - n_neg,
               balance=1 - abs(n_pos - n_neg) / (n_pos + n_neg),
               pairing=1 - np.linalg.norm(lp - lm) / np.sqrt(sym), rho=rho,
               pairing_bound=1 - abs(1 - rho) / np.sqrt(1 + rho**2))
    out["pairing_gap"] = out["pairing_bound"] - out["pairing"]
    out["lobe_departure"] = np.linalg.norm(lm - rho * lp) / norm_m
    out |= dict(b_sym=b / sym, c_sym=c / sym, d_sym=d / sym, trace_ratio=abs(np.trace(M)),
                participation_ratio=h2.sum() ** 2 / (h2**2).sum(), stable_rank=h2.sum() / h2.max(),
                leading_share=h2.max() / h2.sum())
    return {key: float(v) for key, v in out.items()}


def gaussian_head(rng: np.random.Generator, N: int, n: int) -> np.ndarray:
    """The 2n x 2n block M of one i.i.d. Gaussian head (see the module doc)."""
    W_Q, W_K = rng.standard_normal((n, N)), rng.standard_normal((n, N))
    Q, _ = np.linalg.qr(np.concatenate([W_K.T, W_Q.T], axis=1))
    return (W_K @ Q).T @ (W_Q @ Q)


def store_pairs() -> list[tuple[int, int]]:
    """The (d_model, d_head) of the default store's computed models."""
    import xarray as xr

    from pipeline.schema import model_rows
    from pipeline.store import default_store_path

    rows = model_rows(xr.open_zarr(default_store_path(), group="profiles"))
    return sorted({(r.d_model, r.d_head) for r in rows if r.computed and not r.damaged})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", default="", help="comma-separated NxN_head list (default: the store's computed "
                                                "models)")
    ap.add_argument("--samples", type=int, default=200, help="Gaussian heads per pair (default 200)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.samples < 2:
        ap.error("--samples must be at least 2")
    try:
        pairs = ([tuple(int(x) for x in p.split("x")) for p in args.pairs.split(",")] if args.pairs
                 else store_pairs())
    except ValueError:
        ap.error(f"--pairs must look like 768x64,384x32, got {args.pairs!r}")
    from pipeline.schema import STATISTICS

    rng = np.random.default_rng(args.seed)
    table = {}
    for N, n in pairs:
        t0 = time.perf_counter()
        rows = [statistics_of(gaussian_head(rng, N, n)) for _ in range(args.samples)]
        values = {s: np.array([r[s] for r in rows]) for s in STATISTICS}
        print(f"N = {N}, n = {n}: {args.samples} heads in {time.perf_counter() - t0:.1f} s "
              f"(closed form symmetric_energy (N+1)/(2N) = {(N + 1) / (2 * N):.5f})")
        for s in STATISTICS:
            print(f"  {s:20s} mean {values[s].mean():12.6g}   sd {values[s].std(ddof=1):10.4g}")
        table[(N, n)] = {s: float(f"{values[s].mean():.4g}") for s in STATISTICS if s != "symmetric_energy"}
    print(f"\n# seed {args.seed}, {args.samples} heads per pair")
    print("MEASURED = {")
    for key, row in table.items():
        print(f"    {key}: {row},")
    print("}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
