"""Every family through the command line: ``python -m pipeline profiles DIR --store S`` stores the profiles of the
forms whose scores ``test_forward.py`` proves equal to the model's forward pass, one model per tower for CLIP and
Whisper (``NAME/tower``), with each model's conventions (its tower, scale and every layer's positional kind).

The expected values are computed independently of the run path: for every layer, head and d = 0..128 the
dense N x N form L(d) = W_K^T R(d) W_Q (W from ``layer_weights`` of the saved files, R from ``rotations`` of
that layer: both proved against the forward pass) and its profile from the definition (eigvalsh of the
symmetric part; ``test_cli_profiles.profile_by_definition``). The run path computes the same numbers by the
low-rank route of ``pipeline.profile`` one layer at a time, with each layer's own rotations. Whether a layer moves
with d is read off those expected profiles, and the stored positional kind of each layer must say the same.
"""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.families import layer_weights, layout_from_config, rotations
from pipeline.registry.checkpoints import open_checkpoint
from pipeline.store import Store
from tests.pipeline.families.cases import CASES
from tests.pipeline.test_cli_profiles import D, cli, open_store, profile_by_definition

# One case per single-tower family, its richest variant (the others differ in what test_forward.py proves).
SINGLE = ["qwen3", "qwen3_moe", "mixtral", "gemma", "gemma2", "gemma3_text", "phi-qk_layernorm", "phi3-bf16-sharded",
          "gptj", "falcon-new_decoder_architecture", "stablelm-qk_layernorm", "olmo2", "starcoder2",
          "gpt_bigcode-multi_query", "cohere-qk_norm", "granite", "smollm3", "olmoe", "olmo3-yarn", "glm", "glm4",
          "exaone4", "ernie4_5", "ernie4_5_moe", "seed_oss", "apertus", "helium", "arcee", "granitemoe", "nemotron",
          "gpt_oss", "llama4_text", "ministral3", "deepseek_v2", "deepseek_v2-no_q_lora",
          "deepseek_v3", "hunyuan_v1_dense", "roberta", "xlm-roberta", "electra-projected", "distilbert",
          "modernbert", "vit", "dinov2", "dinov2_with_registers", "wav2vec2", "hubert", "lfm2", "jamba", "qwen3_next",
          "minimax", "falcon_h1", "gpt_neox-default_rotary_pct", "qwen3_next-default_partial_rotary_factor"]
# The checkpoints of several towers (cases named ``family/tower``): each goes through the command line whole.
TOWERED = sorted({name.split("/")[0] for name, case in CASES.items() if case.tower})


def expected(ckpt, layout) -> tuple[np.ndarray, np.ndarray]:
    """(layers, H, D, 4) profiles and (layers, H, D) norms from the dense forms; NaN on a hybrid's layers without a
    form."""
    L, H = layout.n_layers, layout.n_heads
    profs, norms = np.zeros((L, H, D, 4)), np.zeros((L, H, D))
    for layer in range(L):
        if layout.positional_of(layer).kind == "no form":
            profs[layer], norms[layer] = np.nan, np.nan
            continue
        W_Q, W_K = layer_weights(ckpt, layout, layer)
        R = rotations(layout, np.arange(D), layer)
        for h in range(H):
            for d in range(D if R is not None else 1):
                form = W_K[h].T @ (W_Q[h] if R is None else R[d] @ W_Q[h])
                profs[layer, h, d], norms[layer, h, d] = profile_by_definition(form)
            if R is None:
                profs[layer, h, 1:], norms[layer, h, 1:] = profs[layer, h, 0], norms[layer, h, 0]
    return profs, norms


def moving_layers(profiles: np.ndarray) -> list[bool]:
    """Per layer of (layers, H, D, 4) profiles: whether any head's profile changes with d."""
    return [bool(np.abs(p[:, 0] - p[:, 64]).max() > 1e-3) for p in profiles]


