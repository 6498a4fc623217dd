"""Write a run, its orbits and the sweep table to the store (``orbits``, ``orbits_sweep``, and one profiles model).

A *run* here is the mapping saved by the sweep / the CLI (``sweep.save_run``): ``epoch`` (F,), ``M`` and
``R`` (F, H, p, p) per frame, ``profile`` (F, H, 4) per frame when the run recorded it, ``metric_<name>`` (F,),
``config`` (JSON), ``train_mask`` (p, p, p) and the final ``param_<name>`` weights.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import xarray as xr

from ..profile import head_profiles
from ..schema import COORDINATES, ORBITS, ORBITS_SWEEP, ModelRow, ModelShape
from ..store import Store
from .config import METRICS
from .find import Orbits, find_orbits, split_errors
from .fourier import panel_positions, panels_for

TRAIL_EPOCHS = 250
SEED_FREQUENCIES = (10, 6)  # the seed page's panels: QK 0x10, OV 10x10, QK 0x6, OV 6x6
FINDER_DOC = {
    "orbit": "orbit id per head, -1 where none (dead heads and heads in no closed set); ids ordered by size",
    "shift_image": "for shift s, the head that s.h matched (Hungarian assignment on the matching error, among "
    "merged live heads; a merged group is named by its first head); -1 for dead heads",
    "shift_error": "matching error err(s, h, pi_s(h)) = ||(T_s M_h T_s^-1 - M_g, T_2s R_h T_s^-1 - R_g)||_F / "
    "||(M_h, R_h)||_F on gauge-centred heads (M rows, R columns and R rows centred: see fourier.centre), "
    "merged heads' R summed",
    "orbit_definition": "a set of merged heads closed under all 24 shifts with every error <= finder_tol, connected, "
    "and |orbit| * |stabiliser of h| = 24 for each head h in it",
    "near_orbit": "orbit id per head found by the same finder at the looser tolerance near_orbit_tol (not verified "
    "within finder_tol; shown to say how near the layer is to orbits), -1 none",
    "orbit_worst_error": "the largest shift_error over the orbit's heads and all 24 shifts",
    "orbit_worst_error_M": "the same for M alone: max ||T_s M_h T_s^-1 - M_g||_F / ||M_h||_F (the pair error is "
    "dominated by R, whose norm is far larger)",
    "orbit_worst_error_R": "the same for R alone (merged heads' R summed)",
    "M": "final QK circuit W_E W_Q^T W_K W_E^T / sqrt(d_head), rows = query token, cols = key token (raw, not centred)",
    "R": "final OV circuit W_U W_O W_V W_E^T, rows = output class, cols = input token (raw, not centred)",
    "position": "(Re z, Im z) of each head in each panel; QK: z = sqrt(2)/24 sum_ab M[a,b] exp(+i theta (freq_a a + "
    "eps freq_b b)), OV: the same with R[c,b] (freq_a on the output c), theta = 2 pi / 24; raw M and R (the panels' "
    "nonzero frequencies make them gauge-independent)",
    "matching_error": "per frame: median over live heads and shifts s != 0 of the matching error (0 for a layer made "
    "of orbits; about 1 or more for unrelated heads)",
    "heads_in_orbits": "per frame: heads in orbits of at least 2 heads found within finder_tol",
    "largest_orbit": "per frame: heads in the largest such orbit (0: none)",
    "head_profile": "per frame: each head's profile (a, b, c, d) of L = W_K^T W_Q on the residual stream (d_model), "
    "as the profiles group computes it for the final layer (model orbits-c24); NaN for a head with L = 0",
    "rotation": "a shift by s rotates every dot of the panel by rotation * s * 2 pi / 24 "
    "(QK: freq_a + eps freq_b; OV: 2 freq_a + eps freq_b, mod 24)",
}


def load_run(path: str) -> dict:
    """A saved run (npz) as a plain dict; ``config`` decoded."""
    with np.load(path, allow_pickle=False) as z:
        run = {k: z[k] for k in z.files}
    run["config"] = json.loads(str(run["config"]))
    run["name"] = str(run["name"])
    for k in METRICS:  # a run without this metric: NaN per frame, the last frame computed from its heads
        if f"metric_{k}" not in run:
            run[f"metric_{k}"] = np.full(len(run["epoch"]), np.nan)
            if k == "sharpened_error":
                run[f"metric_{k}"][-1] = sharpened_error(run["M"][-1], run["R"][-1])
    return run


def run_from_result(name: str, result: dict) -> dict:
    """``train``'s result as the mapping ``load_run`` returns for its saved npz (no file in between)."""
    run = {"epoch": result["epoch"], "M": result["M"], "R": result["R"], "train_mask": result["train_mask"],
           "config": json.loads(json.dumps(result["config"])), "name": name}
    if "profile" in result:
        run["profile"] = result["profile"]
    run |= {f"metric_{k}": np.asarray(v, dtype=np.float64) for k, v in result["metrics"].items()}
    run |= {f"param_{k}": v for k, v in result["params"].items()}
    return run


