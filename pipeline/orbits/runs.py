"""One run of the orbit experiment: its name, its analysis and its place in the store (``orbits`` group and the
profiles model), with the orbit finder's defaults and the model's name that the CLI and the search share."""

from __future__ import annotations

import math
import os
import subprocess

MODEL_NAME = "orbits-c24"  # the layer's name in the store's profiles group
FINDER = {"tol": 0.02, "dead_tol": 0.02, "merge_tol": 0.02}  # find_orbits' settings for the stored run
NEAR_TOL = 0.10  # the looser tolerance of the near-orbits stored with it

# How runs are compared (``rank_key``), in words: the search's table and help, and whether a run replaces the
# stored one.
RANK_ORDER = "12 + 4 orbits at 2% first, then heads in orbits at 2%, then median matching error"
RANKING = (f"rank 1 = best: {RANK_ORDER} (a 12-orbit and a 4-orbit both found; heads in orbits of at least 2 "
           "heads, merged heads counted once; the finder at 2%); failed runs last")


def commit() -> str:
    """The repository's commit (with ``+dirty`` when pipeline/ has uncommitted changes), or ``unknown``."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--", "pipeline"], capture_output=True,
                               text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def rank_key(counts_2pct: dict[int, int], matching_error: float, failed: bool = False) -> tuple:
    """Sort key of a run (smaller is better) from its orbit counts by size at 2% and its median matching error:
    failed runs last; then a 12-orbit and a 4-orbit both found (the original's 12 + 4); then more heads in orbits
    of at least 2 heads (merged heads counted once); then a lower median matching error (non-finite: last)."""
    twelve_four = counts_2pct.get(12, 0) >= 1 and counts_2pct.get(4, 0) >= 1
    in_orbits = sum(size * n for size, n in counts_2pct.items() if size >= 2)
    err = matching_error if math.isfinite(matching_error) else math.inf
    return (bool(failed), not twelve_four, -in_orbits, err)


def run_name(cfg) -> str:
    """A run's name from its recipe and seed, e.g. long-s9-p650 (the sweep's names) or base-s0."""
    from .config import recipe_of

    recipe, rest = recipe_of(cfg)
    return f"{recipe}-s{cfg.seed}" + (f"-p{cfg.polish_steps}" if recipe == "long" and not rest else "") + \
        ("-custom" if rest else "")


def train_run(cfg, save_path: str | None = None, log=print) -> dict:
    """Train ``cfg`` on one thread (with progress) into a run dict as ``store_run`` takes it; also saved as .npz
    at ``save_path`` when given (``sweep.save_run``: ``--from-run`` reads it back)."""
    import torch

    from .store_io import run_from_result
    from .sweep import save_run
    from .train import train

    torch.set_num_threads(1)
    result = train(cfg, progress=True)
    name = run_name(cfg)
    if save_path:
        save_run(save_path, name, result)
        log(f"saved the run to {save_path}")
    return run_from_result(name, result)


def store_run(run_: dict, store_path: str | None, finder: dict, near_tol: float = NEAR_TOL,
              model_name: str = MODEL_NAME) -> list[str]:
    """Analyse a run's final heads (orbits at the finder's tol and at near_tol, panels) and, unless store_path
    is None, write the ``orbits`` group and the profiles model; returns the report's lines. The group's
    attributes record the run's seed, recipe, the repository's commit and the command that regenerates it."""
    import json

    import numpy as np

    from .config import command_for, differences, from_dict
    from .find import find_orbits, split_errors
    from .fourier import choose_frequencies
    from .store_io import orbits_dataset, sharpened_error, write_orbits, write_profiles_model

    out = []
    missing = np.flatnonzero(np.isnan(run_["metric_sharpened_error"]))
    if missing.size:  # a run saved before the metric existed: compute it per frame from the stored heads
        out.append(f"computing sharpened_error for {missing.size} frames saved without it")
        for f in missing:
            run_["metric_sharpened_error"][f] = sharpened_error(run_["M"][f], run_["R"][f])
    M, R = run_["M"][-1].astype(np.float64), run_["R"][-1].astype(np.float64)
    found = find_orbits(M, R, **finder)
    near = find_orbits(M, R, **(finder | {"tol": near_tol}))
    strict = list(zip(found.members, found.sizes, strict=True))
    loose = [(m, s) for m, s in zip(near.members, near.sizes, strict=True) if s >= 2]
    A, B = choose_frequencies(M, R, strict or loose)
    last = {k[7:]: float(v[-1]) for k, v in run_.items() if k.startswith("metric_")}
    out.append(f"final: train {last['train_accuracy']:.4f}  held-out {last['heldout_accuracy']:.4f}  "
               f"equivariance error {last['equivariance_error']:.2e}  (longer sequences "
               f"{last['context_error']:.2e}, at 2x QK {last['sharpened_error']:.2e})")
    out.append(f"orbits within {finder['tol']:.0%}: {found.sizes or 'none'}  worst errors "
               f"{np.round(found.worst_error, 4)}  median matching error {found.median_error:.3f}; panels at "
               f"frequencies {A} and {B}")
    for i, (em, er) in enumerate(split_errors(M, R, found)):
        out.append(f"  orbit {i} ({found.sizes[i]} heads: {list(map(int, found.members[i]))}): worst error of M "
                   f"alone {em:.2%}, of R alone {er:.2%}")
    out.append(f"near-orbits within {near_tol:.0%}: {near.sizes or 'none'}  worst errors "
               f"{np.round(near.worst_error, 4)}")
    if store_path is None:
        return out
    cfg = from_dict({k: v for k, v in run_["config"].items() if k != "extra"})
    command = command_for(cfg)
    ds = orbits_dataset(run_, found, A, B, finder, near=near, near_tol=near_tol)
    ds.attrs |= {"recipe": json.dumps(differences(cfg), sort_keys=True), "commit": commit(), "command": command}
    write_orbits(store_path, ds)
    params = {k[6:]: v for k, v in run_.items() if k.startswith("param_")}
    write_profiles_model(store_path, params, name=model_name, command=command)
    out.append(f"wrote the orbits group and profiles model {model_name!r} to {store_path} (run {run_['name']}; "
               f"regenerate with: {command})")
    return out
