"""One tiny random model per family variant, and a probe of its forward pass.

Every case names a transformers config class with tiny sizes (built offline, no Hub), the model class, and what
the test reads from the live model: the module whose input is the attention input x (a regex whose group is
the layer), the QK-norm modules, and the norm whose output is x (what ``--fold-ln`` folds). These names were
read off transformers' modelling files; the probe checks each against the forward pass (the norm's output *is*
x), so a wrong name fails rather than passes.

Models are float64 with eager attention, every bias zero (so the pre-softmax score is exactly the bilinear form,
divided by the QK-norm's divisors), norm gains drawn from U(0.5, 2) and matrices from N(0, 1 / fan_in).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.tiny_models import torch, transformers

T = 9  # tokens per sequence (never a head count, so a norm's head axis is told from its token axis)
VOCAB = 64


@dataclass(frozen=True)
class Case:
    config: str
    kw: dict
    model: str
    proj: str  # regex (search, anchored at the end) of the module whose input is x; group 1 = layer
    ln: str = ""  # the module whose output is layer l's x: a template with {l}, {p} = l - 1 ("" = none)
    ln_first: str | None = None  # layer 0's, where it differs ("" = none)
    q_norm: str = ""  # regexes of the QK-norm modules (group 1 = layer)
    k_norm: str = ""
    tower: str | None = None
    submodel: str = ""  # the attribute (dotted path) of the tower's own module, run alone
    inputs: str = "ids"  # ids, pixels, features (mel), waveform, decoder
    causal: bool = True
    other: str = ""  # regex of other attention projections whose softmax is not this tower's (cross-attention)
    rtol: float = 1e-5
    save: dict = field(default_factory=dict)  # dtype / max_shard_size of save_pretrained
    alibi: str = ""  # the modelling module whose build_alibi_tensor gives the ALiBi bias (Falcon: over sqrt(n))
    sinks: str = ""  # regex of the attention modules (group 1 = layer) whose ``sinks`` join the softmax (gpt-oss)
    # a positional temperature on the queries: "llama4" (on the layers without rotary), "ministral3" (on every layer)
    temperature: str = ""
    relative_bias: bool = False  # T5's learned bias per relative position is added to the scores
    key_at_zero: bool = False  # the form is the scores' with the key at position 0 alone (Hunyuan's gains after R)
    # keys left out of the saved config.json (at its top and in its rope_parameters), so that transformers' config
    # class fills its default when it reads the file, as the model built here took it
    drop: tuple[str, ...] = ()


_GQA = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2, intermediate_size=48,
            vocab_size=VOCAB, max_position_embeddings=64)
_ATTN = r"layers\.(\d+)\.self_attn\."
_DEC = dict(proj=_ATTN + "q_proj", ln="layers.{l}.input_layernorm")
_QK = dict(q_norm=_ATTN + "q_norm", k_norm=_ATTN + "k_norm")
_BERT = dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=48, vocab_size=VOCAB,
             max_position_embeddings=32)
_BERT_PROBE = dict(proj=r"layer\.(\d+)\.attention\.self\.query", ln="layer.{p}.output.LayerNorm",
                   ln_first="embeddings.LayerNorm", causal=False)
_WHISPER = dict(d_model=32, encoder_attention_heads=4, decoder_attention_heads=4, encoder_layers=2, decoder_layers=2,
                encoder_ffn_dim=48, decoder_ffn_dim=48, num_mel_bins=8, max_source_positions=T,
                max_target_positions=32, vocab_size=VOCAB, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                decoder_start_token_id=3)
_CLIP = dict(text_config=dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=48,
                              vocab_size=VOCAB, max_position_embeddings=32, pad_token_id=0, bos_token_id=1,
                              eos_token_id=2),
             vision_config=dict(hidden_size=24, num_attention_heads=2, num_hidden_layers=3, intermediate_size=32,
                                image_size=12, patch_size=4), projection_dim=8)

_IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)  # special tokens inside the tiny vocabulary
_SIGLIP = dict(text_config=dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=48,
                                vocab_size=VOCAB, max_position_embeddings=T, projection_size=32) | _IDS,
               vision_config=dict(hidden_size=24, num_attention_heads=2, num_hidden_layers=3, intermediate_size=32,
                                  image_size=12, patch_size=4))
_DINOV2 = dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=48, image_size=12,
               patch_size=4)
_DINOV2_PROBE = dict(inputs="pixels", proj=r"layer\.(\d+)\.attention\.q_proj", ln="encoder.layer.{l}.norm1",
                     causal=False, rtol=1e-10)
# two convolutions (kernels 4, 2; strides 4, 2) make 9 frames of 72 samples
_AUDIO = dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=48, conv_dim=(16, 16),
              conv_stride=(4, 2), conv_kernel=(4, 2), num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2,
              vocab_size=VOCAB)
_AUDIO_PROBE = dict(inputs="waveform", proj=r"layers\.(\d+)\.attention\.q_proj", causal=False, rtol=1e-10)
_POST_NORM_AUDIO = dict(ln="encoder.layers.{p}.final_layer_norm", ln_first="encoder.layer_norm")
_BART = dict(d_model=32, encoder_attention_heads=4, decoder_attention_heads=4, encoder_layers=2, decoder_layers=3,
             encoder_ffn_dim=48, decoder_ffn_dim=48, vocab_size=VOCAB, max_position_embeddings=32,
             decoder_start_token_id=3) | _IDS

_T5 = dict(d_model=32, num_heads=4, d_kv=6, num_layers=2, num_decoder_layers=3, d_ff=48, vocab_size=VOCAB,
           relative_attention_num_buckets=8, relative_attention_max_distance=16, decoder_start_token_id=3) | _IDS


def _t5_probe(tower: str) -> dict:
    return dict(tower=tower, submodel=tower, inputs="ids" if tower == "encoder" else "decoder",
                proj=r"block\.(\d+)\.layer\.0\.SelfAttention\.q", ln="block.{l}.layer.0.layer_norm",
                causal=tower == "decoder", other=r"EncDecAttention\.q" if tower == "decoder" else "",
                relative_bias=True, rtol=1e-6)  # T5's norm takes its variance in float32: the folded check


def _bart_probe(tower: str, pre_norm: bool) -> dict:
    ln = (dict(ln="layers.{l}.self_attn_layer_norm") if pre_norm
          else dict(ln="layers.{p}.final_layer_norm", ln_first="layernorm_embedding"))
    return dict(tower=tower, submodel=tower, inputs="ids" if tower == "encoder" else "decoder",
                proj=r"layers\.(\d+)\.self_attn\.q_proj", causal=tower == "decoder",
                other=r"encoder_attn\.q_proj" if tower == "decoder" else "", rtol=1e-10, **ln)
# Llama 4: layer 3 without rotary (no_rope_layers), the rest with the weightless QK norm; floor_scale 4 so that the
# temperature of the layer without rotary varies over the 9 positions (1 up to position 2, then 1 + 0.5 log 2, ...)
_LLAMA4_TEXT = _GQA | _IDS | dict(head_dim=8, num_hidden_layers=4, intermediate_size_mlp=48, num_local_experts=2,
                                  num_experts_per_tok=1, floor_scale=4, attn_scale=0.5)
_LLAMA4_PROBE = dict(**_DEC, q_norm=_ATTN + "qk_norm", k_norm=_ATTN + "qk_norm", temperature="llama4")
# multimodal rotary: the head's 4 frequencies in sections of 1, 1 and 2 for time, height and width
_QWEN2_VL_TEXT = _GQA | _IDS | dict(rope_parameters={"rope_type": "default", "rope_theta": 1000.0,
                                                     "mrope_section": [1, 1, 2]})
_GEMMA3_TEXT = _GQA | dict(head_dim=8, num_hidden_layers=3, query_pre_attn_scalar=16, sliding_window=32,
                           sliding_window_pattern=2, rope_parameters={
                               "sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                               "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1000.0}})

_GQA8 = _GQA | _IDS | dict(head_dim=8)
# DeepSeek V2 / V3: latent ranks 12 (queries) and 10 (keys), heads of 6 non-rotary and 4 rotary dimensions, values of
# 5; YaRN with mscale = mscale_all_dim (its attention factor 1, as DeepSeek ships), so mscale^2 enters the scale; layer
# 0 dense, layer 1 MoE
_MLA = _IDS | dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=4, num_hidden_layers=2,
                   intermediate_size=48, moe_intermediate_size=16, n_routed_experts=4, num_experts_per_tok=2,
                   n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1, vocab_size=VOCAB,
                   max_position_embeddings=256, q_lora_rank=12, kv_lora_rank=10, qk_nope_head_dim=6,
                   qk_rope_head_dim=4, v_head_dim=5, rope_parameters={
                       "rope_type": "yarn", "rope_theta": 1000.0, "factor": 4.0, "original_max_position_embeddings": 64,
                       "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 0.707, "mscale_all_dim": 0.707})
_MLA_PROBE = dict(proj=r"layers\.(\d+)\.self_attn\.q_(?:a_)?proj", ln="layers.{l}.input_layernorm",
                  q_norm=_ATTN + "q_a_layernorm", k_norm=_ATTN + "kv_a_layernorm")
_NO_LN = dict(proj=_ATTN + "q_proj")  # post-norm decoders: no norm's output enters the attention
# Qwen3-Next: layers 1 and 3 gated attention (full_attention_interval 2), 0 and 2 gated DeltaNet; a quarter of each
# head rotary (Qwen3NextConfig's default partial_rotary_factor); the MoE's experts every layer
_QWEN3_NEXT = _GQA8 | dict(num_hidden_layers=4, full_attention_interval=2, linear_conv_kernel_dim=2,
                           linear_key_head_dim=4, linear_value_head_dim=4, linear_num_key_heads=2,
                           linear_num_value_heads=4, moe_intermediate_size=16, shared_expert_intermediate_size=16,
                           num_experts=4, num_experts_per_tok=2)

CASES: dict[str, Case] = {
    "qwen3": Case("Qwen3Config", _GQA | dict(head_dim=8), "Qwen3ForCausalLM", **_DEC, **_QK),
    "qwen3_moe": Case("Qwen3MoeConfig", _GQA | dict(moe_intermediate_size=16, num_experts=4, num_experts_per_tok=2),
                      "Qwen3MoeForCausalLM", **_DEC, **_QK),
    "mixtral": Case("MixtralConfig", _GQA | dict(num_local_experts=4, rope_theta=1000.0), "MixtralForCausalLM", **_DEC),
    "gemma": Case("GemmaConfig", _GQA | dict(head_dim=12), "GemmaForCausalLM", **_DEC),
    "gemma2": Case("Gemma2Config", _GQA | dict(head_dim=8, query_pre_attn_scalar=16, attn_logit_softcapping=50.0,
                                              sliding_window=32), "Gemma2ForCausalLM", **_DEC),
    "gemma3_text": Case("Gemma3TextConfig", _GEMMA3_TEXT, "Gemma3ForCausalLM", **_DEC, **_QK),
    "phi": Case("PhiConfig", _GQA | dict(num_key_value_heads=4), "PhiForCausalLM", **_DEC),
    "phi-qk_layernorm": Case("PhiConfig", _GQA | dict(num_key_value_heads=4, qk_layernorm=True), "PhiForCausalLM",
                             **_DEC, q_norm=_ATTN + "q_layernorm", k_norm=_ATTN + "k_layernorm"),
    "phi3": Case("Phi3Config", _GQA | dict(pad_token_id=0, bos_token_id=1, eos_token_id=2), "Phi3ForCausalLM",
                 proj=_ATTN + "qkv_proj", ln="layers.{l}.input_layernorm"),
    "phi3-bf16-sharded": Case("Phi3Config", _GQA | dict(pad_token_id=0, bos_token_id=1, eos_token_id=2),
                              "Phi3ForCausalLM", proj=_ATTN + "qkv_proj", ln="layers.{l}.input_layernorm",
                              save=dict(dtype=torch.bfloat16, max_shard_size="8KB")),
    "gptj": Case("GPTJConfig", dict(n_embd=32, n_head=4, n_layer=2, rotary_dim=4, vocab_size=VOCAB, n_positions=64),
                 "GPTJForCausalLM", proj=r"h\.(\d+)\.attn\.q_proj", ln="h.{l}.ln_1"),
    "falcon-multi_query": Case("FalconConfig", dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
                                                    vocab_size=VOCAB, multi_query=True, new_decoder_architecture=False),
                               "FalconForCausalLM", proj=r"h\.(\d+)\.self_attention\.query_key_value",
                               ln="h.{l}.input_layernorm"),
    "falcon-new_decoder_architecture": Case(
        "FalconConfig", dict(hidden_size=32, num_attention_heads=4, num_kv_heads=2, num_hidden_layers=2,
                             vocab_size=VOCAB, new_decoder_architecture=True),
        "FalconForCausalLM", proj=r"h\.(\d+)\.self_attention\.query_key_value", ln="h.{l}.ln_attn",
        save=dict(max_shard_size="8KB")),
    "falcon-per_head": Case("FalconConfig", dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
                                                 vocab_size=VOCAB, multi_query=False, parallel_attn=False),
                            "FalconForCausalLM", proj=r"h\.(\d+)\.self_attention\.query_key_value",
                            ln="h.{l}.input_layernorm"),
    "falcon-alibi": Case("FalconConfig", dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
                                              vocab_size=VOCAB, multi_query=False, parallel_attn=False, alibi=True),
                         "FalconForCausalLM", proj=r"h\.(\d+)\.self_attention\.query_key_value",
                         ln="h.{l}.input_layernorm", alibi="falcon", rtol=1e-10),
    "stablelm": Case("StableLmConfig", _GQA, "StableLmForCausalLM", **_DEC),
    "stablelm-qk_layernorm": Case("StableLmConfig", _GQA | dict(qk_layernorm=True), "StableLmForCausalLM", **_DEC,
                                  q_norm=_ATTN + "q_layernorm", k_norm=_ATTN + "k_layernorm"),
    "olmo2": Case("Olmo2Config", _GQA, "Olmo2ForCausalLM", proj=_ATTN + "q_proj", **_QK),
    "starcoder2": Case("Starcoder2Config", _GQA, "Starcoder2ForCausalLM", **_DEC),
    "gpt_bigcode-multi_query": Case("GPTBigCodeConfig", dict(n_embd=32, n_head=4, n_layer=2, vocab_size=VOCAB,
                                                             n_positions=32), "GPTBigCodeForCausalLM",
                                    proj=r"h\.(\d+)\.attn\.c_attn", ln="h.{l}.ln_1", rtol=1e-10),
    "gpt_bigcode-per_head": Case("GPTBigCodeConfig", dict(n_embd=32, n_head=4, n_layer=2, vocab_size=VOCAB,
                                                          n_positions=32, multi_query=False), "GPTBigCodeForCausalLM",
                                 proj=r"h\.(\d+)\.attn\.c_attn", ln="h.{l}.ln_1", rtol=1e-10),
    "cohere": Case("CohereConfig", _GQA, "CohereForCausalLM", **_DEC),
    "cohere-qk_norm": Case("CohereConfig", _GQA | dict(use_qk_norm=True), "CohereForCausalLM", **_DEC, **_QK),
    "granite": Case("GraniteConfig", _GQA | dict(attention_multiplier=0.3), "GraniteForCausalLM", **_DEC),
    "smollm3": Case("SmolLM3Config", _GQA | dict(num_hidden_layers=4, pad_token_id=0, bos_token_id=1,
                                                 eos_token_id=2), "SmolLM3ForCausalLM", **_DEC),  # layer 3: no rotary
    "olmoe": Case("OlmoeConfig", _GQA | _IDS | dict(num_experts=4, num_experts_per_tok=2), "OlmoeForCausalLM",
                  **_DEC, **_QK),
    # layers 0-2 sliding, 3 full attention (Olmo3Config's default pattern), each kind with its own rotary
    "olmo3": Case("Olmo3Config", _GQA | _IDS | dict(num_hidden_layers=4, sliding_window=32, rope_parameters={
        "sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
        "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1000.0}}), "Olmo3ForCausalLM",
        **_NO_LN, **_QK),
    # YaRN on the full-attention layer (OLMo 3's long-context checkpoints), its attention factor on cos and sin
    "olmo3-yarn": Case("Olmo3Config", _GQA | _IDS | dict(num_hidden_layers=4, sliding_window=32,
                                                          max_position_embeddings=256, rope_parameters={
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "attention_factor": 1.5,
                           "original_max_position_embeddings": 64, "beta_fast": 32.0, "beta_slow": 1.0}}),
        "Olmo3ForCausalLM", **_NO_LN, **_QK),
    "glm": Case("GlmConfig", _GQA8, "GlmForCausalLM", **_DEC),  # interleaved rotary on half of each head
    "glm4": Case("Glm4Config", _GQA8 | dict(partial_rotary_factor=0.75), "Glm4ForCausalLM", **_DEC),
    # layers 0 and 2 sliding with rotary, layer 1 global without (NoPE)
    "exaone4": Case("Exaone4Config", _GQA8 | dict(num_hidden_layers=3, sliding_window=32, sliding_window_pattern=2),
                    "Exaone4ForCausalLM", **_NO_LN, **_QK),
    # no sliding window (EXAONE 4.0 1.2B): every layer rotates, global or not
    "exaone4-no_window": Case("Exaone4Config", _GQA8 | dict(sliding_window=None, layer_types=["full_attention"] * 2),
                              "Exaone4ForCausalLM", **_NO_LN, **_QK),
    "ernie4_5": Case("Ernie4_5Config", _GQA8, "Ernie4_5ForCausalLM", **_DEC),
    "ernie4_5_moe": Case("Ernie4_5_MoeConfig", _GQA8 | dict(moe_intermediate_size=16, moe_num_experts=4, moe_k=2,
                                                            moe_num_shared_experts=1),
                         "Ernie4_5_MoeForCausalLM", **_DEC),
    "seed_oss": Case("SeedOssConfig", _GQA8, "SeedOssForCausalLM", **_DEC),
    # Llama 3 scaling with two of the four frequencies blended (wavelengths 20 and 63 between 64 / 4 and 64 / 1)
    "apertus": Case("ApertusConfig", _GQA8 | dict(max_position_embeddings=256, rope_parameters={
        "rope_type": "llama3", "rope_theta": 100.0, "factor": 8.0, "original_max_position_embeddings": 64,
        "low_freq_factor": 1.0, "high_freq_factor": 4.0}), "ApertusForCausalLM", proj=_ATTN + "q_proj",
        ln="layers.{l}.attention_layernorm", **_QK),
    "helium": Case("HeliumConfig", _GQA8, "HeliumForCausalLM", **_DEC),
    "arcee": Case("ArceeConfig", _GQA | _IDS, "ArceeForCausalLM", **_DEC),
    "granitemoe": Case("GraniteMoeConfig", _GQA | _IDS | dict(attention_multiplier=0.3, num_local_experts=4,
                                                            num_experts_per_tok=2), "GraniteMoeForCausalLM", **_DEC),
    "nemotron": Case("NemotronConfig", _GQA8, "NemotronForCausalLM", **_DEC),  # rotary on half of each head
    "llama4_text": Case("Llama4TextConfig", _LLAMA4_TEXT, "Llama4ForCausalLM", **_LLAMA4_PROBE),
    # attention sinks; sliding and full-attention layers alternate; YaRN without truncation, as gpt-oss ships
    "gpt_oss": Case("GptOssConfig", _GQA8 | dict(num_local_experts=4, num_experts_per_tok=2, sliding_window=32,
                                                 max_position_embeddings=256, rope_parameters={
                                                     "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                                     "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                                                     "original_max_position_embeddings": 64}),
                    "GptOssForCausalLM", **_DEC, sinks=r"layers\.(\d+)\.self_attn"),
    # YaRN from an original context of 4 tokens, so that the query temperature 1 + 0.5 log(1 + floor(i / 4)) varies over
    # the 9 positions (1, then 1 + 0.5 log 2 from position 4, 1 + 0.5 log 3 at position 8)
    "ministral3": Case("Ministral3Config", _GQA8 | dict(rope_parameters={
        "rope_type": "yarn", "rope_theta": 1000.0, "factor": 4.0, "original_max_position_embeddings": 4,
        "beta_fast": 32.0, "beta_slow": 1.0, "llama_4_scaling_beta": 0.5}), "Ministral3ForCausalLM", **_DEC,
        temperature="ministral3"),
    "deepseek_v2": Case("DeepseekV2Config", _MLA, "DeepseekV2ForCausalLM", **_MLA_PROBE),
    # DeepSeek-V2-Lite's queries: q_proj, no latent (q_lora_rank null)
    "deepseek_v2-no_q_lora": Case("DeepseekV2Config", _MLA | dict(q_lora_rank=None), "DeepseekV2ForCausalLM",
                                  **_MLA_PROBE | dict(q_norm="")),
    "deepseek_v3": Case("DeepseekV3Config", _MLA, "DeepseekV3ForCausalLM", **_MLA_PROBE),
    "deepseek_v3-rotate_half": Case("DeepseekV3Config", _MLA | dict(rope_interleave=False), "DeepseekV3ForCausalLM",
                                    **_MLA_PROBE),
    # hybrids: the layers of softmax attention alone run a softmax, and alone have a form
    # LFM2: layers 1 and 3 attention with QK-norm, 0 and 2 short convolutions
    "lfm2": Case("Lfm2Config", _GQA | _IDS | dict(num_hidden_layers=4, full_attn_idxs=[1, 3]), "Lfm2ForCausalLM",
                 proj=_ATTN + "q_proj", ln="layers.{l}.operator_norm", q_norm=_ATTN + "q_layernorm",
                 k_norm=_ATTN + "k_layernorm"),
    # Jamba: attention in layers 1 and 4 (period 3, offset 1), Mamba in the others; no positional encoding
    "jamba": Case("JambaConfig", _GQA | _IDS | dict(num_hidden_layers=5, attn_layer_period=3, attn_layer_offset=1,
                                                    expert_layer_period=2, expert_layer_offset=1, num_experts=2,
                                                    mamba_d_state=4, mamba_expand=2),
                  "JambaForCausalLM", **_DEC),
    "qwen3_next": Case("Qwen3NextConfig", _QWEN3_NEXT, "Qwen3NextForCausalLM", **_DEC, **_QK),
    # MiniMax: layers 0 and 2 softmax attention, 1 and 3 lightning attention (MiniMaxConfig's alternation)
    "minimax": Case("MiniMaxConfig", _GQA8 | dict(num_hidden_layers=4, num_local_experts=2, block_size=4),
                    "MiniMaxForCausalLM", **_DEC),
    # Falcon-H1: attention beside Mamba in every layer, the keys times key_multiplier 0.3; attention_in_multiplier 1,
    # so that the pre-norm's output is the attention's input (what --fold-ln's check compares)
    "falcon_h1": Case("FalconH1Config", _GQA8 | dict(key_multiplier=0.3, attention_in_multiplier=1.0,
                                                     mamba_d_ssm=16, mamba_n_heads=4, mamba_d_head=4, mamba_d_state=4,
                                                     mamba_n_groups=1, mamba_d_conv=2, mamba_chunk_size=4),
                      "FalconH1ForCausalLM", **_DEC),
    # NTK-alpha rotary (rope type dynamic with an alpha, a fixed base), gains after the rotation
    "hunyuan_v1_dense": Case("HunYuanDenseV1Config", _GQA8 | dict(rope_parameters={
        "rope_type": "dynamic", "rope_theta": 1000.0, "alpha": 10.0, "factor": 1.0}), "HunYuanDenseV1ForCausalLM",
        **_DEC, q_norm=_ATTN + "query_layernorm", k_norm=_ATTN + "key_layernorm", key_at_zero=True),
    # config.json without the keys of the rotary fraction: GPTNeoXConfig's default 0.25 (two of each head's 8
    # dimensions rotate), and Qwen3NextConfig's 0.25, as transformers reads such a file
    "gpt_neox-default_rotary_pct": Case("GPTNeoXConfig", dict(hidden_size=32, num_attention_heads=4,
                                                              num_hidden_layers=2, intermediate_size=48,
                                                              vocab_size=VOCAB, max_position_embeddings=64),
                                        "GPTNeoXForCausalLM", proj=r"layers\.(\d+)\.attention\.query_key_value",
                                        ln="layers.{l}.input_layernorm",
                                        drop=("rotary_pct", "partial_rotary_factor")),
    "qwen3_next-default_partial_rotary_factor": Case("Qwen3NextConfig", _QWEN3_NEXT, "Qwen3NextForCausalLM", **_DEC,
                                                     **_QK, drop=("partial_rotary_factor",)),
    "roberta": Case("RobertaConfig", _BERT | dict(pad_token_id=1), "RobertaModel", **_BERT_PROBE, rtol=1e-10),
    "xlm-roberta": Case("XLMRobertaConfig", _BERT | dict(pad_token_id=1), "XLMRobertaModel", **_BERT_PROBE,
                        rtol=1e-10),
    "electra-projected": Case("ElectraConfig", _BERT | dict(embedding_size=16), "ElectraModel",
                              **_BERT_PROBE | dict(ln_first=""), rtol=1e-10),
    "distilbert": Case("DistilBertConfig", dict(dim=32, n_heads=4, n_layers=2, hidden_dim=48, vocab_size=VOCAB,
                                                max_position_embeddings=32), "DistilBertModel",
                       proj=r"layer\.(\d+)\.attention\.q_lin", ln="transformer.layer.{p}.output_layer_norm",
                       ln_first="embeddings.LayerNorm", causal=False, rtol=1e-10),
    "modernbert": Case("ModernBertConfig", dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=3,
                                                intermediate_size=48, vocab_size=VOCAB, global_attn_every_n_layers=2,
                                                global_rope_theta=1000.0, local_rope_theta=100.0, pad_token_id=0,
                                                bos_token_id=1, eos_token_id=2, cls_token_id=3, sep_token_id=4),
                       "ModernBertModel", proj=r"layers\.(\d+)\.attn\.Wqkv", ln="layers.{l}.attn_norm",
                       ln_first="embeddings.norm", causal=False),
    "vit": Case("ViTConfig", dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=48,
                                  image_size=12, patch_size=4), "ViTModel", inputs="pixels",
                proj=r"layers\.(\d+)\.attention\.q_proj", ln="layers.{l}.layernorm_before",
                causal=False, rtol=1e-10),
    "clip/text": Case("CLIPConfig", _CLIP, "CLIPModel", tower="text", submodel="text_model",
                      proj=r"layers\.(\d+)\.self_attn\.q_proj", ln="encoder.layers.{l}.layer_norm1", rtol=1e-10),
    "clip/vision": Case("CLIPConfig", _CLIP, "CLIPModel", tower="vision", submodel="vision_model", inputs="pixels",
                        proj=r"layers\.(\d+)\.self_attn\.q_proj", ln="encoder.layers.{l}.layer_norm1", causal=False,
                        rtol=1e-10),
    "gemma3/text": Case("Gemma3Config", dict(text_config=_GEMMA3_TEXT, mm_tokens_per_image=4, vision_config=dict(
        hidden_size=16, num_attention_heads=2, num_hidden_layers=1, intermediate_size=24, image_size=16, patch_size=4)),
        "Gemma3ForConditionalGeneration", tower="text", submodel="model.language_model", **_DEC, **_QK),
    "llama4/text": Case("Llama4Config", dict(text_config=_LLAMA4_TEXT, vision_config=dict(
        hidden_size=16, num_attention_heads=2, num_hidden_layers=1, intermediate_size=24, image_size=16, patch_size=4,
        vision_output_dim=16, projector_input_dim=16, projector_output_dim=16)), "Llama4ForConditionalGeneration",
        tower="text", submodel="language_model.model", **_LLAMA4_PROBE),
    # the text towers of Qwen2-VL and Qwen2.5-VL, run on text tokens alone (their three rotary position ids equal)
    "qwen2_vl/text": Case("Qwen2VLConfig", dict(text_config=_QWEN2_VL_TEXT, vision_config=dict(
        depth=1, embed_dim=16, hidden_size=32, num_heads=2, patch_size=4, spatial_merge_size=1, temporal_patch_size=1)),
        "Qwen2VLForConditionalGeneration", tower="text", submodel="model.language_model", **_DEC),
    "qwen2_5_vl/text": Case("Qwen2_5_VLConfig", dict(text_config=_QWEN2_VL_TEXT, vision_config=dict(
        depth=1, hidden_size=16, intermediate_size=24, num_heads=2, out_hidden_size=32, patch_size=4,
        spatial_merge_size=1, temporal_patch_size=1, fullatt_block_indexes=[0], window_size=8)),
        "Qwen2_5_VLForConditionalGeneration", tower="text", submodel="model.language_model", **_DEC),
    # Mistral 3's text tower: a Mistral model of its own (text_config's model_type)
    "mistral3/text": Case("Mistral3Config", dict(text_config=_GQA | _IDS | dict(model_type="mistral", head_dim=8),
                                                 vision_config=dict(model_type="pixtral", hidden_size=16,
                                                                    intermediate_size=24, num_hidden_layers=1,
                                                                    num_attention_heads=2, head_dim=8, image_size=16,
                                                                    patch_size=4)),
                          "Mistral3ForConditionalGeneration", tower="text", submodel="model.language_model", **_DEC),
    # Ministral 3's released checkpoints: Mistral 3's image-text model around a ministral3 text model
    "mistral3_ministral3/text": Case("Mistral3Config", dict(
        text_config=_GQA8 | dict(model_type="ministral3", rope_parameters={
            "rope_type": "yarn", "rope_theta": 1000.0, "factor": 4.0, "original_max_position_embeddings": 4,
            "beta_fast": 32.0, "beta_slow": 1.0, "llama_4_scaling_beta": 0.5}),
        vision_config=dict(model_type="pixtral", hidden_size=16, intermediate_size=24, num_hidden_layers=1,
                           num_attention_heads=2, head_dim=8, image_size=16, patch_size=4)),
        "Mistral3ForConditionalGeneration", tower="text", submodel="model.language_model", **_DEC,
        temperature="ministral3"),
    "dinov2": Case("Dinov2Config", _DINOV2, "Dinov2Model", **_DINOV2_PROBE),
    "dinov2_with_registers": Case("Dinov2WithRegistersConfig", _DINOV2 | dict(num_register_tokens=2),
                                  "Dinov2WithRegistersModel", **_DINOV2_PROBE),
    "wav2vec2": Case("Wav2Vec2Config", _AUDIO, "Wav2Vec2Model", **_AUDIO_PROBE, **_POST_NORM_AUDIO),
    "wav2vec2-stable_layer_norm": Case("Wav2Vec2Config", _AUDIO | dict(do_stable_layer_norm=True), "Wav2Vec2Model",
                                       **_AUDIO_PROBE, ln="encoder.layers.{l}.layer_norm"),
    "hubert": Case("HubertConfig", _AUDIO, "HubertModel", **_AUDIO_PROBE, **_POST_NORM_AUDIO),
    "siglip/text": Case("SiglipConfig", _SIGLIP, "SiglipModel", tower="text", submodel="text_model", causal=False,
                        proj=r"layers\.(\d+)\.self_attn\.q_proj", ln="encoder.layers.{l}.layer_norm1", rtol=1e-10),
    "siglip/vision": Case("SiglipConfig", _SIGLIP, "SiglipModel", tower="vision", submodel="vision_model",
                          inputs="pixels", proj=r"layers\.(\d+)\.self_attn\.q_proj",
                          ln="encoder.layers.{l}.layer_norm1", causal=False, rtol=1e-10),
    "t5/encoder": Case("T5Config", _T5, "T5Model", **_t5_probe("encoder")),
    "t5/decoder": Case("T5Config", _T5, "T5Model", **_t5_probe("decoder")),
    "mt5/encoder": Case("MT5Config", _T5, "MT5Model", **_t5_probe("encoder")),
    "mt5/decoder": Case("MT5Config", _T5, "MT5Model", **_t5_probe("decoder")),
    "umt5/encoder": Case("UMT5Config", _T5, "UMT5Model", **_t5_probe("encoder")),
    "umt5/decoder": Case("UMT5Config", _T5, "UMT5Model", **_t5_probe("decoder")),
    # an encoder saved alone (config.json's architectures: T5EncoderModel): a checkpoint of the encoder tower alone
    "t5-encoder_model/encoder": Case("T5Config", _T5, "T5EncoderModel", **_t5_probe("encoder")),
    "umt5-encoder_model/encoder": Case("UMT5Config", _T5, "UMT5EncoderModel", **_t5_probe("encoder")),
    "bart/encoder": Case("BartConfig", _BART, "BartModel", **_bart_probe("encoder", False)),
    "bart/decoder": Case("BartConfig", _BART, "BartModel", **_bart_probe("decoder", False)),
    "mbart/encoder": Case("MBartConfig", _BART, "MBartModel", **_bart_probe("encoder", True)),
    "mbart/decoder": Case("MBartConfig", _BART, "MBartModel", **_bart_probe("decoder", True)),
    "whisper/encoder": Case("WhisperConfig", _WHISPER, "WhisperModel", tower="encoder", submodel="encoder",
                            inputs="features", proj=r"layers\.(\d+)\.self_attn\.q_proj",
                            ln="layers.{l}.self_attn_layer_norm", causal=False, rtol=1e-10),
    "whisper/decoder": Case("WhisperConfig", _WHISPER, "WhisperModel", tower="decoder", submodel="decoder",
                            inputs="decoder", proj=r"layers\.(\d+)\.self_attn\.q_proj",
                            ln="layers.{l}.self_attn_layer_norm", other=r"encoder_attn\.q_proj", rtol=1e-10),
}


def build(case: Case, seed: int = 0):
    """The case's model: eval mode, eager attention, float64, biases zero, gains U(0.5, 2), matrices N(0, 1/fan_in)."""
    config = getattr(transformers, case.config)(**case.kw)
    for c in (config, getattr(config, "text_config", None), getattr(config, "vision_config", None)):
        if c is not None:
            c._attn_implementation = "eager"
            c._experts_implementation = "eager"  # MoE: the grouped matmul kernels take no float64
    torch.manual_seed(seed)
    model = getattr(transformers, case.model)(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 0:  # a scalar (CLIP's logit scale): not attention
                continue
            if name.endswith("bias"):
                p.zero_()
            elif p.ndim == 1 or "norm" in name.lower():
                p.uniform_(0.5, 2.0)
            else:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[-1]))
    with warnings.catch_warnings():  # Llama 4's vision tower keeps a complex rotary buffer, cast to real here: that
        warnings.filterwarnings("ignore", "Casting complex values to real")  # tower is never run, its text tower is
        model = model.to(torch.float64)
    if (dtype := case.save.get("dtype")) is not None:  # the float64 model holds exactly the saved numbers
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(dtype).to(torch.float64))
    return model


