"""``python -m pipeline orbits``: train the 32-head layer on addition mod 24, find its orbits, write the store."""

from __future__ import annotations

import argparse
import os

DESCRIPTION = """\
Train a single 32-head self-attention layer (embedding W_E -> attention -> unembedding W_U, no
positions) on (x1, x2, x3) -> (x2+x3, x3+x1, x1+x2) mod 24 with cross-entropy plus an exact
equivariance penalty (shifting all inputs by s must shift all outputs by 2s), then look for orbits
of the shift group C_24 among its heads and write the movie to the store's `orbits` group.

What it writes:
  store `orbits` group   frames of every head in four Fourier panels, metrics per frame, the final
                         24x24 QK (M) and OV (R) circuits, the orbits found and their check per shift
  store `profiles` group one more model (--model-name, default orbits-c24): the heads' bilinear forms
                         W_K^T W_Q in the residual space
  --save-run PATH        the whole run (frames, weights) as .npz, to rewrite the store later

Examples:
  python -m pipeline orbits --epochs 300                     # a quick look (about a minute)
  python -m pipeline orbits --seed 0 --epochs 4500 --polish-steps 100
  python -m pipeline orbits --from-run /work/orbits_runs/long-s0.npz   # store a sweep run, no training

The search over hyperparameters is `python -m pipeline.orbits.sweep --help`; its results are in
docs/orbits_sweep.md.
"""


