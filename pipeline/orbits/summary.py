"""The sweep table: one row per finished run, the orbit finder applied to its final heads.

Columns: the run's name and hyperparameters, its final metrics (see ``train.METRICS``), and the
finder's verdict at the issue's tolerance 2% and, to show how far a run is from orbits, at 5%, 10%
and 20%: the sizes of the orbits found (heads per orbit after merging, "" = none) and the largest
worst error among orbits of at least two heads; plus the median matching error over live heads and
shifts (``Orbits.median_error``).
"""

from __future__ import annotations

import csv
import glob
import json
import os

from .config import Config
from .find import find_orbits, split_errors
from .store_io import load_run, sweep_dataset, write_sweep

TOLS = (0.02, 0.05, 0.10, 0.20)
HP_KEYS = ("seed", "epochs", "polish_steps", "d_model", "d_head", "n_heads", "init_scale", "learn_embed", "onehot",
           "weight_decay", "weight_decay_qk", "penalty_end", "polish_penalty", "penalty_scales", "context_weight",
           "context_kind", "context_lengths", "train_fraction", "dtype")


def family_heads(M, R, found) -> dict[int, list[int]]:
    """Live heads by frequency family: r -> the heads of every merged group whose strongest frequency
    (``frequency_energy`` of the group alone, its R summed) is r."""
    import numpy as np

    from .fourier import frequency_energy

    fam: dict[int, list[int]] = {}
    for g in range(int(found.group.max()) + 1):
        heads = np.flatnonzero(found.group == g)
        r = int(np.argmax(frequency_energy(M[heads[:1]], R[heads].sum(axis=0, keepdims=True))))
        fam.setdefault(r, []).extend(int(h) for h in heads)
    return fam


def families(M, R, found) -> str:
    """The live heads by frequency family: "r:n/k" for each key frequency r, with n merged live heads whose
    strongest frequency is r and k = 24 / gcd(r, 24) the heads an orbit at r needs (a shift turns frequency r by
    r s 2 pi / 24, so an orbit there is a k-gon). Largest family first."""
    from math import gcd

    count = {r: len(set(found.group[heads])) for r, heads in family_heads(M, R, found).items()}
    order = sorted(count, key=lambda r: (-count[r], r))
    return " ".join(f"{r}:{count[r]}/{24 // gcd(r, 24)}" for r in order)


def run_row(run: dict) -> dict:
    cfg = Config().to_dict() | run["config"]  # runs saved before a setting existed ran at its default
    if cfg["weight_decay_qk"] is None:  # None means "as the other weights", and so does the table
        cfg["weight_decay_qk"] = cfg["weight_decay"]
    if cfg["polish_penalty"] is None:
        cfg["polish_penalty"] = cfg["penalty_end"]
    row = {"name": run["name"]} | {k: (json.dumps(cfg[k]) if isinstance(cfg[k], list) else cfg[k]) for k in HP_KEYS}
    for k in ("train_accuracy", "heldout_accuracy", "loss", "equivariance_error", "context_error", "sharpened_error"):
        row[k] = float(run[f"metric_{k}"][-1])
    M, R = run["M"][-1], run["R"][-1]
    for tol in TOLS:
        f = find_orbits(M, R, tol=tol)
        big = [i for i, s in enumerate(f.sizes) if s >= 2]
        tag = f"{round(tol * 100)}pct"
        row[f"orbits_{tag}"] = " ".join(str(f.sizes[i]) for i in big)
        row[f"worst_{tag}"] = max((f.worst_error[i] for i in big), default=float("nan"))
        if tol == TOLS[0]:
            split = [e for e, n in zip(split_errors(M, R, f), f.sizes, strict=True) if n >= 2]
            row["worst_M_2pct"] = max((e[0] for e in split), default=float("nan"))
            row["worst_R_2pct"] = max((e[1] for e in split), default=float("nan"))
            row["alive_heads"] = int(f.alive.sum())
            row["families"] = families(M, R, f)
            row["merged_groups"] = int(f.group.max() + 1)
            row["median_matching_error"] = f.median_error
    return row