def save(model, case: Case, folder) -> str:
    """save_pretrained, of a copy cast to the case's save dtype (buffers such as rotary frequencies stay float64
    in ``model``)."""
    dtype = case.save.get("dtype")
    out = model if dtype is None else copy.deepcopy(model).to(dtype)
    kw = {"max_shard_size": case.save["max_shard_size"]} if "max_shard_size" in case.save else {}
    out.save_pretrained(str(folder), **kw)
    if case.drop:
        path = Path(folder) / "config.json"
        config = json.loads(path.read_text())
        for holder in (config, config.get("rope_parameters") or {}):
            for key in case.drop:
                holder.pop(key, None)
        path.write_text(json.dumps(config, indent=2))
    return str(folder)


def _inputs(case: Case, model) -> tuple[object, dict]:
    """The module to run (the tower's own, or the model) and its inputs."""
    g = torch.Generator().manual_seed(1)
    module = functools.reduce(getattr, case.submodel.split("."), model) if case.submodel else model
    if case.inputs == "pixels":
        size = model.config.vision_config.image_size if case.tower else model.config.image_size
        return module, {"pixel_values": torch.randn(1, 3, size, size, generator=g, dtype=torch.float64)}
    if case.inputs == "waveform":  # wav2vec2's convolutions (_AUDIO): 72 samples -> 18 -> 9 frames
        return module, {"input_values": torch.randn(1, 72, generator=g, dtype=torch.float64)}
    if case.inputs == "features":
        return module, {"input_features": torch.randn(1, model.config.num_mel_bins, 2 * T, generator=g,
                                                      dtype=torch.float64)}
    ids = torch.randint(5, VOCAB, (1, T), generator=g)
    if case.inputs == "decoder":
        memory = torch.randn(1, T, model.config.d_model, generator=g, dtype=torch.float64)
        return module, {"input_ids": ids, "encoder_hidden_states": memory}
    return module, {"input_ids": ids}


