"""The profiles page: the tetrahedron, per-layer heat maps and histograms, the d slider; all client-side.

One function, ``profiles_view``, builds plain Bokeh models (figures, ColumnDataSources, CustomJS) that
both the served app (wrapped in Panel) and the static exporter (``bokeh.embed.file_html``) use, so
every interaction (rotation, hover, selection linked to the histograms, the d slider and its play
button) runs in the browser with no server.

Data shipped to the page: the profile of every head at every offset d, quantised to uint16
(``quantise``: v -> round(v * 65534), NaN -> 65535) in one flat array of shape (heads, D, 4), D = 129
for rotary models and 1 otherwise. The browser decodes the slice of the current d.
"""

from __future__ import annotations

import html

import numpy as np
from bokeh.layouts import column, row
from bokeh.models import (
    BasicTicker,
    BoxSelectTool,
    Button,
    ColumnDataSource,
    CustomJS,
    Div,
    FixedTicker,
    InlineStyleSheet,
    Label,
    LinearColorMapper,
    Range1d,
    ResetTool,
    Select,
    Slider,
)
from bokeh.palettes import Blues256
from bokeh.plotting import figure
from bokeh.transform import dodge

from dashboard.data import ModelSummary
from dashboard.tetrahedron import PROJECT_JS, VERTICES, angle_sliders, project, tetrahedron_figure, to_3d

COORDS = ("a", "b", "c", "d")
COORD_TITLES = ("a · antisymmetric", "b · H (±spectrum)", "c · positive semidef.", "d · negative semidef.")
N_BINS = 40
NAN_CODE = 65535
SCALE = 65534
SELECTED = "#ff5a1f"
ALL = "#8a93a3"

CSS = """
:host { font-family: "Source Sans 3", "Source Sans Pro", "Segoe UI", Helvetica, Arial, sans-serif; color: #222831; }
h1 { font-size: 1.55em; font-weight: 600; margin: 0.2em 0 0.3em 0; }
h2 { font-size: 1.15em; font-weight: 600; margin: 0.6em 0 0.2em 0; }
p, li { font-size: 0.95em; line-height: 1.45; margin: 0.25em 0; max-width: 78em; }
code { background: #eef1f5; padding: 0.05em 0.35em; border-radius: 3px; font-size: 0.92em; }
.note { color: #4a5260; }
.warn { background: #fff4e5; border-left: 4px solid #ff9800; padding: 0.5em 0.8em; margin: 0.4em 0; }
.error { background: #fdecea; border-left: 4px solid #d32f2f; padding: 0.6em 0.9em; margin: 0.4em 0; }
.meta { color: #4a5260; font-size: 0.9em; }
"""


def style() -> InlineStyleSheet:
    """The page's typography, as a fresh stylesheet model (a model belongs to one document only)."""
    return InlineStyleSheet(css=CSS)

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
semidefinite. Drag the tetrahedron to turn it; pick box or lasso in its toolbar (or box in a per-layer
view) to select heads, which are then highlighted everywhere and compared with all heads in the
histograms.</p>
"""


# ----------------------------------------------------------------------------------- quantisation


def quantise(profile: np.ndarray) -> np.ndarray:
    """Values in [0, 1] (NaN allowed) -> uint16: round(v * 65534), NaN -> 65535. Shape kept."""
    p = np.asarray(profile, dtype=np.float64)
    q = np.rint(np.clip(np.nan_to_num(p, nan=0.0), 0.0, 1.0) * SCALE).astype(np.uint16)
    q[np.isnan(p)] = NAN_CODE
    return q


def dequantise(q: np.ndarray) -> np.ndarray:
    """The inverse of ``quantise`` up to 1 / 65534 (what the browser computes)."""
    q = np.asarray(q)
    out = q.astype(np.float64) / SCALE
    out[q == NAN_CODE] = np.nan
    return out


def histogram_counts(values: np.ndarray, n_bins: int = N_BINS) -> np.ndarray:
    """Counts of the finite values in [0, 1] in ``n_bins`` equal bins (1.0 falls in the last bin), like the JS."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    b = np.minimum(np.floor(v * n_bins).astype(int), n_bins - 1)
    return np.bincount(b, minlength=n_bins).astype(float)


