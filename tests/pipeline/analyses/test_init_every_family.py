"""The library-initialisation baseline of every family case (``tests/pipeline/families/cases.py``, each tower of a
model of several): its shapes, and its heads equal to those of the case's model as transformers initialises it under
the seeding rule, saved by ``save_pretrained`` and read back as a checkpoint.

The reference is made without the code under test: transformers builds and initialises the case's model class (with
its head: the heads are the same under the seeding rule, which restarts the stream at each attention module), the global
generator reseeded with ``layer_seed(seed, l)`` as its initialisation walk enters layer l's attention module, found
by the case's own regex (the parent of the module whose input is x, as the forward-pass tests name it); the model is
saved with ``save_pretrained`` and its layers read by the checkpoint route (``open_checkpoint``, ``layer_qk``), which
``tests/pipeline/families/test_forward.py`` proves against each family's forward pass. Latent attention (DeepSeek),
fused projections, QK-norms, hybrids (their layers without a form are no baseline layer: NaN in the analyses'
HeadData), modules transformers renames from their checkpoints' names (ViT, DINOv2) and multi-tower models are all
among the cases.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from pipeline.families import layer_qk, layout_from_config
from pipeline.registry.checkpoints import open_checkpoint
from pipeline.sources.init_heads import InitBaselineError, InitHeads, layer_seed
from tests.pipeline.families.cases import CASES, Case
from tests.tiny_models import torch, transformers

SEED = 5


def config_json(case: Case) -> dict:
    """The config.json ``save_pretrained`` writes for the case's model (transformers' own serialisation, infinite
    floats as ``{"__float__": "Infinity"}``), with the case's dropped keys left out."""
    config = json.loads(getattr(transformers, case.config)(**case.kw).to_json_string())
    config["architectures"] = [case.model]
    for holder in (config, config.get("rope_parameters") or {}):
        for key in case.drop:
            holder.pop(key, None)
    return config


def reseeding_model(monkeypatch, case: Case):
    """The case's model class (``case.model``) built from the case's config object through transformers' own
    initialisation, the global generator reseeded with ``layer_seed(SEED, l)`` as the walk (children before parents)
    enters layer l's attention module of the case's tower: at the first module of it the walk initialises, its first
    leaf down its first children. Returns the model and the number of attention modules reseeded."""
    hf = getattr(transformers, case.config)(**case.kw)
    model_class = getattr(transformers, case.model)
    with torch.device("meta"):
        skeleton = model_class(hf)
    entries = {}  # the name of the first module the walk initialises in an attention module -> its layer
    for name, _ in skeleton.named_modules():
        if (hit := re.search(case.proj + "$", name)) is not None and name.startswith(case.submodel):
            first = name.rsplit(".", 1)[0]
            module = skeleton.get_submodule(first)
            while (child := next(module.named_children(), None)) is not None:
                first, module = f"{first}.{child[0]}", child[1]
            entries[first] = int(hit.group(1))
    assert entries, f"no module matches {case.proj!r}"
    original = transformers.PreTrainedModel._initialize_weights
    # per model walking: module -> its name in that model (a sub-model, such as an image-text model's text model,
    # walks with its own names, the end of the names in the whole model; the entries are the case's tower's alone, so
    # no other tower's module ends the same way)
    names: dict[int, dict[int, str]] = {}

    def initialize(self, module, *args, **kwargs):
        own = names.setdefault(id(self), {id(m): n for n, m in self.named_modules()})
        relative = own.get(id(module), "")
        layers = {layer for full, layer in entries.items() if relative and (full == relative or
                                                                            full.endswith("." + relative))}
        assert len(layers) <= 1, (relative, layers)
        if layers:
            torch.manual_seed(layer_seed(SEED, layers.pop()))
        return original(self, module, *args, **kwargs)

    monkeypatch.setattr(transformers.PreTrainedModel, "_initialize_weights", initialize)
    torch.manual_seed(12345)  # whatever the stream, each attention module restarts it
    model = model_class(hf)
    monkeypatch.undo()
    return model, len(entries)