def _eps(m) -> float:
    for holder in (m, getattr(m, "norms", [None])[0]):
        for attr in ("variance_epsilon", "eps"):
            if holder is not None and getattr(holder, attr, None) is not None:
                return float(getattr(holder, attr))
    raise AssertionError(f"no epsilon on {type(m).__name__}")


def _kind(m) -> str:
    name = type(m).__name__ if not hasattr(m, "norms") else type(m.norms[0]).__name__
    return "rms" if "RMS" in name or name.endswith("T5LayerNorm") else "layernorm"  # T5's norms are RMS norms


def probe(model, case: Case) -> dict[int, dict]:
    """Per layer: ``x`` (T, N) entering the Q projection, ``scores`` (H, T, T) handed to softmax ((H, T, T + 1) with
    attention sinks, and their ``sinks`` (H,)), the QK-norms' inputs (``q``, ``k``: (array, eps, kind)) and the
    fold-ln norm's input and output (``ln_in``, ``ln_out``)."""
    layers: dict[int, dict] = defaultdict(dict)
    state = {"layer": None}
    module, inputs = _inputs(case, model)
    # the layers with an attention (a hybrid's softmax layers alone), by their index in the model
    attended = sorted({int(hit.group(1)) for n, _ in module.named_modules() if (hit := re.search(case.proj + "$", n))})
    ln_of = {}
    for layer in attended:
        template = case.ln_first if layer == 0 and case.ln_first is not None else case.ln
        if template:
            ln_of[template.format(l=layer, p=layer - 1)] = layer

    for name, m in module.named_modules():  # attention sinks: the per-head logit each query's softmax also takes
        if case.sinks and (hit := re.search(case.sinks + "$", name)):
            layers[int(hit.group(1))]["sinks"] = m.sinks.detach().numpy().copy()

    def take_x(layer):
        def hook(_m, args):
            state["layer"] = layer
            layers[layer].setdefault("x", args[0][0].detach().numpy().copy())
        return hook

    def keep(layer, key, m):
        def hook(_m, args, output):
            slot = key  # one module for both (Llama 4's qk_norm): its first call is the queries', then the keys'
            if key == "qk":
                slot = "q" if "q" not in layers[layer] else "k"
            layers[layer].setdefault(slot, (args[0][0].detach().numpy().copy(), _eps(m), _kind(m)))
            if key == "ln_in":
                layers[layer].setdefault("ln_out", output[0].detach().numpy().copy())
        return hook

    handles = []
    for name, m in module.named_modules():
        if hit := re.search(case.proj + "$", name):
            handles.append(m.register_forward_pre_hook(take_x(int(hit.group(1)))))
        elif case.other and re.search(case.other + "$", name):
            handles.append(m.register_forward_pre_hook(lambda *_: state.update(layer=None)))
        shared = case.q_norm == case.k_norm
        for key, pattern in (("qk", case.q_norm),) if shared else (("q", case.q_norm), ("k", case.k_norm)):
            if pattern and (hit := re.search(pattern + "$", name)):
                handles.append(m.register_forward_hook(keep(int(hit.group(1)), key, m)))
        suffix = next((s for s in ln_of if name == s or name.endswith("." + s)), None)
        if suffix is not None:
            handles.append(m.register_forward_hook(keep(ln_of[suffix], "ln_in", m)))
    real_softmax = torch.nn.functional.softmax

    def recording_softmax(x, *args, **kwargs):
        if state["layer"] is not None and x.ndim == 4:
            layers[state["layer"]].setdefault("scores", x.detach().to(torch.float64).numpy()[0].copy())
        return real_softmax(x, *args, **kwargs)

    torch.nn.functional.softmax = recording_softmax
    try:
        with torch.no_grad():
            module(**inputs)
    finally:
        torch.nn.functional.softmax = real_softmax
        for h in handles:
            h.remove()
    return dict(layers)


def normalised(u: np.ndarray, eps: float, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(u / r, r): a norm's output before its gain, and its divisor r over the last axis."""
    if kind == "layernorm":
        c = u - u.mean(axis=-1, keepdims=True)
        r = np.sqrt((c * c).mean(axis=-1) + eps)
        return c / r[..., None], r
    r = np.sqrt((u * u).mean(axis=-1) + eps)
    return u / r[..., None], r


def divisors(captured, heads: int) -> np.ndarray:
    """r (T, heads) of a QK-norm from its captured input: per head, or one per token over the whole projection."""
    u, eps, kind = captured
    if u.ndim == 2:  # (T, heads * n): one divisor per token
        return np.repeat(normalised(u, eps, kind)[1][:, None], heads, axis=1)
    if u.shape[0] != T:  # (heads, T, n)
        u = u.transpose(1, 0, 2)
    assert u.shape[:2] == (T, heads), u.shape  # the text cases have T tokens, never a head count
    return normalised(u, eps, kind)[1]
