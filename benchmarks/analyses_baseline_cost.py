"""Making a baseline layer against profiling it, side by side in one run, at a Mistral-Small shape.

    python benchmarks/analyses_baseline_cost.py [--layers 2] [--heads 8]

The shape is Mistral-Small-24B-Base's (40 layers, 32 query heads over 8 key heads, N = 5120, n = 128, rope with
base 1e8; its config from ``pipeline.analyses.baselines.config_for_shape``). It times, in CPU time on one thread:

- building the model on the meta device once (``InitHeads``), and per layer the library-initialisation baseline
  (``InitHeads.layer``: one attention module materialised and initialised, its W_Q, W_K read) and the i.i.d. one
  (``IidHeads.layer``);
- per layer the profile at the 129 offsets with statistics, as a profiles run computes it
  (``pipeline.profile.head_profiles``, numpy route), on the first ``--heads`` heads of the layer, scaled to the
  layer's 32 heads (every head costs the same: one span and 129 eigenproblems of the same size).

It prints both per layer and their ratio, and the whole model's: the meta build plus 40 layers of either baseline
against 40 profiled layers.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def cpu(fn):
    t0 = time.process_time()
    out = fn()
    return out, time.process_time() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=2, help="layers made and profiled (default 2)")
    ap.add_argument("--heads", type=int, default=8, help="heads profiled per layer, scaled to 32 (default 8)")
    args = ap.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    import numpy as np
    import torch

    torch.set_num_threads(1)
    from pipeline.analyses.baselines import config_for_shape
    from pipeline.families import rotations
    from pipeline.profile import head_profiles
    from pipeline.registry.models import MODELS
    from pipeline.sources.iid_heads import IidHeads
    from pipeline.sources.init_heads import InitHeads

    spec = MODELS["Mistral-Small-24B-Base"]
    config = config_for_shape(spec, spec.rope_theta)
    init, t_meta = cpu(lambda: InitHeads(config, 0))
    iid = IidHeads(init.layout, 0)
    R = rotations(init.layout)
    H = init.layout.n_heads
    print(f"shape: {init.layout.n_layers} layers x {H} heads ({init.layout.n_kv_heads} key heads), "
          f"N = {init.layout.d_model}, n = {init.layout.d_head}, {len(R)} offsets; CPU seconds, one thread")
    print(f"meta model built once: {t_meta:.2f} s")
    print(f"{'layer':>5} {'init':>8} {'iid':>8} {'profile':>9} {'init/profile':>13} {'iid/profile':>12}")
    rows = []
    for layer in range(args.layers):
        qk, t_init = cpu(lambda layer=layer: init.layer(layer))
        _, t_iid = cpu(lambda layer=layer: iid.layer(layer))
        k = min(args.heads, H)
        _, t_part = cpu(lambda qk=qk, k=k: head_profiles(qk.W_Q[:k], qk.W_K, R, kv_of_head=qk.kv_of_head[:k],
                                                          eigvalsh="numpy", threads=1, at_zero=True))
        t_prof = t_part * H / k
        rows.append((t_init, t_iid, t_prof))
        print(f"{layer:>5} {t_init:>8.2f} {t_iid:>8.2f} {t_prof:>9.2f} {t_init / t_prof:>13.3f} "
              f"{t_iid / t_prof:>12.3f}", flush=True)
    t_init, t_iid, t_prof = np.mean(rows, axis=0)
    L = init.layout.n_layers
    print(f"whole model (mean layer x {L}): init {t_meta + L * t_init:.0f} s, iid {L * t_iid:.0f} s, "
          f"profile {L * t_prof:.0f} s; init / profile = {(t_meta + L * t_init) / (L * t_prof):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
