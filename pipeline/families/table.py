"""The family table: one entry per ``model_type`` (see :class:`pipeline.families.spec.Family`).

Each entry was read off transformers' own modelling file of the family (the attention's forward pass, its norms
and its rotary helper); ``tests/pipeline/families/`` proves every entry equal to that forward pass. To add a
family, add an entry here and its case to those tests (docs/architecture.md, "Adding a family").
"""

from __future__ import annotations

from dataclasses import replace

from pipeline.families.spec import SET, Family, Hybrid, Latent, QKNorm, when

_ABS, _ALIBI, _BIAS = "learned absolute", "alibi", "relative bias"
_ATTN = "layers.{l}.self_attn."


def _decoder(name: str, **kw) -> Family:
    """A Llama-style decoder: separate q_proj / k_proj under layers.l.self_attn, grouped key heads, rotate-half
    rotary, the pre-attention ``input_layernorm``."""
    base = dict(kind="decoder", head_dim=("head_dim",), grouping="grouped", q=_ATTN + "q_proj.weight",
                k=_ATTN + "k_proj.weight", ln="layers.{l}.input_layernorm.weight")
    return Family(name=name, **(base | kw))


def _defaults(rope_parameters: dict | None = None, **keys) -> dict:
    """An entry's ``defaults``: the values its transformers config class (transformers 5.25) gives where config.json
    leaves these keys out, where they differ from the readers' own fallbacks (``spec.Family.defaults``). Each entry
    names its class; ``tests/pipeline/families/test_config_defaults.py`` checks every case's config without each key
    against the class's reading of it.

    Held here rather than read from the class at run time: the table reads a plain dict and imports no transformers
    (an optional dependency of the pipeline, whose import brings torch, about 2 s and 200 MB into every process that
    reads a layout, the profile workers included), and its readings would then move with the installed transformers
    (4.45 on lack the newer families' classes). The class's defaults live in several places (a field, the class's
    ``default_theta``, its ``convert_rope_params_to_dict`` or ``__post_init__``), so a test against the class is
    their one check."""
    rope = (("rope_parameters", tuple(rope_parameters.items())),) if rope_parameters else ()
    return dict(defaults=tuple(keys.items()) + rope)


def _rms_head(gain: str = "shared") -> QKNorm:
    return QKNorm("rms", "head", gain, _ATTN + "q_norm.weight", _ATTN + "k_norm.weight")


# OLMo 2, OLMoE, OLMo 3: one RMS norm over the whole projection (H n values), before the heads are split
_RMS_PROJECTION = QKNorm("rms", "projection", "projection", _ATTN + "q_norm.weight", _ATTN + "k_norm.weight")
# Flat configs (written before transformers 5) give OLMo 3's rope_theta to both kinds of layer, and their
# rope_scaling to the full-attention ones alone (transformers 4.57's two rotary embeddings); the default base is
# Olmo3Config's. transformers 5.25 itself converts such a config's rope_theta for the full-attention layers only and
# leaves the sliding ones at 500000: the same wherever rope_theta is 500000, as in every released OLMo 3.
_OLMO3_TYPES = dict(layer_rule="layer_types", type_period=("", 4, 1),
                    type_theta=(("sliding_attention", ("rope_theta",), 500000.0),
                                ("full_attention", ("rope_theta",), 500000.0)))


_MLA = dict(head_dim=(), grouping="multi-head", q="", k="", split="latent", rotary_style="interleaved",
            rotary_dim_key="qk_rope_head_dim", scale="1/sqrt(head_dim) yarn mscale_all_dim^2",
            latent=Latent(q=_ATTN + "q_proj.weight", q_a=_ATTN + "q_a_proj.weight",
                          q_a_norm=_ATTN + "q_a_layernorm.weight", q_b=_ATTN + "q_b_proj.weight",
                          kv_a=_ATTN + "kv_a_proj_with_mqa.weight", kv_a_norm=_ATTN + "kv_a_layernorm.weight",
                          kv_b=_ATTN + "kv_b_proj.weight"))
