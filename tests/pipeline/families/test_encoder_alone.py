"""An encoder saved alone (T5EncoderModel, UMT5EncoderModel, ...): a checkpoint of one tower, the encoder.

Such a checkpoint names its tensors as the two-tower model's encoder does (``encoder.block.N``) and says what it is
in config.json's ``architectures``. It is profiled as a model of that one tower, stored as ``NAME/encoder``: the
same encoder saved from T5Model and from T5EncoderModel gives the same row, bit for bit, with and without
``--fold-ln``. ``test_forward.py`` proves its forms against the T5EncoderModel's own forward pass
(``cases.py``: ``t5-encoder_model/encoder``), ``test_cli.py`` its profiles through the command line, and
``tests/pipeline/test_check.py`` ``check`` on it.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from pipeline.families import ArchitectureError, layer_weights, layout_from_config, towers
from pipeline.registry.checkpoints import open_checkpoint
from pipeline.store import Store
from tests.pipeline.families.cases import CASES
from tests.pipeline.test_cli_profiles import cli, open_store, profile_by_definition
from tests.tiny_models import torch, transformers


def _encoder_alone(model, cls: str, folder) -> str:
    """``cls`` (an encoder-only class) holding ``model``'s encoder and shared embedding, saved to ``folder``."""
    alone = getattr(transformers, cls)(copy.deepcopy(model.config)).to(torch.float64)
    missing, unexpected = alone.load_state_dict(model.state_dict(), strict=False)
    assert not missing and all(k.startswith("decoder.") for k in unexpected)  # every weight of the encoder taken
    alone.save_pretrained(str(folder))
    return str(folder)


@pytest.mark.parametrize("name, cls", [("t5/encoder", "T5EncoderModel"), ("umt5/encoder", "UMT5EncoderModel")])
def test_an_encoder_alone_is_stored_as_the_two_tower_models_encoder(family_model, tmp_path, name, cls):
    model, both, _ = family_model(name)
    alone = _encoder_alone(model, cls, tmp_path / "alone")
    config = open_checkpoint(alone).config
    assert config["architectures"] == [cls] and towers(config) == ("encoder",)
    for fold in ((), ("--fold-ln",)):
        a, b = tmp_path / f"alone{len(fold)}.zarr", tmp_path / f"both{len(fold)}.zarr"
        assert cli("profiles", alone, "--store", a, "--name", "m", "--quiet", *fold) == 0
        assert cli("profiles", both, "--store", b, "--name", "m", "--quiet", *fold) == 0
        got, want = open_store(a), open_store(b)
        assert list(got.model.values) == ["m/encoder"] and list(want.model.values) == ["m/encoder", "m/decoder"]
        L = int(got.n_layers.values[0])  # the two-tower store is padded to its decoder's 3 layers
        np.testing.assert_array_equal(got.profile.values[0, :L], want.sel(model="m/encoder").profile.values[:L])
        np.testing.assert_array_equal(got.norm.values[0, :L], want.sel(model="m/encoder").norm.values[:L])
        row = Store.open(str(a), "r").row("m/encoder")
        assert row.conventions == Store.open(str(b), "r").row("m/encoder").conventions
        assert row.conventions.tower == "encoder" and row.positional == "relative bias"
        # the folded forms, by definition, from the weights test_forward.py proves against the T5EncoderModel
        ckpt = open_checkpoint(alone)
        layout = layout_from_config(ckpt.config, "encoder")
        m = got.sel(model="m/encoder")
        for layer in range(layout.n_layers):
            W_Q, W_K = layer_weights(ckpt, layout, layer, fold_ln=bool(fold))
            for h in range(layout.n_heads):
                p, norm = profile_by_definition(W_K[h].T @ W_Q[h])
                np.testing.assert_allclose(m.profile.values[layer, h, 64], p, rtol=0, atol=1e-9)
                np.testing.assert_allclose(m.norm.values[layer, h, 64], norm, rtol=1e-10)
    folded, plain = open_store(tmp_path / "alone1.zarr"), open_store(tmp_path / "alone0.zarr")
    assert np.abs(folded.norm.values[0, :L] - plain.norm.values[0, :L]).max() > 0.1  # the gains U(0.5, 2) fold in


def test_the_towers_a_checkpoint_holds_are_those_of_its_class():
    """``architectures`` decides: an encoder-only class (and a token classifier, which wraps one) holds the encoder
    alone, and asking it for its decoder is refused with that reason; T5ForConditionalGeneration, or a config that
    names no class, holds both towers."""
    for config_class, prefix in (("T5Config", "T5"), ("MT5Config", "MT5"), ("UMT5Config", "UMT5")):
        config = getattr(transformers, config_class)(**CASES["t5/encoder"].kw).to_dict()
        assert towers(config) == ("encoder", "decoder")
        assert towers(config | {"architectures": [f"{prefix}ForConditionalGeneration"]}) == ("encoder", "decoder")
        for cls in ("EncoderModel", "ForTokenClassification"):
            alone = config | {"architectures": [f"{prefix}{cls}"]}
            assert towers(alone) == ("encoder",)
            assert layout_from_config(alone, "encoder") == layout_from_config(config, "encoder")
            with pytest.raises(ArchitectureError, match=rf"this {config['model_type']} checkpoint \({prefix}{cls}\) "
                                                        "holds the encoder tower alone: it has no decoder tower"):
                layout_from_config(alone, "decoder")
            with pytest.raises(ArchitectureError, match="name one of them, not 'vision'"):
                layout_from_config(alone, "vision")


def test_a_token_classifier_reads_its_wrapped_encoder(tmp_path):
    """T5ForTokenClassification wraps a T5EncoderModel (``transformer.encoder.block.N``): the encoder tower's forms
    are its encoder's, read through the same suffixes."""
    case = CASES["t5-encoder_model/encoder"]
    config = transformers.T5Config(**case.kw | dict(num_labels=3))
    torch.manual_seed(0)
    model = transformers.T5ForTokenClassification(config).to(torch.float64)
    model.save_pretrained(str(tmp_path / "tok"))
    ckpt = open_checkpoint(str(tmp_path / "tok"))
    assert ckpt.config["architectures"] == ["T5ForTokenClassification"] and towers(ckpt.config) == ("encoder",)
    layout = layout_from_config(ckpt.config, "encoder")
    H, n = layout.n_heads, layout.d_head
    for layer in range(layout.n_layers):
        attn = model.transformer.encoder.block[layer].layer[0].SelfAttention
        W_Q, W_K = layer_weights(ckpt, layout, layer)
        np.testing.assert_array_equal(W_Q, attn.q.weight.detach().numpy().reshape(H, n, -1))
        np.testing.assert_array_equal(W_K, attn.k.weight.detach().numpy().reshape(H, n, -1))
