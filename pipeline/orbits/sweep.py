"""The sweep for the regime where orbits emerge: a fixed, named list of runs, run by workers, summarised.

Run (each worker runs every ``workers``-th run of the list, one thread, logging to RUNS/NAME.log):

    nohup python -m pipeline.orbits.sweep run --runs RUNS --worker 0 --workers 2 &
    nohup python -m pipeline.orbits.sweep run --runs RUNS --worker 1 --workers 2 &
    python -m pipeline.orbits.sweep summarize --runs RUNS --csv docs/orbits_sweep.csv

Each run saves RUNS/NAME.npz (frames of M, R, metrics, final params, split) and appends its final
metrics to RUNS/results.jsonl; a finished run is skipped on restart. ``summarize`` applies the orbit
finder to every run's final heads and writes one row per run (CSV, and the store's ``orbits_sweep``
group with ``--store``).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from .config import RECIPES

BASE = RECIPES["base"]  # the prototype's recipe (Config defaults): d_model 128, d_head 24, wd 1, penalty 1 -> 3000
LONG = RECIPES["long"]  # the long schedule (4500 epochs, ramp over 1000-4000); the runs below set their polishing
# The phases of docs/orbits_sweep.md (what each run gave is there); a phase's runs are independent, so a phase
# may be run in part. Run names are the rows of docs/orbits_sweep.csv.
PHASES: dict[str, list[tuple[str, dict]]] = {
    "smoke": [("smoke", {"epochs": 30, "polish_steps": 2})],
    # A: the long schedule against the base recipe, weight decay and init scale
    "A": [
        # the long schedule ramps the penalty over epochs 1000-4000, when the cosine learning rate is low
        ("long-s0", LONG | {"seed": 0, "polish_steps": 150}),
        ("base-s1", {"seed": 1, "polish_steps": 50}),
        ("wd0.1-s0", {"weight_decay": 0.1, "polish_steps": 50}),
        ("init2-s0", {"init_scale": 2.0, "polish_steps": 50}),
    ],
    # B: one setting changed at a time from the base recipe
    "B": [
        ("wd3-s0", {"weight_decay": 3.0, "polish_steps": 50}),
        ("ctxlong-s0", {"context_lengths": (4, 8, 16, 32), "polish_steps": 50}),
        ("base-s2", {"seed": 2, "polish_steps": 50}),
        ("wd2-s1", {"seed": 1, "weight_decay": 2.0, "polish_steps": 50}),
        ("dir-s0", {"context_kind": "dirichlet", "context_lengths": (4, 8, 16, 32), "polish_steps": 50}),
        ("frac0.4-s0", {"train_fraction": 0.4, "polish_steps": 50}),
        ("fixedE-s0", {"learn_embed": False, "polish_steps": 50}),
        ("noctx-s0", {"context_weight": 0.0, "polish_steps": 50}),
        ("dh8-s0", {"d_head": 8, "polish_steps": 50}),
        ("pen1e4-s0", {"penalty_end": 1e4, "polish_steps": 50}),
        ("init0.5-s0", {"init_scale": 0.5, "polish_steps": 50}),
        ("dh32-s0", {"d_head": 32, "polish_steps": 50}),
        ("base-s3", {"seed": 3, "polish_steps": 50}),
        ("frac0.3-s0", {"train_fraction": 0.3, "polish_steps": 50}),
        ("pen300-s0", {"penalty_end": 300.0, "polish_steps": 50}),
    ],
    # C: more seeds of the decay settings, with longer polishing
    "C": [
        ("wd2-s2-p150", {"seed": 2, "weight_decay": 2.0, "polish_steps": 150}),
        ("wd1-s4-p150", {"seed": 4, "polish_steps": 150}),
        ("wd2-s3-p150", {"seed": 3, "weight_decay": 2.0, "polish_steps": 150}),
    ],
    # D: more seeds of the long schedule
    "D": [
        ("long-s1", LONG | {"seed": 1, "polish_steps": 150}),
        ("long-s2", LONG | {"seed": 2, "polish_steps": 150}),
    ],
    # E: is the soft attention what lets non-orbits be equivariant to 1e-4? Without decay on W_Q, W_K the
    # attention may sharpen, and then only orbits are equivariant
    "E": [
        ("qkwd0-s0", {"weight_decay_qk": 0.0, "polish_steps": 150}),
        ("qkwd0-s1", {"seed": 1, "weight_decay_qk": 0.0, "polish_steps": 150}),
        ("long-qkwd0-s0", LONG | {"seed": 0, "polish_steps": 150, "weight_decay_qk": 0.0}),
        ("qkwd0.1-s0", {"weight_decay_qk": 0.1, "polish_steps": 150}),
    ],
    # F: the penalty at several QK scales (embeddings scaled by sqrt(beta)): orbits are equivariant at every
    # scale, a layer tuned to its own scale is not (the metric sharpened_error)
    "F": [
        ("scales-s0", {"penalty_scales": (0.5, 1.0, 2.0), "polish_steps": 150}),
        ("scales-s1", {"seed": 1, "penalty_scales": (0.5, 1.0, 2.0), "polish_steps": 150}),
        ("long-scales-s0", LONG | {"seed": 0, "polish_steps": 150, "penalty_scales": (0.5, 1.0, 2.0)}),
        ("scales-s2", {"seed": 2, "penalty_scales": (0.5, 1.0, 2.0), "polish_steps": 150}),
    ],
    # G: one-hot tokens (W_E = W_U = I, d_model 24): the heads' weights live in the token space, where the group
    # acts. Adam's steps are ~lr per coordinate and the one-hot weights are ~10x larger than learned-embedding
    # ones, so these runs take lr 1e-2 with decay 0.1 (the base recipe's lr x decay)
    "G": [
        (f"onehot-s{s}", {"seed": s, "onehot": True, "d_model": 24, "lr": 1e-2, "lr_final": 1e-4,
                          "weight_decay": 0.1, "polish_steps": 150}) for s in range(4)
    ],
    # H: many seeds of the base recipe with polish-base-s1's long polishing: the init decides the head counts per
    # frequency, so draw many inits
    "H": [(f"seed{s}-p350", {"seed": s, "polish_steps": 350}) for s in range(5, 21)],
    # I: more seeds of the long schedule with long polishing
    "I": [(f"long-s{s}-p650", LONG | {"seed": s, "polish_steps": 650}) for s in range(3, 11)],
}


# continue a finished run with more LBFGS polishing: name -> (source run, extra polish steps[, config changes])
POLISH = {
    "polish-base-s1": ("base-s1", 300),
    "polish-long-s0": ("long-s0", 200),
    "polish-wd2-s1": ("wd2-s1", 250),
    "polish2-long-s0": ("polish-long-s0", 200),
    "polish3-long-s0": ("polish2-long-s0", 300),
    "polish-init0.5-s0": ("init0.5-s0", 250),
    "polish-long-s1": ("long-s1", 200),
    "polish-long-s2": ("long-s2", 200),
    "polish2-long-s1": ("polish-long-s1", 200),
    # a 300x heavier penalty in float64, to push the equivariance error far below 1e-4
    "hipen-long-s0": ("polish2-long-s0", 300, {"polish_penalty": 1e6, "dtype": "float64"}),
    # polish-long-s2's hexagon at key frequency 4 has a sixth vertex of two heads with M a few % apart: polished on
    # to see whether they meet within the finder's 2% merge tolerance
    "polish2-long-s2": ("polish-long-s2", 300),
    "polish3-long-s2": ("polish2-long-s2", 400),
}


def polish_worker(runs: str, name: str) -> None:
    """Polish RUNS/<source>.npz further; saved as RUNS/<name>.npz with epochs counted on from the source."""
    import torch

    from .config import Config
    from .malloc import keep_freed_memory
    from .store_io import load_run
    from .train import train

    torch.set_num_threads(1)
    keep_freed_memory()  # this worker process's own setting (pipeline.orbits.malloc)
    source, steps, *changes = POLISH[name]
    changes = changes[0] if changes else {}
    src = load_run(os.path.join(runs, f"{source}.npz"))
    cfg_d = dict(src["config"]) | {"polish_steps": steps, "frame_every": 25} | changes
    cfg_d["context_lengths"] = tuple(cfg_d["context_lengths"])
    cfg_d["penalty_scales"] = tuple(cfg_d.get("penalty_scales", (1.0,)))
    done = int(src["epoch"][-1])
    cfg = Config(**(cfg_d | {"epochs": 0}))
    with open(os.path.join(runs, f"{name}.log"), "w") as logf:
        def log(line):
            logf.write(f"{time.strftime('%H:%M:%S')} {line}\n")
            logf.flush()

        start = {k[6:]: v for k, v in src.items() if k.startswith("param_")}
        result = train(cfg, progress=False, log=log, start=start)
    result["epoch"] = result["epoch"] + done
    for k in ("M", "R", "epoch"):
        result[k] = np.concatenate([src[k], result[k][1:]])
    if "profile" in src:  # a source saved without frame profiles keeps none
        result["profile"] = np.concatenate([src["profile"], result["profile"][1:]])
    else:
        result.pop("profile")
    for k in result["metrics"]:
        result["metrics"][k] = np.concatenate([src[f"metric_{k}"], result["metrics"][k][1:]])
    result["config"] = dict(src["config"]) | changes | {"polish_steps": src["config"]["polish_steps"] + steps}
    save_run(os.path.join(runs, f"{name}.npz"), name, result)
    with open(os.path.join(runs, "results.jsonl"), "a") as f:
        f.write(json.dumps({"name": name, "phase": "polish", "config": result["config"], "final": result["final"],
                            "seconds": result["seconds"]}) + "\n")


def run_list(phase: str) -> list[tuple[str, dict]]:
    if phase not in PHASES:
        raise SystemExit(f"unknown phase {phase!r}; known: {', '.join(PHASES)}")
    return PHASES[phase]


def done_names(runs: str) -> set[str]:
    path = os.path.join(runs, "results.jsonl")
    if not os.path.exists(path):
        return set()
    with open(path) as f:
        return {json.loads(line)["name"] for line in f if line.strip()}


def save_run(path: str, name: str, result: dict) -> None:
    np.savez_compressed(
        path, epoch=result["epoch"], M=result["M"], R=result["R"], train_mask=result["train_mask"],
        config=json.dumps(result["config"]), name=name,
        **({"profile": result["profile"]} if "profile" in result else {}),
        **{f"metric_{k}": v for k, v in result["metrics"].items()},
        **{f"param_{k}": v for k, v in result["params"].items()},
    )


def run_worker(runs: str, phase: str, worker: int, workers: int) -> None:
    import torch

    from .config import Config
    from .malloc import keep_freed_memory
    from .train import train

    torch.set_num_threads(1)
    keep_freed_memory()  # this worker process's own setting (pipeline.orbits.malloc)
    os.makedirs(runs, exist_ok=True)
    for i, (name, over) in enumerate(run_list(phase)):
        if i % workers != worker or name in done_names(runs):
            continue
        cfg = Config(**(BASE | over))
        with open(os.path.join(runs, f"{name}.log"), "w") as logf:
            def log(line, logf=logf):
                logf.write(f"{time.strftime('%H:%M:%S')} {line}\n")
                logf.flush()

            log(f"config {json.dumps(cfg.to_dict())}")
            try:
                result = train(cfg, progress=False, log=log)
            except Exception as exc:  # noqa: BLE001 - record and continue with the next run
                log(f"FAILED {exc!r}")
                continue
        save_run(os.path.join(runs, f"{name}.npz"), name, result)
        with open(os.path.join(runs, "results.jsonl"), "a") as f:
            f.write(json.dumps({"name": name, "phase": phase, "config": result["config"], "final": result["final"],
                                "seconds": result["seconds"]}) + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m pipeline.orbits.sweep", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run this worker's share of a phase")
    r.add_argument("--runs", required=True, help="folder for the runs' npz, logs and results.jsonl")
    r.add_argument("--phase", default="A", help="which list of runs (default A)")
    r.add_argument("--worker", type=int, default=0)
    r.add_argument("--workers", type=int, default=1)
    q = sub.add_parser("polish", help="polish a finished run further (see POLISH)")
    q.add_argument("--runs", required=True)
    q.add_argument("name", choices=sorted(POLISH))
    s = sub.add_parser("summarize", help="apply the orbit finder to every finished run; write the table")
    s.add_argument("--runs", required=True)
    s.add_argument("--csv", default="docs/orbits_sweep.csv")
    s.add_argument("--store", default=None, help="also write the store's orbits_sweep group")
    i = sub.add_parser("inspect", help="print one finished run's orbits, frequency families and E3 at QK scales")
    i.add_argument("--runs", required=True)
    i.add_argument("name", help="a run's name (RUNS/NAME.npz)")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        run_worker(args.runs, args.phase, args.worker, args.workers)
    elif args.cmd == "polish":
        polish_worker(args.runs, args.name)
    elif args.cmd == "inspect":
        from .store_io import load_run
        from .summary import inspect

        path = os.path.join(args.runs, f"{args.name}.npz")
        if not os.path.exists(path):
            raise SystemExit(f"no run {args.name!r} in {args.runs!r} (expected {path})")
        print(inspect(load_run(path)))
    else:
        from .summary import summarize

        summarize(args.runs, args.csv, args.store)


if __name__ == "__main__":
    main()
