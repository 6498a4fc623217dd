"""The spectral types of one model's heads: the a = 0 face, the layer x type map, and the parity spectra of
each type's most extreme heads (``geometry.spectral_types``, ``face_coordinates``, ``extreme_heads``)."""

from __future__ import annotations

import holoviews as hv
import numpy as np
from bokeh.models import HoverTool, Legend, LegendItem

from dashboard.common import geometry as g
from dashboard.common.render import Named, name_models
from dashboard.common.selection import at_offset, profile_array, spectrum_array, statistics_table
from dashboard.profiles.statistics import missing


def symmetric_face(sel, d: int = 0, size: int = 360) -> hv.Overlay:
    """The a = 0 face: every head at (b, c, d) / (1 - a) in the triangle b (top), c (left), d (right), one
    marker and colour per spectral type (at this d), the c-d edge dashed (no form reaches its inside).

    One source ``face_heads`` (renderer ``face_dots``), one row per head in layer-major order (the tetrahedron's
    order; a head with a = 1 has NaN coordinates and is not drawn), so a page links the selection by index.
    """
    profile = profile_array(sel)
    at = at_offset(profile, d)
    L, H = at.shape[:2]
    p = at.reshape(-1, 4)
    xy = g.face_coordinates(p)
    types = g.spectral_types(p).astype(np.int32)
    data = dict(x=xy[:, 0], y=xy[:, 1], layer=np.repeat(np.arange(L, dtype=np.int32), H),
                head=np.tile(np.arange(H, dtype=np.int32), L), type_name=[g.TYPE_NAMES[t] for t in types],
                colour=[g.TYPE_COLORS[t] for t in types], marker=[g.TYPE_MARKERS[t] for t in types],
                b_sym=p[:, 1] / (1 - p[:, 0]), c_sym=p[:, 2] / (1 - p[:, 0]), d_sym=p[:, 3] / (1 - p[:, 0]))
    fv = g.FACE_VERTICES
    solid = hv.Path([fv[[1, 0, 2]]], group="FaceEdges").opts(color="#5b6270", line_width=1.4)
    dashed = hv.Path([fv[[1, 2]]], group="FaceEdges").opts(color="#5b6270", line_width=1.4, line_dash="dashed")
    # b's label centred above its vertex; c's and d's below theirs, each running inwards from just outside its
    # vertex, so that none reaches the frame's edge (where Bokeh clips it) whatever the font's width
    labels = hv.Labels({"x": fv[:, 0] + np.array([0.0, -0.06, 0.06]), "y": fv[:, 1] + np.array([0.06, -0.06, -0.06]),
                        "text": list(g.FACE_LABELS), "align": ["center", "left", "right"]},
                       ["x", "y"], ["text", "align"], group="FaceLabels").opts(
        text_font_size="9.5pt", text_color="#222831", text_align="align")
    hover = HoverTool(tooltips=[("layer", "@layer"), ("head", "@head"), ("type", "@type_name"),
                                ("(b, c, d) / (1 − a)", "@b_sym{0.000}, @c_sym{0.000}, @d_sym{0.000}")], limit=1)
    dots = hv.Points(data, ["x", "y"], [k for k in data if k not in ("x", "y")], group="Face").opts(
        color="colour", marker="marker", size=7, line_color="#ffffff", line_width=0.4, fill_alpha=0.85,
        selection_fill_color=g.SELECTED, nonselection_fill_alpha=0.15, nonselection_line_alpha=0.1,
        tools=[hover, "box_select", "lasso_select", "tap", "reset"], default_tools=[])
    counts = g.type_labels(types)
    face_names = name_models({"Face": {"renderer": "face_dots", "source": "face_heads"}})

    def name_face(plot, element):
        face_names(plot, element)
        fig = plot.state
        r = Named(fig)["face_dots"]
        firsts = [int(np.flatnonzero(types == k)[0]) for k in range(3) if (types == k).any()]
        names = [counts[int(types[i])] for i in firsts]
        fig.add_layout(Legend(items=[LegendItem(label=n, renderers=[r], index=i) for n, i in zip(names, firsts,
                                                                                                  strict=True)],
                              location="top_right", name="face_legend", label_text_font_size="9pt"))

    return (solid * dashed * labels * dots).opts(hv.opts.Overlay(
        frame_width=size, frame_height=int(size * 0.92), xlim=(-0.62, 0.62), ylim=(-0.14, np.sqrt(3) / 2 + 0.12),
        xaxis=None, yaxis=None, show_grid=False, toolbar="right", show_legend=False, hooks=[name_face],
        title="The a = 0 face: (b, c, d) / (1 − a)"))


