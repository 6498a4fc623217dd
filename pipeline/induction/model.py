"""The decoder: transformers' Llama (the family table's ``llama`` entry), rotary positions, eager attention.

Why Llama: the plainest rotary decoder of the table (separate q_proj / k_proj, rotate-half rotary, RMS norms).

Why ``intermediate_size`` 0 by default: no family's config has a switch that drops the MLP, but a Llama MLP of
intermediate size 0 has empty gate, up and down projections, and its down projection sums over an empty
dimension, so the MLP adds exactly 0 to the residual stream for every input (a test checks it). The model is then
attention-only, the setting in which induction heads were described (Olsson et al. 2022), and its checkpoint is
still a plain Llama checkpoint that ``from_pretrained`` loads. ``--mlp-size`` keeps an MLP of that size instead.

The vocabulary has no special tokens, so the config names none (no bos, eos or pad id).
"""

from __future__ import annotations

import warnings

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from .settings import Settings

ATTENTION = "eager"  # the attention whose probabilities output_attentions returns (the head scores read them)


def config_of(s: Settings) -> LlamaConfig:
    return LlamaConfig(vocab_size=s.vocab, hidden_size=s.hidden, intermediate_size=s.mlp_size,
                       num_hidden_layers=s.layers, num_attention_heads=s.heads, num_key_value_heads=s.heads,
                       head_dim=s.head_dim, max_position_embeddings=s.positions, tie_word_embeddings=False,
                       bos_token_id=None, eos_token_id=None, pad_token_id=None, attn_implementation=ATTENTION)


def new_model(s: Settings, gen: torch.Generator) -> LlamaForCausalLM:
    """The model at its init: transformers' own init (normal, std ``initializer_range``) drawn from the global
    generator, which is set from ``gen`` first; the caller keeps the global generator's state (``fork_rng``)."""
    torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=gen)))
    with warnings.catch_warnings():
        # torch warns that initialising the empty MLP weights of mlp_size 0 does nothing, which is the intent
        warnings.filterwarnings("ignore", message="Initializing zero-element tensors is a no-op")
        return LlamaForCausalLM(config_of(s))
