"""The browser code in dashboard/*/js/, run by node outside any page, against the numpy twins.

The same files are exercised inside real pages by tests/browser/. Here each function is called on plain
objects shaped like the Bokeh sources it edits, so a wrong index or formula shows as a wrong number.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from dashboard.common import geometry as g
from dashboard.common import jscode
from dashboard.profiles.payload import pack_profiles

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed: the JS files are still run in the "
                                                     "browser tests")
PACKAGE = Path(__file__).resolve().parents[2] / "dashboard"


def run_node(script: str):
    out = subprocess.run([NODE, "-e", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@needs_node
def test_every_file_is_valid_javascript():
    """Each file compiles as a callback's body (``new Function``, which throws on a syntax error), all in one node."""
    bodies = {}
    for name in jscode.names():
        code = jscode.code(name)
        bodies[name] = f"return ({code})" if code.lstrip("/ \n").startswith("(") or "\n() =>" in code else code
    check = (f"const bodies = {json.dumps(bodies)}, compiled = [], bad = [];"
             "for (const [name, body] of Object.entries(bodies)) {"
             "  try { new Function('ctx', 'cb_obj', body); compiled.push(name); }"
             "  catch (e) { bad.push(name + ': ' + e.message); } }"
             "console.log(JSON.stringify([compiled, bad]))")
    compiled, bad = run_node(check)
    assert bad == [] and compiled == list(bodies), bad


def test_the_python_holds_no_javascript():
    """Browser code lives in dashboard/*/js/*.js only (the loader names BokehJS's ``cb_obj`` for the contracts)."""
    pattern = re.compile(r"cb_obj|\.change\.emit|=>|\bfunction\s*\(|\bconst\s+\w+\s*=|\blet\s+\w+\s*=")
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        hits = pattern.findall(text.replace('"cb_obj"', "") if path.name == "jscode.py" else text)
        assert not hits, f"{path.name} holds JavaScript: {hits[:3]}"


def _mock(data: dict) -> str:
    return "{data: " + json.dumps(data) + ", change: {emit() {}}, selected: {indices: []}}"


@needs_node
@pytest.mark.parametrize("az, el", [(30, 20), (-135, 60), (90, -45)])
def test_project_matches_numpy(az, el):
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(4), 25)
    xyz = g.to_3d(p)
    heads = {"x3": xyz[:, 0].tolist(), "y3": xyz[:, 1].tolist(), "z3": xyz[:, 2].tolist(), "x": [0] * 25, "y": [0] * 25}
    v = g.VERTICES
    vertices = {"x3": v[:, 0].tolist(), "y3": v[:, 1].tolist(), "z3": v[:, 2].tolist(), "x": [0] * 4, "y": [0] * 4,
                "dy": [0] * 4}
    edges = {k: [0] * 6 for k in ("x0", "y0", "x1", "y1")}
    script = (jscode.code("project") + f"""
const ctx = {{heads: {_mock(heads)}, vertices: {_mock(vertices)}, edges: {_mock(edges)},
  camera: {_mock({"az": [az], "el": [el]})}, label_offset_px: 9,
  edge_from: {[e[0] for e in g.EDGES]}, edge_to: {[e[1] for e in g.EDGES]}}};
project_all(ctx);
console.log(JSON.stringify([ctx.heads.data.x, ctx.heads.data.y, ctx.vertices.data.dy, ctx.edges.data.x1]));""")
    x, y, dy, x1 = run_node(script)
    ex, ey = g.project(xyz, az, el)
    np.testing.assert_allclose(x, ex, atol=1e-12)
    np.testing.assert_allclose(y, ey, atol=1e-12)
    vx, vy = g.project(v, az, el)
    np.testing.assert_allclose(dy, g.label_offsets(vy))
    np.testing.assert_allclose(x1, vx[[e[1] for e in g.EDGES]], atol=1e-12)


