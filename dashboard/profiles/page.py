"""The profiles page of one model: the views of ``dashboard.profiles`` rendered, linked in the browser.

``profiles_view`` renders the tetrahedron, the per-layer heat maps and the histograms, then links them
with Bokeh callbacks whose code is in ``dashboard/profiles/js/``: the heat maps' dots share the tetrahedron's
data source (one selection everywhere), a selection redraws the histograms, the d slider decodes the
profiles of another offset and redraws every view, the angle sliders and a drag turn the camera. Every
interaction runs client-side, so the same layout works served and in a static file.

Data shipped to the page: the profile of every head at every offset d, quantised to uint16
(``geometry.quantise``), (heads, D, 4) with D = 129 for rotary models and 1 otherwise, packed to compress
well (``payload.pack_profiles``; the browser restores the same codes).
"""

from __future__ import annotations

import html
from typing import NamedTuple

import numpy as np
import xarray as xr
from bokeh.layouts import column, row
from bokeh.models import (
    Button,
    CheckboxGroup,
    ColumnDataSource,
    CustomJS,
    Div,
    GlyphRenderer,
    LayoutDOM,
    Legend,
    Plot,
    RadioButtonGroup,
    Select,
    Slider,
    TapTool,
)
from bokeh.transform import dodge

from dashboard.common import geometry as g
from dashboard.common import jscode
from dashboard.common.page_models import PageModels
from dashboard.common.page_style import style
from dashboard.common.page_widgets import header, lean
from dashboard.common.render import Named, render
from dashboard.common.simplex import edge_indices
from dashboard.data import ModelData
from dashboard.profiles.layers import PANEL_STEP, histograms, layer_heatmaps
from dashboard.profiles.page_analyses import analyses_tab, page_tabs
from dashboard.profiles.page_details import more_views
from dashboard.profiles.page_texts import (
    DEFINITIONS,
    formless_layers_html,
    model_line,
    static_layers_html,
    status_html,
)
from dashboard.profiles.payload import pack_profiles
from dashboard.profiles.tetrahedron import by_cluster, by_type, tetrahedron
from pipeline.schema import COORDINATES


def _as_dataarray(profile: np.ndarray, name: str) -> xr.DataArray:
    return xr.DataArray(profile, dims=("layer", "head", "d", "coordinate"), coords={"model": name},
                        name="profile")


def page_dataset(profile: np.ndarray, name: str, sel: xr.Dataset | None) -> xr.Dataset:
    """The one model's Dataset the views draw: ``profile`` (exactly what the browser decodes) in place of the
    stored one, with the model's other variables (statistics, spectrum, sizes, command) from ``sel`` (the
    store's ``ds.sel(model=name)``, padding and all) when given."""
    L, H, D, _ = profile.shape
    da = _as_dataarray(profile, name)
    if sel is None:
        return xr.Dataset({"profile": da, "n_layers": L, "n_heads": H}, coords={"model": name})
    cut = sel.isel(layer=slice(0, L), head=slice(0, H)).drop_vars("profile")
    cut = (cut.isel(d=slice(0, D)) if "d" in cut.dims else cut).load()  # read once: the views take many slices
    return cut.assign(profile=da.assign_coords({k: cut[k] for k in ("layer", "head", "d", "coordinate")
                                                if k in cut.coords and k in da.dims}))


class Figures(NamedTuple):
    """The page's three first figures, rendered, and the heads' models in them."""

    tetra: Plot
    heat: Plot
    hist: Plot
    heads: ColumnDataSource
    head_dots: GlyphRenderer
    type_dots: list[GlyphRenderer]
    type_legend: Legend
    cluster_dots: list[GlyphRenderer]
    cluster_legend: Legend
    names: Named  # the three figures' named models, as rendered


def _figures(shown: xr.Dataset, m: ModelData, baseline: xr.Dataset | None) -> Figures:
    """The tetrahedron (with the baseline's percentiles in its hover and its cloud drawn hidden), the per-layer heat
    maps and the histograms, rendered; the heat maps' dots drawn from the tetrahedron's heads (one selection
    everywhere); the colours by type and by cluster added hidden (``by_type``, ``by_cluster``)."""
    tetra = render(tetrahedron(shown, d=0, rank_one=False, baseline=baseline, cloud=False))
    heat = render(layer_heatmaps(shown, d=0, width=820, high=m.heat_high))
    hist = render(histograms(shown, d=0, width=820, top=m.hist_top))
    heat.name, hist.name = "layers", "hists"
    tetra.sizing_mode = None  # sized by its frame (frame_width, frame_height): "fixed" would ask for width and height
    hist.min_border_left = heat.min_border_left
    heat.y_range.name, hist.y_range.name = "layers_y", "hists_y"
    names = Named(tetra, heat, hist)
    heads = names["heads"]
    dots = [names[f"layer_dots_{c}"] for c in COORDINATES]
    for k, c in enumerate(COORDINATES):
        dots[k].data_source = heads  # the same heads as the tetrahedron: one selection everywhere
        dots[k].glyph.x = dots[k].selection_glyph.x = dodge(c, k * PANEL_STEP)
        dots[k].nonselection_glyph = None  # unselected heads drawn with the glyph itself: invisible
    head_dots = names["head_dots"]
    type_dots, type_legend = by_type(tetra, head_dots, heads, shown=False)
    cluster_dots, cluster_legend = by_cluster(tetra, head_dots, heads, shown=False)
    return Figures(tetra, heat, hist, heads, head_dots, type_dots, type_legend, cluster_dots, cluster_legend, names)