def check_stored(m, ckpt, layout, name: str) -> list[bool]:
    """The stored model ``m`` (a Dataset of one model) against the dense forms of ``layout`` read from ``ckpt``: its
    shape, its profiles and norms, and its conventions (tower, scale, every layer's kind and base). Returns which
    layers move with d."""
    L, H = int(m.n_layers), int(m.n_heads)
    assert (L, H, int(m.n_kv_heads), int(m.d_model), int(m.d_head)) == (
        layout.n_layers, layout.n_heads, layout.n_kv_heads, layout.d_model, layout.d_head)
    assert bool(m.complete) and m.family.item() == layout.family and m.positional.item() == layout.positional
    want_p, want_n = expected(ckpt, layout)
    np.testing.assert_allclose(m.profile.values[:L, :H], want_p, rtol=0, atol=1e-9)
    np.testing.assert_allclose(m.norm.values[:L, :H], want_n, rtol=1e-10)
    kinds = [str(k) for k in m.layer_positional.values[:L]]
    # a layer without rotary is one form at every d; a rotary one moves with d: the stored kind says which
    assert moving_layers(want_p) == [k == "rope" for k in kinds], f"{name}: {kinds}"
    assert kinds == [layout.positional_of(layer).kind for layer in range(L)]
    np.testing.assert_array_equal(m.layer_rope_theta.values[:L], [
        layout.positional_of(layer).rope_theta if k == "rope" else 0.0 for layer, k in enumerate(kinds)])
    assert (m.tower.item(), m.scale_rule.item(), m.qk_norm.item()) == (layout.tower, layout.spec.scale, layout.qk_norm)
    assert float(m.scale) == layout.scale and float(m.softcap) == layout.softcap  # (proved by test_forward.py)
    return moving_layers(want_p)


@pytest.mark.parametrize("name", SINGLE)
def test_stored_profiles_equal_the_dense_forms(family_model, tmp_path, name):
    _, folder, _ = family_model(name)
    store = tmp_path / "s.zarr"
    assert cli("profiles", folder, "--store", store, "--quiet") == 0
    stored = f"tiny-{name}"
    ckpt = open_checkpoint(folder)
    layout = layout_from_config(ckpt.config)
    moving = check_stored(open_store(store).sel(model=stored), ckpt, layout, name)
    row = Store.open(str(store), "r").row(stored)  # what the dashboard reads: the layers a d slider does not move
    formless = tuple(layer for layer in range(layout.n_layers) if layout.positional_of(layer).kind == "no form")
    assert row.static_layers == tuple(layer for layer, moves in enumerate(moving)
                                      if not moves and layer not in formless)
    assert row.formless_layers == formless and row.complete  # a hybrid's layers without a form, NaN and written
    if formless:  # every stored value of such a layer NaN, its statistics too; the others' finite
        m = open_store(store).sel(model=stored)
        H = int(m.n_heads)
        stats = m.head_statistics.values[:, :H]
        assert np.isnan(stats[list(formless)]).all() and np.isnan(m.profile.values[list(formless), :H]).all()
        assert np.isfinite(np.delete(stats, formless, axis=0)).all()
        assert Store.open(str(store), "r").verify(mark=False) == []  # NaN layers read back equal to their checksums
    assert row.conventions == layout.conventions() and row.layer_kinds == row.conventions.layer_positional


def test_the_layers_without_rotary_are_the_ones_the_row_names(family_model, tmp_path):
    """SmolLM3's fourth layer has no rotary: its profile is one point at every d, and the stored row says so; Gemma 3's
    sliding and global layers move with their own bases, recorded per layer."""
    for name, static, thetas in (("smollm3", (3,), None), ("gemma3_text", (), [100.0, 1000.0, 100.0])):
        _, folder, _ = family_model(name)
        store = tmp_path / f"{name}.zarr"
        assert cli("profiles", folder, "--store", store, "--quiet") == 0
        row = Store.open(str(store), "r").row(f"tiny-{name}")
        profile = open_store(store).profile.sel(model=f"tiny-{name}").values[:row.n_layers, :row.n_heads]
        assert row.static_layers == static == tuple(i for i, moves in enumerate(moving_layers(profile)) if not moves)
        assert row.positional == "rope" and row.conventions_recorded
        if thetas is not None:
            assert list(row.layer_rope_theta) == thetas
            assert row.layer_rope_scaling == ("", "linear factor=4", "")  # the case's scaling on the global layers