def summarize(runs: str, csv_path: str, store_path: str | None = None) -> list[dict]:
    """Rows for every RUNS/*.npz (sorted by name); written to ``csv_path`` and optionally the store."""
    paths = sorted(glob.glob(os.path.join(runs, "*.npz")))
    if not paths:
        raise SystemExit(f"no finished runs (*.npz) in {runs!r}; start the sweep first (see --help)")
    rows = []
    for path in paths:
        row = run_row(load_run(path))
        rows.append(row)
        print(f"{row['name']:>14}  train {row['train_accuracy']:.3f}  held {row['heldout_accuracy']:.3f}  "
              f"eq {row['equivariance_error']:.1e}  ctx {row['context_error']:.1e}  "
              + "  ".join(f"{t}:[{row['orbits_' + t]}]" for t in ("2pct", "5pct", "10pct", "20pct"))
              + f"  median {row['median_matching_error']:.2f}")
    os.makedirs(os.path.dirname(csv_path) or ".", exist_ok=True)
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    print(markdown_table(rows))
    if store_path:
        ds = sweep_dataset(rows)
        write_sweep(store_path, ds, {"description": __doc__.strip(), "tolerances": list(TOLS),
                                     "source": "python -m pipeline.orbits.sweep summarize"})
    return rows



MD_COLUMNS = (("name", "run"), ("train_accuracy", "train"), ("heldout_accuracy", "held-out"),
              ("equivariance_error", "eq. error (len 3)"), ("context_error", "eq. error (len 4-16)"),
              ("sharpened_error", "eq. error at 2x QK"),
              ("alive_heads", "live heads"), ("orbits_2pct", "orbits 2%"), ("worst_2pct", "worst err (2%)"),
              ("worst_M_2pct", "M alone (2%)"), ("orbits_5pct", "orbits 5%"),
              ("orbits_10pct", "orbits 10%"), ("orbits_20pct", "orbits 20%"), ("worst_20pct", "worst err (20%)"),
              ("median_matching_error", "median match err"), ("families", "families r:heads/needed"))


def markdown_table(rows: list[dict]) -> str:
    """The table's main columns as markdown (the CSV holds every column)."""
    def fmt(v):
        if isinstance(v, float):
            return "" if v != v else (f"{v:.3f}" if 1e-2 <= abs(v) < 1e3 or v == 0 else f"{v:.1e}")
        return str(v) if v != "" else "-"

    head = "| " + " | ".join(h for _, h in MD_COLUMNS) + " |\n|" + "---|" * len(MD_COLUMNS) + "\n"
    return head + "".join("| " + " | ".join(fmt(r[k]) for k, _ in MD_COLUMNS) + " |\n" for r in rows)


def inspect(run: dict, scales=(0.5, 1.0, 2.0, 4.0)) -> str:
    """A run's final heads in detail (the numbers the docs quote): the 2% orbits with the errors of M and R alone,
    each frequency family's heads in its QK 0 x r plane (angle in degrees, radius, ||R|| gauge-centred), and the
    length-3 equivariance error with M scaled by each beta in ``scales``."""
    import numpy as np

    from .fourier import centre, project
    from .store_io import sharpened_error

    M, R = np.asarray(run["M"][-1], np.float64), np.asarray(run["R"][-1], np.float64)
    f = find_orbits(M, R)
    lines = [f"{run['name']}: epoch {int(run['epoch'][-1])}, {int(f.alive.sum())} live heads"]
    for i, (em, er) in enumerate(split_errors(M, R, f)):
        lines.append(f"orbit {i}: heads {list(map(int, f.members[i]))}, worst error {f.worst_error[i]:.2e} "
                     f"(M alone {em:.2e}, R alone {er:.2e})")
    Mc, Rc = centre(M, R)
    for r, heads in sorted(family_heads(M, R, f).items(), key=lambda kv: -len(kv[1])):
        z = project(Mc[heads], 0, r, 1)
        order = np.argsort(np.degrees(np.angle(z)) % 360)
        cells = [f"h{heads[j]} {np.degrees(np.angle(z[j])) % 360:.1f}deg r={abs(z[j]):.2f} "
                 f"|R|={np.linalg.norm(Rc[heads[j]]):.0f}" for j in order]
        lines.append(f"family r={r} ({len(heads)} heads): " + ", ".join(cells))
    lines.append("E3 at QK scale: " + ", ".join(f"{b:g}x {sharpened_error(M, R, b):.2e}" for b in scales))
    return "\n".join(lines)
