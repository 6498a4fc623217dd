"""The training view's numbers, views and page, against independent computations: the type counts per step, the
path lengths and displacements, the statistics' quantiles written out with loops over the heads (not the numpy calls
the module makes), the log-step axis, the packed frames decoded by hand, the run's last frame as a model, and what the
page ships to its browser code. The run is read from a store the run writer wrote (``training_store``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from bokeh.models import ColumnDataSource, CustomJS

from dashboard.common import geometry as g
from dashboard.common.render import Named, render
from dashboard.training import frames as tf
from dashboard.training import runs
from dashboard.training import views as tv
from dashboard.training.model import last_frame
from dashboard.training.page import training_tab
from pipeline.schema import STATISTICS
from tests.browser.conftest import ROPE_MODEL
from tests.dashboard.training_store import (
    LEFT_OUT,
    NO_PROFILE,
    ROPE_RUN_STEPS,
    RUN,
    RUN_SHAPE,
    RUN_STEPS,
    run_profiles,
    run_values,
)
from tests.shared import SYNTHETIC_PAGES

pytestmark = SYNTHETIC_PAGES


@pytest.fixture(scope="module")
def frames(training_store) -> tf.RunFrames:
    return tf.run_frames(runs.run(training_store, RUN), RUN)


def written_profile() -> np.ndarray:
    """The profile the store factory wrote for RUN's complete frames (NaN at NO_PROFILE)."""
    p = run_profiles(RUN_STEPS, *RUN_SHAPE)
    p[NO_PROFILE] = np.nan
    return p


def type_of(c: float, d: float) -> int:
    """The spectral type rule written out once more: I₊ (0) when (c - d)/(c + d) > 0.2 with c + d > 0.01, I₋ (2)
    when it is below -0.2 with c + d > 0.01, else II (1); a NaN profile is II."""
    s = c + d
    if not s > 0.01:
        return 1
    imbalance = (c - d) / s
    return 0 if imbalance > 0.2 else (2 if imbalance < -0.2 else 1)


def test_a_run_reads_back_as_written_its_incomplete_frame_left_out(training_store, frames):
    assert runs.run_names(training_store) == sorted([RUN, ROPE_MODEL])
    F, L, H, D = frames.shape
    assert (F, L, H, D) == (len(RUN_STEPS), *RUN_SHAPE, 129) and frames.rotary
    assert frames.steps.tolist() == list(RUN_STEPS) and frames.left_out == (LEFT_OUT,)
    assert frames.revisions == tuple(f"checkpoint-{s}" for s in RUN_STEPS)
    np.testing.assert_array_equal(frames.profile, written_profile())
    stats, _, _, metrics, heads = run_values(RUN_STEPS, *RUN_SHAPE)
    np.testing.assert_array_equal(frames.statistics, stats)
    assert sorted(frames.metrics) == sorted(metrics) and sorted(frames.head_metrics) == sorted(heads)
    for k, v in metrics.items():
        np.testing.assert_array_equal(frames.metrics[k], v)
    np.testing.assert_array_equal(frames.head_metrics["induction_score"], heads["induction_score"])


def test_type_counts_per_step_against_the_rule_per_head(frames):
    counts = tf.type_counts(frames.profile)
    p = written_profile()
    F, L, H, D, _ = p.shape
    for f in range(F):
        for d in (0, 1, 17, 128):
            want = [0, 0, 0]
            for layer in range(L):
                for h in range(H):
                    want[type_of(p[f, layer, h, d, 2], p[f, layer, h, d, 3])] += 1
            assert counts[f, d].tolist() == want, (f, d)
    assert counts.sum(axis=-1).min() == L * H
    assert len({tuple(c) for c in counts[:, 0]}) > 1  # the heads change type over the run


