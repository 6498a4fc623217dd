"""The profiles page of one model: the views of ``dashboard.views`` rendered with ``hv.render``, linked in the browser.

``profiles_view`` renders the tetrahedron, the per-layer heat maps and the histograms, then links them
with Bokeh callbacks whose code is in ``dashboard/js/``: the heat maps' dots share the tetrahedron's
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
    CDSView,
    CheckboxGroup,
    ColumnDataSource,
    CustomJS,
    Div,
    GlyphRenderer,
    GroupFilter,
    HoverTool,
    InlineStyleSheet,
    Legend,
    LegendItem,
    RadioButtonGroup,
    Select,
    Slider,
    TapTool,
)
from bokeh.transform import dodge

from dashboard import geometry as g
from dashboard import jscode, views
from dashboard.data import ModelData, ModelRow
from dashboard.page_models import PageModels
from dashboard.profiles_views import lean, more_views
from dashboard.stylesheet import style

ORBIT_FAMILY = "orbits"
ORBIT_GROUP = "trained in this project: orbit experiment"
PUBLIC_GROUP = "public models"

DEFINITIONS = """
<p><b>Profile.</b> A head with query and key weights W<sub>Q</sub>, W<sub>K</sub> scores tokens with the
bilinear form <i>L</i> = W<sub>K</sub><sup>T</sup> W<sub>Q</sub> on the residual stream (rotary models:
<i>L</i>(<i>d</i>) = W<sub>K</sub><sup>T</sup> R(<i>d</i>) W<sub>Q</sub>, <i>d</i> = query position − key
position). Scale <i>L</i> to ‖<i>L</i>‖<sub>F</sub> = 1; let <i>S</i>, <i>T</i> be its symmetric and
antisymmetric parts and λ<sub>+</sub>, λ<sub>−</sub> the positive eigenvalues of <i>S</i> and the absolute
values of its negative ones, decreasing, zero-padded. Then
<i>a</i> = ‖<i>T</i>‖², <i>b</i> = 2⟨λ<sub>+</sub>, λ<sub>−</sub>⟩,
<i>c</i> = ‖(λ<sub>+</sub> − λ<sub>−</sub>)<sub>+</sub>‖², <i>d</i> = ‖(λ<sub>+</sub> − λ<sub>−</sub>)<sub>−</sub>‖²,
all ≥ 0 with <i>a</i> + <i>b</i> + <i>c</i> + <i>d</i> = 1: a point of the 3-simplex.</p>
<p><b>Vertices.</b> <i>a</i> = 1: antisymmetric; <i>b</i> = 1 (H): symmetric with spectrum symmetric about 0;
<i>c</i> = 1: positive semidefinite (a token attends to tokens like itself); <i>d</i> = 1: negative
semidefinite. Drag the tetrahedron to turn it; pick box or lasso in its toolbar (or box in a heat map) to
select heads, which are then highlighted everywhere and compared with all heads in the histograms.</p>
"""


def header(title: str, body_html: str = "", name: str = "page_header", width: int = 1340,
           sheet: InlineStyleSheet | None = None) -> Div:
    return Div(text=f"<h1>{html.escape(title)}</h1>{body_html}", stylesheets=[sheet or style()], width=width,
               name=name)


def message(text_html: str, kind: str = "warn", name: str = "message") -> Div:
    return Div(text=f'<div class="{kind}">{text_html}</div>', stylesheets=[style()], width=1100, name=name)


def is_orbit_experiment(r: ModelRow) -> bool:
    """The heads trained by this project's orbit experiment (not a public model)."""
    return r.family == ORBIT_FAMILY


def selector_groups(rows: list[ModelRow]) -> dict[str, list[str]]:
    """The drawable models for a selector, in two groups: public models, and the orbit experiment's heads."""
    out = {PUBLIC_GROUP: [], ORBIT_GROUP: []}
    for r in rows:
        if r.computed and not r.damaged:
            out[ORBIT_GROUP if is_orbit_experiment(r) else PUBLIC_GROUP].append(r.name)
    return {k: v for k, v in out.items() if v}


def model_line(r: ModelRow) -> str:
    """What the model is and where its weights came from (provenance, note)."""
    rev = f" @ {html.escape(r.revision[:12])}" if r.revision else ""
    folded = "layer norm folded" if r.layernorm_folded else "raw weights"
    layers = f"{r.n_layers} layer{'s' if r.n_layers != 1 else ''}"
    kind = f" · <b>{ORBIT_GROUP}</b>" if is_orbit_experiment(r) else ""
    out = (f'<p class="meta"><b>{html.escape(r.name)}</b>{kind} · {layers} × {r.n_heads} heads · '
           f"N = {r.d_model}, n = {r.d_head} · {html.escape(r.positional)} · {folded} · "
           f"{html.escape(r.source)}{rev}</p>")
    prov = [(k, getattr(r, k)) for k in ("format", "quantization", "package", "file", "sha256") if getattr(r, k)]
    if prov:
        out += ('<p class="meta" id="provenance">Provenance: ' + " · ".join(
            f"{k} <code>{html.escape(v[:16] if k == 'sha256' else v)}</code>" for k, v in prov) + "</p>")
    if r.note:
        out += f'<p class="note" id="model_note"><b>Note:</b> {html.escape(r.note)}</p>'
    return out


