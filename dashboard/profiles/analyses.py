"""The Analyses views of one model: the paper's evidence drawn from ``pipeline.analyses`` (via
:mod:`dashboard.profiles.analyses_data`), each a HoloViews object for a notebook and for the profiles page's
Analyses tab (:mod:`dashboard.profiles.page_analyses`).

Every view takes a model's Dataset (``ds.sel(model=name)``) and optionally one of its random baselines' Datasets
(``analyses_data.baseline_of(ds, name)``), or an :class:`~dashboard.profiles.analyses_data.Analyses` already
computed (the page computes it once). A model without statistics shows "statistics not computed" and the command
that adds them.

- :func:`pairing_histogram`: P with the fitted beta law (its a, b and Kolmogorov-Smirnov p in the title), the
  baseline's P outlined;
- :func:`pairing_bound_view`: P against r = min(rho, 1/rho) with the bound 1 - (1 - r) / sqrt(1 + r^2) drawn, the
  correlation and the share where it holds in the title; the hover gives each head's percentiles among the
  baseline's heads;
- :func:`rho_histogram`: rho on the pairing law's bins, the baseline's outlined;
- :func:`sigma_geometric`: sigma_i(T) against sqrt(lambda_+,i lambda_-,i), the leading pairs of every head;
- :func:`trained_vs_random`: S and P per layer x head beside its baseline's, each pair on one colour scale;
- :func:`analyses_summary`, :func:`goodness_of_fit_table`, :func:`type_sensitivity_table`: the counts and
  tables, as HTML.
"""

from __future__ import annotations

import holoviews as hv
import numpy as np
from bokeh.models import HoverTool

from dashboard.common.render import name_models
from dashboard.profiles import analyses_data as ad
from dashboard.profiles.analyses_tables import fit_table_html, sensitivity_table_html, summary_html
from pipeline.analyses import pairing_law
from pipeline.analyses.report import BASELINE_STATISTICS

TRAINED, BASELINE, LAW = "#1f77b4", "#7f7f7f", "#d62728"
HEIGHT = 300


def analyses_of(x, baseline=None) -> ad.Analyses:
    """``x`` itself when it is an Analyses, else the Analyses of its Dataset against ``baseline``."""
    return x if isinstance(x, ad.Analyses) else ad.analyses(x, baseline)


def _missing(a: ad.Analyses, width: int) -> hv.Div:
    return hv.Div(f"<p class='note'>{a.note}</p>").opts(width=width, height=60)


def _p_title(a: ad.Analyses) -> str:
    beta = a.report["pairing_law"]["beta"] if a.report else {}
    if beta.get("a") is None:
        return "pairing score P (no beta law: too few heads)"
    return f"P and its beta law (a = {beta['a']:.2f}, b = {beta['b']:.2f}), KS p = {beta['ks_p']:.2g}"


def _overlay_opts(width: int, title: str, xlabel: str, hooks: list) -> hv.opts:
    return hv.opts.Overlay(width=width, height=HEIGHT, title=title, xlabel=xlabel, ylabel="density",
                           legend_position="top_left", toolbar=None, default_tools=[], hooks=hooks)


