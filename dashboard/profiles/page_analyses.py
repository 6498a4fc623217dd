"""The profiles page's Analyses tab: the views of :mod:`dashboard.profiles.analyses` rendered for one model.

The analyses are computed once (:func:`dashboard.profiles.analyses_data.analyses`) and every view drawn from
them. The tab holds the same named models for every model with statistics, its baseline overlays drawn hidden
where the model has no baseline, and every model that carries the model's numbers (sources, titles, ranges,
texts) is named: the served app switches models by giving the named models the new model's values
(``dashboard.rendered.replace_in_place``). A model without statistics shows "statistics not computed" with the
command that adds them.

:func:`page_tabs` puts the page's Profiles part and this tab in one ``Tabs``; a deep link's ``tab=analyses``
opens it (``js/url_state.js``).
"""

from __future__ import annotations

import xarray as xr
from bokeh.layouts import column, row
from bokeh.models import Div, HoverTool, LayoutDOM, TabPanel, Tabs

from dashboard.common.page_widgets import name_ranges, static
from dashboard.common.render import render
from dashboard.profiles import analyses as views
from dashboard.profiles.analyses_data import analyses

PAGE_TABS = ("profiles", "analyses")  # the tabs' names in a deep link, in order
INTRO = ("<h2>Analyses</h2><p class='note'>The paper's evidence on this model's heads at d = 0: the law of the "
         "pairing score P and its bound through ρ, the balance and effective-rank counts, which law fits the "
         "spectra, how the type counts move with the rule's thresholds, and σ(T) against √(λ₊λ₋). Where the store "
         "holds a random baseline of the model (<code>python -m pipeline baseline</code>), its heads are outlined "
         "on the histograms and each head's percentiles among them are in the hover of P against its "
         "bound.</p>")


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


def analyses_tab(shown: xr.Dataset, baseline: xr.Dataset | None, sheet) -> LayoutDOM:
    """The Analyses tab's content for the model of ``shown`` (the page's Dataset) against ``baseline`` (the
    Dataset of one of its baselines, or None)."""
    a = analyses(shown, baseline)
    intro = Div(text=INTRO, stylesheets=[sheet], width=1300, name="analyses_intro")
    if a.report is None:
        return column(intro, Div(text=f"<div class='warn'>{a.note}</div>", stylesheets=[sheet], width=1100,
                                 name="analyses_missing"), name="analyses")
    p_fig = _figure(views.pairing_histogram(a), "analyses_p")
    bound_fig = _figure(views.pairing_bound_view(a), "analyses_bound", hover=True)
    rho_fig = _figure(views.rho_histogram(a), "analyses_rho")
    sigma_fig = _figure(views.sigma_geometric(a), "analyses_sigma")
    return column(
        intro,
        row(p_fig, bound_fig, _div(views.analyses_summary(a), "analyses_summary", sheet, 400), name="analyses_law"),
        row(rho_fig, sigma_fig, name="analyses_spectra"),
        _div(views.goodness_of_fit_table(a), "analyses_fit_table", sheet, 1000),
        _div(views.type_sensitivity_table(a), "analyses_types_table", sheet, 1000),
        name="analyses")


def page_tabs(profiles: LayoutDOM, analyses_part: LayoutDOM) -> Tabs:
    """The page's two tabs, Profiles first. Left unnamed: the served app's in-place model switch leaves the tab
    that is open as it is."""
    return Tabs(tabs=[TabPanel(child=profiles, title="Profiles"), TabPanel(child=analyses_part, title="Analyses")],
                active=0)
