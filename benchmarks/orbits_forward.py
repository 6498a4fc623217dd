"""Fast circuit forward vs the token-level forward: one full-batch step on all 24^3 triples, side by side.

    python benchmarks/orbits_forward.py [--repeats 3]

Prints seconds per forward+backward of each route on the same weights (32 heads, d_model 128, d_head 24),
their ratio, and the largest difference of their logits (they compute the same function).
"""

import argparse
import time

import torch

from pipeline.orbits.model import circuits, init_params, table_forward, token_forward
from pipeline.orbits.task import all_triples


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    params = init_params(seed=0)
    for v in params.values():
        v.requires_grad_(True)
    x = torch.from_numpy(all_triples())

    def fast():
        M, R = circuits(params)
        G = table_forward(M, R)
        G.square().mean().backward()
        return G

    def tokens():
        out = token_forward(params, x)
        out.square().mean().backward()
        return out

    times = {}
    for name, fn in (("circuit table", fast), ("token level", tokens)):
        fn()
        t = time.perf_counter()
        for _ in range(args.repeats):
            fn()
        times[name] = (time.perf_counter() - t) / args.repeats
        print(f"{name:>14}: {times[name]:.3f} s per full-batch forward+backward")
    G = fast().detach()
    logits = tokens().detach()
    diff = (G[x[:, 0], x[:, 1], x[:, 2]] - logits[:, 0]).abs().max()
    print(f"ratio token/circuit: {times['token level'] / times['circuit table']:.1f}x; max |logit difference| "
          f"{float(diff):.1e} (float32)")


if __name__ == "__main__":
    main()