def layer_type_map(sel, d: int = 0, width: int = 330) -> hv.Image:
    """The fraction of each layer's heads in each spectral type at this d (``geometry.layer_type_fractions``),
    a heat map (types across, layers up) with a colour bar from 0 to 1; its source ``layer_types_image``."""
    frac = g.layer_type_fractions(at_offset(profile_array(sel), d))
    L = max(frac.shape[0], 1)
    img = hv.Image(frac[::-1].copy() if frac.size else np.zeros((1, 3)), bounds=(-0.5, -0.5, 2.5, L - 0.5),
                   kdims=["type", "layer"], vdims=["fraction of the layer's heads"], group="LayerTypes")
    return img.opts(cmap="Blues", clim=(0, 1), colorbar=True, colorbar_opts={"width": 10}, width=width,
                    height=max(220, min(560, 16 * L + 110)), xticks=list(enumerate(g.TYPE_NAMES)),
                    tools=["hover"], default_tools=[], toolbar=None, title=f"Layer × type (d = {int(d)})",
                    hooks=[name_models({"LayerTypes": {"source": "layer_types_image"}})])


def parity_selection(sel, n: int = g.N_EXTREME) -> list[np.ndarray] | None:
    """For each type (at d = 0) the flat head indices of its ``n`` most extreme heads (``geometry.extreme_heads``:
    I₊ smallest d_sym, II smallest c + d, I₋ smallest c_sym); None without statistics."""
    stats = statistics_table(sel)
    if stats is None:
        return None
    p = at_offset(profile_array(sel), 0).reshape(-1, 4)
    return g.extreme_heads(g.spectral_types(p), p, stats["c_sym"], stats["d_sym"], n)


def parity_spectra(sel, n: int = g.N_EXTREME, bins: int = 30, panel_px: int = 260):
    """Per spectral type, the histogram of the entries of the mean sorted unit-norm S spectrum of its ``n``
    most extreme heads (``parity_selection``): negative entries blue, positive red, each lobe's mean dashed.
    A message instead when the store holds no statistics or spectra for the model."""
    chosen = parity_selection(sel, n)
    spectra = spectrum_array(sel)
    if chosen is None or spectra is None:
        return missing(sel)
    flat = spectra.reshape(-1, spectra.shape[-1])
    panels = []
    for k, idx in enumerate(chosen):
        mean = g.mean_unit_spectrum(flat[idx])
        title = f"{g.TYPE_NAMES[k]}: {len(idx)} most extreme head{'s' if len(idx) != 1 else ''}"
        if mean.size == 0:
            panels.append(hv.Curve([], "eigenvalue", "entries").opts(width=panel_px, height=200, title=title,
                                                                    toolbar=None, default_tools=[]))
            continue
        top = max(float(np.abs(mean).max()), 1e-12)
        edges = np.linspace(-top, top, 2 * bins + 1)
        neg, pos = mean[mean < 0], mean[mean > 0]
        dims = dict(kdims=["eigenvalue"], vdims=["entries"])
        layers = [hv.Histogram((edges[: bins + 1], np.histogram(neg, edges[: bins + 1])[0]), group="Negative",
                               **dims).opts(color="#1f77b4", line_color=None),
                  hv.Histogram((edges[bins:], np.histogram(pos, edges[bins:])[0]), group="Positive",
                               **dims).opts(color="#d62728", line_color=None)]
        for values, colour in ((neg, "#1f77b4"), (pos, "#d62728")):
            if values.size:
                layers.append(hv.VLine(float(values.mean())).opts(color=colour, line_dash="dashed", line_width=1.5))
        panels.append(hv.Overlay(layers).opts(hv.opts.Overlay(width=panel_px, height=200, title=title,
                                                              toolbar=None, default_tools=[], show_legend=False)))
    return hv.Layout(panels).cols(3).opts(shared_axes=False)


