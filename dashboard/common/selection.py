"""One model's selection of the profiles group as numpy arrays: its profile without the padding, its
statistics and spectra at d = 0, and the scales that cover every offset. No HoloViews: the store reader
(``dashboard.data``) computes the scales too.

A profiles selection is either the Dataset of one model (``ds.sel(model=name)``: its ``n_layers`` and
``n_heads`` cut the padding) or its ``profile`` DataArray (the padding is recognised as all-NaN). Rotary
models vary with the offset ``d``; a selection without a ``d`` dimension is used as it is.
"""

from __future__ import annotations

import html

import numpy as np
import xarray as xr

from dashboard.common import geometry as g
from pipeline.schema import STATISTICS, model_rows


def profile_array(sel) -> np.ndarray:
    """(n_layers, n_heads, D, 4) float64 profile of one model without the padding (D = 1 without ``d``).

    ``sel``: the profiles Dataset of one model or its ``profile`` DataArray (see the module doc), or such an
    array already (returned as it is).
    """
    if isinstance(sel, np.ndarray) and sel.ndim == 4:
        return sel
    da = sel["profile"] if isinstance(sel, xr.Dataset) else sel
    if not isinstance(da, xr.DataArray):
        raise TypeError(f"expected an xarray Dataset or DataArray of one model's profiles, got {type(sel).__name__}")
    extra = [dim for dim in da.dims if dim not in ("layer", "head", "d", "coordinate") and da.sizes[dim] > 1]
    if extra:
        raise ValueError(f"select one model first (e.g. ds.sel(model=NAME)); the selection still has {extra}")
    da = da.squeeze([dim for dim in da.dims if dim not in ("layer", "head", "d", "coordinate")])
    if "d" not in da.dims:
        da = da.expand_dims("d")
    values = np.asarray(da.transpose("layer", "head", "d", "coordinate").values, dtype=np.float64)
    if isinstance(sel, xr.Dataset) and "n_layers" in sel and "n_heads" in sel:
        n_layers, n_heads = int(sel["n_layers"].values), int(sel["n_heads"].values)
    else:
        finite = np.isfinite(values).any(axis=(2, 3))
        n_layers = int(np.flatnonzero(finite.any(axis=1)).max() + 1) if finite.any() else 0
        n_heads = int(np.flatnonzero(finite.any(axis=0)).max() + 1) if finite.any() else 0
    return values[:n_layers, :n_heads]


def model_name(sel) -> str:
    """The selection's model name ('model' when it holds none)."""
    model = sel.coords.get("model") if hasattr(sel, "coords") else None
    return str(model.values) if model is not None and model.ndim == 0 else "model"


def at_offset(profile: np.ndarray, d: int) -> np.ndarray:
    """(L, H, 4) at offset d (clipped to the stored offsets)."""
    return profile[:, :, int(np.clip(d, 0, profile.shape[2] - 1))]


def statistics_table(sel) -> dict[str, np.ndarray] | None:
    """{statistic: (n_layers, n_heads) float64} at d = 0 of one model (``ds.sel(model=...)``), or None when
    the selection holds no ``head_statistics`` (a store written before them, or a model whose statistics are
    not computed: all NaN)."""
    values = _per_head(sel, "head_statistics", "statistic")
    if values is None:
        return None
    names = [str(x) for x in sel["head_statistics"]["statistic"].values]
    return {name: values[:, :, k] for k, name in enumerate(names)}


def _per_head(sel, var: str, inner: str) -> np.ndarray | None:
    """(n_layers, n_heads, len(inner)) float64 of one model's d = 0 variable ``var``, or None when the selection
    does not hold it or holds only NaN."""
    if not isinstance(sel, xr.Dataset) or var not in sel:
        return None
    L, H = profile_array(sel).shape[:2]
    da = sel[var]
    da = da.squeeze([dim for dim in da.dims if dim not in ("layer", "head", inner)])
    values = np.asarray(da.transpose("layer", "head", inner).values, dtype=np.float64)[:L, :H]
    return values if values.size and np.isfinite(values).any() else None


def spectrum_array(sel) -> np.ndarray | None:
    """(n_layers, n_heads, E) eigenvalues of S at d = 0 (decreasing, NaN-padded), or None when not stored."""
    return _per_head(sel, "spectrum", "eigen")


def check_statistic(name: str) -> str:
    """``name`` when it is a statistic (``pipeline.schema.STATISTICS``), else a ValueError naming them."""
    if name not in STATISTICS:
        raise ValueError(f"unknown statistic {name!r}; known: {', '.join(STATISTICS)}")
    return name


def statistics_note(sel) -> str:
    """The line shown where statistics are missing: 'statistics not computed' and the command that adds them."""
    cmd = ""
    if isinstance(sel, xr.Dataset) and "command" in sel and "model" in sel.coords and sel["model"].ndim == 0:
        small = [k for k in sel.data_vars if sel[k].ndim == 0]
        rows = model_rows(sel[small].expand_dims("model"))
        cmd = rows[0].statistics_command if rows else ""
    how = f": add them with <code>{html.escape(cmd)}</code>" if cmd else ""
    return f"<p class='note'><b>{html.escape(model_name(sel))}</b>: statistics not computed{how}</p>"


def layer_counts(profile: np.ndarray, bins: int) -> np.ndarray:
    """``geometry.layer_counts`` of a profile, (D, 1, 4, bins) zeros for a model without layers."""
    return g.layer_counts(profile, bins) if profile.shape[0] else np.zeros((profile.shape[2], 1, 4, bins))


def scales(sel, bins: int = g.N_BINS) -> tuple[float, float]:
    """(colour-scale top of ``layer_heatmaps``, height of ``histograms``): each covers every offset d."""
    profile = profile_array(sel)
    high = max(float(layer_counts(profile, bins).max()), 1.0)
    n = profile.shape[0] * profile.shape[1]
    flat = np.moveaxis(profile.reshape(n, profile.shape[2], 4), 0, -1)  # (D, 4, heads)
    b = g.bin_index(flat, bins)
    counts = np.stack([(b == i).sum(axis=-1) for i in range(bins)], axis=-1)  # (D, 4, bins)
    totals = counts.sum(axis=-1, keepdims=True)
    top = float(np.max(np.divide(counts, totals, out=np.zeros(counts.shape), where=totals > 0), initial=0.0))
    return high, max(top, 0.05)