# ------------------------------------------------------------------------------------ client side

UPDATE_JS = """
function decode_d(ctx, d) {
  const q = ctx.cube.data.q, D = ctx.n_d, h = ctx.heads.data, n = h.layer.length, V = ctx.V;
  const dd = Math.max(0, Math.min(D - 1, d | 0));
  const cols = [h.a, h.b, h.c, h.d];
  for (let i = 0; i < n; i++) {
    const base = (i * D + dd) * 4;
    let x = 0, y = 0, z = 0, nan = false;
    for (let k = 0; k < 4; k++) {
      const code = q[base + k];
      const v = code === 65535 ? NaN : code / 65534;
      if (code === 65535) { nan = true; }
      cols[k][i] = v;
      x += v * V[3 * k]; y += v * V[3 * k + 1]; z += v * V[3 * k + 2];
    }
    h.x3[i] = nan ? NaN : x; h.y3[i] = nan ? NaN : y; h.z3[i] = nan ? NaN : z;
  }
}
function histograms(ctx, heat_too) {
  const h = ctx.heads.data, n = h.layer.length, B = ctx.n_bins, L = ctx.n_layers;
  const sel = ctx.heads.selected.indices;
  const names = ['a', 'b', 'c', 'd'];
  let top = ctx.hist_top;
  for (let k = 0; k < 4; k++) {
    const col = h[names[k]], hd = ctx.hists[k].data;
    const all = hd.all, s = hd.sel;
    for (let b = 0; b < B; b++) { all[b] = 0; s[b] = 0; }
    const img = ctx.heats[k].data.image[0];
    if (heat_too) { for (let j = 0; j < img.length; j++) { img[j] = 0; } }
    let n_all = 0, n_sel = 0;
    for (let i = 0; i < n; i++) {
      const v = col[i];
      if (!isFinite(v)) { continue; }
      const b = Math.min(B - 1, Math.floor(v * B));
      all[b] += 1; n_all += 1;
      if (heat_too) { img[h.layer[i] * B + b] += 1; }
    }
    for (const i of sel) {
      const v = col[i];
      if (!isFinite(v)) { continue; }
      s[Math.min(B - 1, Math.floor(v * B))] += 1; n_sel += 1;
    }
    for (let b = 0; b < B; b++) {
      all[b] = n_all > 0 ? all[b] / n_all : 0;
      s[b] = n_sel > 0 ? s[b] / n_sel : 0;
      if (s[b] * 1.05 > top) { top = s[b] * 1.05; }
    }
    ctx.hists[k].change.emit();
    if (heat_too) { ctx.heats[k].change.emit(); }
  }
  // the axes stay put while d moves (the range covers every d); only a selection can stretch them
  if (ctx.hist_range.end !== top) { ctx.hist_range.end = top; }
  const text = sel.length > 0 ? `<b>${sel.length}</b> of ${n} heads selected (orange)` : `${n} heads · none selected`;
  if (ctx.info.text !== text) { ctx.info.text = text; }
}
"""

PLAY_JS = """
const b = button;
if (b.__timer != null) {
  clearInterval(b.__timer); b.__timer = null; b.label = '▶ Play'; b.button_type = 'success';
} else {
  b.label = '❚❚ Pause'; b.button_type = 'warning';
  b.__timer = setInterval(() => {
    const s = slider;
    if (s.document == null) { clearInterval(b.__timer); b.__timer = null; return; }  // the view was replaced
    s.value = s.value >= s.end ? s.start : s.value + 1;
  }, interval);
}
"""

NAV_JS = "if (cb_obj.value) { window.location.href = cb_obj.value; }"
CLEAR_JS = "heads.selected.indices = [];"


# ------------------------------------------------------------------------------------- the models