@needs_node
def test_decode_and_histograms_match_numpy():
    rng = np.random.default_rng(2)
    L, H, D, B = 3, 5, 7, 10
    profile = rng.dirichlet(np.ones(4), (L, H, D))
    profile[1, 2] = np.nan  # a missing head
    q = pack_profiles(g.quantise(profile).reshape(L * H, D, 4))  # as the page ships it
    n = L * H
    cols = {c: [0.0] * n for c in ("a", "b", "c", "d", "x3", "y3", "z3")}
    heads = {"layer": np.repeat(np.arange(L), H).tolist(), **cols}
    hist = {"top": [0.0] * (4 * B)}  # the four coordinates' bars, coordinate-major
    chosen = [0, 3, 4, 13]
    script = (jscode.code("payload_decode", "profiles_decode", "profiles_histograms") + f"""
const heads = {_mock(heads)}; heads.selected.indices = {chosen};
const mk = (d) => ({{data: d, change: {{emit() {{}}}}}});
const ctx = {{profile_cube: mk({{q: {q.tolist()}}}), profile_meta: mk({{hist_top: [0.1]}}), heads: heads,
  vertex_xyz: {g.VERTICES.ravel().tolist()}, n_bins: {B},
  hist_all: mk({json.dumps(hist)}), hist_selected: mk({json.dumps(hist)}),
  heat_sources: [0, 1, 2, 3].map(() => mk({{image: [new Float64Array({L * B})]}})),
  hist_selected_bars: {{}}, hist_y_range: {{end: 0.1}}, selection_info: {{text: ''}}}};
decode_d(ctx, 4);
histograms(ctx, true);
console.log(JSON.stringify([ctx.heads.data.a, ctx.hist_all.data.top, ctx.hist_selected.data.top,
  ctx.heat_sources.map(h => Array.from(h.data.image[0])), ctx.hist_selected_bars.visible,
  ctx.selection_info.text]));""")
    a, all_, sel, heat, visible, info = run_node(script)
    shown = g.dequantise(g.quantise(profile[:, :, 4])).reshape(n, 4)
    np.testing.assert_allclose(np.array(a, dtype=float), shown[:, 0], atol=1e-15)
    finite = np.isfinite(shown[:, 0])
    for k in range(4):
        counts = np.histogram(shown[finite, k], B, (0, 1))[0]
        np.testing.assert_allclose(all_[k * B:(k + 1) * B], counts / finite.sum())
        np.testing.assert_allclose(sel[k * B:(k + 1) * B], np.histogram(shown[chosen, k], B, (0, 1))[0] / len(chosen))
        per_layer = np.stack([np.histogram(shown[i * H:(i + 1) * H, k][finite[i * H:(i + 1) * H]], B, (0, 1))[0]
                              for i in range(L)])
        np.testing.assert_array_equal(np.array(heat[k]).reshape(L, B), per_layer)
    assert visible is True and info.startswith(f"<b>{len(chosen)}</b> of {n}")


def _read_link(search: str, L: int = 4, H: int = 8, D: int = 129, stats=None):
    meta = {"model": ["m"], "n_layers": [L], "n_heads": [H], "n_offsets": [D]}
    stat = "null" if stats is None else "{options: " + json.dumps(stats) + ", value: " + json.dumps(stats[0]) + "}"
    script = (jscode.code("url_note", "url_state") + f"""
const ctx = {{profile_meta: {{data: {json.dumps(meta)}}}, statistic_select: {stat}}};
console.log(JSON.stringify(read_url_state(ctx, {json.dumps(search)})));""")
    return run_node(script)


@needs_node
def test_a_deep_link_is_read_into_the_state_it_names():
    st = _read_link("?model=org%2Fm&tab=compare&d=128&color=type&stat=rho&heads=3.7,0.0,3.7", stats=["pairing", "rho"])
    assert st == {"notes": [], "model": "org/m", "tab": "compare", "d": 128, "color": "type", "stat": "rho",
                  "heads": [3 * 8 + 7, 0]}  # layer-major indices, each once
    assert _read_link("") == {"notes": []}
    assert _read_link("?color=cluster") == {"notes": [], "color": "cluster"}


@needs_node
@pytest.mark.parametrize("search, key, words", [
    ("?d=129", "d", ["0 to 128"]),
    ("?d=-1", "d", ["0 to 128"]),
    ("?d=1.5", "d", ["0 to 128"]),
    ("?color=viridis", "color", ["layer, type or cluster"]),
    ("?heads=4.0", "heads", ["layers 0 to 3"]),
    ("?heads=0.8", "heads", ["heads 0 to 7"]),
    ("?heads=1,2", "heads", ["<code>1</code>"]),
    ("?stat=nothing", "stat", ["pairing, rho"]),
    ("?d=%3Cb%3E", "d", ["&lt;b&gt;"]),
])
def test_bad_link_input_is_left_out_with_a_note(search, key, words):
    st = _read_link(search, stats=["pairing", "rho"])
    assert key not in st and len(st["notes"]) == 1
    assert all(w in st["notes"][0] for w in words), st["notes"]
    assert "<b>" not in st["notes"][0]  # what the link holds is escaped