def status_html(m: ModelData) -> str:
    """Empty for a complete, readable model; else what is missing or damaged and the command that fixes it."""
    r = m.row
    cmd = f"<code>{html.escape(r.fix_command)}</code>"
    if m.error:
        parts = html.escape(m.error).split("`")
        return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))
    if r.damaged:
        return f"<b>{html.escape(r.name)}</b> is damaged: {html.escape(r.damaged)}"
    if not r.computed:
        return (f"No profiles are stored for <b>{html.escape(r.name)}</b> yet: there is nothing to draw. "
                f"Compute them with {cmd}.")
    if not r.complete:
        return (f"<b>{html.escape(r.name)}</b> is incomplete ({r.layers_done} of {r.n_layers} layers written); "
                f"missing layers show no heads. Finish it with {cmd}.")
    return ""


def todo_html(rows: list[ModelRow]) -> str:
    """The models registered but not computed, or damaged: one line that opens (``<details>``) into the
    list, each model with the command that computes or repairs it."""
    todo = [r for r in rows if not r.computed or r.damaged]
    if not todo:
        return ""
    items = []
    for r in todo:
        what = f"damaged: {html.escape(r.damaged)}" if r.damaged else "not computed"
        items.append(f"<li><b>{html.escape(r.name)}</b> ({what}): <code>{html.escape(r.fix_command)}</code></li>")
    count = f"{len(todo)} model{'s' if len(todo) != 1 else ''}"
    return (f"<details id='todo'><summary><b>To compute or repair</b>: {count} registered in the store with nothing "
            "to draw yet (or damaged)</summary><p class='note'>Each line is the command that fixes it.</p>"
            f"<ul>{''.join(items)}</ul></details>")


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
    (``restore_on_ready``), it applies the deep link of the page's URL (``dashboard/js/url_state.js``).
    """
    r = m.row
    sheet = style()  # one for every Div of the page
    L, H, D, _ = m.profile.shape
    q = g.quantise(m.profile)
    shown = page_dataset(g.dequantise(q), r.name, sel)  # exactly what the browser decodes
    tetra = views.render(views.tetrahedron(shown, d=0, rank_one=False))
    heat = views.render(views.layer_heatmaps(shown, d=0, width=820, high=m.heat_high))
    hist = views.render(views.histograms(shown, d=0, width=820, top=m.hist_top))
    heat.name, hist.name = "layers", "hists"
    tetra.sizing_mode = None  # sized by its frame (frame_width, frame_height): "fixed" would ask for width and height
    hist.min_border_left = heat.min_border_left
    heat.y_range.name, hist.y_range.name = "layers_y", "hists_y"
    for t in tetra.tools:
        if isinstance(t, HoverTool) and t.limit == 1:
            t.name = "head_hover"
    heads = tetra.select_one({"name": "heads"})
    images = [x for x in heat.renderers if type(x.glyph).__name__ == "Image"]
    dots = [x for x in heat.renderers if type(x.glyph).__name__ == "Scatter"]
    heat_sources = []
    for k, c in enumerate(g.COORDS):
        images[k].data_source.name = f"heat_{c}"
        images[k].glyph.name = f"heat_image_{c}"
        images[k].glyph.color_mapper.name = f"heat_colours_{c}"  # the colour bar shows panel d's
        heat_sources.append(images[k].data_source)
        dots[k].data_source = heads  # the same heads as the tetrahedron: one selection everywhere
        dots[k].glyph.x = dots[k].selection_glyph.x = dodge(c, k * views.PANEL_STEP)
        dots[k].nonselection_glyph = None  # unselected heads drawn with the glyph itself: invisible
        dots[k].name = f"layer_dots_{c}"
    bars = hist.select_one({"type": GlyphRenderer})  # every coordinate's bars, coordinate-major (views.histograms)
    bars.name, bars.data_source.name = "hist_bars", "hist_all"
    sel_hist = ColumnDataSource({k: np.asarray(bars.data_source.data[k]) for k in ("left", "right")}
                                | {"top": np.zeros(len(bars.data_source.data["top"]))}, name="hist_selected")
    sel_renderer = hist.quad(left="left", right="right", bottom=0, top="top", source=sel_hist, fill_color=None,
                             line_color=views.SELECTED, line_width=2, visible=False, name="hist_selected_bars")
    head_dots = tetra.select_one({"name": "head_dots"})
    type_dots, type_legend = by_type(tetra, head_dots, heads)
    for fig, selectable in ((tetra, [head_dots, *type_dots]), (heat, dots), (hist, [])):
        lean(fig, selectable)
    azimuth = Slider(start=-180, end=180, value=g.DEFAULT_AZIMUTH, step=1, title="azimuth (°)", name="azimuth",
                     width=190)
    elevation = Slider(start=-90, end=90, value=g.DEFAULT_ELEVATION, step=1, title="elevation (°)",
                       name="elevation", width=190)
    info = Div(text=f"{L * H} heads · none selected", stylesheets=[sheet], name="selection_info", width=260)
    tools = {type(t).__name__: t for t in tetra.tools}
    models = PageModels(
        heads=heads, vertices=tetra.select_one({"name": "tetra_vertices"}),
        edges=tetra.select_one({"name": "tetra_edges"}), camera=tetra.select_one({"name": "camera"}), fig=tetra,
        box=tools.get("BoxSelectTool"), lasso=tools.get("LassoSelectTool"), label_offset=g.LABEL_OFFSET_PX,
        azimuth=azimuth, elevation=elevation, **views.edge_indices(),
        cube=ColumnDataSource(dict(q=q.reshape(-1)), name="profile_cube"), n_bins=g.N_BINS,
        meta=ColumnDataSource(dict(hist_top=[float(hist.y_range.end)], model=[r.name], n_layers=[L], n_heads=[H],
                                   n_offsets=[D]), name="profile_meta"),
        V=g.VERTICES.ravel().tolist(), heats=heat_sources, hist=bars.data_source, sel_hist=sel_hist,
        sel_renderer=sel_renderer, hist_range=hist.y_range, info=info, type_names=list(g.TYPE_NAMES),
        type_legend=type_legend)
    more, models, stat_select = more_views(shown, models, sheet, r.rotary and D > 1)
    ctx = models.args()
    tetra.add_tools(TapTool(renderers=[head_dots, *type_dots]))  # a tap selects one head: the inspector shows it
    # the drag callback that views.tetrahedron attached moves the sliders here, which project
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


def restore_on_ready(doc, page) -> None:
    """Run the deep-link restore of ``page`` (a ``profiles_view`` layout or a copy) when ``doc`` is ready."""
    for tag in page.tags:
        if isinstance(tag, CustomJS) and tag.name == "url_restore":
            doc.js_on_event("document_ready", tag)


def by_type(fig, dots, heads) -> tuple[list[GlyphRenderer], Legend]:
    """The colour by spectral type, added hidden beside ``dots`` (the heads coloured by layer): one renderer
    per type over the same source ``heads`` (a GroupFilter on its ``type`` column, which the browser rewrites
    at every d: spectral_types.js), each in its colour (``geometry.TYPE_COLORS``), and a legend
    ``type_legend`` whose items read "Type I₊ (n=K)" and hide their type on a click. The hover and the
    selection tools of ``dots`` cover them too."""
    types = np.asarray(heads.data["type"])
    out = []
    for k in range(3):
        r = GlyphRenderer(data_source=heads, glyph=dots.glyph.clone(), visible=False, name=f"head_dots_type{k}",
                          view=CDSView(filter=GroupFilter(column_name="type", group=k)))
        for attr in ("selection_glyph", "nonselection_glyph", "hover_glyph"):
            glyph = getattr(dots, attr)
            setattr(r, attr, glyph.clone() if glyph is not None and glyph != "auto" else glyph)
        for glyph in (r.glyph, r.nonselection_glyph, r.hover_glyph):
            if glyph is not None and glyph != "auto":
                glyph.fill_color = g.TYPE_COLORS[k]
        out.append(r)
    at = fig.renderers.index(dots) + 1
    fig.renderers = [*fig.renderers[:at], *out, *fig.renderers[at:]]
    legend = Legend(items=[LegendItem(label=label, renderers=[out[k]], name=f"type_legend_item{k}")
                           for k, label in enumerate(g.type_labels(types))],
                    click_policy="hide", location="top_left", name="type_legend", label_text_font_size="9pt",
                    background_fill_alpha=0.7, visible=False)
    fig.add_layout(legend)
    for tool in fig.tools:
        rs = getattr(tool, "renderers", "auto")
        if isinstance(rs, list) and dots in rs and not isinstance(tool, HoverTool):  # hover: color_mode.js
            tool.renderers = [*rs, *out]
    return out, legend
