"""What the Analyses tab draws for one model (and its random baseline), every number from ``pipeline.analyses``.

:func:`analyses` reads a model's per-head values at d = 0 from its Dataset (``ds.sel(model=name)``, or the page's
own) through :func:`pipeline.analyses.head_data.from_dataset` and gathers, without computing any statistic here:

- ``report``: the model's summaries, :func:`pipeline.analyses.report.report` (the pairing law with its beta fit and
  KS p, the bound's correlation and share, the rho histogram, the balance count, the effective-rank counts, the
  type rule's sensitivity, the goodness-of-fit table, the spectral geometry and, with a baseline, the comparison);
- per head, for the scatter plots, their hover and the heat maps: S (``symmetric_energy``), P, rho,
  r = min(rho, 1/rho), the bound at r (:func:`pipeline.analyses.pairing_law.pairing_bound`) and, with a
  baseline, the percentile of ``symmetric_energy``, ``pairing`` and ``rho`` among the baseline's heads
  (:func:`pipeline.analyses.report.percentiles`);
- the leading ``SIGMA_PAIRS`` pairs (sigma_i(T), sqrt(lambda_+,i lambda_-,i)) of every head
  (:func:`pipeline.analyses.spectral_geometry.paired_spectra`), where the singular values of T are stored;
- the baseline's P and rho, for the overlays, and its S and P with each head's layer and head, for the
  trained-vs-random heat maps.

The tetrahedron's hover and the inspector read two of these per head through their own functions:
:func:`baseline_percentiles` (the same percentiles) and :func:`cluster_labels` (the report's k-means clusters).

The histograms' bins are drawing choices (``P_BINS`` on [0, 1]; rho's are the pairing law's own).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from dashboard.common.selection import profile_array, statistics_table
from pipeline.analyses import clusters, pairing_law, spectral_geometry
from pipeline.analyses.head_data import HeadData, from_dataset
from pipeline.analyses.report import BASELINE_STATISTICS, percentiles, report

P_BINS = 40
SIGMA_PAIRS = 3  # the leading pairs of each head drawn in sigma(T) against sqrt(lambda_+ lambda_-)


@dataclass(frozen=True)
class Analyses:
    """One model's Analyses (module docstring). ``report`` is None when the model has no statistics (``note``
    says why and how to add them); ``baseline`` is the baseline's name ('' without one)."""

    name: str
    report: dict | None
    note: str = ""
    heads: dict[str, np.ndarray] = field(default_factory=dict)
    sigma: np.ndarray | None = None  # (heads x SIGMA_PAIRS, 2): sigma_i(T), sqrt(lambda_+,i lambda_-,i)
    baseline: str = ""
    baseline_heads: dict[str, np.ndarray] = field(default_factory=dict)


def head_data_of(sel: xr.Dataset) -> HeadData | None:
    """The per-head values of one model's Dataset (a scalar ``model`` coordinate), or None where it lacks the
    sizes or the statistics the analyses need."""
    need = ("n_layers", "n_heads", "d_model", "d_head", "head_statistics", "spectrum")
    if not isinstance(sel, xr.Dataset) or "model" not in sel.coords or any(k not in sel for k in need):
        return None
    name = str(sel["model"].values)
    data = from_dataset(sel.expand_dims("model"), name)
    if data.statistics is None or not np.isfinite(data.statistics).any():
        return None
    return data


def _note(sel) -> str:
    from dashboard.common.selection import statistics_note

    return statistics_note(sel)


def _per_head(data: HeadData) -> dict[str, np.ndarray]:
    rho = data.stat("rho")
    with np.errstate(divide="ignore"):
        r = np.minimum(rho, 1.0 / rho)
    return {"layer": data.layer, "head": data.head, "P": data.stat("pairing"), "rho": rho, "r": r,
            "bound": pairing_law.pairing_bound(rho), "S": data.stat("symmetric_energy")}


def _sigma_pairs(data: HeadData) -> np.ndarray | None:
    antisym = data.spectrum_of("antisym_spectrum")
    if antisym is None or data.spectrum is None:
        return None
    paired = spectral_geometry.paired_spectra(data.spectrum, antisym)
    sigma, geometric = paired["sigma"][:, :SIGMA_PAIRS], paired["geometric"][:, :SIGMA_PAIRS]
    xy = np.stack([sigma.ravel(), geometric.ravel()], axis=-1)
    return xy[np.isfinite(xy).all(axis=-1) & (xy[:, 0] > 0)]