def sharpened_error(M: np.ndarray, R: np.ndarray, beta: float = 2.0) -> float:
    """The metric ``sharpened_error`` of one frame's heads (float64): the length-3 error of (beta M, R)."""
    import torch

    from .equivariance import layer_error

    return layer_error(beta * torch.as_tensor(np.asarray(M, np.float64)), torch.as_tensor(np.asarray(R, np.float64)))


def _flat_attrs(prefix: str, d: dict) -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, (list, tuple)):
            v = [x if isinstance(x, (int, float, str, bool)) else str(x) for x in v]
        elif isinstance(v, dict):
            v = json.dumps(v)
        elif isinstance(v, (np.integer, np.floating)):
            v = v.item()
        out[f"{prefix}{k}"] = v
    return out


def frame_orbit_metrics(M: np.ndarray, R: np.ndarray, finder: dict) -> dict:
    """Per frame: the finder's median matching error, heads in orbits of >= 2 heads, and the largest orbit."""
    med, in_orbit, largest = [], [], []
    for Mf, Rf in zip(M.astype(np.float64), R.astype(np.float64), strict=True):
        f = find_orbits(Mf, Rf, **finder)
        big = [m for m, s in zip(f.members, f.sizes, strict=True) if s >= 2]
        med.append(f.median_error)
        in_orbit.append(sum(len(m) for m in big))
        largest.append(max((len(m) for m in big), default=0))
    return {"matching_error": (("frame",), np.array(med)),
            "heads_in_orbits": (("frame",), np.array(in_orbit, dtype=np.int32)),
            "largest_orbit": (("frame",), np.array(largest, dtype=np.int32))}


def orbits_dataset(run: dict, found: Orbits, A: int, B: int, finder: dict, near: Orbits | None = None,
                   near_tol: float | None = None) -> xr.Dataset:
    """The ``orbits`` group for one run: frames, panels, metrics, final circuits and the verified orbits.

    ``near`` (optional): the finder's result at the looser ``near_tol``, stored as ``near_orbit`` (head) and
    ``near_orbit_size`` / ``near_orbit_worst_error`` (near_orbit_id).
    """
    panels = panels_for(A, B)
    # the seed's panels after the run's, each once (a run whose frequencies include 10 or 6 already has some)
    seed_panels = [pn for pn in panels_for(*SEED_FREQUENCIES) if pn not in panels]
    roles = ["run"] * len(panels) + ["seed"] * len(seed_panels)
    panels = panels + seed_panels
    pos = panel_positions(run["M"].astype(np.float64), run["R"].astype(np.float64), panels)  # (F, H, panel, 2)
    F, H = pos.shape[:2]
    p = run["M"].shape[-1]
    n_orb = len(found.sizes)
    data = {
        "position": (("frame", "head", "panel", "xy"), pos),
        "panel_kind": (("panel",), np.array([pn.kind for pn in panels], dtype=object)),
        "panel_role": (("panel",), np.array(roles, dtype=object)),
        "freq_a": (("panel",), np.array([pn.freq_a for pn in panels], dtype=np.int32)),
        "freq_b": (("panel",), np.array([pn.freq_b for pn in panels], dtype=np.int32)),
        "eps": (("panel",), np.array([pn.eps for pn in panels], dtype=np.int32)),
        "rotation": (("panel",), np.array([pn.rotation for pn in panels], dtype=np.int32)),
        "M": (("head", "row", "col"), run["M"][-1].astype(np.float64)),
        "R": (("head", "row", "col"), run["R"][-1].astype(np.float64)),
        "orbit": (("head",), found.orbit.astype(np.int32)),
        "alive": (("head",), found.alive),
        "merged_group": (("head",), found.group.astype(np.int32)),
        "shift_image": (("shift", "head"), found.shift_image.astype(np.int32)),
        "shift_error": (("shift", "head"), found.shift_error),
        "orbit_size": (("orbit_id",), np.array(found.sizes, dtype=np.int32)),
        "orbit_worst_error": (("orbit_id",), np.array(found.worst_error, dtype=np.float64)),
    }
    split = split_errors(run["M"][-1], run["R"][-1], found)
    data["orbit_worst_error_M"] = (("orbit_id",), np.array([e[0] for e in split], dtype=np.float64))
    data["orbit_worst_error_R"] = (("orbit_id",), np.array([e[1] for e in split], dtype=np.float64))
    if near is not None:
        data["near_orbit"] = (("head",), near.orbit.astype(np.int32))
        data["near_orbit_size"] = (("near_orbit_id",), np.array(near.sizes, dtype=np.int32))
        data["near_orbit_worst_error"] = (("near_orbit_id",), np.array(near.worst_error, dtype=np.float64))
    for k in METRICS:
        data[k] = (("frame",), run[f"metric_{k}"].astype(np.float64))
    if "profile" in run:
        data["head_profile"] = (("frame", "head", "coordinate"), np.asarray(run["profile"], dtype=np.float64))
    data |= frame_orbit_metrics(run["M"], run["R"], finder)
    coords = {
        "frame": np.arange(F), "epoch": (("frame",), run["epoch"].astype(np.int64)),
        "head": np.arange(H), "panel": np.array([pn.label for pn in panels], dtype=object),
        "xy": np.array(["x", "y"], dtype=object), "row": np.arange(p), "col": np.arange(p),
        "shift": np.arange(p), "orbit_id": np.arange(n_orb),
    }
    if "profile" in run:
        coords["coordinate"] = np.array(COORDINATES, dtype=object)
    if near is not None:
        coords["near_orbit_id"] = np.arange(len(near.sizes))
    ds = xr.Dataset(data, coords=coords)
    ds.attrs = orbits_attrs(run, found, A, B, finder, near, near_tol)
    return ds