@pytest.mark.parametrize("name", list(CASES))
def test_every_family_initialises_like_from_config(monkeypatch, tmp_path, name):
    case = CASES[name]
    config = config_json(case)
    heads = InitHeads(config, SEED, case.tower)
    layout = heads.layout
    H, kv, n, N = layout.n_heads, layout.n_kv_heads, layout.d_head, layout.d_model
    formed = [layer for layer in range(layout.n_layers) if layout.positional_of(layer).kind != "no form"]
    ours = {layer: heads.layer(layer) for layer in formed}  # made before the reference patches transformers
    for layer in set(range(layout.n_layers)) - set(formed):
        with pytest.raises(InitBaselineError, match="not softmax attention"):
            heads.layer(layer)

    model, attention_modules = reseeding_model(monkeypatch, case)
    model.save_pretrained(str(tmp_path))
    ckpt = open_checkpoint(str(tmp_path))
    saved = layout_from_config(ckpt.config, case.tower)
    assert (saved.n_layers, saved.n_heads, saved.n_kv_heads, saved.d_model, saved.d_head) == (
        layout.n_layers, H, kv, N, n)
    assert attention_modules >= len(formed)
    for layer in formed:
        qk, want = ours[layer], layer_qk(ckpt, saved, layer)
        assert qk.W_Q.shape == (H, n, N) and qk.W_K.shape == (kv, n, N), layer
        np.testing.assert_array_equal(qk.kv_of_head, np.arange(H) // (H // kv))
        np.testing.assert_array_equal(qk.W_Q, want.W_Q, err_msg=f"layer {layer} W_Q")
        np.testing.assert_array_equal(qk.W_K, want.W_K, err_msg=f"layer {layer} W_K")
        assert np.std(qk.W_Q) > 0 and np.std(qk.W_K) > 0  # drawn, not a constant


@pytest.mark.parametrize("name", ["jamba", "deepseek_v3"])
def test_analyses_head_data_of_every_layer(name):
    """The report's baseline (``pipeline.analyses.baselines.head_data``): a hybrid's layers without a form hold
    NaN, the others the profile of the layer's heads at d = 0 (a + b + c + d = 1, c, d >= 0)."""
    from pipeline.analyses.baselines import head_data

    case = CASES[name]
    heads = InitHeads(config_json(case), SEED, case.tower)
    layout = heads.layout
    data = head_data(heads, name)
    assert data.profile.shape == (layout.n_layers * layout.n_heads, 4)
    formless = np.array([layout.positional_of(int(layer)).kind == "no form" for layer in data.layer])
    assert formless.any() == (name == "jamba")
    assert np.isnan(data.profile[formless]).all() and np.isnan(data.statistics[formless]).all()
    formed = data.profile[~formless]
    np.testing.assert_allclose(formed.sum(axis=1), 1.0, rtol=1e-9)
    assert (formed[:, 2:] >= 0).all() and np.isfinite(data.statistics[~formless]).any()


@pytest.mark.parametrize("name", ["t5/decoder", "jamba"])
def test_the_baseline_command_stores_each_tower_and_a_hybrids_layers(monkeypatch, tmp_path, name):
    """``python -m pipeline baseline CONFIG``: a model of several towers gets one baseline per tower, stored as
    NAME/tower~init-seedS, the baseline of NAME/tower; a hybrid's layers without a form are stored NaN. Each row
    records its model's conventions (the tower, every layer's positional kind), as the model's own row does. Each
    head's stored profile at d = 0 is that of W_K^T W_Q from the reference (the case's model initialised by
    transformers under the seeding rule, read back as a checkpoint), by the naive profile."""
    from pipeline.__main__ import main
    from pipeline.profile import naive_profiles
    from pipeline.store import Store

    case = CASES[name]
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config_json(case)))
    store = str(tmp_path / "s.zarr")
    assert main(["baseline", str(folder / "config.json"), "--seed", str(SEED), "--store", store]) in (0, None)
    rows = {row.name: row for row in Store.open(store, mode="r").models()}
    want_names = {f"model/{t}~init-seed{SEED}" for t in ("encoder", "decoder")} if case.tower else \
        {f"model~init-seed{SEED}"}
    assert set(rows) == want_names
    stored_name = f"model/{case.tower}~init-seed{SEED}" if case.tower else f"model~init-seed{SEED}"
    assert rows[stored_name].baseline_of == stored_name.split("~")[0]

    model, _ = reseeding_model(monkeypatch, case)
    model.save_pretrained(str(tmp_path / "reference"))
    ckpt = open_checkpoint(str(tmp_path / "reference"))
    layout = layout_from_config(ckpt.config, case.tower)
    assert rows[stored_name].n_layers == layout.n_layers
    assert rows[stored_name].conventions == layout.conventions()
    assert rows[stored_name].tower == (case.tower or "")
    assert ("no form" in rows[stored_name].layer_positional) == (name == "jamba")
    profile = Store.open(store, mode="r").dataset("profiles").sel(model=stored_name).profile.values
    for layer in range(layout.n_layers):
        if layout.positional_of(layer).kind == "no form":
            assert np.isnan(profile[layer, :layout.n_heads, 0]).all()
            continue
        qk = layer_qk(ckpt, layout, layer)
        for h in range(layout.n_heads):
            L = np.asarray(qk.W_K[qk.kv_of_head[h]], np.float64).T @ np.asarray(qk.W_Q[h], np.float64)
            np.testing.assert_allclose(profile[layer, h, 0], naive_profiles(L)[0], rtol=1e-9, atol=1e-12)