def test_path_lengths_and_displacements_against_loops(frames):
    p = written_profile()
    F, L, H, D, _ = p.shape
    paths, disps = tf.path_lengths(frames.profile), tf.displacements(frames.profile)
    assert paths.shape == disps.shape == (D, L * H)
    for d in (0, 5, 128):
        for layer in range(L):
            for h in range(H):
                total = 0.0
                for f in range(F - 1):
                    a, b = p[f, layer, h, d], p[f + 1, layer, h, d]
                    if np.isfinite(a).all() and np.isfinite(b).all():
                        total += math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b, strict=True)))
                assert paths[d, layer * H + h] == pytest.approx(total, rel=1e-12, abs=1e-15)
                first, last = p[0, layer, h, d], p[-1, layer, h, d]
                want = math.sqrt(sum((x - y) ** 2 for x, y in zip(first, last, strict=True)))
                got = disps[d, layer * H + h]
                assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, rel=1e-12)
    layer, h = NO_PROFILE[1:]
    assert np.isnan(disps[0, layer * H + h]) and paths[0, layer * H + h] > 0  # a missing frame counts nothing


def quantile_by_hand(values: list[float], q: float) -> float:
    """The linear interpolation between order statistics (numpy's default method), written out."""
    xs = sorted(v for v in values if not math.isnan(v))
    if not xs:
        return math.nan
    h = (len(xs) - 1) * q
    lo = math.floor(h)
    return xs[lo] + (h - lo) * (xs[min(lo + 1, len(xs) - 1)] - xs[lo])


def test_quantiles_over_the_heads_against_sorted_values(frames):
    stats = frames.statistics.copy()
    stats[3, 0, 1, :] = np.nan  # a head without statistics at one frame: left out there
    got = tf.quantiles(stats)
    F, L, H, S = stats.shape
    assert got.shape == (S, F, len(tf.QUANTILES))
    for s in (0, STATISTICS.index("rho"), S - 1):
        for f in (0, 3, F - 1):
            values = [stats[f, layer, h, s] for layer in range(L) for h in range(H)]
            for j, q in enumerate(tf.QUANTILES):
                assert got[s, f, j] == pytest.approx(quantile_by_hand(values, q), rel=1e-12)
    assert np.isnan(tf.quantiles(np.full((2, 1, 3, S), np.nan))).all()


def test_the_log_step_axis_places_step_0():
    axis = tf.step_axis(np.array([0, 1, 2, 30, 1000]))
    assert axis.zero_at == 0.5 and axis.x.tolist() == [0.5, 1, 2, 30, 1000]
    assert axis.ticks == [0.5, 1, 10, 100, 1000] and axis.labels[0.5] == "0" and axis.labels[100] == "100"
    later = tf.step_axis(np.array([0, 20, 400]))
    assert later.zero_at == 10 and later.ticks == [10, 100] and later.labels[10] == "0"
    assert tf.step_axis(np.array([5, 50])).ticks == [10]  # no step 0: no tick for it


def test_the_packed_frames_decode_to_12_bit_codes(frames):
    F, L, H, D = frames.shape
    packed = tf.frame_cube(frames.profile)
    assert packed.dtype == np.uint8 and packed.size == 8 * L * H * F * D
    codes = tf.unpack_frame_cube(packed, L * H, F)
    p = written_profile()
    for f, layer, h, d in ((0, 0, 0, 0), (5, 1, 3, 77), (F - 1, 1, 0, 128)):
        for k in range(4):
            code = codes[layer * H + h, f, d, k]
            assert code == round(p[f, layer, h, d, k] * 4094) and abs(code / 4094 - p[f, layer, h, d, k]) <= 1 / 8188
    assert (codes[NO_PROFILE[1] * H + NO_PROFILE[2], 0] == tf.FRAME_NAN).all()


def test_movers_rank_every_head_by_path_and_displacement(frames):
    F, L, H, D = frames.shape
    for d in (0, 40):
        rows = tv.movers(frames, d)
        paths, disps = tf.path_lengths(frames.profile)[d], tf.displacements(frames.profile)[d]
        assert sorted(rows["index"].tolist()) == list(range(L * H))
        assert rows["path length"].tolist() == sorted(paths.tolist(), reverse=True)
        assert list(rows["head"]) == [f"{i // H}.{i % H}" for i in rows["index"]]
        farthest = sorted(range(L * H), key=lambda i: -np.nan_to_num(disps[i], nan=-1.0))
        for i, r in zip(rows["index"], rows["displacement rank"], strict=True):
            assert farthest[r - 1] == i