def pairing_histogram(sel, baseline=None, width: int = 460):
    """The histogram of P (density, ``analyses_data.P_BINS`` bins on [0, 1]) with the beta law fitted by
    ``pipeline.analyses.pairing_law.beta_fit`` and, when a baseline is given, the baseline's heads outlined.
    Sources ``analyses_p``, ``analyses_p_beta``, ``analyses_p_baseline``; figure ``analyses_p_figure``."""
    a = analyses_of(sel, baseline)
    if a.report is None:
        return _missing(a, width)
    edges = np.linspace(0.0, 1.0, ad.P_BINS + 1)
    x = np.linspace(0.0025, 0.9975, 200)
    fit = a.report["pairing_law"]["beta"]
    base = ad.histogram(a.baseline_heads.get("P", []), edges)
    parts = [hv.Histogram((edges, ad.histogram(a.heads["P"], edges)), kdims="P", vdims="density", group="PHist",
                          label="trained heads").opts(color=TRAINED, alpha=0.6, line_color=None),
             hv.Curve((x, ad.beta_density(fit, x)), kdims="P", vdims="density", group="PBeta", label="beta law").opts(
                 color=LAW, line_width=2),
             hv.Histogram((edges, base), kdims="P", vdims="density", group="PBase", label="random baseline").opts(
                 fill_alpha=0, line_color=BASELINE, line_width=1.5, visible=bool(a.baseline))]
    hook = name_models({"PHist.trained heads": {"source": "analyses_p", "renderer": "analyses_p_bars"},
                        "PBeta.beta law": {"source": "analyses_p_beta", "renderer": "analyses_p_beta_line"},
                        "PBase.random baseline": {"source": "analyses_p_baseline",
                                                    "renderer": "analyses_p_baseline_bars"}}, "analyses_p_figure")
    return hv.Overlay(parts).opts(_overlay_opts(width, _p_title(a), "P", [hook]))


def _bound_title(a: ad.Analyses) -> str:
    b = a.report["pairing_law"]["bound"]
    corr = "n/a" if b["correlation"] is None else f"{b['correlation']:+.3f}"
    holds = "n/a" if b["holds"] is None else f"{100 * b['holds']:.1f}%"
    return f"P against its bound: corr. {corr}, holds for {holds}"


def _bound_hover() -> HoverTool:
    tips = [("layer", "@layer"), ("head", "@head"), ("P", "@P{0.000}"), ("rho", "@rho{0.000}"),
            ("bound", "@bound{0.000}")]
    tips += [(f"{s} percentile vs baseline", f"@percentile_{s}{{0.0}}") for s in BASELINE_STATISTICS]
    return HoverTool(tooltips=tips, name="analyses_bound_hover")


def pairing_bound_view(sel, baseline=None, width: int = 460):
    """P against r = min(rho, 1/rho), one dot per head, with the bound 1 - (1 - r) / sqrt(1 + r^2)
    (``pairing_law.pairing_bound``) drawn over [0, 1]. The hover gives the head's P, rho, bound and, with a
    baseline, its percentiles of ``symmetric_energy``, ``pairing`` and ``rho`` among the baseline's heads.
    Sources ``analyses_bound_heads``, ``analyses_bound_curve``; figure ``analyses_bound_figure``."""
    a = analyses_of(sel, baseline)
    if a.report is None:
        return _missing(a, width)
    h = a.heads
    cols = {k: np.asarray(h[k]) for k in ("r", "P", "layer", "head", "rho", "bound")}
    for s in BASELINE_STATISTICS:
        cols[f"percentile_{s}"] = np.asarray(h.get(f"percentile_{s}", np.full(len(cols["P"]), np.nan)))
    ok = np.isfinite(cols["r"]) & np.isfinite(cols["P"])
    cols = {k: v[ok].astype(np.int32 if k in ("layer", "head") else np.float32) for k, v in cols.items()}
    r = np.linspace(0.0, 1.0, 101)
    dots = hv.Scatter(cols, "r", [k for k in cols if k != "r"], group="BoundHeads", label="heads").opts(
        color=TRAINED, size=4, alpha=0.6, tools=[_bound_hover()])
    curve = hv.Curve((r, pairing_law.pairing_bound(r)), "r", "P", group="BoundCurve", label="bound").opts(
        color=LAW, line_width=2)
    hook = name_models({"BoundHeads.heads": {"source": "analyses_bound_heads", "renderer": "analyses_bound_dots"},
                        "BoundCurve.bound": {"source": "analyses_bound_curve", "renderer": "analyses_bound_line"}},
                       "analyses_bound_figure")
    return (dots * curve).opts(hv.opts.Overlay(
        width=width, height=HEIGHT, title=_bound_title(a), xlabel="r = min(ρ, 1/ρ)", ylabel="P", xlim=(0, 1),
        ylim=(0, 1.02), legend_position="bottom_right", toolbar=None, default_tools=[], hooks=[hook]))