def _selected_bars(hist: Plot, bars: ColumnDataSource) -> tuple[ColumnDataSource, GlyphRenderer]:
    """The selected heads' bars over the histograms (``hist_selected``), hidden while nothing is selected;
    ``bars``: the histograms' source (``hist_all``: every coordinate's bars, coordinate-major, as
    ``layers.histograms`` draws them)."""
    sel_hist = ColumnDataSource({k: np.asarray(bars.data[k]) for k in ("left", "right")}
                                | {"top": np.zeros(len(bars.data["top"]))}, name="hist_selected")
    sel_renderer = hist.quad(left="left", right="right", bottom=0, top="top", source=sel_hist, fill_color=None,
                             line_color=g.SELECTED, line_width=2, visible=False, name="hist_selected_bars")
    return sel_hist, sel_renderer


def _page_models(f: Figures, m: ModelData, q: np.ndarray, sheet) -> PageModels:
    """The models of the first part of the page that its browser code reads: the tetrahedron, its camera and
    angle sliders, the quantised profiles (``profile_cube``) and sizes (``profile_meta``), the heat maps, the
    histograms and the selection's summary."""
    L, H, D, _ = m.profile.shape
    n = f.names
    sel_hist, sel_renderer = _selected_bars(f.hist, n["hist_all"])
    for fig, selectable in ((f.tetra, [f.head_dots, *f.type_dots, *f.cluster_dots]),
                            (f.heat, [n[f"layer_dots_{c}"] for c in COORDINATES]),
                            (f.hist, [])):
        lean(fig, selectable)
    azimuth = Slider(start=-180, end=180, value=g.DEFAULT_AZIMUTH, step=1, title="azimuth (°)", name="azimuth",
                     width=190)
    elevation = Slider(start=-90, end=90, value=g.DEFAULT_ELEVATION, step=1, title="elevation (°)",
                       name="elevation", width=190)
    return PageModels(
        heads=f.heads, vertices=n["tetra_vertices"], edges=n["tetra_edges"], **edge_indices(),
        camera=n["camera"], tetrahedron=f.tetra, box_select=n["head_box_select"],
        lasso_select=n["head_lasso_select"], label_offset_px=g.LABEL_OFFSET_PX,
        azimuth_slider=azimuth, elevation_slider=elevation, vertex_xyz=g.VERTICES.ravel().tolist(),
        profile_cube=ColumnDataSource(dict(q=pack_profiles(q.reshape(L * H, D, 4))), name="profile_cube"),
        profile_meta=ColumnDataSource(dict(hist_top=[float(f.hist.y_range.end)], model=[m.row.name], n_layers=[L],
                                           n_heads=[H], n_offsets=[D]), name="profile_meta"),
        heat_sources=[n[f"heat_{c}"] for c in COORDINATES], hist_all=n["hist_all"], hist_selected=sel_hist,
        hist_selected_bars=sel_renderer,
        hist_y_range=f.hist.y_range, n_bins=g.N_BINS,
        selection_info=Div(text=f"{L * H} heads · none selected", stylesheets=[sheet], name="selection_info",
                           width=260),
        type_names=list(g.TYPE_NAMES), type_legend=f.type_legend)


def _turn_and_select(f: Figures, models: PageModels) -> Button:
    """The camera follows a drag and the angle sliders; a selection redraws the histograms; a tap selects one
    head. Returns the "Clear selection" button."""
    ctx = models.args()
    # a tap selects one head: the inspector
    f.tetra.add_tools(TapTool(renderers=[f.head_dots, *f.type_dots, *f.cluster_dots]))
    # the drag callback that tetrahedron() attached moves the sliders here, which project
    for cb in f.tetra.js_event_callbacks.get("pan", []) + f.tetra.js_event_callbacks.get("panstart", []):
        cb.args = dict(ctx=ctx)
    rotate = jscode.callback(dict(ctx=ctx), "project", "rotate_slider")
    models.azimuth_slider.js_on_change("value", rotate)
    models.elevation_slider.js_on_change("value", rotate)
    f.heads.selected.js_on_change("indices", jscode.callback(dict(ctx=ctx), "profiles_histograms", "profiles_select"))
    clear = Button(label="Clear selection", width=130, name="clear_selection")
    clear.js_on_event("button_click", jscode.callback(dict(heads=f.heads), "clear_selection"))
    return clear