def _heads_source(summary: ModelSummary, first: np.ndarray, az: float, el: float) -> ColumnDataSource:
    """One row per head, layer-major: layer, head, lj (layer + spread by head), a..d, x3..z3, x, y."""
    L, H = summary.n_layers, summary.n_heads
    layer = np.repeat(np.arange(L, dtype=np.int32), H)
    head = np.tile(np.arange(H, dtype=np.int32), L)
    lj = layer + ((head + 0.5) / max(H, 1) - 0.5) * 0.8
    p = first.reshape(L * H, 4)
    xyz = to_3d(p)
    x, y = project(xyz, az, el)
    data = dict(layer=layer, head=head, lj=lj.astype(np.float64))
    data |= {c: p[:, k].copy() for k, c in enumerate(COORDS)}
    data |= dict(x3=xyz[:, 0].copy(), y3=xyz[:, 1].copy(), z3=xyz[:, 2].copy(), x=x, y=y)
    return ColumnDataSource(data, name="heads")


def layer_counts(profile: np.ndarray, n_bins: int = N_BINS) -> np.ndarray:
    """(D, L, 4, n_bins) counts of heads per layer and value bin at every offset (NaN heads left out).

    profile : (L, H, D, 4), as the browser decodes it.
    """
    L, H, D, _ = profile.shape
    finite = np.isfinite(profile)
    b = np.minimum(np.floor(np.nan_to_num(profile) * n_bins).astype(int), n_bins - 1)
    out = np.zeros((D, L, 4, n_bins))
    d_idx, l_idx, k_idx = np.meshgrid(np.arange(D), np.arange(L), np.arange(4), indexing="ij")
    for h in range(H):
        ok = np.moveaxis(finite[:, h], 1, 0)  # (D, L, 4)
        bins = np.moveaxis(b[:, h], 1, 0)
        np.add.at(out, (d_idx[ok], l_idx[ok], k_idx[ok], bins[ok]), 1)
    return out


PANEL_STEP = 1.2  # x offset between the four coordinate panels of the per-layer figures (each spans [0, 1])


def _panel_axis(fig, L: int | None = None) -> None:
    """Ticks 0, 0.5, 1 under each of the four panels (shifted by PANEL_STEP), integer layer ticks."""
    labels = {k * PANEL_STEP + t: text for k in range(4) for t, text in ((0.0, "0"), (0.5, "0.5"), (1.0, "1"))}
    fig.xaxis.ticker = FixedTicker(ticks=list(labels))
    fig.xaxis.major_label_overrides = labels
    fig.xgrid.visible = False
    fig.ygrid.visible = False
    if L is not None:
        fig.yaxis.ticker = BasicTicker(min_interval=1, desired_num_ticks=min(L, 10))