def _percentiles(data: HeadData, base: HeadData) -> dict[str, np.ndarray]:
    return {f"percentile_{stat}": percentiles(data.stat(stat), base.stat(stat)) for stat in BASELINE_STATISTICS}


def baseline_percentiles(sel: xr.Dataset, baseline: xr.Dataset) -> dict[str, np.ndarray] | None:
    """{``percentile_<statistic>``: (heads,) in layer-major order} for each of ``BASELINE_STATISTICS``: each head's
    percentile among the baseline's heads (:func:`pipeline.analyses.report.percentiles`); None when the model or
    the baseline has no statistics."""
    values, reference = statistics_table(sel), statistics_table(baseline)
    if values is None or reference is None:
        return None
    return {f"percentile_{stat}": percentiles(values[stat].ravel(), reference[stat].ravel())
            for stat in BASELINE_STATISTICS}


def cluster_labels(sel: xr.Dataset) -> np.ndarray:
    """(heads,) in layer-major order: each head's cluster among ``clusters.K`` k-means clusters of the heads' unit
    S spectra at d = 0, as the report computes them (:func:`pipeline.analyses.clusters.kmeans`, its seed; 0 the
    positive-dominant cluster); -1 for a head without a spectrum, and for every head of a model without
    statistics or with fewer heads than clusters."""
    data = head_data_of(sel)
    if data is None:
        return np.full(int(np.prod(profile_array(sel).shape[:2])), -1)
    labels = np.full(data.heads, -1)
    X, kept = clusters.unit_spectra(data.spectrum)
    try:
        labels[kept] = clusters.kmeans(X, clusters.K, clusters.SEED)[0]
    except ValueError:  # fewer heads than clusters, or too few distinct spectra: no clusters to show
        pass
    return labels


def analyses(sel: xr.Dataset, baseline: xr.Dataset | None = None) -> Analyses:
    """The Analyses of the model of ``sel`` (module docstring), against ``baseline`` (the Dataset of one of its
    baselines, ``ds.sel(model=baseline_name)``) when given and computed."""
    data = head_data_of(sel)
    name = str(sel["model"].values) if isinstance(sel, xr.Dataset) and "model" in sel.coords else ""
    if data is None:
        return Analyses(name, None, _note(sel))
    base = head_data_of(baseline) if baseline is not None else None
    heads = _per_head(data)
    base_heads: dict[str, np.ndarray] = {}
    if base is not None:
        base_heads = {"P": base.stat("pairing"), "rho": base.stat("rho"), "S": base.stat("symmetric_energy"),
                      "layer": base.layer, "head": base.head}
        heads |= _percentiles(data, base)
    return Analyses(data.name, report(data, base), "", heads, _sigma_pairs(data), base.name if base else "",
                    base_heads)


def baseline_of(ds: xr.Dataset, name: str, rows=None) -> xr.Dataset | None:
    """The Dataset of the first computed baseline of model ``name`` in a profiles Dataset
    (:func:`pipeline.schema.baselines_of`: the library initialisation first), or None. ``rows``: the Dataset's
    ``ModelRow``s where the caller holds them (``dashboard.data.rows``), else read from ``ds``."""
    from pipeline.schema import baselines_of, model_rows

    found = [r for r in baselines_of(model_rows(ds) if rows is None else rows, name) if r.computed and not r.damaged]
    return ds.sel(model=found[0].name).load() if found else None  # read once: the views take many small slices


def histogram(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The density of the finite ``values`` in the bins ``edges`` (zeros when there are none): the overlays
    compare a model's heads with its baseline's, of another count."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    counts, _ = np.histogram(v, bins=edges)
    total = counts.sum() * np.diff(edges)
    return np.where(total > 0, counts / np.where(total > 0, total, 1.0), 0.0)


def beta_density(fit: dict, x: np.ndarray) -> np.ndarray:
    """The fitted beta law's density (``pairing_law.beta_fit``'s a, b) at x; NaN without a fit."""
    if fit.get("a") is None:
        return np.full(np.shape(x), np.nan)
    from scipy import stats

    return stats.beta.pdf(x, fit["a"], fit["b"])
