"""The dashboard's views as HoloViews objects, over Datasets opened from the store with xarray: the one
import place of the notebook API. Each view lives with its page (``dashboard/profiles/``,
``dashboard/compare/``, ``dashboard/orbits/``, ``dashboard/training/``); this module gathers them.

Use them in a notebook on any subset of the data::

    import xarray as xr
    import dashboard.views as v
    v.use_bokeh()                                              # or hv.extension("bokeh"), once
    ds = xr.open_zarr("store.zarr", group="profiles")
    v.tetrahedron(ds.sel(model="all-MiniLM-L6-v2"))            # drag to rotate
    v.layer_heatmaps(ds.sel(model="all-MiniLM-L6-v2")) + v.histograms(ds.sel(model="all-MiniLM-L6-v2"))
    one = ds.sel(model="SmolLM2-135M-Instruct")
    v.tetrahedron(one, d=64, color_by="type", rank_one=True)   # spectral types, the rank-one curve
    v.symmetric_face(one) + v.layer_type_map(one)              # the a = 0 face, layer x type
    v.parity_spectra(one)                                      # the most extreme heads of each type
    v.statistic_heatmap(one, "pairing")                        # a statistic per head, and its Gaussian value
    v.head_inspector(one, layer=3, head=5, d=64)               # one head: spectrum, statistics, profile over d
    base = v.baseline_of(ds, "SmolLM2-135M-Instruct")          # its random baseline (None without one)
    v.pairing_histogram(one, base) + v.pairing_bound_view(one, base)  # the pairing law, the baseline outlined
    v.rho_histogram(one, base) + v.sigma_geometric(one)        # rho; sigma(T) against sqrt(lambda+ lambda-)
    v.analyses_summary(one, base) + v.goodness_of_fit_table(one) + v.type_sensitivity_table(one)
    v.trained_vs_random(one, base)                             # S and P beside the baseline's, one scale per pair
    v.tetrahedron(one, baseline=base, color_by="cluster")      # its cloud, percentiles in the hover; k-means clusters
    v.compare_depth(ds, quantity="c") + v.compare_histograms(ds, "all-MiniLM-L6-v2", "SmolLM2-135M-Instruct")
    orb = xr.open_zarr("store.zarr", group="orbits")
    v.orbit_polygons(orb, frame=-1) + v.training_metrics(orb)
    v.orbit_tetrahedron(orb, frame=-1)                         # each head's W_K^T W_Q profile, with trails
    search = xr.open_zarr("store.zarr", group="orbits_search")
    v.hypotheses_table(search)                                 # one row per searched recipe
    run = xr.open_zarr("store.zarr", group="runs/NAME")        # a run's checkpoints, a frame per step
    v.training_tetrahedron(run, step=None, d=0, trail=10, color_by="type")  # the heads at a step, with trails
    v.type_counts_view(run, d=0) + v.quantiles_view(run, "rho")  # types and a statistic over the steps (log axis)
    v.movers_table(run)                                        # the heads that moved most: path, displacement
    v.head_path(run, 1, 2) + v.head_over_steps(run, 1, 2)      # one head's path, its profile and a statistic
    v.run_metrics(run, layer=1, head=2)                        # the run's metrics.json, by step

The views write Bokeh options, so HoloViews' backend must be Bokeh when they are called: importing this
module does not switch it (a process-wide setting); ``use_bokeh()`` or ``hv.extension("bokeh")`` does.

A profiles selection is either the Dataset of one model (``ds.sel(model=name)``: its ``n_layers`` and
``n_heads`` cut the padding) or its ``profile`` DataArray (the padding is recognised as all-NaN). Rotary
models vary with the offset ``d``; pass ``d=`` to choose one (a selection without a ``d`` dimension is
used as it is). The served app and the static pages render these same views with ``render`` and add
their browser behaviour (each page's ``js/``).

A run of a model's checkpoints (``runs/NAME``: ``xr.open_zarr(store, group="runs/NAME")`` or
``Store.run(name)``) is drawn by the training views (``dashboard/training/views.py``) from its complete frames in
step order; ``step=`` is one of its training steps (None: the last), the steps lie on a log axis with step 0
placed, and ``run_frames`` reads a run once for several views (they take its result as well as the Dataset).

The per-head statistics and spectra (``head_statistics``, ``spectrum``: d = 0) are read when the selection
holds them; the views that need them show "statistics not computed" and the command that adds them
otherwise (a store written before them). Spectral types and their colours, the rank-one curve and the a = 0
face are computed by ``dashboard.common.geometry``; the i.i.d. Gaussian baselines are in
``dashboard.common.baselines``. The Analyses views (``dashboard/profiles/analyses.py``) draw what
``pipeline.analyses`` computes for a model, against one of its stored random baselines where given.
"""