def _per_layer_views(heads: ColumnDataSource, summary: ModelSummary, profile: np.ndarray):
    """Per coordinate: a layer x value heat map with the heads as dots (box-selectable), and a histogram.

    The four coordinates sit side by side in one heat-map figure and one histogram figure (panel k at
    x = k * PANEL_STEP + value): two canvases instead of eight keep a d step cheap to repaint.
    profile : (L, H, D, 4) as decoded in the browser; the colour scale of the heat maps and the height
    of the histograms cover every offset d, so the axes stay put while d moves.
    """
    L = max(summary.n_layers, 1)
    edges = np.linspace(0, 1, N_BINS + 1)
    counts = layer_counts(profile) if summary.n_layers else np.zeros((1, 1, 4, N_BINS))  # (D, L, 4, B)
    totals = counts.sum(axis=(1, 3), keepdims=True)  # (D, 1, 4, 1)
    fractions = np.divide(counts.sum(axis=1, keepdims=True), totals, out=np.zeros_like(totals.repeat(N_BINS, 3)),
                          where=totals > 0)[:, 0]  # (D, 4, B)
    top = max(float(fractions.max()) * 1.05, 0.05)
    x_range = Range1d(-0.04, 3 * PANEL_STEP + 1.04)
    f = figure(width=880, height=max(280, min(600, 14 * L + 90)), x_range=x_range,
               y_range=Range1d(-0.5, L - 0.5 + max(1.0, 0.06 * L)),
               tools=[], toolbar_location="above", name="layers",
               title="Per layer: number of heads per value bin; selected heads in orange (box-select here too)")
    g = figure(width=880, height=170, x_range=x_range, y_range=Range1d(0, top), tools=[], toolbar_location=None,
               name="hists", min_border_left=f.min_border_left)
    _panel_axis(f, L)
    _panel_axis(g)
    f.yaxis.axis_label = "layer"
    f.yaxis.bounds = (0, L - 1)
    g.yaxis.axis_label = "fraction of heads"
    f.xaxis.axis_label = g.xaxis.axis_label = "value of the coordinate"
    heats, hists, renderers = [], [], []
    for k, c in enumerate(COORDS):
        x0 = k * PANEL_STEP
        heat = ColumnDataSource(dict(image=[counts[0, :, k].copy()]), name=f"heat_{c}")
        mapper = LinearColorMapper(palette=Blues256[::-1][8:], low=0, high=max(float(counts[:, :, k].max()), 1.0))
        f.image(image="image", x=x0, y=-0.5, dw=1, dh=L, source=heat, color_mapper=mapper)
        # the heads themselves: invisible (the heat map shows them) until selected, then orange on top
        dots = f.scatter(dodge(c, x0), "lj", source=heads, size=6, fill_color=SELECTED, fill_alpha=0.0,
                         line_color="#222831", line_alpha=0.0, line_width=0.5, selection_fill_alpha=1.0,
                         selection_line_alpha=1.0, nonselection_fill_alpha=0.0, nonselection_line_alpha=0.0,
                         name=f"layer_dots_{c}")
        renderers.append(dots)
        f.add_layout(Label(x=x0 + 0.5, y=L - 0.5, y_offset=3, text=COORD_TITLES[k],
                           text_align="center", text_baseline="bottom", text_font_size="10.5pt",
                           text_font_style="bold"))
        hist = ColumnDataSource(dict(left=edges[:-1] + x0, right=edges[1:] + x0, all=fractions[0, k].copy(),
                                     sel=np.zeros(N_BINS)), name=f"hist_{c}")
        g.quad(left="left", right="right", bottom=0, top="all", source=hist, fill_color=ALL, fill_alpha=0.55,
               line_color=None, legend_label="all heads")
        g.quad(left="left", right="right", bottom=0, top="sel", source=hist, fill_color=None, line_color=SELECTED,
               line_width=2, legend_label="selected")
        heats.append(heat)
        hists.append(hist)
    f.add_tools(BoxSelectTool(renderers=renderers, persistent=False), ResetTool())
    f.toolbar.active_drag = f.tools[0]
    g.legend.location = "top_right"
    g.legend.orientation = "horizontal"
    g.legend.label_text_font_size = "8.5pt"
    g.legend.background_fill_alpha = 0.7
    g.legend.padding = 2
    return heats, hists, g.y_range, top, column(f, g)


def header(title: str, body_html: str = "", name: str = "page_header") -> Div:
    return Div(text=f"<h1>{html.escape(title)}</h1>{body_html}", stylesheets=[style()], width=1420, name=name)


def message(text_html: str, kind: str = "warn", name: str = "message") -> Div:
    return Div(text=f'<div class="{kind}">{text_html}</div>', stylesheets=[style()], width=1100, name=name)


def model_line(s: ModelSummary) -> str:
    rev = f" @ {html.escape(s.revision[:12])}" if s.revision else ""
    folded = "layer norm folded" if s.layernorm_folded else "raw weights"
    layers = f"{s.n_layers} layer{'s' if s.n_layers != 1 else ''}"
    return (f'<p class="meta"><b>{html.escape(s.name)}</b> · {layers} × {s.n_heads} heads · '
            f"N = {s.d_model}, n = {s.d_head} · {html.escape(s.positional)} · {folded} · "
            f"{html.escape(s.source)}{rev}</p>")


def status_html(s: ModelSummary, profile: np.ndarray) -> str:
    """Empty string for a complete model with data, else what is missing and the command that fixes it."""
    cmd = f"<code>{html.escape(s.fix_command)}</code>"
    if not np.isfinite(profile).any():
        return (f"No profiles are stored for <b>{html.escape(s.name)}</b> yet, so the views are empty. "
                f"Compute them with {cmd}.")
    if not s.complete:
        return (f"<b>{html.escape(s.name)}</b> is incomplete ({s.layers_done} of {s.n_layers} layers written); "
                f"missing layers show no heads. Finish it with {cmd}.")
    return ""


