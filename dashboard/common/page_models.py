"""``PageModels``: the Bokeh models and values a page's browser code reads, one typed field per name.

The pages' CustomJS callbacks (code in ``dashboard/<page>/js/``) receive one argument ``ctx`` and read
``ctx.heads``, ``ctx.camera``, ... from it. ``PageModels`` is the one list of those names: a page fills
the fields it has and passes ``CustomJS(args=dict(ctx=models.args()))``; ``args()`` leaves out the
fields left at None, which the browser code reads as absent (it tests them with ``!= null``).
``tests/dashboard/test_dashboard_page_models.py`` checks that every ``ctx.X`` in the browser code is a field,
that every field is read by some browser code, that each page's callbacks get the names their code reads,
and that each value has its field's type.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from bokeh.models import (
    Axis,
    BoxSelectTool,
    ColorBar,
    ColorMapper,
    ColumnDataSource,
    Div,
    GlyphRenderer,
    HoverTool,
    Label,
    LassoSelectTool,
    Legend,
    LegendItem,
    Plot,
    RadioButtonGroup,
    Range,
    Select,
    Slider,
    Span,
    Spinner,
    Tabs,
    Title,
    Toggle,
)

Source = ColumnDataSource


@dataclass
class PageModels:
    """The names the pages' browser code reads as ``ctx.X``; None: the page has no such model."""

    # the tetrahedron and its camera (project.js, rotate_slider.js, rotate_drag.js; rank_one_project.js turns
    # the rank-one curve's points as ``heads``)
    heads: Source | None = None  # the heads: positions, layer, head, type; its selection is the page's
    vertices: Source | None = None  # the tetrahedron's vertices and their labels
    edges: Source | None = None  # the tetrahedron's edges
    edge_from: list[int] | None = None  # each edge's first and second vertex (simplex.edge_indices)
    edge_to: list[int] | None = None
    camera: Source | None = None  # azimuth and elevation of the view
    tetrahedron: Plot | None = None  # the tetrahedron's figure
    box_select: BoxSelectTool | None = None  # a drag selects instead of turning while one of them is active
    lasso_select: LassoSelectTool | None = None
    label_offset_px: float | None = None  # the vertex labels' offset
    azimuth_slider: Slider | None = None
    elevation_slider: Slider | None = None
    vertex_xyz: list[float] | None = None  # the vertices' coordinates, flat (geometry.VERTICES)
    # the profile of every offset, decoded in the browser (profiles_decode.js)
    profile_cube: Source | None = None  # the quantised profiles (geometry.quantise), packed (profiles/payload.py)
    profile_meta: Source | None = None  # model, n_layers, n_heads, n_offsets, hist_top
    d_slider: Slider | None = None
    # heat maps and histograms (profiles_histograms.js)
    heat_sources: list[Source] | None = None  # the per-layer heat maps, one per coordinate
    hist_all: Source | None = None  # every head's histogram bars
    hist_selected: Source | None = None  # the selected heads' bars
    hist_selected_bars: GlyphRenderer | None = None  # their renderer, hidden while nothing is selected
    hist_y_range: Range | None = None
    n_bins: int | None = None
    selection_info: Div | None = None  # the selection's one-line summary
    # spectral types and the colour mode (spectral_types.js, color_mode.js, type_hover.js)
    type_names: list[str] | None = None
    type_legend: Legend | None = None
    type_colors: list[str] | None = None
    type_markers: list[str] | None = None
    colour_mode: RadioButtonGroup | None = None  # by layer, by type, by cluster
    head_dots: GlyphRenderer | None = None  # the heads coloured by layer
    type_dots: list[GlyphRenderer] | None = None  # the heads coloured by type, one renderer per type
    cluster_dots: list[GlyphRenderer] | None = None  # the heads coloured by cluster, one renderer per cluster
    cluster_legend: Legend | None = None
    layer_colour_bar: ColorBar | None = None
    head_hover: HoverTool | None = None
    # the a = 0 face, layer x type, the inspector (page_views.js, inspector_select.js)
    face_heads: Source | None = None  # the heads on the a = 0 face
    face_legend: Legend | None = None
    face_vertex_xy: list[float] | None = None  # the face's vertices, flat (geometry.FACE_VERTICES)
    layer_types_image: Source | None = None
    layer_types_title: Title | None = None
    inspector_title: Div | None = None
    head_spectra: Source | None = None  # every head's S spectrum, packed (profiles/payload.py: pack_spectra)
    head_spectrum_scales: Source | None = None  # each head's largest |λ|, the scale of its packed spectrum
    inspector_up: Source | None = None  # the inspector's spectrum bars: positive and negative
    inspector_down: Source | None = None
    inspector_spectrum_title: Title | None = None
    inspector_statistics: Source | None = None  # the inspector's table of statistics
    inspector_curves: list[Source] | None = None  # the inspector's a, b, c, d over d
    inspector_curves_title: Title | None = None
    inspector_d: Span | None = None  # the current d on the curves
    # the statistic chooser (statistic_choose.js; url_state.js)
    statistic_select: Select | None = None
    head_statistics: Source | None = None  # every head's statistics, one column per statistic
    statistic_image: Source | None = None  # the statistic heat map's image
    statistic_colours: ColorMapper | None = None
    statistic_title: Title | None = None
    statistic_baseline: Div | None = None  # the Gaussian baseline sentence
    baseline_texts: Source | None = None  # that sentence for every statistic
    # the compare page (compare_quantity.js, compare_models.js, compare_url.js)
    quantity_select: Select | None = None
    model_medians: list[Source] | None = None  # every model's per-layer medians of every quantity
    depth_lines: list[Source] | None = None  # each model's line and dots
    median_column: str | None = None  # the lines' y column
    depth_title: Title | None = None
    depth_y_axis: Axis | None = None
    depth_y_range: Range | None = None
    median_ranges: Source | None = None  # the depth chart's y range for every quantity
    model_selects: list[Select] | None = None  # the two model choosers
    model_bars: list[list[Source]] | None = None  # each coordinate panel's two bar sources
    model_fractions: Source | None = None  # every model's histogram fractions
    legend_items: list[LegendItem] | None = None  # the legend items naming the two models
    # deep links (url_state.js, url_restore.js, url_write.js, url_note.js)
    url_note: Div | None = None  # the note naming what a link asked for that the page cannot show
    model_nav: Select | None = None  # a static page's model selector ({url: model})
    tab_pages: dict[str, str] | None = None  # a static page's tabs: {tab name: page url, '' for this one}
    page_tabs: Tabs | None = None  # the profiles page's own tabs: Profiles, Analyses (page_analyses.PAGE_TABS)
    # the orbits page (orbits_*.js): the movie's frames and panels
    frame_data: Source | None = None  # per frame: epoch, trail start, metrics, panel radii
    positions: Source | None = None  # every frame's positions in every panel, flat
    panel_dots: list[Source] | None = None
    panel_trails: list[Source] | None = None
    panel_x_ranges: list[Range] | None = None
    panel_y_ranges: list[Range] | None = None
    frame_info: Div | None = None  # the frame's epoch and metrics
    metric_cursors: list[Span] | None = None  # the metrics charts' frame cursors
    frame_slider: Slider | None = None
    play_toggle: Toggle | None = None
    step_by: int | None = None  # a step button's step: -1 or +1
    interval_spinner: Spinner | None = None  # ms per frame
    hold_ms: int | None = None  # the last frame's hold
    n_heads: int | None = None
    n_panels: int | None = None
    tetra_positions: Source | None = None  # every frame's projected profiles: x, y, a, b, c, d per head
    tetra_dots: Source | None = None
    tetra_trails: Source | None = None
    # the training view (dashboard/training/js/training_*.js; its movie: frame_slider, play_toggle, the step buttons'
    # step_by, interval_spinner, hold_ms; type_names, type_colors, url_note)
    training_frames: Source | None = None  # every head's profile at every frame and offset, packed (frames.frame_cube)
    training_meta: Source | None = None  # the run's name and sizes: n_layers, n_heads, n_frames, n_offsets, head
    training_steps: Source | None = None  # per frame: step, x (its place on the log-step axis), revision, metrics
    training_heads: Source | None = None  # per head: label, layer colour, cluster colour
    training_type_counts: Source | None = None  # each type's count at every offset and frame, flat
    training_moved: Source | None = None  # each head's path length and displacement at every offset, flat
    training_quantile_values: Source | None = None  # each statistic's quantiles at every frame, flat
    training_statistic_values: Source | None = None  # every head's statistics at every frame, flat
    training_head_metric_values: Source | None = None  # every per-head metric of every head at every frame, flat
    training_vertex_xy: list[float] | None = None  # the four vertices where the fixed camera draws them, flat
    training_d_slider: Slider | None = None
    training_trail: Spinner | None = None  # the trails' frames (0: every frame from the first)
    training_colour: RadioButtonGroup | None = None  # by layer, by type, by cluster
    training_statistic: Select | None = None
    training_info: Label | None = None  # the step shown, its checkpoint and metrics (on a canvas: no page layout)
    training_legends: list[Legend] | None = None  # by layer, by type (the counts at the step), by cluster
    training_tetra_title: Title | None = None
    training_dots: Source | None = None  # the heads at the step
    training_trails: Source | None = None  # their trails
    training_cursors: list[Span] | None = None  # the step on every chart over the steps
    training_type_curves: list[Source] | None = None  # the type counts at the d slider's d: I₊, II, I₋
    training_quantile_curves: list[Source] | None = None  # the statistic's 10-90 % band, 25-75 % band, median
    training_quantile_title: Title | None = None
    training_quantile_y: Range | None = None
    training_movers_rows: Source | None = None  # the heads that moved most, longest path first
    training_head_title: Div | None = None  # the inspector's heading: the head shown
    training_path: Source | None = None  # the inspected head's path over the frames
    training_path_start: Source | None = None
    training_path_dot: Source | None = None  # its place at the step
    training_head_curves: list[Source] | None = None  # its a, b, c, d over the steps
    training_head_statistic: Source | None = None  # its statistic over the steps
    training_head_statistic_title: Title | None = None
    training_head_statistic_y: Range | None = None
    training_head_metric_curves: list[Source] | None = None  # its per-head metrics over the steps

    def args(self) -> dict[str, Any]:
        """The fields that are set, by name: the ``ctx`` argument of a CustomJS."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}

    def but(self, **changes) -> PageModels:
        """A copy with ``changes`` (``dataclasses.replace``): one callback's models beside the page's."""
        return dataclasses.replace(self, **changes)


def names() -> list[str]:
    """Every field's name: the names the browser code may read as ``ctx.X``."""
    return [f.name for f in dataclasses.fields(PageModels)]