def _d_controls(models: PageModels, m: ModelData, play_interval_ms: int, sheet) -> tuple[Slider, LayoutDOM]:
    """The d slider (decodes the profiles at that offset and redraws every view) with the note of the layers it does
    not move (``static_layers_note``), its play button, and the note shown instead for a model whose form does not
    depend on position. The same models for every model (hidden where they do not apply), so the served app can swap
    data in place."""
    r = m.row
    rotary = r.rotary and m.profile.shape[2] > 1
    dslider = Slider(start=0, end=max(m.profile.shape[2] - 1, 1), value=0, step=1, width=330, name="d_slider",
                     visible=rotary, title="d = query position − key position")
    dslider.js_on_change("value", jscode.callback(dict(ctx=models.args()), "payload_decode", "profiles_decode",
                                                  "type_rule", "spectral_types", "project", "profiles_histograms",
                                                  "page_views", "profiles_d_step"))
    play = Button(label="▶ Play", width=90, button_type="success", name="play", visible=rotary)
    play.js_on_event("button_click", jscode.callback(dict(slider=dslider, button=play, interval=int(play_interval_ms)),
                                                     "profiles_play"))
    kind = ("this model has no positional encoding" if r.positional == "none"
            else "its learned bias per relative position is added to each score, not a form of the two tokens, and "
                 "left out" if r.positional == "relative bias"
            else f"with {html.escape(r.positional)} positions")
    formless = formless_layers_html(r)  # a hybrid's layers without a form, named beside either note
    note = Div(text=f'<p class="note">The form does not depend on position ({kind}): one profile per head, no d '
               "slider.</p>" + formless, stylesheets=[sheet], width=330, name="position_note", visible=not rotary)
    static = static_layers_html(r) + formless
    static_note = Div(text=static, stylesheets=[sheet], width=330, name="static_layers_note",
                      visible=rotary and bool(static))
    return dslider, row(column(dslider, static_note), play, note, name="position_controls")


def _view_controls(f: Figures, models: PageModels, dslider: Slider, has_baseline: bool,
                   rotary: bool) -> tuple[RadioButtonGroup, LayoutDOM]:
    """The colour mode (by layer, by type, by cluster), the toggles of the rank-one curve and of the baseline's
    cloud (disabled without a baseline; at d = 0 for a ``rotary`` model), and the inspector following the
    selection. The cloud starts hidden: it doubles the dots in the tetrahedron, and the first look is at the
    model's own heads."""
    color = RadioButtonGroup(labels=["colour by layer", "colour by type", "colour by cluster"], active=0,
                             name="color_mode", width=360)
    modes = dict(ctx=PageModels(colour_mode=color, head_dots=f.head_dots, type_dots=f.type_dots,
                                type_legend=f.type_legend, cluster_dots=f.cluster_dots,
                                cluster_legend=f.cluster_legend,
                                layer_colour_bar=f.names["layer_colour_bar"],
                                head_hover=f.names["head_hover"]).args())
    color.js_on_change("active", jscode.callback(modes, "color_mode"))
    hover_follows = jscode.callback(modes, "type_hover")  # one callback for every group
    for r_group in [*f.type_dots, *f.cluster_dots]:  # a legend click hides a group: its heads leave the hover too
        r_group.js_on_change("visible", hover_follows)
    rank_one = CheckboxGroup(labels=["rank-one curve"], active=[], name="rank_one_toggle", width=130)
    rank_one.js_on_change("active", jscode.callback(dict(curve=f.names["rank_one_curve"]),
                                                    "rank_one_toggle"))
    label = f"random baseline's heads{' (d = 0)' if rotary else ''}"
    cloud = CheckboxGroup(labels=[label], active=[], name="baseline_cloud_toggle", width=230, disabled=not has_baseline)
    cloud.js_on_change("active", jscode.callback(dict(cloud=f.names["baseline_cloud_dots"]),
                                                 "baseline_cloud_toggle"))
    f.heads.selected.js_on_change("indices", jscode.callback(dict(ctx=models.but(d_slider=dslider).args()),
                                                             "payload_decode", "page_views", "inspector_select"))
    return color, row(color, rank_one, cloud, name="view_controls")