def orbits_attrs(run: dict, found: Orbits, A: int, B: int, finder: dict, near: Orbits | None = None,
                 near_tol: float | None = None) -> dict:
    """The ``orbits`` group's attributes: the run, its split, config and frames, the panels, the orbits found, the
    finder's settings and the metrics' and finder's descriptions."""
    cfg = run["config"]
    attrs = {
        "run": run.get("name", ""),
        "seed": int(cfg["seed"]),
        "split": f"{cfg['split']} split (whole orbits of triples under shifts and permutations go to train or "
        f"held-out), train_fraction {cfg['train_fraction']}, drawn with seed {cfg['seed']}; "
        f"{int(run['train_mask'].sum())} of {run['train_mask'].size} triples in train",
        "config": json.dumps(cfg),
        "trail_epochs": TRAIL_EPOCHS,
        "frames": f"every {cfg['frame_every']} epochs up to {cfg['frame_switch']}, then every "
        f"{cfg['frame_every_late']}, and the final epoch; epochs past {cfg['epochs']} are LBFGS polishing steps",
        "panel_frequencies": [int(A), int(B)],
        "panels": "panels 0-3 are the run's own: [QK 0 x A, OV A x A, QK 0 x B, OV B x B] with A, B = "
        "panel_frequencies, chosen from the orbits found (their polygon frequency with the most energy) and "
        "otherwise the run's energy spectrum; when A, B differ from the seed's 10 and 6, panels 4-7 are the "
        "seed's QK 0x10, OV 10x10, QK 0x6, OV 6x6 (panel_role 'seed')",
        "orbit_sizes": [int(s) for s in found.sizes],
        "orbit_worst_errors": [float(e) for e in found.worst_error],
        "median_matching_error": None if np.isnan(found.median_error) else found.median_error,
        "near_orbit_tol": float(near_tol) if near is not None and near_tol is not None else None,
        "near_orbit_sizes": [int(s) for s in near.sizes] if near is not None else [],
        "objective": "CE(train) + w(t) * (E3^2 + context_weight * Ectx^2), see pipeline/orbits/train.py",
    }
    attrs |= _flat_attrs("hp_", cfg)
    attrs |= _flat_attrs("finder_", finder)
    attrs |= {f"metric_{k}": v for k, v in METRICS.items()}
    attrs |= {f"doc_{k}": v for k, v in FINDER_DOC.items()}
    return attrs


def sweep_dataset(rows: list[dict]) -> xr.Dataset:
    """One row per run (dim ``run``): each key of the rows becomes a variable (strings variable-length)."""
    keys = list(rows[0])
    data = {}
    for k in keys:
        vals = [r.get(k) for r in rows]
        if all(isinstance(v, (bool, np.bool_)) for v in vals):
            arr = np.array(vals, dtype=bool)
        elif all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in vals):
            arr = np.array(vals, dtype=np.float64)
        else:
            arr = np.array([str(v) for v in vals], dtype=object)
        data[k] = (("run",), arr)
    return xr.Dataset(data, coords={"run": np.arange(len(rows))})


def write_orbits(path, ds: xr.Dataset) -> None:
    """Replace the store's ``orbits`` group with ``ds`` (atomic: ``Store.replace_group``)."""
    Store.open(path).replace_group(ORBITS, ds)


def write_sweep(path, ds: xr.Dataset, attrs: dict | None = None) -> None:
    Store.open(path).replace_group(ORBITS_SWEEP, ds, attrs)


def write_profiles_model(path, params: dict, name: str = "orbits-c24",
                         command: str = "python -m pipeline orbits") -> None:
    """The trained layer's heads as one more model of the profiles group (L = W_K^T W_Q in the residual space),
    with their head statistics and spectrum."""
    W_Q, W_K = np.asarray(params["W_Q"], np.float64), np.asarray(params["W_K"], np.float64)
    H, n, N = W_Q.shape
    digest = hashlib.sha256(W_Q.tobytes() + W_K.tobytes()).hexdigest()[:16]
    shape = ModelShape(family="orbits", n_layers=1, n_heads=H, n_kv_heads=H, d_model=N, d_head=n, positional="none")
    row = ModelRow.of(name, shape, source="trained by pipeline.orbits (addition mod 24 with an equivariance penalty)",
                      revision=f"sha256:{digest}", command=command)
    st = Store.open(path)
    with st.writer(name):
        if name in st.names():
            st.reset(name)
        st.register(row)
        st.write_layer(name, 0, *head_profiles(W_Q, W_K, at_zero=True).layer_values())
        st.mark_complete(name, revision=row.revision)
