"""The training view's browser code (dashboard/training/js/), run by node outside any page on plain objects shaped
like the page's sources, against numpy: the packed frames decoded at an offset, a step's dots and trails, the movers
table and the type counts at an offset. The same files run inside real pages in tests/browser/test_training_view.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dashboard.common import geometry as g
from dashboard.common import jscode
from dashboard.training import frames as tf
from dashboard.training import views as tv
from tests.dashboard.test_dashboard_js import needs_node, run_node

CODE = ("type_rule", "training_decode", "training_show", "training_inspect", "training_rows")


def _frames(F: int = 6, L: int = 2, H: int = 3, D: int = 5, seed: int = 0) -> np.ndarray:
    p = np.random.default_rng(seed).dirichlet(np.ones(4) * 0.6, (F, L, H, D))
    p[2, 1, 0] = np.nan  # a head without a profile at one frame
    return p


def _ctx(p: np.ndarray, step: int, d: int, trail: int, colour: int) -> str:
    """A ``ctx`` of plain objects: the sources and widgets the files read, as the page gives them."""
    F, L, H, D, _ = p.shape
    HH = L * H
    axis = tf.step_axis(np.arange(F) * 10)
    moved = {"path": tf.path_lengths(p).reshape(-1).tolist(), "displacement":
             np.nan_to_num(tf.displacements(p), nan=-1).reshape(-1).tolist()}
    src = lambda data: {"data": data, "selected": {"indices": []}}  # noqa: E731
    ctx = {
        "training_frames": src({"q": tf.frame_cube(p).tolist()}),
        "training_meta": src({"name": ["r"], "n_layers": [L], "n_heads": [H], "n_frames": [F], "n_offsets": [D],
                              "head": [4]}),
        "training_steps": src({"step": (np.arange(F) * 10).tolist(), "x": axis.x.tolist(),
                               "revision": [f"c-{f}" for f in range(F)], "metric_loss": list(range(F))}),
        "training_heads": src({"label": tf.head_labels(L, H), "layer_colour": tv.layer_colours(L, H),
                               "cluster": [0, 1, -1, 0, 1, 2][:HH], "cluster_colour": ["c0", "c1", "cx", "c0", "c1",
                                                                                     "c2"][:HH]}),
        "training_type_counts": src({"n": np.transpose(tf.type_counts(p), (1, 0, 2)).reshape(-1).tolist()}),
        "training_moved": src(moved),
        "training_vertex_xy": tv.vertex_xy().ravel().tolist(),
        "training_d_slider": {"value": d}, "training_trail": {"value": trail}, "training_colour": {"active": colour},
        "frame_slider": {"value": step},
        "type_names": list(g.TYPE_NAMES), "type_colors": list(g.TYPE_COLORS),
        "training_dots": src({}), "training_trails": src({}), "training_path_dot": src({}),
        "training_cursors": [{}, {}], "training_tetra_title": {}, "training_info": {},
        "training_legends": [{"visible": True, "items": []}, {"visible": False, "items": [{"label": None}] * 3},
                             {"visible": False, "items": []}],
        "training_movers_rows": src({}), "training_type_curves": [src({}), src({}), src({})],
    }
    return json.dumps(ctx)


def _run(p, step, d, trail, colour, body: str):
    script = jscode.code(*CODE) + f"\nconst ctx = {_ctx(p, step, d, trail, colour)};\n" + \
        "const flat = (v) => (v != null && v.length !== undefined && typeof v !== 'string') ? Array.from(v, flat) : " \
        "(typeof v === 'number' && Number.isNaN(v) ? null : v);\n" + body
    return run_node(script)


@needs_node
@pytest.mark.parametrize("d", [0, 3])
def test_a_step_shows_one_frames_dots_and_the_trails_as_views(d):
    p = _frames()
    F, L, H, D, _ = p.shape
    f, trail = 4, 2
    out = _run(p, f, d, trail, 1, "training_show(ctx);"
               " const dots = ctx.training_dots.data, t = ctx.training_trails.data;"
               " console.log(JSON.stringify([flat(dots.x), flat(dots.y), flat(dots.c), dots.color, dots.type_name,"
               " flat(t.xs), t.xs.map((a) => a.buffer === ctx.training_frames.__decoded.cols.x.buffer),"
               " ctx.training_cursors[0].location, ctx.training_info.text, ctx.training_legends.map((l) => l.visible),"
               " ctx.training_legends[1].items.map((i) => i.label.value)]));")
    x, y, c, color, type_name, xs, views, cursor, info, shown, labels = out
    codes = np.transpose(tf.frame_codes(p), (1, 2, 0, 3, 4))  # (L, H, F, D, 4)
    values = np.where(codes == tf.FRAME_NAN, np.nan, codes / tf.FRAME_SCALE).reshape(L * H, F, D, 4)[:, :, d]
    xy = values @ tv.vertex_xy()  # (heads, F, 2): the 12-bit profiles projected
    np.testing.assert_allclose(np.array(x, dtype=float), xy[:, f, 0], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.array(y, dtype=float), xy[:, f, 1], rtol=1e-12, atol=1e-15)
    assert np.nanmax(np.abs(np.array(c, dtype=float) - p[f, :, :, d, 2].reshape(-1))) <= 0.5 / tf.FRAME_SCALE
    kinds = g.spectral_types(values[:, f])
    assert type_name == [g.TYPE_NAMES[k] for k in kinds] and color == [g.TYPE_COLORS[k] for k in kinds]
    for h in range(L * H):  # each trail: the head's last `trail` frames and this one, a view into the decoded arrays
        np.testing.assert_allclose(np.array(xs[h], dtype=float), xy[h, f - trail:f + 1, 0], rtol=1e-12, atol=1e-15)
    assert all(views) and cursor == pytest.approx(tf.step_axis(np.arange(F) * 10).x[f])
    assert info == f"step {f * 10}  (frame {f + 1} of {F}, c-{f})  ·  loss 4.0000"
    assert shown == [False, True, False]  # colour by type: its legend, with the counts at the step
    assert labels == [f"{g.TYPE_NAMES[k]} (n={int((kinds == k).sum())})" for k in range(3)]


@needs_node
def test_every_trail_from_the_first_frame_when_its_length_is_0():
    p = _frames()
    lengths = _run(p, 3, 0, 0, 0, "training_show(ctx); console.log(JSON.stringify("
                   "[ctx.training_trails.data.xs.map((a) => a.length), ctx.training_dots.data.color]));")
    assert lengths[0] == [4] * 6 and lengths[1] == tv.layer_colours(2, 3)


@needs_node
def test_the_codes_of_an_offset_decode_exactly():
    p = _frames(F=9, D=7, seed=3)
    F, L, H, D, _ = p.shape
    codes = _run(p, 0, 0, 0, 0, "console.log(JSON.stringify([0, 6].map((d) => Array.from(training_codes("
                 "ctx.training_frames.data.q, 6, 9, 7, d)))));")
    want = np.transpose(tf.frame_codes(p), (1, 2, 0, 3, 4)).reshape(L * H, F, D, 4)
    for j, d in enumerate((0, 6)):
        np.testing.assert_array_equal(np.array(codes[j]).reshape(L * H, F, 4), want[:, :, d])


@needs_node
def test_an_offset_redraws_the_movers_table_and_the_type_counts():
    p = _frames(F=8, D=6, seed=4)
    F, L, H, D, _ = p.shape
    d = 4
    rows, curves = _run(p, 0, d, 0, 0, f"training_rows(ctx, {d}); training_types_at(ctx, {d});"
                        " console.log(JSON.stringify([ctx.training_movers_rows.data,"
                        " ctx.training_type_curves.map((s) => Array.from(s.data.heads))]));")
    frames = tf.RunFrames("r", {}, np.arange(F) * 10, ("",) * F, p, np.full((F, L, H, 1), np.nan),
                          np.full((L, H, 1), np.nan), {}, {})
    want = tv.movers(frames, d)
    assert rows["index"] == want["index"].tolist() and rows["head"] == list(want["head"])
    np.testing.assert_allclose(rows["path_length"], want["path length"])
    assert rows["displacement_rank"] == want["displacement rank"].tolist()
    np.testing.assert_array_equal(np.array(curves).T, tf.type_counts(p)[:, d])