from __future__ import annotations

from dashboard.common.render import render, use_bokeh
from dashboard.common.selection import profile_array, scales, spectrum_array, statistics_note, statistics_table
from dashboard.common.simplex import heads_table
from dashboard.compare.views import compare_depth, compare_histograms, computed_models, depth_medians
from dashboard.orbits.search import (
    family_heads,
    family_sizes,
    gap_to_12_4,
    hypotheses,
    hypotheses_table,
    recipe_label,
    search_families,
)
from dashboard.orbits.views import (
    orbit_polygons,
    orbit_profile_positions,
    orbit_tetrahedron,
    reproduction,
    reproduction_table,
    training_metrics,
)
from dashboard.profiles.analyses import (
    analyses_summary,
    goodness_of_fit_table,
    pairing_bound_view,
    pairing_histogram,
    rho_histogram,
    sigma_geometric,
    trained_vs_random,
    type_sensitivity_table,
)
from dashboard.profiles.analyses_data import analyses, baseline_of
from dashboard.profiles.layers import PANEL_STEP, histograms, layer_heatmaps
from dashboard.profiles.spectral import (
    PARITY_STEP,
    layer_type_map,
    parity_selection,
    parity_spectra,
    parity_spectra_figure,
    symmetric_face,
)
from dashboard.profiles.statistics import baseline_html, head_inspector, statistic_heatmap
from dashboard.profiles.tetrahedron import kv_heads, tetrahedron
from dashboard.training.frames import (
    cluster_labels,
    displacements,
    path_lengths,
    quantiles,
    run_frames,
    step_axis,
    type_counts,
)
from dashboard.training.views import (
    frames_of,
    head_over_steps,
    head_path,
    movers,
    movers_table,
    quantiles_view,
    run_metrics,
    training_tetrahedron,
    type_counts_view,
)

__all__ = [
    "PANEL_STEP",
    "PARITY_STEP",
    "analyses",
    "analyses_summary",
    "baseline_html",
    "baseline_of",
    "cluster_labels",
    "compare_depth",
    "compare_histograms",
    "computed_models",
    "depth_medians",
    "displacements",
    "family_heads",
    "family_sizes",
    "frames_of",
    "gap_to_12_4",
    "goodness_of_fit_table",
    "head_inspector",
    "head_over_steps",
    "head_path",
    "heads_table",
    "histograms",
    "hypotheses",
    "hypotheses_table",
    "kv_heads",
    "layer_heatmaps",
    "layer_type_map",
    "movers",
    "movers_table",
    "orbit_polygons",
    "orbit_profile_positions",
    "orbit_tetrahedron",
    "pairing_bound_view",
    "pairing_histogram",
    "parity_selection",
    "parity_spectra",
    "parity_spectra_figure",
    "path_lengths",
    "profile_array",
    "quantiles",
    "quantiles_view",
    "recipe_label",
    "render",
    "reproduction",
    "reproduction_table",
    "rho_histogram",
    "run_frames",
    "run_metrics",
    "scales",
    "search_families",
    "sigma_geometric",
    "spectrum_array",
    "statistic_heatmap",
    "statistics_note",
    "statistics_table",
    "step_axis",
    "symmetric_face",
    "tetrahedron",
    "trained_vs_random",
    "training_metrics",
    "training_tetrahedron",
    "type_counts",
    "type_counts_view",
    "type_sensitivity_table",
    "use_bokeh",
]
