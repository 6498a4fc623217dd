"""One model's per-head values at d = 0, flattened over its heads: what every analysis reads.

:class:`HeadData` holds, for each real head (layer-major order), its profile (a, b, c, d) at d = 0, its statistics
(``pipeline.schema.STATISTICS``), the eigenvalues of S (``spectrum``) and, where known, the three spectra of
:mod:`pipeline.analyses.spectra`, each (heads, k) with k = min(N, 2n). :func:`from_dataset` reads them from an
opened ``profiles`` group (``pipeline.store.Store.dataset("profiles")``), :func:`from_run` one frame of a run group
(``Store.run(NAME)``) by the same reads; a variable the store does not hold is None.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pipeline.analyses.spectra import SPECTRA
from pipeline.schema import STATISTICS


@dataclass(frozen=True)
class HeadData:
    """Per-head values of one model at d = 0 (module docstring). ``statistics`` / ``spectrum`` are None when the
    store has no statistics for the model; a head whose values were not computed holds NaN. ``command``: the one
    command that computes the model (for messages)."""

    name: str
    d_model: int
    d_head: int
    layer: np.ndarray
    head: np.ndarray
    profile: np.ndarray
    statistics: np.ndarray | None = None
    spectrum: np.ndarray | None = None
    spectra: dict[str, np.ndarray] = field(default_factory=dict)
    command: str = ""

    @property
    def heads(self) -> int:
        return len(self.layer)

    def stat(self, name: str) -> np.ndarray:
        """One statistic of every head (heads,); NaN everywhere when statistics are not known."""
        if self.statistics is None:
            return np.full(self.heads, np.nan)
        return self.statistics[:, STATISTICS.index(name)]

    def spectrum_of(self, name: str) -> np.ndarray | None:
        """One of :data:`pipeline.analyses.spectra.SPECTRA` (heads, k), or None when not known."""
        return self.spectra.get(name)


def _width(d_model: int, d_head: int) -> int:
    return min(int(d_model), 2 * int(d_head))


def from_dataset(ds, name: str) -> HeadData:
    """The values of model ``name`` from an opened ``profiles`` Dataset (validated by the caller's store handle).

    KeyError with the known names when ``name`` is not in it."""
    names = [str(m) for m in ds["model"].values]
    if name not in names:
        raise KeyError(f"model {name!r} is not in the store; it holds {', '.join(names)}")
    row = ds.isel(model=names.index(name))
    command = str(row["command"].values) if "command" in row else ""
    return _from_row(row, name, int(row["n_layers"]), int(row["n_heads"]), int(row["d_model"]), int(row["d_head"]),
                     command)


def from_run(ds, step: int, name: str | None = None) -> HeadData:
    """The values of the frame of training step ``step`` from an opened run group (``Store.run(NAME)``, or any
    subset of its variables), read as :func:`from_dataset` reads a model: the run's per-layer variables are the
    profiles group's with ``step`` in place of ``model``, its shape the group's attributes. ``name``: default
    "RUN step S (REVISION)"; ``command``: the run's.

    KeyError naming the nearest steps when the run has no frame of ``step``."""
    steps = [int(s) for s in ds["step"].values]
    run = str(ds.attrs.get("run_name", "the run"))
    if step not in steps:
        below = [s for s in steps if s < step]
        above = [s for s in steps if s > step]
        near = ", ".join(str(s) for s in (max(below) if below else None, min(above) if above else None)
                         if s is not None)
        raise KeyError(f"step {step} is not a frame of the run {run!r}; the nearest: {near or 'none'} "
                       f"({len(steps)} frames; `python -m pipeline list` shows them)")
    row = ds.isel(step=steps.index(step))
    if name is None:
        revision = f" ({row['revision'].values})" if "revision" in row else ""
        name = f"{run} step {step}{revision}"
    a = ds.attrs
    return _from_row(row, name, int(a["n_layers"]), int(a["n_heads"]), int(a["d_model"]), int(a["d_head"]),
                     str(a.get("command", "")))


def _from_row(row, name: str, L: int, H: int, N: int, n: int, command: str) -> HeadData:
    """HeadData from one model's (or one frame's) variables, each with ``layer`` and ``head`` leading."""
    k = _width(N, n)
    sel = {"layer": slice(0, L), "head": slice(0, H)}
    layer, head = (x.ravel() for x in np.meshgrid(np.arange(L), np.arange(H), indexing="ij"))
    profile = row["profile"].isel(sel | {"d": 0}).values.reshape(L * H, 4)
    out = {"statistics": None, "spectrum": None}
    if "head_statistics" in row and "statistic" in row.coords:
        order = [list(map(str, row["statistic"].values)).index(s) for s in STATISTICS]
        out["statistics"] = row["head_statistics"].isel(sel).values.reshape(L * H, -1)[:, order]
    if "spectrum" in row:
        out["spectrum"] = row["spectrum"].isel(sel | {"eigen": slice(0, k)}).values.reshape(L * H, -1)
    spectra = {s: row[s].isel(sel | {"eigen": slice(0, k)}).values.reshape(L * H, -1) for s in SPECTRA if s in row}
    return HeadData(name, N, n, layer, head, profile, out["statistics"], out["spectrum"], spectra, command)


def from_layers(name: str, d_model: int, d_head: int, layers: list[dict]) -> HeadData:
    """HeadData from per-layer dicts in layer order, each with ``profile`` (H, 4), ``statistics`` (H, 17),
    ``spectrum`` (H, k) and any of :data:`pipeline.analyses.spectra.SPECTRA` (H, k)."""
    counts = [len(x["profile"]) for x in layers]
    layer = np.repeat(np.arange(len(layers)), counts)
    head = np.concatenate([np.arange(c) for c in counts]) if counts else np.zeros(0, int)
    cat = lambda key: np.concatenate([x[key] for x in layers]) if layers else None  # noqa: E731
    spectra = {s: cat(s) for s in SPECTRA if layers and s in layers[0]}
    return HeadData(name, d_model, d_head, layer, head, cat("profile"), cat("statistics"), cat("spectrum"), spectra)
