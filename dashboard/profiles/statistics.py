"""The per-head statistics of one model at d = 0: a statistic's heat map beside its i.i.d. Gaussian value
(``dashboard.common.baselines``), and the head inspector (one head's spectrum, statistics and profile over d).
A view that needs statistics the selection does not hold shows ``missing``: "statistics not computed" and
the command that adds them."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from dashboard.common import baselines
from dashboard.common.render import name_models
from dashboard.common.selection import (
    check_statistic,
    profile_array,
    spectrum_array,
    statistics_note,
    statistics_table,
)
from dashboard.profiles.analyses_data import baseline_percentiles
from pipeline.schema import COORDINATES


def missing(sel, width: int = 430, height: int = 60) -> hv.Div:
    """The note shown in place of a view that needs statistics (``statistics_note``)."""
    return hv.Div(statistics_note(sel)).opts(width=width, height=height)


def statistic_heatmap(sel, statistic: str = "symmetric_energy", width: int = 430):
    """A layer x head heat map of one statistic at d = 0 (``pipeline.schema.STATISTICS``; another name is a
    ValueError), with a colour bar, and beside it the value for i.i.d. Gaussian heads of the model's own
    N = d_model and n = d_head (``dashboard.common.baselines``). A message instead when the statistics are
    missing. The heat map's renderer is ``statistic_heatmap``, its source ``statistic_image`` and its colour
    mapper ``statistic_colours``."""
    check_statistic(statistic)
    stats = statistics_table(sel)
    if stats is None:
        return missing(sel, width)
    values = stats[statistic]
    L, H = values.shape
    img = hv.Image(values[::-1].copy(), bounds=(-0.5, -0.5, H - 0.5, L - 0.5), kdims=["head", "layer"],
                   vdims=[statistic], group="Statistic").opts(
        cmap="Viridis", colorbar=True, colorbar_opts={"width": 10}, width=width,
        height=max(220, min(560, 14 * L + 110)), tools=["hover"], default_tools=[], toolbar=None,
        title=f"{statistic} per head (d = 0)", clipping_colors={"NaN": "#eeeeee"},
        hooks=[name_models({"Statistic": {"renderer": "statistic_heatmap", "source": "statistic_image",
                                          "mapper": "statistic_colours"}})])
    return (img + hv.Div(baseline_html(sel, statistic, values)).opts(width=260, height=120)).opts(shared_axes=False)


def baseline_html(sel, statistic: str, values: np.ndarray | None = None) -> str:
    """The sentence beside a statistic: the model's median and the i.i.d. Gaussian value at its (N, n)."""
    N = int(sel["d_model"].values) if isinstance(sel, xr.Dataset) and "d_model" in sel else 0
    n = int(sel["d_head"].values) if isinstance(sel, xr.Dataset) and "d_head" in sel else 0
    base = baselines.gaussian(statistic, N, n)
    median = (f"median over the heads: <b>{np.nanmedian(values):.4g}</b><br>"
              if values is not None and np.isfinite(values).any() else "")
    if base is None:
        gauss = (f"i.i.d. Gaussian heads at N = {N}, n = {n}: not measured "
                 "(<code>benchmarks/gaussian_baseline.py</code>)")
    else:
        value, how = base
        gauss = f"i.i.d. Gaussian W<sub>Q</sub>, W<sub>K</sub> at N = {N}, n = {n}: <b>{value:.4g}</b> ({how})"
    return f"<p class='note'>{median}{gauss}</p>"


INSPECTOR_SPECTRUM = name_models({"LambdaPlus": {"source": "inspector_up"},
                                  "LambdaMinus": {"source": "inspector_down"}}, "inspector_spectrum")
INSPECTOR_TABLE = name_models({"Table": {"table": "inspector_table", "source": "inspector_statistics"}})
INSPECTOR_CURVES = name_models({**{f"Curve.{c}": {"source": f"inspector_curve_{c}"} for c in COORDINATES},
                                "VLine": {"glyph": "inspector_d"}}, "inspector_curves")