def rho_histogram(sel, baseline=None, width: int = 460):
    """The histogram of rho on the pairing law's bins (``pairing_law.rho_histogram``; the heads above its range
    counted in the title), the baseline's outlined. Sources ``analyses_rho``, ``analyses_rho_baseline``; figure
    ``analyses_rho_figure``."""
    a = analyses_of(sel, baseline)
    if a.report is None:
        return _missing(a, width)
    hist = a.report["pairing_law"]["rho_histogram"]
    edges = np.asarray(hist["edges"])
    counts = np.asarray(hist["counts"], dtype=float)
    density = counts / max(counts.sum() + hist["above"], 1) / np.diff(edges)
    base = ad.histogram(a.baseline_heads.get("rho", []), edges)
    parts = [hv.Histogram((edges, density), kdims="rho", vdims="density", group="RhoHist", label="trained heads").opts(
                 color=TRAINED, alpha=0.6, line_color=None),
             hv.Histogram((edges, base), kdims="rho", vdims="density", group="RhoBase", label="random baseline").opts(
                 fill_alpha=0, line_color=BASELINE, line_width=1.5, visible=bool(a.baseline))]
    hook = name_models({"RhoHist.trained heads": {"source": "analyses_rho", "renderer": "analyses_rho_bars"},
                        "RhoBase.random baseline": {"source": "analyses_rho_baseline",
                                             "renderer": "analyses_rho_baseline_bars"}}, "analyses_rho_figure")
    title = f"ρ = ‖λ₋‖ / ‖λ₊‖ ({hist['above']} heads above {edges[-1]:g})"
    return hv.Overlay(parts).opts(_overlay_opts(width, title, "ρ", [hook]))


def sigma_geometric(sel, baseline=None, width: int = 460):
    """sigma_i(T) against sqrt(lambda_+,i lambda_-,i) for the leading ``analyses_data.SIGMA_PAIRS`` pairs of every
    head (``spectral_geometry.paired_spectra``), with the diagonal; the median relative error in the title. Source
    ``analyses_sigma``; figure ``analyses_sigma_figure``. A note where the singular values of T are not stored."""
    a = analyses_of(sel, baseline)
    if a.report is None:
        return _missing(a, width)
    xy = a.sigma if a.sigma is not None else np.zeros((0, 2))
    geo = a.report.get("spectral_geometry")
    err = geo["geometric_error"]["q50"] if geo else None
    title = ("σᵢ(T) against √(λ₊ᵢ λ₋ᵢ)" + (f": median relative gap {err:.3f}" if err is not None else
                                            ": the singular values of T are not stored"))
    top = float(xy.max()) * 1.05 if len(xy) else 1.0
    xy = xy.astype(np.float32)  # drawn, not read: a page of 1,280 heads ships 3,840 pairs
    dots = hv.Scatter((xy[:, 0], xy[:, 1]), "σ(T)", "√(λ₊ λ₋)", group="SigmaPairs").opts(
        color=TRAINED, size=3, alpha=0.5)
    diagonal = hv.Curve(([0, top], [0, top]), "σ(T)", "√(λ₊ λ₋)", group="SigmaDiagonal").opts(
        color=LAW, line_dash="dashed", line_width=1)
    hook = name_models({"SigmaPairs": {"source": "analyses_sigma"}, "SigmaDiagonal": {"source": "analyses_diagonal"}},
                       "analyses_sigma_figure")
    return (dots * diagonal).opts(hv.opts.Overlay(width=width, height=HEIGHT, title=title, toolbar=None,
                                                  default_tools=[], hooks=[hook], show_legend=False))


PAIRED = (("S", "symmetric_energy"), ("P", "pairing"))  # the heat-map pairs: the letter, the statistic


def _grid(heads: dict[str, np.ndarray], key: str, shape: tuple[int, int]) -> np.ndarray:
    """(layer, head) of one per-head value; NaN where a head has none."""
    grid = np.full(shape, np.nan)
    if key in heads and len(heads[key]):
        grid[np.asarray(heads["layer"]), np.asarray(heads["head"])] = heads[key]
    return grid


