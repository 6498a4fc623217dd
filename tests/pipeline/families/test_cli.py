"""Every single-tower family through the command line: ``python -m pipeline profiles DIR --store S`` stores the
profiles of the forms whose scores ``test_forward.py`` proves equal to the model's forward pass.

The expected values are computed independently of the run path: for every layer, head and d = 0..128 the
dense N x N form L(d) = W_K^T R(d) W_Q (W from ``layer_weights`` of the saved files, R from ``rotations`` of
that layer: both proved against the forward pass) and its profile from the definition (eigvalsh of the
symmetric part; ``test_cli_profiles.profile_by_definition``). The run path computes the same numbers by the
low-rank route of ``pipeline.profile`` one layer at a time, with each layer's own rotations.
"""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.architectures import layer_weights, layout_from_config, rotations
from pipeline.checkpoints import open_checkpoint
from tests.pipeline.families.cases import CASES
from tests.pipeline.test_cli_profiles import D, cli, open_store, profile_by_definition

# One case per single-tower family, its richest variant (the others differ in what test_forward.py proves).
SINGLE = ["qwen3", "qwen3_moe", "mixtral", "gemma", "gemma2", "gemma3_text", "phi-qk_layernorm", "phi3-bf16-sharded",
          "gptj", "falcon-new_decoder_architecture", "stablelm-qk_layernorm", "olmo2", "starcoder2",
          "gpt_bigcode-multi_query", "cohere-qk_norm", "granite", "smollm3", "roberta", "xlm-roberta",
          "electra-projected", "distilbert", "modernbert", "vit"]


def expected(ckpt, layout) -> tuple[np.ndarray, np.ndarray]:
    """(layers, H, D, 4) profiles and (layers, H, D) norms from the dense forms."""
    L, H = layout.n_layers, layout.n_heads
    profs, norms = np.zeros((L, H, D, 4)), np.zeros((L, H, D))
    for layer in range(L):
        W_Q, W_K = layer_weights(ckpt, layout, layer)
        R = rotations(layout, np.arange(D), layer)
        for h in range(H):
            for d in range(D if R is not None else 1):
                form = W_K[h].T @ (W_Q[h] if R is None else R[d] @ W_Q[h])
                profs[layer, h, d], norms[layer, h, d] = profile_by_definition(form)
            if R is None:
                profs[layer, h, 1:], norms[layer, h, 1:] = profs[layer, h, 0], norms[layer, h, 0]
    return profs, norms


@pytest.mark.parametrize("name", SINGLE)
def test_stored_profiles_equal_the_dense_forms(family_model, tmp_path, name):
    _, folder, _ = family_model(name)
    store = tmp_path / "s.zarr"
    assert cli("profiles", folder, "--store", store, "--quiet") == 0
    stored = f"tiny-{name}"
    m = open_store(store).sel(model=stored)
    ckpt = open_checkpoint(folder)
    layout = layout_from_config(ckpt.config)
    L, H = int(m.n_layers), int(m.n_heads)
    assert (L, H, int(m.n_kv_heads), int(m.d_head)) == (layout.n_layers, layout.n_heads, layout.n_kv_heads,
                                                         layout.d_head)
    assert bool(m.complete) and m.family.item() == layout.family and m.positional.item() == layout.positional
    want_p, want_n = expected(ckpt, layout)
    np.testing.assert_allclose(m.profile.values[:L, :H], want_p, rtol=0, atol=1e-9)
    np.testing.assert_allclose(m.norm.values[:L, :H], want_n, rtol=1e-10)
    for layer in range(L):  # a layer without rotary is one form at every d; a rotary one moves with d
        moves = np.abs(want_p[layer, :, 0] - want_p[layer, :, 64]).max() > 1e-3
        assert moves == (layout.positional_of(layer).kind == "rope"), f"{name} layer {layer}"


def test_every_single_tower_family_goes_through_the_command_line():
    families = {CASES[name].config for name in SINGLE}
    towers = {case.config for case in CASES.values() if case.tower}
    assert families | towers == {case.config for case in CASES.values()}, "a family without a command-line case"


def test_a_checkpoint_of_several_towers_is_one_line_that_names_them(family_model, tmp_path, capsys):
    _, folder, _ = family_model("clip/text")
    capsys.readouterr()  # what building the model printed
    store = tmp_path / "s.zarr"
    assert cli("profiles", folder, "--store", store, "--quiet") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "clip is a model of 2 towers (text, vision)" in err
    assert not store.exists()