@needs_node
def test_d_of_a_model_without_positions_and_stat_without_statistics():
    st = _read_link("?d=3&stat=rho", D=1)
    assert "d" not in st and "stat" not in st
    assert "does not depend on position" in st["notes"][0] and "no per-head statistics" in st["notes"][1]
    assert _read_link("?d=0", D=1) == {"notes": [], "d": 0}


@needs_node
def test_spectral_types_match_numpy_and_the_rule():
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(4) * 0.5, 400)
    p[:40, 2:] *= 0.004  # c + d at or below the 0.01 floor
    p[40:60, 3] = p[40:60, 2] * 1.5  # imbalance exactly -0.2: not I₋
    p[60] = np.nan  # a head without a profile
    n = len(p)
    heads = {"c": p[:, 2].tolist(), "d": p[:, 3].tolist(), "type": [9] * n, "type_name": [""] * n}
    names = list(g.TYPE_NAMES)
    script = (jscode.code("type_rule", "spectral_types") + f"""
const h = {json.dumps(heads).replace("NaN", "null")};
h.c[60] = NaN; h.d[60] = NaN;
const items = [0, 1, 2].map(() => ({{label: null}}));
const counts = spectral_types({{heads: {{data: h}}, type_names: {json.dumps(names)}, type_legend: {{items}}}});
console.log(JSON.stringify([h.type, h.type_name, counts, items.map(i => i.label.value)]));""")
    types, type_names, counts, labels = run_node(script)
    expected = g.spectral_types(p)
    np.testing.assert_array_equal(types, expected)
    # the rule written out once more, directly
    c, d = p[:, 2], p[:, 3]
    with np.errstate(invalid="ignore", divide="ignore"):
        imb = (c - d) / (c + d)
    direct = np.where((c + d > 0.01) & (imb > 0.2), 0, np.where((c + d > 0.01) & (imb < -0.2), 2, 1))
    np.testing.assert_array_equal(types, direct)
    assert 0 < counts[0] and 0 < counts[2] and counts[1] >= 41
    assert type_names == [names[t] for t in expected]
    assert labels == g.type_labels(expected) == [f"{names[k]} (n={counts[k]})" for k in range(3)]


def _read_compare_link(search: str, models=("org/a", "b", "c"), quantities=("a", "b", "c", "d", "rho")):
    """read_compare_state on plain objects shaped like the compare page's choosers (model 1 and 2 at their
    defaults: the first two models; the quantity at c)."""
    picks = [{"options": list(models), "value": models[0]}, {"options": list(models), "value": models[1]}]
    ctx = {"model_selects": picks, "quantity_select": {"options": list(quantities), "value": "c"}}
    script = (jscode.code("url_note", "compare_url") + f"""
console.log(JSON.stringify(read_compare_state({json.dumps(ctx)}, {json.dumps(search)})));""")
    return run_node(script)


@needs_node
def test_a_compare_link_is_read_into_the_choosers_it_names():
    assert _read_compare_link("?tab=compare&models=c,org%2Fa&quantity=rho") == {
        "notes": [], "models": ["c", "org/a"], "quantity": "rho"}
    assert _read_compare_link("?models=b") == {"notes": [], "models": ["b"]}
    assert _read_compare_link("?model=x&tab=compare") == {"notes": []}  # the profiles tab's parameters


@needs_node
@pytest.mark.parametrize("search, key, words", [
    ("?models=b,nope", "models", ["<code>nope</code>", "org/a, b, c", "showing org/a and b"]),
    ("?models=a,b,c", "models", ["3 models", "at most 2"]),
    ("?models=", "models", ["<code></code> is not a computed model"]),
    ("?quantity=volume", "quantity", ["<code>volume</code>", "a, b, c, d, rho", "showing c"]),
    ("?models=%3Cimg%20src%3Dx%3E", "models", ["&lt;img src=x&gt;"]),
])
def test_bad_compare_link_input_is_left_out_with_a_note(search, key, words):
    st = _read_compare_link(search)
    assert key not in st and len(st["notes"]) == 1
    assert all(w in st["notes"][0] for w in words), st["notes"]
    assert "<img" not in st["notes"][0]  # what the link holds is escaped