def register(subparsers) -> None:
    from .config import Config

    d = Config()
    p = subparsers.add_parser("orbits", help="train the 32-head layer on addition mod 24 and find its C_24 orbits",
                              description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", default="store.zarr", help="Zarr store to write (default: store.zarr)")
    p.add_argument("--from-run", default=None, metavar="NPZ",
                   help="write this saved run (from the sweep or --save-run) instead of training")
    p.add_argument("--save-run", default=None, metavar="NPZ", help="also save the run's frames and weights here")
    p.add_argument("--no-store", action="store_true", help="train and report only; write nothing to the store")
    p.add_argument("--model-name", default="orbits-c24", help="name of the layer in the profiles group")
    g = p.add_argument_group("model")
    g.add_argument("--heads", type=int, default=d.n_heads, help=f"number of heads (default {d.n_heads})")
    g.add_argument("--d-model", type=int, default=d.d_model, help=f"residual width (default {d.d_model})")
    g.add_argument("--d-head", type=int, default=d.d_head, help=f"head dimension (default {d.d_head})")
    g.add_argument("--init-scale", type=float, default=d.init_scale, help="std multiplier of the init (default 1)")
    g.add_argument("--fixed-embed", action="store_true", help="keep W_E at its random init")
    g = p.add_argument_group("task and training")
    g.add_argument("--seed", type=int, default=d.seed, help="seed of init, split and contexts (default 0)")
    g.add_argument("--train-fraction", type=float, default=d.train_fraction,
                   help=f"fraction of triples to train on (default {d.train_fraction})")
    g.add_argument("--split", choices=("orbit", "random"), default=d.split,
                   help="orbit: whole orbits of shifts+permutations per side (default); random: leaky, comparison")
    g.add_argument("--epochs", type=int, default=d.epochs, help=f"full-batch AdamW steps (default {d.epochs})")
    g.add_argument("--lr", type=float, default=d.lr, help=f"peak learning rate, cosine to --lr-final (default {d.lr})")
    g.add_argument("--lr-final", type=float, default=d.lr_final)
    g.add_argument("--weight-decay", type=float, default=d.weight_decay, help=f"AdamW decay (default {d.weight_decay})")
    g.add_argument("--weight-decay-qk", type=float, default=d.weight_decay_qk,
                   help="AdamW decay of W_Q and W_K alone (default: --weight-decay)")
    g.add_argument("--polish-steps", type=int, default=d.polish_steps, help="LBFGS steps after AdamW (default 0)")
    g.add_argument("--polish-penalty", type=float, default=d.polish_penalty,
                   help="penalty weight during polishing (default: --penalty-end)")
    g.add_argument("--dtype", choices=("float32", "float64"), default=d.dtype,
                   help="precision of training (default float32; float64 for errors far below 1e-5)")
    g = p.add_argument_group("equivariance penalty")
    g.add_argument("--penalty-start", type=float, default=d.penalty_start, help="weight before the ramp (default 1)")
    g.add_argument("--penalty-end", type=float, default=d.penalty_end, help="weight after the ramp (default 3000)")
    g.add_argument("--ramp", type=int, nargs=2, default=(d.ramp_start, d.ramp_end), metavar=("START", "END"),
                   help=f"epochs of the geometric ramp (default {d.ramp_start} {d.ramp_end})")
    g.add_argument("--context-weight", type=float, default=d.context_weight,
                   help="weight of the penalty on longer sequences relative to length 3 (0: length 3 only)")
    g.add_argument("--context-lengths", type=int, nargs="+", default=list(d.context_lengths),
                   help="sequence lengths of the random contexts (default 4 5 6 8)")
    g.add_argument("--context-kind", choices=("tokens", "dirichlet"), default=d.context_kind,
                   help="tokens: random sequences; dirichlet: random mixtures (the long-sequence limit)")
    g.add_argument("--context-batch", type=int, default=d.context_batch, help="contexts per step (x 24 shifts)")
    g.add_argument("--penalty-scales", type=float, nargs="+", default=list(d.penalty_scales), metavar="BETA",
                   help="QK scales at which the penalty is taken (M -> beta M, i.e. embeddings scaled by "
                   "sqrt(beta)); the penalty is the mean over them (default 1: the layer as it is)")
    g = p.add_argument_group("orbit finder")
    g.add_argument("--tol", type=float, default=0.02, help="largest matching error inside an orbit (default 0.02)")
    g.add_argument("--dead-tol", type=float, default=0.02, help="heads with ||R|| below this x the largest are dead")
    g.add_argument("--merge-tol", type=float, default=0.02, help="heads with M this close (relative) are merged")
    g.add_argument("--near-tol", type=float, default=0.10,
                   help="looser tolerance for the near-orbits also stored (variable near_orbit; default 0.10); "
                   "they choose the panels when no orbit closes within --tol")
    p.set_defaults(func=run)


def config_from_args(args):
    from .config import Config

    if not 0 < args.train_fraction < 1:
        raise SystemExit(f"--train-fraction must lie strictly between 0 and 1; got {args.train_fraction}")
    if args.epochs < 1:
        raise SystemExit(f"--epochs must be at least 1; got {args.epochs}")
    if any(not b > 0 for b in args.penalty_scales):
        raise SystemExit(f"--penalty-scales must all be positive; got {args.penalty_scales}")
    return Config(seed=args.seed, n_heads=args.heads, d_model=args.d_model, d_head=args.d_head,
                  init_scale=args.init_scale, learn_embed=not args.fixed_embed, train_fraction=args.train_fraction,
                  split=args.split, epochs=args.epochs, lr=args.lr, lr_final=args.lr_final,
                  weight_decay=args.weight_decay, penalty_start=args.penalty_start, penalty_end=args.penalty_end,
                  ramp_start=args.ramp[0], ramp_end=args.ramp[1], context_weight=args.context_weight,
                  context_lengths=tuple(args.context_lengths), context_batch=args.context_batch,
                  context_kind=args.context_kind, polish_steps=args.polish_steps,
                  weight_decay_qk=args.weight_decay_qk, polish_penalty=args.polish_penalty, dtype=args.dtype,
                  penalty_scales=tuple(args.penalty_scales))


def run(args) -> int:
    import numpy as np

    from .find import find_orbits, split_errors
    from .fourier import choose_frequencies
    from .store_io import load_run, orbits_dataset, write_orbits, write_profiles_model

    if args.from_run:
        if not os.path.exists(args.from_run):
            raise SystemExit(f"--from-run {args.from_run!r} does not exist; give an .npz saved by the sweep or "
                             "by --save-run")
        run_ = load_run(args.from_run)
    else:
        import torch

        from .sweep import save_run
        from .train import train

        torch.set_num_threads(1)
        cfg = config_from_args(args)
        result = train(cfg, progress=True)
        path = args.save_run or os.path.join(os.environ.get("TMPDIR", "/tmp"), f"orbits-seed{cfg.seed}.npz")
        save_run(path, f"seed{cfg.seed}", result)
        print(f"saved the run to {path}")
        run_ = load_run(path)
    missing = np.flatnonzero(np.isnan(run_["metric_sharpened_error"]))
    if missing.size:  # a run saved before the metric existed: compute it per frame from the stored heads
        from .store_io import sharpened_error

        print(f"computing sharpened_error for {missing.size} frames saved without it")
        for f in missing:
            run_["metric_sharpened_error"][f] = sharpened_error(run_["M"][f], run_["R"][f])
    finder = {"tol": args.tol, "dead_tol": args.dead_tol, "merge_tol": args.merge_tol}
    M, R = run_["M"][-1].astype(np.float64), run_["R"][-1].astype(np.float64)
    found = find_orbits(M, R, **finder)
    near = find_orbits(M, R, **(finder | {"tol": args.near_tol}))
    strict = list(zip(found.members, found.sizes, strict=True))
    loose = [(m, s) for m, s in zip(near.members, near.sizes, strict=True) if s >= 2]
    A, B = choose_frequencies(M, R, strict or loose)
    last = {k[7:]: float(v[-1]) for k, v in run_.items() if k.startswith("metric_")}
    print(f"final: train {last['train_accuracy']:.4f}  held-out {last['heldout_accuracy']:.4f}  "
          f"equivariance error {last['equivariance_error']:.2e}  (longer sequences {last['context_error']:.2e}, "
          f"at 2x QK {last['sharpened_error']:.2e})")
    print(f"orbits within {args.tol:.0%}: {found.sizes or 'none'}  worst errors {np.round(found.worst_error, 4)}  "
          f"median matching error {found.median_error:.3f}; panels at frequencies {A} and {B}")
    for i, (em, er) in enumerate(split_errors(M, R, found)):
        print(f"  orbit {i} ({found.sizes[i]} heads: {list(map(int, found.members[i]))}): worst error of M alone "
              f"{em:.2%}, of R alone {er:.2%}")
    print(f"near-orbits within {args.near_tol:.0%}: {near.sizes or 'none'}  worst errors "
          f"{np.round(near.worst_error, 4)}")
    if args.no_store:
        return 0
    ds = orbits_dataset(run_, found, A, B, finder, near=near, near_tol=args.near_tol)
    write_orbits(args.store, ds)
    params = {k[6:]: v for k, v in run_.items() if k.startswith("param_")}
    write_profiles_model(args.store, params, name=args.model_name,
                         command=f"python -m pipeline orbits (run {run_['name']})")
    print(f"wrote the orbits group and profiles model {args.model_name!r} to {args.store}")
    return 0
