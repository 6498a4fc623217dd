"""``PageModels``: the Bokeh models and values a page's browser code reads, one field per name.

The pages' CustomJS callbacks (code in ``dashboard/js/``) receive one argument ``ctx`` and read
``ctx.heads``, ``ctx.camera``, ... from it. ``PageModels`` is the one list of those names: a page fills
the fields it has and passes ``CustomJS(args=dict(ctx=models.args()))``; ``args()`` leaves out the
fields left at None, which the browser code reads as absent (it tests them with ``!= null``).
``tests/dashboard/test_dashboard_page_models.py`` checks that every ``ctx.X`` in ``dashboard/js/*.js`` is a field.
The same field may hold a different model on different pages (``select`` is the statistic chooser of a
profiles page and the quantity chooser of the compare page): it is named for what the code does with it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass
class PageModels:
    """The names the pages' browser code reads as ``ctx.X``; None: the page has no such model."""

    # the tetrahedron and its camera (project.js, rotate_slider.js, rotate_drag.js)
    heads: Any = None  # the heads' data source: positions, layer, head, type; its selection is the page's
    vertices: Any = None  # the tetrahedron's vertices and their labels
    edges: Any = None
    edge_i: Any = None  # the edges' first and second vertex indices (views.edge_indices)
    edge_j: Any = None
    camera: Any = None  # azimuth and elevation of the view
    fig: Any = None  # the tetrahedron's figure
    box: Any = None  # its box and lasso select tools: a drag selects instead of turning while one is active
    lasso: Any = None
    label_offset: Any = None  # vertex labels' offset in pixels
    azimuth: Any = None  # the angle sliders
    elevation: Any = None
    V: Any = None  # the vertices' coordinates, flat (geometry.VERTICES)
    # the profile of every offset, decoded in the browser (profiles_decode.js)
    cube: Any = None  # the quantised profiles (geometry.quantise), flat
    meta: Any = None  # model, n_layers, n_heads, n_offsets, hist_top
    dslider: Any = None  # the d slider
    # heat maps and histograms (profiles_histograms.js)
    heats: Any = None  # the per-layer heat maps' sources, one per coordinate
    hist: Any = None  # every head's histogram bars
    sel_hist: Any = None  # the selected heads' bars
    sel_renderer: Any = None
    hist_range: Any = None
    n_bins: Any = None
    info: Any = None  # the selection's one-line summary
    # spectral types and the colour mode (spectral_types.js, color_mode.js, type_hover.js)
    type_names: Any = None
    type_legend: Any = None
    type_colors: Any = None
    type_markers: Any = None
    color: Any = None  # the colour-mode buttons
    dots: Any = None  # the heads coloured by layer (the orbits page: each panel's dots)
    type_dots: Any = None  # the heads coloured by type, one renderer per type
    colour_bar: Any = None  # the layer colour bar
    hover: Any = None  # the heads' hover tool
    # the a = 0 face, layer x type, the inspector (page_views.js, inspector_select.js)
    face: Any = None
    face_legend: Any = None
    face_vertices: Any = None
    lt: Any = None  # the layer x type map's image source
    lt_title: Any = None
    insp_title: Any = None
    spectra: Any = None  # every head's S spectrum, flat
    up: Any = None  # the inspector's spectrum bars: positive and negative
    down: Any = None
    spectrum_title: Any = None
    table: Any = None  # the inspector's statistics
    curves: Any = None  # the inspector's a, b, c, d over d
    curves_title: Any = None
    vline: Any = None  # the current d on the curves
    # choosers that swap in numbers computed with the page (statistic_choose.js, compare_*.js)
    select: Any = None  # the chooser whose value is read
    every: Any = None  # every value the chooser can show (statistics per head; compare: histogram fractions)
    image: Any = None  # the statistic heat map's image source
    mapper: Any = None  # its colour mapper
    title: Any = None  # the title the chooser rewrites
    baseline: Any = None  # the Gaussian baseline sentence and its text for every statistic
    texts: Any = None
    medians: Any = None  # compare: every model's per-layer medians of every quantity, one source per model
    lines: Any = None  # compare: every model's line and dots sources
    y: Any = None  # compare: the lines' y column
    axis: Any = None  # compare: the y axis
    picks: Any = None  # compare: the two model choosers
    bars: Any = None  # compare: each coordinate panel's two bar sources
    items: Any = None  # compare: the legend items naming the two models
    quantity: Any = None  # compare: the quantity chooser (the deep link's quantity)
    # deep links (url_state.js, url_restore.js, url_write.js)
    url_note: Any = None  # the note naming what a link asked for that the page cannot show
    nav: Any = None  # a static page's model selector ({url: model})
    tabs: Any = None  # a static page's tabs: {tab name: page url, '' for this one}
    stat: Any = None  # the statistic chooser
    # the orbits page (orbits_*.js): the movie's frames and panels
    frames: Any = None  # per frame: epoch, trail start
    store: Any = None  # every frame's positions, flat
    trails: Any = None
    xr: Any = None  # each panel's x and y ranges
    yr: Any = None
    cursors: Any = None  # the metrics charts' frame cursors
    slider: Any = None  # the frame slider
    play: Any = None
    step: Any = None
    speed: Any = None  # ms per frame
    hold_ms: Any = None  # the last frame's hold
    H: Any = None  # heads and panels
    P: Any = None

    def args(self) -> dict[str, Any]:
        """The fields that are set, by name: the ``ctx`` argument of a CustomJS."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}

    def but(self, **changes) -> PageModels:
        """A copy with ``changes`` (``dataclasses.replace``): one callback's models beside the page's."""
        return dataclasses.replace(self, **changes)


def names() -> list[str]:
    """Every field's name: the names the browser code may read as ``ctx.X``."""
    return [f.name for f in dataclasses.fields(PageModels)]