def _pair_image(values: np.ndarray, clim: tuple[float, float], name: str, title: str, width: int,
                colorbar: bool) -> hv.Image:
    L, H = values.shape
    # the range given: HoloViews would otherwise take it from the values (all NaN where there is no baseline)
    return hv.Image(values[::-1].astype(np.float32), bounds=(-0.5, -0.5, H - 0.5, L - 0.5), kdims=["head", "layer"],
                    vdims=[hv.Dimension(name.split("_")[2], range=clim)], group="Paired").opts(
        cmap="Viridis", clim=clim, colorbar=colorbar, colorbar_opts={"width": 10}, width=width + 60 * colorbar,
        height=max(200, min(480, 12 * L + 90)), title=title, tools=["hover"], default_tools=[], toolbar=None,
        clipping_colors={"NaN": "#eeeeee"},
        hooks=[name_models({"Paired": {"source": name, "mapper": f"{name}_colours", "renderer": f"{name}_image"}},
                           f"{name}_figure")])


def trained_vs_random(sel, baseline=None, width: int = 330) -> hv.Layout:
    """The paper's "trained vs random" heat maps: S (``symmetric_energy``) and P (``pairing``) per layer x head of
    the model beside the same of its random baseline, each pair on one colour scale (the range of both maps, the
    colour bar on the baseline's; titled "S (symmetric_energy): trained", "S: random baseline init-seed0"). Without
    a baseline the baseline's maps are empty and their titles say how to make one. Four figures in two rows, the
    sources ``analyses_pair_{S,P}_{trained,baseline}``, each in the figure ``..._figure`` with the colour mapper
    ``..._colours`` and the renderer ``..._image``."""
    a = analyses_of(sel, baseline)
    if a.report is None:
        return hv.Layout([_missing(a, width)])
    shape = (int(np.max(a.heads["layer"])) + 1, int(np.max(a.heads["head"])) + 1)
    images = []
    for letter, stat in PAIRED:
        trained, base = _grid(a.heads, letter, shape), _grid(a.baseline_heads, letter, shape)
        both = np.concatenate([trained.ravel(), base.ravel()])
        both = both[np.isfinite(both)]
        clim = (float(both.min()), float(both.max())) if len(both) else (0.0, 1.0)
        base_title = (f"{letter}: random baseline {a.baseline.split('~')[-1]}" if a.baseline else
                      f"{letter}: no random baseline (python -m pipeline baseline {a.name})")
        images += [_pair_image(trained, clim, f"analyses_pair_{letter}_trained", f"{letter} ({stat}): trained",
                               width, False),
                   _pair_image(base, clim, f"analyses_pair_{letter}_baseline", base_title, width, True)]
    return hv.Layout(images).cols(2).opts(shared_axes=False)


def analyses_summary(sel, baseline=None, width: int = 460) -> hv.Div:
    """The counts: heads, beta law, bound, balance n_pos = n_neg, effective rank, and trained against baseline
    medians when a baseline is given (HTML)."""
    a = analyses_of(sel, baseline)
    return hv.Div(summary_html(a) if a.report else f"<p class='note'>{a.note}</p>").opts(width=width, height=260)


def goodness_of_fit_table(sel, baseline=None, width: int = 720) -> hv.Div:
    """Generalised gamma against lognormal on |eig L|, lambda_+, lambda_- and sigma(T) (HTML table)."""
    a = analyses_of(sel, baseline)
    return hv.Div(fit_table_html(a.report["goodness_of_fit"]) if a.report else
                  f"<p class='note'>{a.note}</p>").opts(width=width, height=200)


def type_sensitivity_table(sel, baseline=None, width: int = 720) -> hv.Div:
    """The counts of I₊ / II / I₋ as the type rule's thresholds move, the paper's radius rule beside (HTML)."""
    a = analyses_of(sel, baseline)
    return hv.Div(sensitivity_table_html(a.report["types"]) if a.report else
                  f"<p class='note'>{a.note}</p>").opts(width=width, height=260)
