"""A store with training runs for the training view's tests, written through the store's own run writer
(``Store.add_frames``, ``Store.frame_writer``: what ``profiles MODEL --revisions SPEC`` writes through), from
synthetic values: heads that drift over the frames and move with d, statistics, spectra and metrics to find on the
page, not those of any weights.

``write_training_store(path)``: the browser tests' synthetic models (``write_synthetic_store``, without orbits) and
two runs: ``RUN`` (2 layers x 4 heads, ``RUN_STEPS``, rotary; no model of its name: an entry of its own in the
picker) with one frame left incomplete (step ``LEFT_OUT``) and one head without a profile at the first frame, and
``ROPE_MODEL`` (the rotary model's name and shape, a few frames: that model's Training tab).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from pipeline import store
from pipeline.schema import N_OFFSETS, SPECTRA, STATISTICS
from tests.browser.conftest import ROPE_MODEL, write_synthetic_store

RUN = "synthetic-run"
RUN_STEPS = (0, 1, 2, 3, 5, 8, 13, 20, 30, 50, 80, 120, 200, 300, 500, 800, 1000)
RUN_SHAPE = (2, 4)  # layers, heads
LEFT_OUT = 1500  # a frame of RUN after its last complete one, with only its first layer written
NO_PROFILE = (0, 1, 2)  # (frame, layer, head): no profile (a zero form) at the first frame
ROPE_RUN_STEPS = (0, 10, 100, 1000)
D_HEAD = 8


def run_profiles(steps, L: int, H: int, seed: int = 5) -> np.ndarray:
    """(F, L, H, 129, 4): each head goes from a start point of the simplex to an end point, on a schedule that
    steepens around step 100 (a phase change), and moves with d between two such paths."""
    rng = np.random.default_rng(seed)
    start, end, start_d, end_d = (rng.dirichlet(np.ones(4), (L, H)) for _ in range(4))
    t = 1 / (1 + np.exp(-(np.log1p(np.asarray(steps, dtype=float)) - np.log(100.0)) * 3))  # (F,)
    t = t[:, None, None, None]
    at0 = (1 - t) * start + t * end  # (F, L, H, 4)
    atd = (1 - t) * start_d + t * end_d
    w = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_OFFSETS) / 48.0))[None, None, None, :, None]
    return (1 - w) * at0[:, :, :, None, :] + w * atd[:, :, :, None, :]


def run_values(steps, L: int, H: int, seed: int = 6):
    """(statistics (F, L, H, 17), spectrum (F, L, H, 2 n), spectra (F, 3, L, H, 2 n), metrics {name: (F,)},
    head metrics {name: (F, L, H)}): stand-ins that change over the frames."""
    rng = np.random.default_rng(seed)
    F = len(steps)
    ramp = np.linspace(0, 1, F)[:, None, None, None]
    stats = rng.uniform(0.05, 0.95, (1, L, H, len(STATISTICS))) * (1 - 0.5 * ramp) + 0.5 * ramp * rng.uniform(
        0.05, 0.95, (1, L, H, len(STATISTICS)))
    spectrum = -np.sort(-rng.standard_normal((F, L, H, 2 * D_HEAD)), axis=-1)
    spectrum /= np.linalg.norm(spectrum, axis=-1, keepdims=True)
    spectra = np.abs(rng.standard_normal((F, len(SPECTRA), L, H, 2 * D_HEAD)))
    spectra = -np.sort(-spectra, axis=-1)
    s = np.log1p(np.asarray(steps, dtype=float))
    metrics = {"loss_first_half": 3.5 - 0.01 * s, "loss_repeated_half": 3.5 - 3.0 / (1 + np.exp(-(s - 4.6) * 3))}
    heads = {"induction_score": rng.uniform(0, 0.1, (F, L, H)) + np.linspace(0, 0.8, F)[:, None, None]
             * (np.arange(L * H).reshape(L, H) == L * H - 1),
             "previous_token_score": rng.uniform(0, 0.3, (F, L, H))}
    return stats, spectrum, spectra, metrics, heads


def header(L: int, H: int, source: str) -> dict:
    """The run group's attributes and per-layer conventions, as the run path writes them for a rotary model."""
    return {"attrs": {"family": "llama", "n_layers": L, "n_heads": H, "n_kv_heads": H, "d_model": 4 * D_HEAD,
                      "d_head": D_HEAD, "positional": "rope", "rotary_dim": D_HEAD, "tower": "", "qk_norm": "",
                      "scale": D_HEAD ** -0.5, "scale_rule": "1/sqrt(head_dim)", "softcap": 0.0,
                      "layernorm_folded": False, "source": source, "format": "safetensors",
                      "command": f"python -m pipeline profiles {source} --revisions all"},
            "layers": {"layer_positional": ["rope"] * L, "layer_rope_theta": [10000.0] * L,
                       "layer_rope_scaling": [""] * L}}


def write_run(handle: store.Store, name: str, steps, L: int, H: int, left_out: int | None = None,
              no_profile: tuple[int, int, int] | None = None) -> np.ndarray:
    """Run ``name`` written frame by frame, layer by layer; returns its profile (F, L, H, 129, 4) as written (NaN at
    ``no_profile``). ``left_out``: a step whose frame gets its first layer alone (the others not written)."""
    steps = list(steps)
    profile = run_profiles(steps, L, H)
    if no_profile is not None:
        profile[no_profile] = np.nan
    stats, spectrum, spectra, metrics, heads = run_values(steps, L, H)
    frames = [{"step": s, "revision": f"checkpoint-{s}", "commit": f"local-{s:08x}",
               "metrics": {"scalars": {k: float(v[i]) for k, v in metrics.items()},
                           "heads": {k: v[i].tolist() for k, v in heads.items()}}} for i, s in enumerate(steps)]
    if left_out is not None:
        frames.append({"step": left_out, "revision": f"checkpoint-{left_out}", "commit": "", "metrics": None})
    at = handle.add_frames(name, header(L, H, f"runs/{name}"), frames)
    writer = handle.frame_writer(name)
    norm = np.ones((H, N_OFFSETS))
    for i, s in enumerate(steps):
        for layer in range(L):
            digest = hashlib.sha256(f"{name} {s} {layer}".encode()).hexdigest()
            writer.write(at[s], layer, digest, profile[i, layer], norm, stats[i, layer], spectrum[i, layer],
                         spectra[i, :, layer])
    if left_out is not None:
        i = len(steps) - 1
        writer.write(at[left_out], 0, "left-out", profile[i, 0], norm, stats[i, 0], spectrum[i, 0], spectra[i, :, 0])
    handle.finish_run(name)
    return profile


def write_training_store(path, with_orbits: bool = False) -> Path:
    """The store of the module doc (``with_orbits``: and the synthetic orbits group); returns its path."""
    path = write_synthetic_store(Path(path), with_orbits=with_orbits)
    handle = store.Store.open(path)
    write_run(handle, RUN, RUN_STEPS, *RUN_SHAPE, left_out=LEFT_OUT, no_profile=NO_PROFILE)
    write_run(handle, ROPE_MODEL, ROPE_RUN_STEPS, 4, 8)
    return path
