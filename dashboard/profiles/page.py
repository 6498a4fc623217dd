"""The profiles page of one model: the views of ``dashboard.profiles`` rendered, linked in the browser.

``profiles_view`` renders the tetrahedron, the per-layer heat maps and the histograms, then links them
with Bokeh callbacks whose code is in ``dashboard/profiles/js/``: the heat maps' dots share the tetrahedron's
data source (one selection everywhere), a selection redraws the histograms, the d slider decodes the
profiles of another offset and redraws every view, the angle sliders and a drag turn the camera. Every
interaction runs client-side, so the same layout works served and in a static file.

Data shipped to the page: the profile of every head at every offset d, quantised to uint16
(``geometry.quantise``) in one flat array of shape (heads, D, 4), D = 129 for rotary models and 1 otherwise.
"""

from __future__ import annotations

import html

import numpy as np
import xarray as xr
from bokeh.layouts import column, row
from bokeh.models import (
    Button,
    CheckboxGroup,
    ColumnDataSource,
    CustomJS,
    Div,
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
from dashboard.common.render import render
from dashboard.common.simplex import edge_indices
from dashboard.data import ModelData
from dashboard.profiles.layers import PANEL_STEP, histograms, layer_heatmaps
from dashboard.profiles.page_details import more_views
from dashboard.profiles.page_texts import DEFINITIONS, model_line, status_html
from dashboard.profiles.tetrahedron import by_type, tetrahedron
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
    cut = cut.isel(d=slice(0, D)) if "d" in cut.dims else cut
    return cut.assign(profile=da.assign_coords({k: cut[k] for k in ("layer", "head", "d", "coordinate")
                                                if k in cut.coords and k in da.dims}))


def profiles_view(m: ModelData, sel: xr.Dataset | None = None, *, nav: dict[str, str] | None = None,
                  current_url: str | None = None, play_interval_ms: int = 120, selector=None,
                  tabs: dict[str, str] | None = None):
    """The profiles page of one model as a Bokeh layout.

    m : the model's row and (n_layers, n_heads, D, 4) profile (``dashboard.data.model_data``).
    sel : the model's Dataset in the store (``data.profiles(store).sel(model=name)``), for its statistics
        and spectra; None draws the views that need them as "statistics not computed".
    nav : for static pages, {model name: page url}; draws a selector that navigates between pages.
    current_url : the url of this page among ``nav``'s values.
    selector : a widget (the served app's model selector) placed at the top; None for none.
    tabs : for static pages, {tab name in a deep link: the page that shows it ('' for this one)}.

    The layout's ``tags`` hold one CustomJS, ``url_restore``: run when the document is ready
    (``restore_on_ready``), it applies the deep link of the page's URL (``js/url_state.js``).
    """
    r = m.row
    sheet = style()  # one for every Div of the page
    L, H, D, _ = m.profile.shape
    q = g.quantise(m.profile)
    shown = page_dataset(g.dequantise(q), r.name, sel)  # exactly what the browser decodes
    tetra = render(tetrahedron(shown, d=0, rank_one=False))
    heat = render(layer_heatmaps(shown, d=0, width=820, high=m.heat_high))
    hist = render(histograms(shown, d=0, width=820, top=m.hist_top))
    heat.name, hist.name = "layers", "hists"
    tetra.sizing_mode = None  # sized by its frame (frame_width, frame_height): "fixed" would ask for width and height
    hist.min_border_left = heat.min_border_left
    heat.y_range.name, hist.y_range.name = "layers_y", "hists_y"
    heads = tetra.select_one({"name": "heads"})
    heat_sources = [heat.select_one({"name": f"heat_{c}"}) for c in COORDINATES]
    dots = [heat.select_one({"name": f"layer_dots_{c}"}) for c in COORDINATES]
    for k, c in enumerate(COORDINATES):
        dots[k].data_source = heads  # the same heads as the tetrahedron: one selection everywhere
        dots[k].glyph.x = dots[k].selection_glyph.x = dodge(c, k * PANEL_STEP)
        dots[k].nonselection_glyph = None  # unselected heads drawn with the glyph itself: invisible
    bars = hist.select_one({"name": "hist_bars"})  # every coordinate's bars, coordinate-major (layers.histograms)
    sel_hist = ColumnDataSource({k: np.asarray(bars.data_source.data[k]) for k in ("left", "right")}
                                | {"top": np.zeros(len(bars.data_source.data["top"]))}, name="hist_selected")
    sel_renderer = hist.quad(left="left", right="right", bottom=0, top="top", source=sel_hist, fill_color=None,
                             line_color=g.SELECTED, line_width=2, visible=False, name="hist_selected_bars")
    head_dots = tetra.select_one({"name": "head_dots"})
    type_dots, type_legend = by_type(tetra, head_dots, heads, shown=False)
    for fig, selectable in ((tetra, [head_dots, *type_dots]), (heat, dots), (hist, [])):
        lean(fig, selectable)
    azimuth = Slider(start=-180, end=180, value=g.DEFAULT_AZIMUTH, step=1, title="azimuth (°)", name="azimuth",
                     width=190)
    elevation = Slider(start=-90, end=90, value=g.DEFAULT_ELEVATION, step=1, title="elevation (°)",
                       name="elevation", width=190)
    info = Div(text=f"{L * H} heads · none selected", stylesheets=[sheet], name="selection_info", width=260)
    models = PageModels(
        heads=heads, vertices=tetra.select_one({"name": "tetra_vertices"}),
        edges=tetra.select_one({"name": "tetra_edges"}), camera=tetra.select_one({"name": "camera"}), fig=tetra,
        box=tetra.select_one({"name": "head_box_select"}), lasso=tetra.select_one({"name": "head_lasso_select"}),
        label_offset=g.LABEL_OFFSET_PX, azimuth=azimuth, elevation=elevation, **edge_indices(),
        cube=ColumnDataSource(dict(q=q.reshape(-1)), name="profile_cube"), n_bins=g.N_BINS,
        meta=ColumnDataSource(dict(hist_top=[float(hist.y_range.end)], model=[r.name], n_layers=[L], n_heads=[H],
                                   n_offsets=[D]), name="profile_meta"),
        V=g.VERTICES.ravel().tolist(), heats=heat_sources, hist=bars.data_source, sel_hist=sel_hist,
        sel_renderer=sel_renderer, hist_range=hist.y_range, info=info, type_names=list(g.TYPE_NAMES),
        type_legend=type_legend)
    more, models, stat_select = more_views(shown, models, sheet, r.rotary and D > 1)
    ctx = models.args()
    tetra.add_tools(TapTool(renderers=[head_dots, *type_dots]))  # a tap selects one head: the inspector shows it
    # the drag callback that tetrahedron() attached moves the sliders here, which project
    for cb in tetra.js_event_callbacks.get("pan", []) + tetra.js_event_callbacks.get("panstart", []):
        cb.args = dict(ctx=ctx)
    rotate = CustomJS(args=dict(ctx=ctx), code=jscode.code("project", "rotate_slider"))
    azimuth.js_on_change("value", rotate)
    elevation.js_on_change("value", rotate)
    heads.selected.js_on_change("indices", CustomJS(args=dict(ctx=ctx), code=jscode.code(
        "profiles_histograms", "profiles_select")))
    clear = Button(label="Clear selection", width=130, name="clear_selection")
    clear.js_on_event("button_click", CustomJS(args=dict(heads=heads), code=jscode.code("clear_selection")))

    # the same models for every model (hidden where they do not apply), so the app can swap data in place
    rotary = r.rotary and D > 1
    dslider = Slider(start=0, end=max(D - 1, 1), value=0, step=1, width=330, name="d_slider", visible=rotary,
                     title="d = query position − key position")
    dslider.js_on_change("value", CustomJS(args=dict(ctx=ctx), code=jscode.code(
        "profiles_decode", "spectral_types", "project", "profiles_histograms", "page_views", "profiles_d_step")))
    color = RadioButtonGroup(labels=["colour by layer", "colour by type"], active=0, name="color_mode", width=240)
    modes = PageModels(color=color, dots=head_dots, type_dots=type_dots, type_legend=type_legend,
                       colour_bar=tetra.select_one({"name": "layer_colour_bar"}),
                       hover=tetra.select_one({"name": "head_hover"})).args()
    recolour = CustomJS(args=dict(ctx=modes), code=jscode.code("color_mode"))
    color.js_on_change("active", recolour)
    for r_type in type_dots:  # a legend click hides a type: its heads leave the hover too
        r_type.js_on_change("visible", CustomJS(args=dict(ctx=modes), code=jscode.code("type_hover")))
    curve = tetra.select_one({"name": "rank_one_curve"})
    rank_one = CheckboxGroup(labels=["rank-one curve"], active=[], name="rank_one_toggle", width=130)
    rank_one.js_on_change("active", CustomJS(args=dict(curve=curve), code=jscode.code("rank_one_toggle")))
    heads.selected.js_on_change("indices", CustomJS(args=dict(ctx=models.but(dslider=dslider).args()),
                                                    code=jscode.code("page_views", "inspector_select")))
    play = Button(label="▶ Play", width=90, button_type="success", name="play", visible=rotary)
    play.js_on_event("button_click", CustomJS(args=dict(slider=dslider, button=play, interval=int(play_interval_ms)),
                                              code=jscode.code("profiles_play")))
    kind = ("this model has no positional encoding" if r.positional == "none"
            else f"with {html.escape(r.positional)} positions")
    note = Div(text=f'<p class="note">The form does not depend on position ({kind}): one profile per head, no d '
               "slider.</p>", stylesheets=[sheet], width=330, name="position_note", visible=not rotary)
    position = row(dslider, play, note, name="position_controls")

    top = [header("Profiles of attention heads", width=700, sheet=sheet)]
    if selector is not None:
        top.append(selector)
    if nav:
        sel = Select(title="Model", options=[(url, name) for name, url in nav.items()], value=current_url or "",
                     width=320, name="model_select")
        sel.js_on_change("value", CustomJS(code=jscode.code("navigate")))
        top.append(sel)
    url_note = Div(text="", stylesheets=[sheet], width=1100, name="url_note", visible=False)
    link = models.but(dslider=dslider, url_note=url_note, nav=top[-1] if nav else None, tabs=tabs, color=color,
                      stat=stat_select).args()
    write = CustomJS(args=dict(ctx=link), code=jscode.code("url_note", "url_state", "url_write"), name="url_write")
    dslider.js_on_change("value", write)
    color.js_on_change("active", write)
    if stat_select is not None:
        stat_select.js_on_change("value", write)
    heads.selected.js_on_change("indices", write)
    models.meta.js_on_change("data", write)  # the served app swaps in another model's data
    restore = CustomJS(args=dict(ctx=link), code=jscode.code("url_note", "url_state", "url_restore"),
                       name="url_restore")
    parts = [row(*top), url_note, Div(text=model_line(r), stylesheets=[sheet], width=1300, name="model_line")]
    status = status_html(m)
    parts.append(Div(text=f'<div class="{"error" if (m.error or r.damaged) else "warn"}">{status}</div>',
                     stylesheets=[sheet], width=1100, name="model_status", visible=bool(status)))
    parts.append(row(position, azimuth, elevation, clear, info, name="controls"))
    parts.append(row(color, rank_one, name="view_controls"))
    parts.append(row(tetra, column(heat, hist)))
    parts.append(more)
    parts.append(Div(text=DEFINITIONS, stylesheets=[sheet], width=1300, name="definitions"))
    return column(*parts, name="profiles_page", tags=[restore])