def test_report_computes_the_init_baseline_of_a_stored_latent_model(tmp_path, capsys):
    """``report MODEL --baseline init`` without a stored baseline computes it from the config of the model's
    checkpoint (DeepSeek's latent sizes are no shape's): the baseline of that config and seed, as ``head_data`` of
    its ``InitHeads`` gives it."""
    from pipeline.__main__ import main
    from pipeline.analyses.baselines import head_data
    from tests.pipeline.families.cases import build, save

    case = CASES["deepseek_v3"]
    folder = save(build(case), case, tmp_path / "ds3")
    store = str(tmp_path / "s.zarr")
    assert main(["profiles", folder, "--store", store]) in (0, None)
    capsys.readouterr()
    assert main(["report", "ds3", "--store", store, "--baseline", "init", "--seed", "3", "--json"]) in (0, None)
    baseline = json.loads(capsys.readouterr().out)["baseline"]
    want = head_data(InitHeads(json.loads((tmp_path / "ds3" / "config.json").read_text()), 3), "want")
    assert baseline["heads"] == want.heads == 8
    assert baseline["pairing"]["baseline_median"] == pytest.approx(float(np.median(want.stat("pairing"))), rel=1e-12)


@pytest.mark.parametrize("name", ["olmo3", "deepseek_v3"])
def test_a_key_weight_the_initialisation_leaves_unwritten_is_refused(monkeypatch, name):
    """A key projection that ``_init_weights`` left unwritten (NaN, as ``InitHeads.attention`` fills a module
    first) refuses the layer, naming W_K; a latent layer's heads are formed for that check one at a time."""
    case = CASES[name]
    heads = InitHeads(config_json(case), SEED, case.tower)
    assert getattr(heads.layer(0).W_K, "heads_on_demand", False) == (name == "deepseek_v3")
    original = InitHeads.attention

    def partly_written(self, layer):
        module = original(self, layer)
        key = next(p for n, p in module.named_parameters() if n.split(".")[-2] in ("k_proj", "kv_b_proj"))
        with torch.no_grad():
            key.fill_(float("nan"))
        return module

    monkeypatch.setattr(InitHeads, "attention", partly_written)
    with pytest.raises(InitBaselineError, match="left part of layer 0's W_K unwritten"):
        heads.layer(0)