def test_the_last_complete_frame_is_the_runs_model(training_store, frames):
    m, sel = last_frame(runs.run(training_store, RUN), RUN)
    r = m.row
    assert (r.name, r.n_layers, r.n_heads, r.positional, r.family) == (RUN, *RUN_SHAPE, "rope", "llama")
    assert r.revision == f"checkpoint-{RUN_STEPS[-1]}" and r.complete and r.computed and not r.damaged
    assert r.layers_done == RUN_SHAPE[0] and r.statistics_computed and RUN in r.note
    assert r.layer_positional == ("rope",) * RUN_SHAPE[0] and r.static_layers == ()
    assert LEFT_OUT > RUN_STEPS[-1]  # the last frame by step is incomplete: the model is the one before it
    np.testing.assert_array_equal(m.profile, written_profile()[-1])
    np.testing.assert_array_equal(sel["head_statistics"].values, frames.statistics[-1])


def test_the_views_draw_the_frame_asked_for(frames):
    F, L, H, D = frames.shape
    f, d, trail = 6, 9, 3
    fig = render(tv.training_tetrahedron(frames, step=int(RUN_STEPS[f]), d=d, trail=trail, color_by="type"))
    named = Named(fig)
    dots, trails = named["training_dots"].data, named["training_trails"].data
    p = written_profile()[:, :, :, d].reshape(F, L * H, 4)
    xy = p @ tv.vertex_xy()
    np.testing.assert_allclose(dots["x"], xy[f, :, 0])
    np.testing.assert_allclose(dots["y"], xy[f, :, 1])
    want = np.array([g.project(g.to_3d(p[f]), g.DEFAULT_AZIMUTH, g.DEFAULT_ELEVATION)]).squeeze()
    np.testing.assert_allclose(np.stack([dots["x"], dots["y"]]), want)  # the profiles page's projection
    assert [len(x) for x in trails["xs"]] == [trail + 1] * (L * H)
    np.testing.assert_allclose(trails["xs"][5], xy[f - trail:f + 1, 5, 0])
    assert list(dots["color"]) == [g.TYPE_COLORS[type_of(c, dd)] for c, dd in p[f, :, 2:]]
    with pytest.raises(ValueError, match="step 7 is not a frame"):
        tv.training_tetrahedron(frames, step=7)
    types = Named(render(tv.type_counts_view(frames, d=d)))
    counts = tf.type_counts(frames.profile)[:, d]
    for k in range(3):
        np.testing.assert_array_equal(types[f"training_types_{k}"].data["heads"], counts[:, k])
        np.testing.assert_array_equal(types[f"training_types_{k}"].data["step"], tf.step_axis(frames.steps).x)
    q = Named(render(tv.quantiles_view(frames, "rho")))
    np.testing.assert_allclose(q["training_q_median"].data["rho"], tf.quantiles(frames.statistics)[
        STATISTICS.index("rho"), :, 2])
    path = Named(render(tv.head_path(frames, 1, 2, d=d)))
    np.testing.assert_allclose(path["training_path"].data["y"], xy[:, 6, 1])
    head = Named(render(tv.head_over_steps(frames, 1, 2, d=d, statistic="rho")))
    np.testing.assert_allclose(head["training_head_c"].data["coordinate"], p[:, 6, 2])
    np.testing.assert_allclose(head["training_head_statistic"].data["rho"], frames.statistics[:, 1, 2,
                                                                                             STATISTICS.index("rho")])
    metrics = Named(render(tv.run_metrics(frames, layer=1, head=3)))
    np.testing.assert_allclose(metrics["training_head_metric_induction_score"].data["induction_score"],
                               frames.head_metrics["induction_score"][:, 1, 3])
    assert "training_metric_loss_repeated_half" in metrics._by_name