def head_inspector(sel, layer: int, head: int, d: int = 0, width: int = 330, baseline: xr.Dataset | None = None):
    """One head: its S spectrum at d = 0 as bars (λ₊ up in red, −λ₋ down in blue, paired by rank), its
    statistics (a table; with ``baseline``, the Dataset of one of the model's random baselines, also its
    percentiles ``percentile_<statistic>`` of ``symmetric_energy``, ``pairing`` and ``rho`` among the baseline's
    heads, ``analyses_data.baseline_percentiles``), and for rotary models (``positional`` "rope", or without it
    more than one d stored) its a, b, c, d over d = 0..128 with the current d marked. Without statistics the
    spectrum and table give way to a message. ``layer``, ``head``: the head's indices (the tetrahedron's row is
    layer * n_heads + head).

    Named for a page to fill in for another head: the figure ``inspector_spectrum`` with the sources
    ``inspector_up`` (λ₊) and ``inspector_down`` (−λ₋); the table ``inspector_table`` over
    ``inspector_statistics``; the figure ``inspector_curves`` with the sources ``inspector_curve_a`` ..
    ``inspector_curve_d`` and the current d's line ``inspector_d``.
    """
    profile = profile_array(sel)
    L, H, D, _ = profile.shape
    if not (0 <= layer < L and 0 <= head < H):
        raise ValueError(f"no head (layer {layer}, head {head}): the model has {L} layers of {H} heads")
    parts = []
    stats, spectra = statistics_table(sel), spectrum_array(sel)
    if stats is None or spectra is None:
        parts.append(missing(sel, width))
    else:
        lam = spectra[layer, head]
        lam = lam[np.isfinite(lam)]
        lp, lm = np.sort(lam[lam > 0])[::-1], np.sort(-lam[lam < 0])[::-1]
        rank = max(lp.size, lm.size, 1)
        up = hv.Rectangles((np.arange(lp.size) + 0.6, np.zeros(lp.size), np.arange(lp.size) + 1.4, lp),
                           group="LambdaPlus").opts(color="#d62728", line_color=None)
        down = hv.Rectangles((np.arange(lm.size) + 0.6, -lm, np.arange(lm.size) + 1.4, np.zeros(lm.size)),
                             group="LambdaMinus").opts(color="#1f77b4", line_color=None)
        parts.append((up * down * hv.HLine(0).opts(color="#444", line_width=0.8)).opts(hv.opts.Overlay(
            width=width, height=220, xlim=(0, rank + 1), xlabel="rank", ylabel="λ₊ (up), −λ₋ (down)",
            title=f"layer {layer}, head {head}: spectrum of S (d = 0)", toolbar=None, default_tools=[],
            show_legend=False, hooks=[INSPECTOR_SPECTRUM])))
        rows = [(name, float(stats[name][layer, head])) for name in stats]
        ranks = baseline_percentiles(sel, baseline) if baseline is not None else None
        rows += [(name, float(v[layer * H + head])) for name, v in (ranks or {}).items()]
        parts.append(hv.Table(rows, ["statistic"], ["value"]).opts(width=width, height=420,
                                                                    title="statistics (d = 0)",
                                                                    hooks=[INSPECTOR_TABLE]))
    rotary = str(sel["positional"].values) == "rope" if isinstance(sel, xr.Dataset) and "positional" in sel else D > 1
    if rotary and D > 1:
        dd = int(np.clip(d, 0, D - 1))
        colours = ("#9467bd", "#7f7f7f", "#d62728", "#1f77b4")
        curves = [hv.Curve((np.arange(D), profile[layer, head, :, k]), "d", "value", label=c).opts(color=colours[k])
                  for k, c in enumerate(COORDINATES)]
        parts.append(hv.Overlay([*curves, hv.VLine(dd).opts(color="#222831", line_dash="dashed")]).opts(
            hv.opts.Overlay(width=width, height=220, ylim=(0, 1), legend_position="top_right", toolbar=None,
                            default_tools=[], title=f"a, b, c, d over d (now d = {dd})", hooks=[INSPECTOR_CURVES])))
    return hv.Layout(parts).cols(1).opts(shared_axes=False)