PARITY_STEP = 2.6  # parity_spectra_figure: the distance between its groups' centres, in group half-widths
PARITY_NAMES = name_models({group: {"renderer": f"parity_{kind}", "source": f"parity_{kind}_source"} for group, kind in
                            (("Negative", "negative"), ("Positive", "positive"), ("LobeMeans", "segment"),
                             ("ParityTypes", "text"))}, "parity_spectra")


def parity_spectra_figure(sel, n: int = g.N_EXTREME, bins: int = 30, width: int = 760, height: int = 230):
    """``parity_spectra`` as one figure: the three types' histograms side by side (group k centred on
    ``k * PARITY_STEP``), each entry divided by the largest |entry| of its type's mean spectrum, so that every
    group spans -1..1; above each group its type, head count and that largest |entry|. One figure, one renderer
    per kind of mark, whatever the counts: a page can change model by changing data. Figure ``parity_spectra``;
    renderers ``parity_negative``, ``parity_positive`` (the bars), ``parity_segment`` (the lobes' means) and
    ``parity_text`` (the labels), each over the source named with ``_source`` after it. A message instead when
    the store holds no statistics or spectra for the model."""
    chosen = parity_selection(sel, n)
    spectra = spectrum_array(sel)
    if chosen is None or spectra is None:
        return missing(sel)
    flat = spectra.reshape(-1, spectra.shape[-1])
    unit = np.linspace(-1.0, 1.0, 2 * bins + 1)
    bars = {"Negative": [], "Positive": []}
    means, labels = [], []
    for k, idx in enumerate(chosen):
        mean = g.mean_unit_spectrum(flat[idx])
        top = max(float(np.abs(mean).max()), 1e-12) if mean.size else 1.0
        x = k * PARITY_STEP
        for group, values, edges in (("Negative", mean[mean < 0] / top, unit[: bins + 1]),
                                     ("Positive", mean[mean > 0] / top, unit[bins:])):
            counts = np.histogram(values, edges)[0]
            bars[group] += [(x + a, 0.0, x + b, float(c))
                            for a, b, c in zip(edges[:-1], edges[1:], counts, strict=True) if c]
            if values.size:
                means.append((x + float(values.mean()), "#1f77b4" if group == "Negative" else "#d62728"))
        heads = f"{len(idx)} head{'s' if len(idx) != 1 else ''}"
        labels.append((x, f"{g.TYPE_NAMES[k]}: {heads}" + (f", max |λ| {top:.3g}" if mean.size else "")))
    ymax = max([b[3] for group in bars.values() for b in group] + [1.0]) * 1.2
    rect = dict(kdims=["x0", "y0", "x1", "y1"])
    layers = [hv.Rectangles(bars[k], group=k, **rect).opts(color=c, line_color=None)
              for k, c in (("Negative", "#1f77b4"), ("Positive", "#d62728"))]
    layers.append(hv.Segments([(x, 0.0, x, ymax / 1.2, c) for x, c in means],
                              kdims=["x0", "y0", "x1", "y1"], vdims=["colour"], group="LobeMeans")
                  .opts(color="colour", line_dash="dashed", line_width=1.5))
    layers.append(hv.Labels([(x, ymax / 1.1, t) for x, t in labels], kdims=["x", "y"], vdims=["text"],
                            group="ParityTypes").opts(text_font_size="8pt", text_baseline="middle"))
    ticks = [(k * PARITY_STEP + u, f"{u:g}") for k in range(3) for u in (-1, 0, 1)]
    return hv.Overlay(layers).opts(hv.opts.Overlay(
        width=width, height=height, title="", toolbar=None, default_tools=[], show_legend=False, hooks=[PARITY_NAMES],
        xlim=(-1.15, 2 * PARITY_STEP + 1.15), ylim=(0, ymax), xticks=ticks,
        xlabel="eigenvalue / largest |eigenvalue| of the type's mean spectrum", ylabel="entries"))

