"""Where the store is and what is in it: read-only, light, cached.

The store path comes from (first wins) the ``--store PATH`` argument (``panel serve dashboard/app.py
--args --store PATH`` or ``python -m dashboard.export OUT --store PATH``), the environment variable
``HEADGEOMETRY_STORE``, or the committed ``store.zarr`` next to the package (not the working
directory). Nothing else (in particular no URL parameter) chooses the path.

Every problem with the store surfaces as ``pipeline.store.StoreError`` whose message says what to do.
"""

from __future__ import annotations

import argparse
import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xarray as xr

from pipeline.store import N_OFFSETS, StoreError, open_orbits, open_profiles

ENV_VAR = "HEADGEOMETRY_STORE"
DEFAULT_STORE = Path(__file__).resolve().parents[1] / "store.zarr"


def store_path(argv: list[str] | None = None, environ: dict | None = None) -> Path:
    """The store to read: ``--store`` in ``argv``, else $HEADGEOMETRY_STORE, else the committed store."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--store", default=None)
    args, _ = parser.parse_known_args(argv or [])
    env = os.environ if environ is None else environ
    chosen = args.store or env.get(ENV_VAR) or str(DEFAULT_STORE)
    return Path(chosen).expanduser().resolve()


@dataclass(frozen=True)
class ModelSummary:
    """One row of the model dimension: what it is and whether it can be drawn."""

    name: str
    n_layers: int
    n_heads: int
    d_model: int
    d_head: int
    positional: str
    source: str
    revision: str
    family: str
    command: str
    complete: bool
    layers_done: int
    layernorm_folded: bool

    @property
    def computed(self) -> bool:
        """At least one layer written: something to draw."""
        return self.layers_done > 0

    @property
    def rotary(self) -> bool:
        return self.positional == "rope"

    @property
    def fix_command(self) -> str:
        """The exact command that computes (or finishes) this model."""
        return self.command or f"python -m pipeline profiles {self.source or self.name}"


def _mtime(path: Path) -> float:
    """When the store's structure last changed (a model registered, the group replaced): 0 if unknown."""
    times = []
    for meta in (path / "zarr.json", path / "profiles" / "zarr.json", path / "profiles" / "model" / "zarr.json"):
        try:
            times.append(os.stat(meta).st_mtime_ns)
        except OSError:
            times.append(0)
    return float(max(times))


@functools.lru_cache(maxsize=8)
def _profiles(path: str, mtime: float) -> xr.Dataset:
    return open_profiles(path)


def profiles(path) -> xr.Dataset:
    """The ``profiles`` group (lazy), cached per path until the group's metadata changes."""
    path = Path(path)
    return _profiles(str(path), _mtime(path))


def orbits(path) -> xr.Dataset:
    """The ``orbits`` group, loaded into memory (it is small)."""
    return open_orbits(str(path)).load()


def summaries(ds: xr.Dataset) -> list[ModelSummary]:
    """Per-model metadata of an opened ``profiles`` group, in store order."""
    meta = {k: ds[k].values for k in ("n_layers", "n_heads", "d_model", "d_head", "positional", "source",
                                        "revision", "family", "command", "complete", "layernorm_folded")
            if k in ds}
    done = ds["layer_done"].values if "layer_done" in ds else None
    out = []
    for i, name in enumerate(ds["model"].values):
        n_layers = int(meta["n_layers"][i])
        n_done = int(done[i, :n_layers].sum()) if done is not None else n_layers
        out.append(ModelSummary(
            name=str(name), n_layers=n_layers, n_heads=int(meta["n_heads"][i]), d_model=int(meta["d_model"][i]),
            d_head=int(meta["d_head"][i]), positional=str(meta["positional"][i]), source=str(meta["source"][i]),
            revision=str(meta["revision"][i]), family=str(meta.get("family", [""] * (i + 1))[i]),
            command=str(meta.get("command", [""] * (i + 1))[i]), complete=bool(meta["complete"][i]),
            layers_done=n_done, layernorm_folded=bool(meta.get("layernorm_folded", [False] * (i + 1))[i])))
    return out


def model_profile(ds: xr.Dataset, summary: ModelSummary) -> np.ndarray:
    """(n_layers, n_heads, D, 4) float64 profile of one model, without the padding.

    D = 129 offsets for rotary models; D = 1 (the d = 0 slice) for the others, whose form does not
    depend on position.
    """
    sel = ds["profile"].sel(model=summary.name).isel(layer=slice(0, summary.n_layers),
                                                     head=slice(0, summary.n_heads))
    if not summary.rotary:
        sel = sel.isel(d=slice(0, 1))
    values = np.asarray(sel.values, dtype=np.float64)
    assert values.shape[2] in (1, N_OFFSETS)
    return values


__all__ = ["DEFAULT_STORE", "ENV_VAR", "ModelSummary", "StoreError", "model_profile", "orbits", "profiles",
           "store_path", "summaries"]