_BERT = dict(kind="encoder", q="layer.{l}.attention.self.query.weight", k="layer.{l}.attention.self.key.weight",
             positional=_ABS, ln="layer.{p}.output.LayerNorm.weight", ln_first="embeddings.LayerNorm.weight",
             variants=tuple(when("position_embedding_type", kind, unsupported=f"position_embedding_type {kind!r} (its "
                                 "relative position scores are not a form of the two tokens' residual vectors)")
                            for kind in ("relative_key", "relative_key_query")))
_GEMMA = dict(gain_offset=1.0)  # GemmaRMSNorm: x * (1 + weight)
_GEMMA3_TYPES = dict(layer_rule="layer_types", type_period=("sliding_window_pattern", 6, 1),
                     type_theta=(("sliding_attention", ("rope_local_base_freq",), 10000.0),
                                 ("full_attention", ("rope_theta",), 1e6)))
_GEMMA3_TEXT = _decoder("gemma3_text", **_GEMMA, **_GEMMA3_TYPES, qk_norm=_rms_head(),  # Gemma3TextConfig:
                        **_defaults(num_key_value_heads=4, head_dim=256, query_pre_attn_scalar=256),
                        scale="1/sqrt(query_pre_attn_scalar)", softcap_key="attn_logit_softcapping")
# Llama 4: interleaved rotary (complex pairs) on three layers of four, none on the fourth (no_rope_layers 0); on the
# rotary layers a weightless RMS norm of each head after the rotation (use_qk_norm; a rotation keeps the head's RMS,
# so it divides the score as a QK-norm before it would); on the others the queries times a position's temperature
# 1 + attn_scale log(1 + floor((i + 1) / floor_scale)) (attn_temperature_tuning): a positive per-query factor,
# treated as the QK-norm divisors are (the profile is that of the form; test_forward.py divides it out)
_LLAMA4_TEXT = _decoder("llama4_text", rotary_style="interleaved", layer_rule="no_rope_layers",  # Llama4TextConfig:
                        **_defaults(num_key_value_heads=8, head_dim=128, rope_theta=500000.0),
                        qk_norm=QKNorm("rms", "head", "none", rotary_only=True, after_rotation=True),
                        query_temperature="queries of the layers without rotary times a positional temperature",
                        variants=(when("use_qk_norm", False, default=True, qk_norm=None),
                                  when("attn_temperature_tuning", False, default=True, query_temperature="")))
# the head size hidden / heads, whatever head_dim says; Qwen2VLTextConfig's and Qwen2_5_VLTextConfig's defaults
_QWEN2_VL_TEXT = _decoder("qwen2_vl_text", head_dim=(), **_defaults(num_key_value_heads=8, rope_theta=1e6))
_QWEN2_5_VL_TEXT = _decoder("qwen2_5_vl_text", head_dim=(), **_defaults(num_key_value_heads=8, rope_theta=1e6))
_CLIP_TEXT = Family(name="clip", kind="text", q="text_model.encoder.layers.{l}.self_attn.q_proj.weight",
                    k="text_model.encoder.layers.{l}.self_attn.k_proj.weight", positional=_ABS,
                    ln="text_model.encoder.layers.{l}.layer_norm1.weight")
_CLIP_VISION = Family(name="clip", kind="vision", q="vision_model.encoder.layers.{l}.self_attn.q_proj.weight",
                      k="vision_model.encoder.layers.{l}.self_attn.k_proj.weight", positional=_ABS,
                      ln="vision_model.encoder.layers.{l}.layer_norm1.weight")


_SIGLIP_TEXT, _SIGLIP_VISION = replace(_CLIP_TEXT, name="siglip"), replace(_CLIP_VISION, name="siglip")
# DINOv2 (and with registers): ViT's attention, the pre-attention norm norm1
_DINOV2 = dict(q="encoder.layer.{l}.attention.attention.query.weight",
               k="encoder.layer.{l}.attention.attention.key.weight", positional=_ABS,
               ln="encoder.layer.{l}.norm1.weight")