def test_the_tab_ships_every_frame_once_and_names_what_it_drives(frames):
    tab = training_tab(frames)
    named = Named(tab.child)
    F, L, H, D = frames.shape
    assert tab.name == "training" and tab.restore.name == "url_restore"
    codes = tf.unpack_frame_cube(named["training_frames"].data["q"], L * H, F)
    np.testing.assert_array_equal(codes, np.transpose(tf.frame_codes(frames.profile), (1, 2, 0, 3, 4))
                                  .reshape(L * H, F, D, 4))
    n = np.asarray(named["training_type_counts"].data["n"]).reshape(D, F, 3)
    np.testing.assert_array_equal(n, np.transpose(tf.type_counts(frames.profile), (1, 0, 2)))
    moved = np.asarray(named["training_moved"].data["path"]).reshape(D, L * H)
    np.testing.assert_allclose(moved, tf.path_lengths(frames.profile))
    assert named["training_step"].value == F - 1 and named["training_d"].visible
    meta = named["training_meta"].data
    assert meta["head"] == [int(tv.movers(frames, 0)["index"][0])]  # the inspector opens on the head that moved most
    # one copy of the view's code: every widget it follows shares one callback
    follows = {cb.id for cb in tab.child.select({"type": CustomJS}) if "training_show" in cb.code}
    assert follows == {tab.restore.id}
    rewritten = [s for s in tab.child.select({"type": ColumnDataSource}) if str(s.name).startswith("training_")]
    assert len(rewritten) > 20 and all(s.syncable is False for s in rewritten), [
        s.name for s in rewritten if s.syncable]  # the browser rewrites or reads them: nothing goes back to a server


def test_d0_only_ships_one_offset_and_says_what_it_left_out(frames):
    tab = training_tab(frames, d0_only=True)
    named = Named(tab.child)
    F, L, H, _ = frames.shape
    assert named["training_frames"].data["q"].size == 8 * L * H * F and not named["training_d"].visible
    assert named["training_meta"].data["n_offsets"] == [1]
    text = named["training_heading"].text
    assert "--run-d0-only" in text and f"d = 1 to 128 ({F} frames × {L * H} heads × 128 offsets)" in text


def test_a_run_is_its_models_training_tab_or_an_entry_of_its_own(training_store):
    """The run of a model's name is that model's Training tab; a run of no model's name is an entry of its own in
    the picker, its page its last frame with the Training tab; a model without a run has no such tab."""
    from bokeh.models import Tabs

    from dashboard import app, data, rendered
    from dashboard.profiles.page_texts import RUNS_GROUP, selector_groups
    from tests.browser.conftest import ABSOLUTE_MODEL

    rows, trained = data.rows(training_store), runs.run_names(training_store)
    assert selector_groups(rows, trained)[RUNS_GROUP] == [RUN]
    assert app.shown_model(rows, RUN, trained) == RUN and app.shown_model(rows, RUN) != RUN

    def tabs(page) -> list[str]:
        return [p.title for t in page.select({"type": Tabs}) for p in t.tabs]

    model_page = rendered.profiles_layout(training_store, ROPE_MODEL)
    named = Named(model_page)
    assert tabs(model_page) == ["Profiles", "Analyses", "Training"]
    assert named["training_steps"].data["step"].tolist() == list(ROPE_RUN_STEPS)
    assert named["profile_meta"].data["model"] == [ROPE_MODEL] and "training run" not in named["model_line"].text
    run_page = rendered.profiles_layout(training_store, RUN)
    assert tabs(run_page) == ["Profiles", "Analyses", "Training"]
    assert f"the training run {RUN}" in Named(run_page)["model_line"].text
    assert [c.name for c in run_page.tags] == ["url_restore", "url_restore"]  # the page's link, then the tab's
    assert tabs(rendered.profiles_layout(training_store, ABSOLUTE_MODEL)) == ["Profiles", "Analyses"]
    with pytest.raises(KeyError):
        rendered.profiles_layout(training_store, "no-such-model")


@pytest.mark.slow
def test_the_served_app_swaps_a_page_with_a_training_tab_whole(training_store):
    """Two pages with a Training tab hold the same named models, but their runs' unnamed ones (the legends' items,
    the charts' log-step axes) differ: the served app replaces such a page instead of switching it in place."""
    from dashboard import rendered
    from tests.browser.conftest import ABSOLUTE_MODEL

    run, model = rendered.profiles(training_store, RUN), rendered.profiles(training_store, ROPE_MODEL)
    assert {"training", "training_legend_layer"} <= set(run.named) and "training" in model.named
    assert not rendered.same_structure(run, model) and not rendered.same_structure(model, run)
    assert not rendered.same_structure(run, rendered.profiles(training_store, ABSOLUTE_MODEL))
    first, second = (Named(c.root)["training_legend_layer"].items for c in (run, model))
    assert [i.label.value for i in first] == ["layer 0", "layer 1"] and len(second) == 4
