"""Scaled rotary frequencies of the layouts against transformers' own (``ROPE_INIT_FUNCTIONS``), for the YaRN variants
the forward-pass cases leave out: ``truncate`` either way, a null ``factor``, DeepSeek's ``mscale`` pair, and the
truncate a per-type config cannot set (transformers reads it from the top of ``rope_parameters``)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.families import inverse_frequencies, layout_from_config
from tests.tiny_models import transformers

_YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 8.0, "original_max_position_embeddings": 512,
         "beta_fast": 32.0, "beta_slow": 1.0}


@pytest.mark.parametrize("change", [{}, {"truncate": False}, {"factor": None}, {"attention_factor": 0.7},
                                    {"mscale": 0.707, "mscale_all_dim": 1.0, "beta_fast": 16.0, "beta_slow": 2.0}])
def test_yarn_frequencies_and_attention_factor_are_transformers(change):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    kw = dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=1, head_dim=64,
              vocab_size=64, max_position_embeddings=4096, rope_parameters=_YARN | change)
    config = transformers.Qwen3Config(**kw)
    want_inv, want_factor = ROPE_INIT_FUNCTIONS["yarn"](config)
    layout = layout_from_config(config.to_dict())
    np.testing.assert_allclose(inverse_frequencies(layout), want_inv.double().numpy(), rtol=1e-6)
    assert layout.score_scale(0) == pytest.approx(layout.scale * want_factor ** 2, rel=1e-12)
    assert dict(layout.rope_scaling)["factor"] == (8.0 if "factor" not in change else 4096 / 512)
    assert layout.conventions().layer_rope_scaling[0].startswith("yarn factor=")


def test_a_per_type_yarn_is_truncated_whatever_its_entry_says():
    """transformers (5.25) reads ``truncate`` from the top of ``rope_parameters``: a per-type config's own is not read,
    so its layers truncate; the layout follows the forward pass."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    full = _YARN | {"truncate": False}
    config = transformers.Olmo3Config(hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
                                      num_hidden_layers=4, vocab_size=64, max_position_embeddings=4096,
                                      rope_parameters={"full_attention": full,
                                                       "sliding_attention": {"rope_type": "default",
                                                                             "rope_theta": 10000.0}})
    want, _ = ROPE_INIT_FUNCTIONS["yarn"](config, layer_type="full_attention")
    layout = layout_from_config(config.to_dict())
    assert dict(layout.positional_of(3).scaling)["truncate"] is True
    np.testing.assert_allclose(inverse_frequencies(layout, 3), want.double().numpy(), rtol=1e-6)
    untruncated = layout_from_config(transformers.Qwen3Config(
        hidden_size=256, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=1, head_dim=64,
        vocab_size=64, max_position_embeddings=4096, rope_parameters=full).to_dict())
    assert not np.allclose(inverse_frequencies(untruncated), want.double().numpy(), rtol=1e-6)