# wav2vec2, HuBERT: a convolutional position embedding added to the encoder's input (no term of the score); post-norm
# layers (the attention reads the layer before's final_layer_norm, layer 0 the encoder's layer_norm), or pre-norm
# ones with do_stable_layer_norm (the layer's own layer_norm)
_WAV2VEC2 = dict(q="encoder.layers.{l}.attention.q_proj.weight", k="encoder.layers.{l}.attention.k_proj.weight",
                 positional=_ABS, ln="encoder.layers.{p}.final_layer_norm.weight", ln_first="encoder.layer_norm.weight",
                 variants=(when("do_stable_layer_norm", True, ln="encoder.layers.{l}.layer_norm.weight",
                                ln_first=None),))


def _bart(name: str, tower: str, pre_norm: bool) -> Family:
    """BART's (post-norm: the attention reads the layer before's final_layer_norm, layer 0 the embeddings'
    layernorm_embedding) and mBART's (pre-norm: self_attn_layer_norm) encoder or decoder self-attention."""
    ln = (f"{tower}.layers.{{l}}.self_attn_layer_norm.weight" if pre_norm
          else f"{tower}.layers.{{p}}.final_layer_norm.weight")
    return Family(name=name, kind="text", hidden=("d_model",), heads=(f"{tower}_attention_heads",),
                  layers=(f"{tower}_layers",), q=f"{tower}.layers.{{l}}.self_attn.q_proj.weight",
                  k=f"{tower}.layers.{{l}}.self_attn.k_proj.weight", positional=_ABS, ln=ln,
                  ln_first=None if pre_norm else f"{tower}.layernorm_embedding.weight")


def _t5(name: str, tower: str) -> Family:
    """T5's, mT5's and UMT5's encoder or decoder self-attention: RMS pre-norm (layer.0.layer_norm), heads of d_kv,
    no softmax scale, and a learned bias per relative-position bucket added to each score (one table in block 0 for
    T5 and mT5, one per layer for UMT5): a number per head and offset, no form of the two tokens, left out of the
    profile (``test_forward.py`` takes the model's own bias off the scores)."""
    layers = ("num_layers",) if tower == "encoder" else ("num_decoder_layers", "num_layers")
    attn = f"{tower}.block.{{l}}.layer.0."
    return Family(name=name, kind="text", hidden=("d_model",), heads=("num_heads",), layers=layers, head_dim=("d_kv",),
                  q=attn + "SelfAttention.q.weight", k=attn + "SelfAttention.k.weight", positional=_BIAS,
                  ln=attn + "layer_norm.weight", scale="1", **_defaults(d_kv=64))  # T5Config, MT5Config, UMT5Config


def _t5_towers(name: str, classes: str) -> Family:
    """T5's, mT5's or UMT5's model of two towers; a checkpoint of its encoder alone (``{classes}EncoderModel``, and
    ``{classes}ForTokenClassification``, which wraps one, as config.json's ``architectures`` names them) holds the
    encoder tower alone, its tensors named as the two-tower model's encoder's (``encoder.block.N``): one model, stored
    as ``NAME/encoder``, as a two-tower checkpoint's encoder is, so that the same encoder gives the same row under
    the same tower name and conventions whichever class saved it."""
    return Family(name, "text", towers=(("encoder", _t5(name, "encoder")), ("decoder", _t5(name, "decoder"))),
                  towers_of_class=tuple((f"{classes}{c}", ("encoder",))
                                        for c in ("EncoderModel", "ForTokenClassification")))


def _whisper(tower: str) -> Family:
    return Family(name="whisper", kind="audio", hidden=("d_model",), heads=(f"{tower}_attention_heads",),
                  layers=(f"{tower}_layers",), q=f"{tower}.layers.{{l}}.self_attn.q_proj.weight",
                  k=f"{tower}.layers.{{l}}.self_attn.k_proj.weight", positional=_ABS,
                  ln=f"{tower}.layers.{{l}}.self_attn_layer_norm.weight")


