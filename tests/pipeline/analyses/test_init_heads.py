"""The library-initialisation baseline equals transformers' own ``AutoModel.from_config`` under the seeding rule, for
every supported family, is reproducible by seed, layer by layer, and leaves the global torch generator alone."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pipeline.families import layer_qk
from pipeline.sources.init_heads import InitBaselineError, InitHeads, layer_seed
from tests.tiny_models import torch, transformers

# family -> (config dict, the attention module's name inside a layer)
TINY = {
    "gpt2": (dict(n_embd=24, n_head=4, n_layer=3, n_positions=32), "attn"),
    "opt": (dict(hidden_size=24, num_attention_heads=4, num_hidden_layers=3, ffn_dim=48, max_position_embeddings=32,
                 word_embed_proj_dim=24), "self_attn"),
    "bloom": (dict(hidden_size=24, n_head=4, n_layer=3), "self_attention"),
    "gpt_neox": (dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=3, intermediate_size=64,
                      rotary_pct=0.25, max_position_embeddings=64), "attention"),
    "mistral": (dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=12, num_hidden_layers=3,
                     intermediate_size=64, rope_theta=1000.0), "self_attn"),
    "llama": (dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=1, num_hidden_layers=3,
                   intermediate_size=64), "self_attn"),
    "qwen2": (dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=3,
                   intermediate_size=64), "self_attn"),
    "bert": (dict(hidden_size=24, num_attention_heads=4, num_hidden_layers=3, intermediate_size=48,
                  max_position_embeddings=32), "attention.self"),
}
VOCAB = 50


def config(family: str, **extra) -> dict:
    return {"model_type": family, "vocab_size": VOCAB} | TINY[family][0] | extra


class ParameterTensors:
    """A torch model's parameters, read like a checkpoint (for ``layer_qk``)."""

    def __init__(self, model):
        self.params = dict(model.named_parameters())

    def tensor_names(self):
        return list(self.params)

    def read(self, name):
        return self.params[name].detach().to(torch.float64).numpy()


def reseeding_from_config(monkeypatch, cfg: dict, seed: int, attention: str):
    """``AutoModel.from_config`` through transformers' own path (construction, post_init, its initialisation walk,
    tying), with the one change of the seeding rule: the global generator is reseeded with ``layer_seed(seed, l)``
    as the walk enters layer l's attention module (at the first module of it that the walk initialises: the walk
    takes children before parents, so the first leaf down its first children)."""
    kwargs = {k: v for k, v in cfg.items() if k != "model_type"}
    hf = transformers.AutoConfig.for_model(cfg["model_type"], **kwargs)
    with torch.device("meta"):
        model_cls = type(transformers.AutoModel.from_config(hf))
    # the class that defines the _init_weights this model and its sub-models (OPT's decoder is a model of its own)
    # resolve to
    cls = next(c for c in model_cls.__mro__ if "_init_weights" in vars(c))
    original = cls._init_weights
    pattern = re.compile(rf"(?:^|\.)(?:h|layers|layer)\.(\d+)\.{re.escape(attention)}$")
    entries: dict[int, int] = {}

    def init_weights(self, module):
        if not entries:
            for name, m in self.named_modules():
                if (found := pattern.search(name)) is not None:
                    while next(m.children(), None) is not None:
                        m = next(m.children())
                    entries[id(m)] = int(found.group(1))
            assert entries, "no attention module found"
        if id(module) in entries:
            torch.manual_seed(layer_seed(seed, entries[id(module)]))
        return original(self, module)

    monkeypatch.setattr(cls, "_init_weights", init_weights)
    torch.manual_seed(12345)  # whatever the stream, each attention module restarts it
    model = transformers.AutoModel.from_config(hf)
    monkeypatch.undo()
    return model


@pytest.mark.parametrize("family", list(TINY))
def test_equals_from_config_under_the_seeding_rule(monkeypatch, family):
    cfg, seed = config(family), 7
    heads = InitHeads(cfg, seed)  # made before the reference patches the class
    ours = {layer: heads.attention(layer) for layer in range(3)}
    qk = {layer: heads.layer(layer) for layer in range(3)}
    reference = reseeding_from_config(monkeypatch, cfg, seed, TINY[family][1])
    for layer in range(3):
        theirs = reference.get_submodule(heads.attention_path(layer))
        mine = dict(ours[layer].named_parameters())
        assert set(mine) == {name for name, _ in theirs.named_parameters()}
        for name, p in theirs.named_parameters():
            assert torch.equal(mine[name], p), f"layer {layer} {name}"
        want = layer_qk(ParameterTensors(reference), heads.layout, layer)
        np.testing.assert_array_equal(qk[layer].W_Q, want.W_Q)
        np.testing.assert_array_equal(qk[layer].W_K, want.W_K)
        np.testing.assert_array_equal(qk[layer].kv_of_head, want.kv_of_head)


def test_bfloat16_config_initialises_in_bfloat16(monkeypatch):
    cfg = config("mistral", torch_dtype="bfloat16")
    heads = InitHeads(cfg, 0)
    qk = heads.layer(1)
    assert qk.W_Q.dtype == np.float32
    as_bf16 = torch.from_numpy(qk.W_Q).to(torch.bfloat16).to(torch.float32).numpy()
    np.testing.assert_array_equal(qk.W_Q, as_bf16)  # bfloat16 values
    reference = reseeding_from_config(monkeypatch, cfg, 0, "self_attn")
    assert reference.dtype == torch.bfloat16
    want = layer_qk(ParameterTensors(reference), heads.layout, 1)
    np.testing.assert_array_equal(qk.W_Q, want.W_Q)


def test_reproducible_by_seed_and_layer_by_layer():
    cfg = config("gpt2")
    a, b = InitHeads(cfg, 3), InitHeads(cfg, 3)
    backwards = [b.layer(layer) for layer in (2, 1, 0)][::-1]
    for layer in range(3):
        np.testing.assert_array_equal(a.layer(layer).W_Q, backwards[layer].W_Q)
        np.testing.assert_array_equal(a.layer(layer).W_K, backwards[layer].W_K)
    assert not np.array_equal(InitHeads(cfg, 4).layer(0).W_Q, a.layer(0).W_Q)
    assert not np.array_equal(a.layer(1).W_Q, a.layer(0).W_Q)


def test_global_generator_untouched_and_the_configs_scale():
    before = torch.get_rng_state()
    qk = InitHeads(config("opt", hidden_size=256, num_attention_heads=4, ffn_dim=64, word_embed_proj_dim=256),
                   0).layer(0)
    assert torch.equal(before, torch.get_rng_state())
    # OPT initialises with standard deviation init_std = 0.02: 256 x 256 draws give it to about 0.3%
    assert np.std(qk.W_Q) == pytest.approx(0.02, rel=0.02) and abs(np.mean(qk.W_Q)) < 0.001


def test_bad_inputs_are_one_line_errors():
    with pytest.raises(InitBaselineError, match="non-negative"):
        InitHeads(config("gpt2"), -1)
    with pytest.raises(InitBaselineError, match="out of range"):
        InitHeads(config("gpt2"), 0).layer(3)
    with pytest.raises(ValueError, match="not supported"):
        InitHeads({"model_type": "mamba"}, 0)
