"""The profiles page's Analyses tab: the views of :mod:`dashboard.profiles.analyses` rendered for one model.

The analyses are computed once (:func:`dashboard.profiles.analyses_data.analyses`) and every view drawn from
them. The tab holds the same named models for every model: its baseline overlays are drawn hidden where the
model has no baseline, and its views hidden from stand-in values where it has no statistics (then "statistics not
computed" shows with the command that adds them). Every model that carries the model's numbers (sources, titles,
ranges, texts) is named: the served app switches models by giving the named models the new model's values
(``dashboard.rendered.replace_in_place``).

:func:`page_tabs` puts the page's Profiles part, this tab and a run's Training tab (``dashboard.training``) in one
``Tabs``; a deep link's ``tab=analyses`` (``tab=training``) opens it (``js/url_state.js``).
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from bokeh.layouts import column, row
from bokeh.models import Div, HoverTool, LayoutDOM, TabPanel, Tabs

from dashboard.common.page_widgets import name_ranges, static
from dashboard.common.render import render
from dashboard.profiles import analyses as views
from dashboard.profiles.analyses_data import analyses
from pipeline.schema import STATISTICS

PAGE_TABS = ("profiles", "analyses", "training")  # the tabs' names in a deep link, in order (training: a run's)
INTRO = ("<h2>Analyses</h2><p class='note'>The paper's evidence on this model's heads at d = 0: the law of the "
         "pairing score P and its bound through ρ, the balance and effective-rank counts, which law fits the "
         "spectra, how the type counts move with the rule's thresholds, and σ(T) against √(λ₊λ₋). Where the store "
         "holds a random baseline of the model (<code>python -m pipeline baseline</code>), its heads are outlined "
         "on the histograms and beside the model's S and P per head, and each head's percentiles among them are in "
         "the hover of P against its bound, of the tetrahedron and in the inspector.</p>")


def _figure(view, prefix: str, hover: bool = False):
    """The rendered figure, its ranges and title named, without tools (but its hover when ``hover``)."""
    fig = render(view)
    fig.sizing_mode = None
    name_ranges(fig, prefix)
    kept = [t for t in fig.tools if hover and isinstance(t, HoverTool)]
    static(fig)
    fig.tools = kept
    return fig


def _div(view, name: str, sheet, width: int) -> Div:
    """A Bokeh Div of an ``hv.Div`` view's HTML (HoloViews renders one as Panel's model, which the static
    pages do not load)."""
    return Div(text=view.data, stylesheets=[sheet], width=width, name=name)


def _stand_in() -> xr.Dataset:
    """Eight heads of fixed stand-in values (seed 0), drawn hidden in place of a model without statistics: every
    page then holds the same models, so the served app switches models by changing data."""
    rng = np.random.default_rng(0)
    L, H = 2, 4
    spectrum = -np.sort(-rng.standard_normal((L, H, 4)), axis=-1)
    return xr.Dataset({"profile": (("layer", "head", "d", "coordinate"), rng.dirichlet(np.ones(4), (L, H, 1))),
                       "head_statistics": (("layer", "head", "statistic"),
                                           rng.uniform(0.05, 0.95, (L, H, len(STATISTICS)))),
                       "spectrum": (("layer", "head", "eigen"), spectrum / np.linalg.norm(spectrum, axis=-1,
                                                                                          keepdims=True)),
                       "n_layers": L, "n_heads": H, "d_model": 4, "d_head": 2},
                      coords={"model": "stand-in", "statistic": list(STATISTICS)})


def analyses_tab(shown: xr.Dataset, baseline: xr.Dataset | None, sheet) -> LayoutDOM:
    """The Analyses tab's content for the model of ``shown`` (the page's Dataset) against ``baseline`` (the
    Dataset of one of its baselines, or None). Without statistics the views are drawn hidden from stand-in
    values (``_stand_in``) and "statistics not computed" shows with the command that adds them."""
    a = analyses(shown, baseline)
    missing = a.report is None
    intro = Div(text=INTRO, stylesheets=[sheet], width=1300, name="analyses_intro")
    note = Div(text=f"<div class='warn'>{a.note}</div>", stylesheets=[sheet], width=1100, name="analyses_missing",
               visible=missing)
    if missing:
        a = analyses(_stand_in())
    p_fig = _figure(views.pairing_histogram(a), "analyses_p")
    bound_fig = _figure(views.pairing_bound_view(a), "analyses_bound", hover=True)
    rho_fig = _figure(views.rho_histogram(a), "analyses_rho")
    sigma_fig = _figure(views.sigma_geometric(a), "analyses_sigma")
    pairs = [_figure(view, f"analyses_pair_{letter}_{which}", hover=True) for view, (letter, which) in
             zip(views.trained_vs_random(a), [(x, w) for x, _ in views.PAIRED for w in ("trained", "baseline")],
                 strict=True)]
    pairs_heading = Div(text="<h3>Trained against random: S and P per layer × head, each pair on one colour "
                             "scale</h3>", stylesheets=[sheet], width=1000, name="analyses_pairs_heading")
    content = column(
        row(p_fig, bound_fig, _div(views.analyses_summary(a), "analyses_summary", sheet, 400), name="analyses_law"),
        row(rho_fig, sigma_fig, name="analyses_spectra"),
        pairs_heading, row(*pairs[:2], name="analyses_pairs_s"), row(*pairs[2:], name="analyses_pairs_p"),
        _div(views.goodness_of_fit_table(a), "analyses_fit_table", sheet, 1000),
        _div(views.type_sensitivity_table(a), "analyses_types_table", sheet, 1000),
        name="analyses_content", visible=not missing)
    return column(intro, note, content, name="analyses")


def page_tabs(profiles: LayoutDOM, analyses_part: LayoutDOM, *more) -> Tabs:
    """The page's tabs, Profiles first, then Analyses and ``more`` (each with its ``title`` and ``child``: a run's
    Training tab). Left unnamed: the served app's in-place model switch leaves the tab that is open as it is."""
    return Tabs(tabs=[TabPanel(child=profiles, title="Profiles"), TabPanel(child=analyses_part, title="Analyses"),
                      *(TabPanel(child=t.child, title=t.title) for t in more)], active=0)