ENTRIES = (
    # ---------------------------------------------------------------- decoders
    Family("gpt2", "decoder", hidden=("n_embd", "hidden_size"), heads=("n_head",), layers=("n_layer",),
           q="h.{l}.attn.c_attn.weight", split="columns", positional=_ABS, ln="h.{l}.ln_1.weight",
           variants=(when("scale_attn_weights", False, default=True, scale="1"),)),
    Family("opt", "decoder", q=_ATTN + "q_proj.weight", k=_ATTN + "k_proj.weight", positional=_ABS,
           ln="layers.{l}.self_attn_layer_norm.weight",
           variants=(when("do_layer_norm_before", False, default=True, ln="layers.{p}.final_layer_norm.weight",
                          ln_first=""),)),
    Family("bloom", "decoder", hidden=("hidden_size", "n_embed"), heads=("n_head", "num_attention_heads"),
           layers=("n_layer", "num_hidden_layers"), q="h.{l}.self_attention.query_key_value.weight", split="groups",
           positional=_ALIBI, ln="h.{l}.input_layernorm.weight"),
    # GPTNeoXConfig: rotary on rotary_pct of each head, 0.25 where config.json gives none (its
    # convert_rope_params_to_dict; it reads no flat partial_rotary_factor)
    Family("gpt_neox", "decoder", q="layers.{l}.attention.query_key_value.weight", split="groups",
           ln="layers.{l}.input_layernorm.weight", **_defaults(rotary_pct=0.25)),
    _decoder("mistral", **_defaults(num_key_value_heads=8)),  # MistralConfig
    _decoder("llama"),
    _decoder("qwen2", **_defaults(num_key_value_heads=32)),  # Qwen2Config
    _decoder("mixtral", **_defaults(num_key_value_heads=8, rope_theta=1e6)),  # MixtralConfig
    _decoder("qwen3", qk_norm=_rms_head(), **_defaults(num_key_value_heads=32, head_dim=128)),  # Qwen3Config
    _decoder("qwen3_moe", qk_norm=_rms_head(), **_defaults(num_key_value_heads=4)),  # Qwen3MoeConfig
    _decoder("gemma", **_GEMMA, **_defaults(num_key_value_heads=16, head_dim=256)),  # GemmaConfig
    _decoder("gemma2", **_GEMMA, scale="1/sqrt(query_pre_attn_scalar)", softcap_key="attn_logit_softcapping",
             **_defaults(num_key_value_heads=4, head_dim=256, query_pre_attn_scalar=256)),  # Gemma2Config
    _GEMMA3_TEXT,
    _decoder("phi", variants=(when("qk_layernorm", True, qk_norm=QKNorm(
        "layernorm", "head", "shared", _ATTN + "q_layernorm.weight", _ATTN + "k_layernorm.weight")),),
             **_defaults(partial_rotary_factor=0.5)),  # PhiConfig
    _decoder("phi3", q=_ATTN + "qkv_proj.weight", k="", split="rows"),
    # GPT-J: interleaved rotary on the first rotary_dim dimensions of each head, at the base 10000 whatever the config
    # says (transformers' modeling_gptj.py: create_sinusoidal_positions computes 1 / 10000 ** (2i / dim), and
    # GPTJConfig has no rope key), so a rope_theta or rope scaling in its config.json is not read
    Family("gptj", "decoder", hidden=("n_embd",), heads=("n_head",), layers=("n_layer",),
           q="h.{l}.attn.q_proj.weight", k="h.{l}.attn.k_proj.weight", rotary_style="interleaved",
           rotary_dim_key="rotary_dim", fixed_rope_theta=10000.0, ln="h.{l}.ln_1.weight",
           **_defaults(rotary_dim=64)),  # GPTJConfig
    Family("falcon", "decoder", heads=("num_attention_heads", "n_head"), layers=("num_hidden_layers", "n_layer"),
           kv_keys=("num_kv_heads", "n_head_kv"), q="h.{l}.self_attention.query_key_value.weight", split="groups",
           ln="h.{l}.input_layernorm.weight",
           variants=(when("multi_query", True, default=True, split="rows", grouping="multi-query"),
                     when("new_decoder_architecture", True, split="groups", grouping="grouped",
                          ln="h.{l}.ln_attn.weight"),
                     when("num_ln_in_parallel_attn", 1, ln="h.{l}.input_layernorm.weight"),
                     when("alibi", True, positional=_ALIBI))),
    _decoder("stablelm", head_dim=(), variants=(when("qk_layernorm", True, qk_norm=QKNorm(
        "layernorm", "head", "each_head", _ATTN + "q_layernorm.norms.{h}.weight",
        _ATTN + "k_layernorm.norms.{h}.weight")),),
             **_defaults(num_key_value_heads=32, partial_rotary_factor=0.25)),  # StableLmConfig
    _decoder("olmo2", qk_norm=_RMS_PROJECTION, ln=""),
    _decoder("starcoder2", **_defaults(num_key_value_heads=2)),  # Starcoder2Config
    Family("gpt_bigcode", "decoder", hidden=("n_embd",), heads=("n_head",), layers=("n_layer",),
           q="h.{l}.attn.c_attn.weight", split="groups", positional=_ABS, ln="h.{l}.ln_1.weight",
           variants=(when("multi_query", True, default=True, split="rows", grouping="multi-query"),
                     when("scale_attn_weights", False, default=True, scale="1"))),
    _decoder("cohere", rotary_style="interleaved", variants=(when("use_qk_norm", True, qk_norm=QKNorm(
        "layernorm", "head", "per_head", _ATTN + "q_norm.weight", _ATTN + "k_norm.weight")),),
             **_defaults(rope_theta=500000.0)),  # CohereConfig
    _decoder("granite", scale="attention_multiplier", **_defaults(attention_multiplier=1.0)),  # GraniteConfig
    _decoder("smollm3", layer_rule="no_rope_layers",
             **_defaults(num_key_value_heads=4, rope_theta=2e6)),  # SmolLM3Config
    # OLMoE: OLMo 2's QK-norm read by a pre-norm decoder; clip_qkv clamps q and k elementwise, which no form states
    _decoder("olmoe", qk_norm=_RMS_PROJECTION, variants=(when("clip_qkv", SET, unsupported=(
        "clip_qkv (queries and keys clamped elementwise: the score is no bilinear form where a value is clipped)")),)),
    # OLMo 3: OLMo 2's attention (no norm before it), sliding and full-attention layers with their own rotary
    _decoder("olmo3", qk_norm=_RMS_PROJECTION, ln="", **_OLMO3_TYPES),
    # GLM (GLM-4 of 2024) and GLM-4 (0414): interleaved rotary on the first partial_rotary_factor of each head
    # (GlmConfig, Glm4Config: half of each head where config.json says nothing)
    _decoder("glm", rotary_style="interleaved",
             **_defaults(num_key_value_heads=2, head_dim=128, partial_rotary_factor=0.5)),
    _decoder("glm4", rotary_style="interleaved",
             **_defaults(num_key_value_heads=2, head_dim=128, partial_rotary_factor=0.5)),
    # EXAONE 4: QK-norm per head, no norm before the attention, its global layers without rotary (NoPE)
    _decoder("exaone4", qk_norm=_rms_head(), ln="", layer_rule="sliding_rotary",
             type_period=("sliding_window_pattern", 4, 1), **_defaults(num_key_value_heads=32)),  # Exaone4Config
    _decoder("ernie4_5", rotary_style="interleaved",  # Ernie4_5Config
             **_defaults(num_key_value_heads=2, head_dim=128, rope_theta=500000.0)),
    _decoder("ernie4_5_moe", rotary_style="interleaved",  # Ernie4_5_MoeConfig
             **_defaults(num_key_value_heads=4, rope_theta=500000.0)),
    _decoder("seed_oss", **_defaults(num_key_value_heads=8, head_dim=128)),  # SeedOssConfig
    # Apertus: ApertusConfig's Llama 3 scaling where config.json has no rope parameters
    _decoder("apertus", qk_norm=_rms_head(), ln="layers.{l}.attention_layernorm.weight", **_defaults(
        rope_theta=1.2e7, rope_parameters={"rope_type": "llama3", "rope_theta": 1.2e7, "factor": 8.0,
                                           "original_max_position_embeddings": 8192, "low_freq_factor": 1.0,
                                           "high_freq_factor": 4.0})),
    _decoder("helium", rotary_style="interleaved",  # HeliumConfig
             **_defaults(num_key_value_heads=20, head_dim=128, rope_theta=100000.0)),
    _decoder("arcee"),
    _decoder("granitemoe", scale="attention_multiplier", **_defaults(attention_multiplier=1.0)),  # GraniteMoeConfig
    # Nemotron: LayerNorm1P (its gain 1 + weight), rotary on the first partial_rotary_factor of each head (half where
    # config.json says nothing: NemotronConfig)
    _decoder("nemotron", gain_offset=1.0, **_defaults(partial_rotary_factor=0.5)),
    _LLAMA4_TEXT,
    # gpt-oss: attention sinks, one learned logit per head appended to every query's scores before the softmax and
    # dropped after it. A sink only enlarges the softmax's denominator: it is no form of the two tokens, and the
    # profile leaves it out (test_forward.py proves the scores without it equal the forward pass's). Its sliding and
    # full-attention layers differ in their mask alone and share one rotary (YaRN in its checkpoints, and GptOssConfig's
    # where config.json has no rope parameters).
    _decoder("gpt_oss", **_defaults(num_key_value_heads=8, head_dim=64, rope_theta=150000.0, rope_parameters={
        "rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
        "original_max_position_embeddings": 4096})),
    # Ministral 3: Mistral's attention, YaRN, and on every layer the queries times a position's temperature
    # 1 + llama_4_scaling_beta log(1 + floor(i / original_max_position_embeddings)) after the rotation: a positive
    # per-query factor, treated as the QK-norm divisors are (Llama 4's, on every layer here)
    # (Ministral3Config's YaRN where config.json has no rope parameters, less its max_position_embeddings, which it
    # copies from the config and the table does not read)
    _decoder("ministral3", query_temperature="queries times a positional temperature", **_defaults(
        num_key_value_heads=8, head_dim=128, rope_parameters={
            "type": "yarn", "rope_type": "yarn", "rope_theta": 1e6, "factor": 16.0,
            "original_max_position_embeddings": 16384, "beta_fast": 32.0, "beta_slow": 1.0, "mscale_all_dim": 1.0,
            "mscale": 1.0, "llama_4_scaling_beta": 0.1})),
    # DeepSeek V2 / V3: multi-head latent attention (pipeline.families.latent), its form at unit-RMS latents; the rotary
    # dimensions (qk_rope_head_dim) of each head rotated as interleaved pairs (V2's complex rotation; V3's with
    # rope_interleave, as its checkpoints), YaRN's mscale_all_dim squared in the softmax scale
    _decoder("deepseek_v2", **_MLA),
    _decoder("deepseek_v3", **_MLA, variants=(when("rope_interleave", False, default=True, rotary_style="half"),)),
    # Hunyuan (dense): q and k normalised per head after the rotation, with gains (no form of i - j alone: the form
    # read is that of the key at position 0, spec.QKNorm); its checkpoints' rope type "dynamic" with an alpha is a
    # fixed NTK-alpha base
    _decoder("hunyuan_v1_dense", ntk_alpha=True, qk_norm=QKNorm(
        "rms", "head", "shared", _ATTN + "query_layernorm.weight", _ATTN + "key_layernorm.weight",
        after_rotation=True)),
    # ---------------------------------------------------------------- hybrids: their softmax layers profiled, the
    # others stored as layers without a form (spec.Hybrid)
    # LFM2: gated short convolutions, and attention layers (full_attn_idxs) with QK-norm per head, the pre-norm
    # operator_norm
    _decoder("lfm2", head_dim=(), ln="layers.{l}.operator_norm.weight",
             qk_norm=QKNorm("rms", "head", "shared", _ATTN + "q_layernorm.weight", _ATTN + "k_layernorm.weight"),
             hybrid=Hybrid("short convolution", index_key="full_attn_idxs"),
             **_defaults(num_key_value_heads=8, rope_theta=1e6)),  # Lfm2Config
    # Jamba: Mamba layers, and an attention layer every attn_layer_period-th (from attn_layer_offset) without
    # positional encoding
    _decoder("jamba", head_dim=(), positional="none", hybrid=Hybrid(
        "Mamba", softmax=("attention",), types_key="layers_block_type",
        period=("attn_layer_period", 8, "attn_layer_offset", 4)), **_defaults(num_key_value_heads=8)),  # JambaConfig
    # Qwen3-Next: gated DeltaNet layers (linear attention) and every full_attention_interval-th layer gated softmax
    # attention: q_proj's rows per head [query | gate] (the gate on the output), QK-norm per head and every norm's gain
    # 1 + weight, rotary on the first partial_rotary_factor of each head (a quarter where config.json says nothing:
    # Qwen3NextConfig)
    _decoder("qwen3_next", gated_query=True, qk_norm=_rms_head(), gain_offset=1.0, hybrid=Hybrid(
        "gated DeltaNet (linear attention)", period=("full_attention_interval", 4, "", 3)),
        **_defaults(num_key_value_heads=2, head_dim=256, partial_rotary_factor=0.25)),
    # MiniMax: lightning attention layers (linear) and softmax ones, alternating from layer 0 where the config lists
    # no layer_types (MiniMaxConfig's rule); rotary on the whole head (transformers' MiniMax rotary takes head_dim)
    _decoder("minimax", rotary_dim_key="head_dim",
             hybrid=Hybrid("lightning attention (linear)", period=("", 2, "", 0)),
             **_defaults(num_key_value_heads=8, rope_theta=1e6)),  # MiniMaxConfig
    # Falcon-H1: attention and Mamba side by side in every layer (each layer's attention a softmax one: no layer
    # without a form); the keys times key_multiplier (in the scale), and the attention's input the pre-norm's output
    # times attention_in_multiplier, a positive constant that --fold-ln's form carries squared (no profile changes)
    _decoder("falcon_h1", scale="key_multiplier/sqrt(head_dim)", **_defaults(num_key_value_heads=8)),  # FalconH1Config
    # ---------------------------------------------------------------- encoders
    Family("bert", **_BERT),
    Family("roberta", **_BERT),
    Family("xlm-roberta", **_BERT),
    Family("electra", **_BERT | dict(embedding_key="embedding_size")),
    Family("distilbert", "encoder", hidden=("dim",), heads=("n_heads",), layers=("n_layers",),
           q="transformer.layer.{l}.attention.q_lin.weight", k="transformer.layer.{l}.attention.k_lin.weight",
           positional=_ABS, ln="transformer.layer.{p}.output_layer_norm.weight",
           ln_first="embeddings.LayerNorm.weight"),
    Family("modernbert", "encoder", q="layers.{l}.attn.Wqkv.weight", split="rows", layer_rule="layer_types",
           type_period=("global_attn_every_n_layers", 3, 0),
           type_theta=(("sliding_attention", ("local_rope_theta",), 10000.0),
                       ("full_attention", ("global_rope_theta",), 160000.0)),
           ln="layers.{l}.attn_norm.weight", ln_first="embeddings.norm.weight"),
    # ---------------------------------------------------------------- other modalities
    Family("dinov2", "vision", **_DINOV2),
    Family("dinov2_with_registers", "vision", **_DINOV2),
    Family("wav2vec2", "audio", **_WAV2VEC2),
    Family("hubert", "audio", **_WAV2VEC2),
    Family("vit", "vision", q="encoder.layer.{l}.attention.attention.query.weight",
           k="encoder.layer.{l}.attention.attention.key.weight", positional=_ABS,
           ln="encoder.layer.{l}.layernorm_before.weight"),
    Family("clip", "text + vision", towers=(("text", replace(_CLIP_TEXT, sub_config="text_config")),
                                            ("vision", replace(_CLIP_VISION, sub_config="vision_config")))),
    replace(_CLIP_TEXT, name="clip_text_model"),
    replace(_CLIP_VISION, name="clip_vision_model"),
    Family("whisper", "audio", towers=(("encoder", _whisper("encoder")), ("decoder", _whisper("decoder")))),
    # SigLIP: CLIP's towers (its text tower not causal: a mask changes no form)
    Family("siglip", "text + vision", towers=(("text", replace(_SIGLIP_TEXT, sub_config="text_config")),
                                              ("vision", replace(_SIGLIP_VISION, sub_config="vision_config")))),
    replace(_SIGLIP_TEXT, name="siglip_text_model"),
    replace(_SIGLIP_VISION, name="siglip_vision_model"),
    # T5, mT5, UMT5: the encoder's and the decoder's self-attention, their relative position bias left out; an
    # encoder saved alone (T5EncoderModel) is its encoder tower
    _t5_towers("t5", "T5"),
    _t5_towers("mt5", "MT5"),
    _t5_towers("umt5", "UMT5"),
    # BART and mBART: the encoder's and the decoder's self-attention (the cross-attention left out, as Whisper's)
    Family("bart", "text", towers=(("encoder", _bart("bart", "encoder", False)),
                                   ("decoder", _bart("bart", "decoder", False)))),
    Family("mbart", "text", towers=(("encoder", _bart("mbart", "encoder", True)),
                                    ("decoder", _bart("mbart", "decoder", True)))),
    # Gemma 3's image-text model: its text tower, the language model's tensors (``language_model.model.layers`` as
    # saved, ``model.language_model.layers`` by transformers 4.5x); the SigLIP vision tower is not in the table
    Family("gemma3", "text", towers=(("text", replace(_GEMMA3_TEXT, sub_config="text_config",
                                                       within=("language_model.",))),)),
    # Qwen2-VL and Qwen2.5-VL: their text towers, Qwen2's attention with the head size hidden / heads and multimodal
    # rotary, which on text tokens (three equal position ids) is the ordinary rotary of the text positions
    Family("qwen2_vl", "text", towers=(("text", replace(_QWEN2_VL_TEXT, sub_config="text_config")),)),
    Family("qwen2_5_vl", "text", towers=(("text", replace(_QWEN2_5_VL_TEXT, sub_config="text_config")),)),
    _QWEN2_VL_TEXT,  # the text models alone (llama.cpp's qwen2vl files hold them)
    _QWEN2_5_VL_TEXT,
    # Mistral 3 (Mistral Small 3.1 / 3.2): its text tower, a model of its text_config's own family (mistral)
    Family("mistral3", "text", towers=(("text", Family("mistral3", "text", sub_config="text_config",
                                                       by_model_type=True, within=("language_model.",))),)),
    # Llama 4's image-text model (Scout, Maverick): its text tower (``language_model.model.layers``; the vision
    # tower's ``vision_model.model.layers`` end alike)
    Family("llama4", "text", towers=(("text", replace(_LLAMA4_TEXT, sub_config="text_config",
                                                       within=("language_model.",))),)),
)

FAMILIES: dict[str, Family] = {f.name: f for f in ENTRIES}