@pytest.mark.parametrize("checkpoint", TOWERED)
def test_every_tower_of_a_checkpoint_is_a_model_of_the_store(family_model, tmp_path, checkpoint):
    """``profiles CLIP_DIR`` stores both towers, ``profiles WHISPER_DIR`` the encoder's and the decoder's
    self-attention, each as ``NAME/tower`` with its own shape, against the dense forms of that tower's weights; both
    share the one command that computes them, and a rerun skips both."""
    towers = [name.split("/")[1] for name in CASES if name.startswith(checkpoint + "/")]
    _, folder, _ = family_model(f"{checkpoint}/{towers[0]}")  # the whole checkpoint (every tower's weights)
    store = tmp_path / "s.zarr"
    named = ("--name", "my-clip") if checkpoint == "clip" else ()
    assert cli("profiles", folder, "--store", store, "--quiet", *named) == 0
    base = "my-clip" if named else f"tiny-{checkpoint}-{towers[0]}"
    ds = open_store(store)
    assert list(ds.model.values) == [f"{base}/{t}" for t in towers]
    ckpt = open_checkpoint(folder)
    for tower in towers:
        m = ds.sel(model=f"{base}/{tower}")
        check_stored(m, ckpt, layout_from_config(ckpt.config, tower), f"{checkpoint}/{tower}")
        assert m.command.item() == f"python -m pipeline profiles {folder}" + (" --name my-clip" if named else "")
    if checkpoint == "clip":  # towers of different shapes, each in its own row
        assert [int(ds.sel(model=f"{base}/{t}").n_layers) for t in towers] == [2, 3]
        assert [int(ds.sel(model=f"{base}/{t}").d_model) for t in towers] == [32, 24]
    before = {t: ds.sel(model=f"{base}/{t}").profile.values.copy() for t in towers}
    assert cli("profiles", folder, "--store", store, "--quiet", *named) == 0  # complete: skipped
    for tower in towers:
        np.testing.assert_array_equal(open_store(store).sel(model=f"{base}/{tower}").profile.values, before[tower])
    from pipeline.__main__ import main

    assert main(["verify", "--store", str(store), f"{base}/{towers[-1]}"]) == 0


def test_a_worker_profiles_the_tower_its_task_names(family_model, tmp_path):
    """The tasks of a tower carry it: a worker (``run_task``, opening the checkpoint itself) profiles that tower's
    layer, as the in-process run does."""
    from pipeline import run as run_module

    _, folder, _ = family_model("whisper/encoder")
    inline, pooled = tmp_path / "inline.zarr", tmp_path / "pooled.zarr"
    assert cli("profiles", folder, "--store", inline, "--quiet", "--name", "w") == 0
    plans = run_module.plan_checkpoint(folder, run_module.open_store(str(pooled)), name="w")
    assert [(name, plan.layout.tower) for name, plan in plans] == [("w/encoder", "encoder"), ("w/decoder", "decoder")]
    for _name, plan in plans:
        run_module.begin_model(run_module.open_store(str(pooled)), plan)
        for task in reversed(plan.tasks(str(pooled))):
            assert task.tower == plan.layout.tower
            run_module.run_task(task)
    a, b = open_store(inline), open_store(pooled)
    np.testing.assert_array_equal(a.profile.values, b.profile.values)
    np.testing.assert_array_equal(a.norm.values, b.norm.values)


def test_every_family_goes_through_the_command_line():
    families = {CASES[name].config for name in SINGLE}
    towers = {case.config for case in CASES.values() if case.tower}
    assert families | towers == {case.config for case in CASES.values()}, "a family without a command-line case"