def not_computed_html(models: list[ModelSummary]) -> str:
    """The registered models with nothing to draw, each with the command that computes it."""
    todo = [m for m in models if not m.computed]
    if not todo:
        return ""
    items = "".join(f"<li><b>{html.escape(m.name)}</b>: <code>{html.escape(m.fix_command)}</code></li>" for m in todo)
    return f"<p class='note'>Registered but not computed yet:</p><ul>{items}</ul>"


def profiles_view(summary: ModelSummary, profile: np.ndarray, *, nav: dict[str, str] | None = None,
                  current_url: str | None = None, models: list[ModelSummary] | None = None,
                  play_interval_ms: int = 120):
    """The whole profiles page for one model as a Bokeh layout.

    Parameters
    ----------
    summary : the model's metadata.
    profile : (n_layers, n_heads, D, 4) float, D = 129 (rotary) or 1; NaN where missing.
    nav : for static pages, {model name: page url}; draws a selector that navigates between pages.
    current_url : the url of this page among ``nav``'s values.
    models : every model of the store, to list the ones not computed with their commands.
    """
    L, H, D, _ = profile.shape
    q = quantise(profile)  # (L, H, D, 4)
    first = dequantise(q[:, :, 0])  # what the browser draws at d = 0
    azimuth, elevation = angle_sliders()
    heads = _heads_source(summary, first, azimuth.value, elevation.value)
    cube = ColumnDataSource(dict(q=q.reshape(-1)), name="profile_cube")
    fig, ctx = tetrahedron_figure(heads, summary.name, L, azimuth, elevation)
    heats, hists, hist_range, hist_top, per_layer = _per_layer_views(heads, summary, dequantise(q))
    info = Div(text=f"{L * H} heads · none selected", stylesheets=[style()], name="selection_info", width=300)
    ctx |= dict(cube=cube, n_d=int(D), n_bins=N_BINS, n_layers=int(L), V=VERTICES.ravel().tolist(),
                heats=heats, hists=hists, hist_range=hist_range, hist_top=hist_top, info=info)
    on_select = CustomJS(args=dict(ctx=ctx), code=UPDATE_JS + "histograms(ctx, false);")
    heads.selected.js_on_change("indices", on_select)
    clear = Button(label="Clear selection", width=130, name="clear_selection")
    clear.js_on_event("button_click", CustomJS(args=dict(heads=heads), code=CLEAR_JS))

    if summary.rotary and D > 1:
        dslider = Slider(start=0, end=D - 1, value=0, step=1, width=480, name="d_slider",
                         title="d = query position − key position")
        ctx["dslider"] = dslider
        step = "decode_d(ctx, cb_obj.value); project_all(ctx); histograms(ctx, true);"
        dslider.js_on_change("value", CustomJS(args=dict(ctx=ctx), code=UPDATE_JS + PROJECT_JS + step))
        play = Button(label="▶ Play", width=100, button_type="success", name="play")
        play.js_on_event("button_click", CustomJS(args=dict(slider=dslider, button=play,
                                                            interval=int(play_interval_ms)), code=PLAY_JS))
        position = row(dslider, play, name="position_controls")
    else:
        kind = ("this model has no positional encoding" if summary.positional == "none"
                else f"with {html.escape(summary.positional)} positions")
        position = Div(text=f'<p class="note">The form does not depend on position ({kind}): one profile per head, '
                       "no d slider.</p>",
                       stylesheets=[style()], width=600, name="position_note")

    parts = [header("Profiles of attention heads", DEFINITIONS)]
    if nav:
        sel = Select(title="Model", options=[(url, name) for name, url in nav.items()],
                     value=current_url or "", width=320, name="model_select")
        sel.js_on_change("value", CustomJS(code=NAV_JS))
        parts.append(sel)
    parts.append(Div(text=model_line(summary), stylesheets=[style()], width=1100, name="model_line"))
    status = status_html(summary, profile)
    if status:
        parts.append(message(status, name="model_status"))
    parts.append(row(position, clear, info))
    parts.append(row(column(fig, azimuth, elevation), per_layer))
    if models:
        todo = not_computed_html(models)
        if todo:
            parts.append(Div(text=todo, stylesheets=[style()], width=1100, name="not_computed"))
    return column(*parts, name="profiles_page")
