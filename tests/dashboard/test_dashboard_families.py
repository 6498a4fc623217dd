"""A model of each new kind of family has a sensible profiles page (issue 33): a QK-norm decoder (Qwen3), a decoder
with a layer without rotary (SmolLM3), an encoder with rotary (ModernBERT), a vision model (ViT) and the two towers of
a CLIP checkpoint (``NAME/tower``), in a store made here from tiny random models (``families_store``).

Each page is checked against the store as the pipeline reads it (``pipeline.store.Store``, not the dashboard's reader)
and against the transformers config the model was built from: its points are the stored profiles, its d slider is
there exactly for a rotary model, the note beside it names the layers whose stored profile is the same at every d
(SmolLM3's layer without rotary, as its config says), and its info line names its family, tower and QK-norm. The
pages of tower models are served from a ``?model=NAME/tower`` link and exported under file names without '/'."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from bokeh.document import Document

from dashboard import app, data, rendered
from dashboard.common.geometry import dequantise, quantise
from dashboard.common.render import models_by_name
from dashboard.export import profile_page_name
from dashboard.profiles.page import profiles_view
from dashboard.profiles.payload import unpack_profiles
from pipeline.schema import PROFILES
from pipeline.store import Store
from tests.dashboard.families_store import MODELS, families_site, families_store
from tests.pipeline.families.cases import CASES, build

NAMES = [n for names in MODELS.values() for n in names]
ROTARY = {"tiny-qwen3", "tiny-smollm3", "tiny-modernbert"}
SERVED = ("tiny-clip/vision", "tiny-smollm3", "tiny-qwen3")  # in the order the served-link test shows them


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    """(store, {case: transformers model}): the shared ``families_store`` and the models it was made of, built
    again (``cases.build`` draws the same weights)."""
    store = families_store(tmp_path_factory)
    return store, {case: build(CASES[case]) for case in MODELS}


@pytest.fixture(scope="module")
def pages(families):
    """{model name: its profiles page with its statistics, as {name: the page's models of that name}}: the served
    app's page (``profiles_view`` with the model's baseline, and this store holds none). The pages of the models
    that the served-link test below shows (``SERVED``) are copies of ``rendered.PAGES`` (this process's served
    pages), so that test finds them built; the others are rendered alone, without the served copy's preparation."""
    store, _ = families
    ds = data.profiles(store)
    return {n: rendered.profiles(store, n).named if n in SERVED else
            models_by_name(profiles_view(data.model_data(store, n), ds.sel(model=n))) for n in NAMES}


def by_name(page, name):
    """The one model of the page (``pages``' value) named ``name``."""
    (model,) = page[name]
    return model


def stored(store, name: str) -> np.ndarray:
    """The model's stored profiles as the pipeline reads them, (layers, heads, 129, 4), padding cut."""
    m = Store.open(str(store), "r").dataset(PROFILES).sel(model=name)
    L, H = int(m.n_layers), int(m.n_heads)
    return np.asarray(m.profile.transpose("layer", "head", "d", "coordinate").values[:L, :H], dtype=np.float64)


def moving_layers(profile: np.ndarray) -> list[int]:
    """The layers whose profile differs between offsets."""
    return [layer for layer in range(profile.shape[0]) if np.ptp(profile[layer], axis=1).max() > 1e-12]


@pytest.mark.parametrize("name", NAMES)
def test_each_page_draws_the_stored_profiles_with_a_d_slider_exactly_for_a_rotary_model(families, pages, name):
    store, _ = families
    view, want = pages[name], stored(store, name)
    L, H = want.shape[:2]
    rotary = name in ROTARY
    if not rotary:
        np.testing.assert_array_equal(want, np.broadcast_to(want[:, :, :1], want.shape))  # one form at every d
        want = want[:, :, :1]
    meta = by_name(view, "profile_meta").data
    assert (meta["model"], meta["n_layers"], meta["n_heads"], meta["n_offsets"]) == (
        [name], [L], [H], [129 if rotary else 1])
    cube = unpack_profiles(by_name(view, "profile_cube").data["q"], L * H).reshape(want.shape)
    np.testing.assert_array_equal(cube, quantise(want))  # every offset the browser decodes
    heads = by_name(view, "heads").data
    np.testing.assert_allclose(np.stack([heads[c] for c in "abcd"], 1), want[:, :, 0].reshape(-1, 4),
                               atol=0.5 / 65534)  # the points drawn at d = 0
    slider = by_name(view, "d_slider")
    assert slider.visible == by_name(view, "play").visible == rotary
    assert by_name(view, "position_note").visible == (not rotary)
    if rotary:
        assert (slider.start, slider.end) == (0, 128)
    line = by_name(view, "model_line").text
    family = Store.open(str(store), "r").row(name).family
    assert f"<b>{name}</b> · {family} · {L} layer{'s' * (L > 1)} × {H} heads" in line


def test_the_slider_names_the_layers_it_does_not_move_as_the_config_says(families, pages):
    """SmolLM3's config marks layer 3 without rotary: the note beside the slider names it, and it is the one layer
    whose drawn profile is the same at every d; the other rotary models have no such layer and no note."""
    store, built = families
    config = built["smollm3"].config
    without = [layer for layer, rope in enumerate(config.no_rope_layers) if not rope]
    assert without == [3]
    for name in sorted(ROTARY):
        view = pages[name]
        shape = stored(store, name).shape
        cube = dequantise(unpack_profiles(by_name(view, "profile_cube").data["q"], shape[0] * shape[1])).reshape(shape)
        static = sorted(set(range(cube.shape[0])) - set(moving_layers(cube)))
        note = by_name(view, "static_layers_note")
        if name == "tiny-smollm3":
            assert static == without and note.visible
            assert "<b>layer 3</b> does not move with d: without rotary" in note.text
            assert "no rotary in layer 3" in by_name(view, "model_line").text
        else:
            assert static == [] and not note.visible and note.text == ""
    for name in sorted(set(NAMES) - ROTARY):
        assert not by_name(pages[name], "static_layers_note").visible  # no slider: its note says why


def test_the_info_line_names_the_qk_norm_the_rotary_bases_and_the_tower(families, pages):
    store, built = families
    qwen3 = built["qwen3"].model.layers[0].self_attn
    assert type(qwen3.q_norm).__name__ == "Qwen3RMSNorm" and qwen3.q_norm.weight.shape == (8,)  # per head (n = 8)
    lines = {n: by_name(pages[n], "model_line").text for n in NAMES}
    assert "QK-norm: rms per head" in lines["tiny-qwen3"]
    assert [n for n in NAMES if "QK-norm" in lines[n]] == ["tiny-qwen3"]
    bert = built["modernbert"].config  # global layers at one base, sliding ones at another
    bases = sorted({bert.rope_parameters[kind]["rope_theta"] for kind in bert.layer_types})
    assert len(bases) == 2
    assert f"rotary bases {bases[0]:g}, {bases[1]:g} by layer" in lines["tiny-modernbert"]
    assert [n for n in NAMES if "rotary bases" in lines[n]] == ["tiny-modernbert"]
    vision = built["clip/vision"].config.vision_config
    assert (f"<b>tiny-clip/vision</b> · clip · {vision.num_hidden_layers} layers × {vision.num_attention_heads} heads "
            f"· N = {vision.hidden_size}, n = {vision.hidden_size // vision.num_attention_heads} · learned absolute · "
            "vision tower ·") in lines["tiny-clip/vision"]
    assert "text tower" in lines["tiny-clip/text"] and "tower" not in lines["tiny-vit"]
    assert "with learned absolute positions" in by_name(pages["tiny-vit"], "position_note").text
    for n in NAMES:
        assert "scale" not in lines[n] and "soft-cap" not in lines[n]  # 1/sqrt(head_dim), no cap: not worth a word


def test_a_link_to_a_tower_serves_its_page_and_the_note_follows_the_model_shown(families):
    store, _ = families
    tower, without_rope, qk_norm = SERVED
    state = app.AppState()
    doc = Document()
    app.build(store, state, args={"model": tower}).server_doc(doc)
    assert state.model == tower

    def shown(name):
        return next(m for m in doc.roots[0].references() if m.name == name)

    assert f"<b>{tower}</b>" in shown("model_line").text and not shown("url_note").visible
    assert shown("profile_meta").data["model"] == [tower]
    state.model = without_rope
    assert shown("static_layers_note").visible and "layer 3" in shown("static_layers_note").text
    state.model = qk_norm
    assert not shown("static_layers_note").visible and shown("profile_meta").data["model"] == [qk_norm]
    assert rendered.same_structure(rendered.profiles(store, without_rope), rendered.profiles(store, qk_norm))


@pytest.mark.slow
def test_the_export_writes_each_tower_to_a_file_of_its_own_that_the_others_link_to(tmp_path_factory):
    _, out, paths = families_site(tmp_path_factory)  # export(out, store) of the families store
    paths = [Path(p) for p in paths]
    assert all(p.parent == out for p in paths)  # no folder made from a '/' in a name
    files = {p.name for p in paths}
    index = (out / "index.html").read_text()
    for name in NAMES:
        page = profile_page_name(name)
        assert "/" not in page and page in files and f'<a href="{page}">{name}</a>' in index
        text = (out / page).read_text()
        assert f"<title>Profiles of attention heads · {name}</title>" in text
        for other in NAMES:  # the model selector of every page: each model's page by its name
            assert f'["{profile_page_name(other)}","{other}"]' in text, (name, other)


def test_an_unusual_scale_and_a_soft_cap_are_named_and_a_model_stored_before_its_conventions_shows_none():
    """Gemma 2's scale 1/sqrt(query_pre_attn_scalar) and soft-cap 50 (as its registration records them, pipeline's
    test_store_conventions.py) are in its info line; a row without recorded conventions adds nothing."""
    from dashboard.profiles.page_texts import conventions_parts, model_line
    from pipeline.schema import ModelRow

    gemma2 = ModelRow("g2", 2, 4, 32, 8, "rope", family="gemma2", scale=16 ** -0.5,
                      scale_rule="1/sqrt(query_pre_attn_scalar)", softcap=50.0, layer_positional=("rope", "rope"),
                      layer_rope_theta=(10000.0, 10000.0), layer_rope_scaling=("", ""))
    assert conventions_parts(gemma2) == ["scale 1/sqrt(query_pre_attn_scalar) = 0.25", "soft-cap 50"]
    assert "rope · scale 1/sqrt(query_pre_attn_scalar) = 0.25 · soft-cap 50 · raw weights" in model_line(gemma2)
    older = ModelRow("old", 4, 4, 32, 8, "rope", family="smollm3", qk_norm="")
    assert not older.conventions_recorded and conventions_parts(older) == []


def test_a_t5_page_says_its_relative_position_bias_is_left_out(tmp_path):
    """T5's learned bias per relative position is added to each score and is no form of the two tokens: its page has
    no d slider, and the note beside it says the bias is left out, for each tower."""
    from tests.pipeline.families.cases import save
    from tests.pipeline.test_cli_profiles import cli

    case = CASES["t5/encoder"]
    folder = save(build(case), case, tmp_path / "tiny-t5")
    store = tmp_path / "s.zarr"
    assert cli("profiles", folder, "--store", store, "--quiet") == 0
    for tower in ("encoder", "decoder"):
        page = models_by_name(profiles_view(data.model_data(store, f"tiny-t5/{tower}"), None))
        (note,) = page["position_note"]
        assert note.visible and not page["d_slider"][0].visible
        assert "its learned bias per relative position is added to each score, not a form of the two tokens, and " \
               "left out" in note.text


def test_a_hybrid_page_names_its_layers_without_a_form_and_draws_no_heads_for_them(tmp_path):
    """LFM2's config makes layers 0 and 2 short convolutions (no softmax attention, no form): the note beside the d
    slider and the info line name them, the page draws no point for their heads, and the softmax layers' points are
    their stored profiles."""
    from tests.pipeline.families.cases import save
    from tests.pipeline.test_cli_profiles import cli

    case = CASES["lfm2"]
    model = build(case)
    formless = [layer for layer, kind in enumerate(model.config.layer_types) if kind == "conv"]
    assert formless == [0, 2]
    folder = save(model, case, tmp_path / "tiny-lfm2")
    store = tmp_path / "s.zarr"
    assert cli("profiles", folder, "--store", store, "--quiet") == 0
    page = models_by_name(profiles_view(data.model_data(store, "tiny-lfm2"), None))
    (note,) = page["static_layers_note"]
    assert note.visible and page["d_slider"][0].visible
    assert "<b>layers 0 and 2</b> are not softmax attention" in note.text and "the 2 softmax layers" in note.text
    assert "no form in layers 0 and 2 (not softmax attention)" in page["model_line"][0].text
    want = stored(store, "tiny-lfm2")
    L, H = want.shape[:2]
    (heads,) = page["heads"]
    points = np.stack([heads.data[c] for c in "abcd"], 1).reshape(L, H, 4)
    assert np.isnan(points[formless]).all()
    np.testing.assert_allclose(points[[1, 3]], want[[1, 3], :, 0], atol=0.5 / 65534)


def test_a_hybrid_without_rotary_names_its_layers_without_a_form_in_the_note_shown_instead_of_the_slider(tmp_path):
    """Jamba's attention layers have no positional encoding: no d slider, and the note shown instead names its Mamba
    layers (those its config does not make attention) as layers without a form."""
    from tests.pipeline.families.cases import save
    from tests.pipeline.test_cli_profiles import cli

    case = CASES["jamba"]
    model = build(case)
    formless = [layer for layer, kind in enumerate(model.config.layers_block_type) if kind == "mamba"]
    assert formless == [0, 2, 3]
    folder = save(model, case, tmp_path / "tiny-jamba")
    store = tmp_path / "s.zarr"
    assert cli("profiles", folder, "--store", store, "--quiet") == 0
    page = models_by_name(profiles_view(data.model_data(store, "tiny-jamba"), None))
    (note,) = page["position_note"]
    assert note.visible and not page["d_slider"][0].visible and not page["static_layers_note"][0].visible
    assert "this model has no positional encoding" in note.text
    assert "<b>layers 0, 2 and 3</b> are not softmax attention" in note.text and "the 2 softmax layers" in note.text