def _model_choice(selector, nav: dict[str, str] | None, current_url: str | None, sheet) -> tuple[list, Select | None]:
    """The page's header, the served app's model selector (``selector``) or a static page's (``nav``)."""
    top = [header("Profiles of attention heads", width=700, sheet=sheet)]
    if selector is not None:
        top.append(selector)
    if not nav:
        return top, None
    choose = Select(title="Model", options=[(url, name) for name, url in nav.items()], value=current_url or "",
                    width=320, name="model_select")
    choose.js_on_change("value", jscode.callback({}, "navigate"))
    return [*top, choose], choose


def _deep_link(models: PageModels, url_note: Div, tab_pages: dict[str, str] | None) -> CustomJS:
    """The URL follows the page's state (d, colour mode, statistic, selection, the tab, the model shown:
    ``url_write``); returns the callback that applies the URL's state once the document is ready
    (``url_restore``)."""
    link = dict(ctx=models.but(url_note=url_note, tab_pages=tab_pages).args())
    write = jscode.callback(link, "url_note", "url_state", "url_write", name="url_write")
    models.d_slider.js_on_change("value", write)
    models.colour_mode.js_on_change("active", write)
    if models.statistic_select is not None:
        models.statistic_select.js_on_change("value", write)
    models.heads.selected.js_on_change("indices", write)
    if models.page_tabs is not None:
        models.page_tabs.js_on_change("active", write)
    models.profile_meta.js_on_change("data", write)  # the served app swaps in another model's data
    return jscode.callback(link, "url_note", "url_state", "url_restore", name="url_restore")


def profiles_view(m: ModelData, sel: xr.Dataset | None = None, *, nav: dict[str, str] | None = None,
                  current_url: str | None = None, play_interval_ms: int = 120, selector=None,
                  tabs: dict[str, str] | None = None, baseline: xr.Dataset | None = None, more_tabs=()):
    """The profiles page of one model as a Bokeh layout.

    m : the model's row and (n_layers, n_heads, D, 4) profile (``dashboard.data.model_data``).
    sel : the model's Dataset in the store (``data.profiles(store).sel(model=name)``), for its statistics
        and spectra; None draws the views that need them as "statistics not computed".
    nav : for static pages, {model name: page url}; draws a selector that navigates between pages.
    current_url : the url of this page among ``nav``'s values.
    selector : a widget (the served app's model selector) placed at the top; None for none.
    tabs : for static pages, {tab name in a deep link: the page that shows it ('' for this one)}.
    baseline : the Dataset of one of the model's random baselines (``analyses_data.baseline_of``), overlaid on
        the Analyses tab; None for none.
    more_tabs : tabs after Analyses, each with ``name`` (its deep link's), ``title``, ``child`` and ``restore`` (the
        CustomJS that applies its part of the deep link, or None): a run's Training tab
        (``dashboard.training.page.training_tab``).

    The layout's ``tags`` hold the CustomJS ``url_restore`` (and one of each tab of ``more_tabs``): run when the
    document is ready (``page_widgets.restore_on_ready``), it applies the deep link of the page's URL
    (``js/url_state.js``).
    """
    r = m.row
    sheet = style()  # one for every Div of the page
    q = g.quantise(m.profile)
    shown = page_dataset(g.dequantise(q), r.name, sel)  # exactly what the browser decodes
    f = _figures(shown, m, baseline)
    models = _page_models(f, m, q, sheet)
    more, models, statistic_select = more_views(shown, models, sheet, r.rotary and m.profile.shape[2] > 1, baseline)
    clear = _turn_and_select(f, models)
    dslider, position = _d_controls(models, m, play_interval_ms, sheet)
    color, view_controls = _view_controls(f, models, dslider, baseline is not None, r.rotary and m.profile.shape[2] > 1)
    top, choose = _model_choice(selector, nav, current_url, sheet)
    profiles_part = column(
        row(position, models.azimuth_slider, models.elevation_slider, clear, models.selection_info, name="controls"),
        view_controls, row(f.tetra, column(f.heat, f.hist)), more,
        Div(text=DEFINITIONS, stylesheets=[sheet], width=1300, name="definitions"))
    tabs_shown = page_tabs(profiles_part, analyses_tab(shown, baseline, sheet), *more_tabs)
    url_note = Div(text="", stylesheets=[sheet], width=1100, name="url_note", visible=False)
    restore = _deep_link(models.but(d_slider=dslider, colour_mode=color, model_nav=choose,
                                    statistic_select=statistic_select, page_tabs=tabs_shown), url_note, tabs)
    status = status_html(m)
    return column(
        row(*top), url_note, Div(text=model_line(r), stylesheets=[sheet], width=1300, name="model_line"),
        Div(text=f'<div class="{"error" if (m.error or r.damaged) else "warn"}">{status}</div>',
            stylesheets=[sheet], width=1100, name="model_status", visible=bool(status)),
        tabs_shown, name="profiles_page", tags=[restore, *(t.restore for t in more_tabs if t.restore is not None)])
