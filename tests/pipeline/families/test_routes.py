"""The routes other than a local folder, for the families' own layouts: Hub range reads of fused QKV tensors fetch
the q and k rows alone, a Hub id of a supported family with no registry entry goes through the command line (one
model per tower for CLIP), and GGUF files of llama.cpp's architectures read back as the Hugging Face weights."""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from pipeline.families import inverse_frequencies, layer_qk, layer_weights, layout_from_config, qk_tensor_names
from pipeline.registry.checkpoints import open_checkpoint
from tests.hub_server import LoopbackHub, serve_folder
from tests.pipeline.families.cases import CASES

pytest.importorskip("huggingface_hub", reason="the Hub tests need huggingface_hub")




def _header_bytes(path: Path) -> int:
    return 8 + int.from_bytes(path.read_bytes()[:8], "little")


def _fetch_bound(folder: Path, layout, names_by_layer) -> tuple[int, int]:
    """(the q and k rows' bytes, what else a reader must fetch: config, index and the headers of their shards)."""
    from safetensors import safe_open

    index = folder / "model.safetensors.index.json"
    where = json.loads(index.read_text())["weight_map"] if index.exists() else None
    qk, shards = 0, set()
    for names in names_by_layer:
        name = names["qkv"]
        shard = folder / (where[name] if where else "model.safetensors")
        shards.add(shard)
        with safe_open(str(shard), framework="pt") as fh:
            item = fh.get_slice(name).get_dtype()
        size = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2}[item]
        qk += (layout.n_heads + layout.n_kv_heads) * layout.d_head * layout.d_model * size
    other = (folder / "config.json").stat().st_size + (index.stat().st_size if index.exists() else 0)
    return qk, other + sum(_header_bytes(s) for s in shards)


@contextmanager
def over_the_hub(family_model, hub_env, name: str):
    """A family case's tiny model served by the loopback Hub: yields (folder, its local checkpoint, its layout, the
    Hub's checkpoint of it, the hub, the repo id), HF_ENDPOINT pointing at the hub meanwhile."""
    from pipeline.sources.hub import hub_checkpoint

    _, folder, _ = family_model(name)
    repo = f"test-org/{Path(folder).name}"
    local = open_checkpoint(folder)
    layout = layout_from_config(local.config)
    with LoopbackHub(serve_folder(folder, repo)) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.endpoint)
        yield folder, local, layout, hub_checkpoint(repo), hub, repo


@pytest.mark.parametrize("name", ["phi3-bf16-sharded", "falcon-new_decoder_architecture", "falcon-per_head",
                                  "gpt_bigcode-per_head"])
def test_hub_reads_only_the_q_and_k_rows_of_a_fused_tensor(family_model, hub_env, name):
    with over_the_hub(family_model, hub_env, name) as (folder, local, layout, remote, hub, repo):
        names = []
        for layer in range(layout.n_layers):
            got, want = layer_qk(remote, layout, layer), layer_qk(local, layout, layer)
            assert got.W_Q.dtype == want.W_Q.dtype
            np.testing.assert_array_equal(got.W_Q, want.W_Q)
            np.testing.assert_array_equal(got.W_K, want.W_K)
            names.append(qk_tensor_names(layout, local.tensor_names(), layer))
        served = hub.total_bytes(repo)
    qk, other = _fetch_bound(Path(folder), layout, names)
    assert qk <= served <= 1.0001 * qk + other, (served, qk, other)


@pytest.mark.parametrize("name", ["deepseek_v2", "deepseek_v2-no_q_lora"])
def test_hub_reads_of_a_latent_attention_fetch_its_query_and_key_bytes_alone(family_model, hub_env, name):
    """Multi-head latent attention over the loopback Hub: the query tensors, the key's compressed projection, both
    latents' norm gains and, of kv_b_proj, each head's key rows (never its value rows) are what is fetched, within
    1.0001 x their bytes beside the config and header; the weights equal the local folder's."""
    from safetensors import safe_open

    from pipeline.families.latent import key_rows

    with over_the_hub(family_model, hub_env, name) as (folder, local, layout, remote, hub, repo):
        qk = 0
        with safe_open(str(Path(folder) / "model.safetensors"), framework="pt") as fh:
            for layer in range(layout.n_layers):
                got, want = layer_qk(remote, layout, layer), layer_qk(local, layout, layer)
                np.testing.assert_array_equal(got.W_Q, want.W_Q)
                np.testing.assert_array_equal(got.W_K, want.W_K)
                for role, tensor in qk_tensor_names(layout, local.tensor_names(), layer).items():
                    part = fh.get_slice(tensor)
                    size = {"F32": 4, "BF16": 2, "F16": 2, "F64": 8}[part.get_dtype()]
                    count = int(np.prod(part.get_shape()))
                    if role == "kv_b":  # its key rows alone
                        count = sum(b - a for a, b in key_rows(layout.spec.latent, layout.n_heads)) * \
                            part.get_shape()[1]
                    qk += count * size
        served = hub.total_bytes(repo)
    other = (Path(folder) / "config.json").stat().st_size + _header_bytes(Path(folder) / "model.safetensors")
    assert set(qk_tensor_names(layout, local.tensor_names(), 0)) >= {"kv_a", "kv_a_norm", "kv_b"}
    assert qk <= served <= 1.0001 * qk + other, (served, qk, other)


def test_hub_reads_of_a_hybrid_with_gated_queries_fetch_the_query_rows_of_its_softmax_layers_alone(family_model,
                                                                                                     hub_env):
    """Qwen3-Next over the loopback Hub: of q_proj (per head [query | gate]) its query rows alone are fetched, with
    k_proj and the QK-norm gains, of its softmax layers alone (its gated DeltaNet layers have no form, and nothing of
    them is read), within 1.0001 x their bytes beside the config and header; the weights equal the local folder's."""
    from safetensors import safe_open

    with over_the_hub(family_model, hub_env, "qwen3_next") as (folder, local, layout, remote, hub, repo):
        softmax = [layer for layer in range(layout.n_layers) if layout.positional_of(layer).kind != "no form"]
        assert softmax == [1, 3]
        qk = 0
        with safe_open(str(Path(folder) / "model.safetensors"), framework="pt") as fh:
            for layer in softmax:
                got, want = layer_qk(remote, layout, layer), layer_qk(local, layout, layer)
                np.testing.assert_array_equal(got.W_Q, want.W_Q)
                np.testing.assert_array_equal(got.W_K, want.W_K)
                for role, tensor in qk_tensor_names(layout, local.tensor_names(), layer).items():
                    part = fh.get_slice(tensor)
                    size = {"F32": 4, "BF16": 2, "F16": 2, "F64": 8}[part.get_dtype()]
                    count = int(np.prod(part.get_shape()))
                    qk += (count // 2 if role == "q" else count) * size  # the query rows, not the gate's
            names = qk_tensor_names(layout, local.tensor_names(), 1)
            q, gain = (fh.get_tensor(names[role]).numpy() for role in ("q", "q_norm"))
        served = hub.total_bytes(repo)
    n, N = layout.d_head, layout.d_model  # the query rows are the first n of each head's 2 n, times the norm's gain
    np.testing.assert_array_equal(layer_weights(local, layout, 1)[0],
                                  q.reshape(layout.n_heads, 2 * n, N)[:, :n] * (1.0 + gain)[:, None])
    other = (Path(folder) / "config.json").stat().st_size + _header_bytes(Path(folder) / "model.safetensors")
    assert qk <= served <= 1.0001 * qk + other, (served, qk, other)


@pytest.mark.parametrize("name", ["qwen3", "clip/text"])
def test_a_hub_id_of_a_supported_family_needs_no_registry_entry(family_model, hub_env, tmp_path, name):
    """``profiles test-org/REPO`` for a family the registry has no entry for: stored under the id's last part (per
    tower ``REPO/tower``), with the values the local folder gives, the resolved commit as revision."""
    from pipeline.registry.models import spec_for
    from tests.pipeline.test_cli_profiles import cli, open_store

    _, folder, _ = family_model(name)
    repo = f"test-org/{Path(folder).name}"
    assert spec_for(repo) is None
    assert cli("profiles", folder, "--store", tmp_path / "disk.zarr", "--quiet") == 0
    with LoopbackHub(serve_folder(folder, repo)) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.endpoint)
        assert cli("profiles", repo, "--store", tmp_path / "hub.zarr", "--quiet") == 0
        sha = hub.sha[repo]
    disk, remote = open_store(tmp_path / "disk.zarr"), open_store(tmp_path / "hub.zarr")
    towers = ["text", "vision"] if name.startswith("clip") else [""]
    assert list(remote.model.values) == list(disk.model.values) == [
        Path(folder).name + (f"/{t}" if t else "") for t in towers]
    np.testing.assert_array_equal(remote.profile.values, disk.profile.values)
    np.testing.assert_array_equal(remote.layer_positional.values, disk.layer_positional.values)
    assert remote.complete.values.all() and set(remote.revision.values) == {sha}
    assert set(remote.command.values) == {f"python -m pipeline profiles {repo}"}


# ------------------------------------------------------------------------------------------ GGUF

# case -> llama.cpp architecture, as its converter (convert_hf_to_gguf.py) writes it
GGUF_ARCHS = {"qwen3": "qwen3", "qwen3_moe": "qwen3moe", "gemma": "gemma", "gemma2": "gemma2",
              "gemma3_text": "gemma3", "phi3": "phi3", "olmo2": "olmo2", "starcoder2": "starcoder2",
              "stablelm-qk_layernorm": "stablelm", "cohere-qk_norm": "command-r", "granite": "granite",
              "smollm3": "smollm3", "olmoe": "olmoe", "olmo3": "olmo2", "glm4": "glm4", "exaone4": "exaone4",
              "ernie4_5": "ernie4_5", "ernie4_5_moe": "ernie4_5-moe", "seed_oss": "seed_oss", "apertus": "apertus",
              "arcee": "arcee", "granitemoe": "granitemoe", "nemotron": "nemotron", "olmo3-yarn": "olmo2",
              "gpt_oss": "gpt-oss", "llama4_text": "llama4", "qwen2_vl/text": "qwen2vl", "mistral3/text": "mistral3",
              "exaone4-no_window": "exaone4", "ministral3": "mistral3", "hunyuan_v1_dense": "hunyuan-dense"}
# rotated as interleaved pairs by llama.cpp where transformers rotates halves: the converter permutes Q/K rows
PERMUTED = ("granite", "smollm3", "arcee", "granitemoe", "mistral3")
NORM_SHIFT = ("gemma", "gemma2", "gemma3", "nemotron")  # the converter stores these norm gains as 1 + weight


def permute(w: np.ndarray, heads: int) -> np.ndarray:
    """The converter's LlamaModel.permute: per head, rotate-half row order -> interleaved pairs."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _rope_scaling(w, rope: dict) -> None:
    """The converter's scaling keys (``TextModel.set_gguf_parameters``): linear's factor; YaRN's factor, original
    context, betas and (where the config gives one) attention factor, its truncate left out."""
    import gguf

    if rope.get("rope_type") == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(rope["factor"])
    elif rope.get("rope_type") == "yarn":
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(rope["factor"])
        w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
        if rope.get("attention_factor") is not None:
            w.add_rope_scaling_yarn_attn_factor(rope["attention_factor"])
        w.add_rope_scaling_yarn_beta_fast(rope["beta_fast"])
        w.add_rope_scaling_yarn_beta_slow(rope["beta_slow"])


def _metadata(w, arch: str, cfg, per_layer_pattern: bool = False) -> None:
    """The shape and rotary keys the converter writes, and each architecture's own."""
    import gguf

    heads, head_dim = cfg.num_attention_heads, getattr(cfg, "head_dim", None) or cfg.hidden_size // \
        cfg.num_attention_heads
    w.add_block_count(cfg.num_hidden_layers)
    w.add_embedding_length(cfg.hidden_size)
    w.add_head_count(heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_key_length(head_dim)
    rope = cfg.rope_parameters
    if "full_attention" in rope:  # Gemma 3, OLMo 3 (its converter: olmo2 with the sliding layers listed)
        full, local = rope["full_attention"], rope["sliding_attention"]
        w.add_rope_freq_base(full["rope_theta"])
        w.add_rope_freq_base_swa(local["rope_theta"])
        _rope_scaling(w, full)
        w.add_sliding_window(cfg.sliding_window)
        w.add_sliding_window_pattern([t == "sliding_attention" for t in cfg.layer_types]
                                     if per_layer_pattern or arch != "gemma3" else int(cfg.sliding_window_pattern))
    elif rope.get("rope_type") == "dynamic" and rope.get("alpha"):  # Hunyuan: its NTK-alpha base, unscaled
        w.add_rope_freq_base(rope["rope_theta"] * rope["alpha"] ** (head_dim / (head_dim - 2)))
        w.add_rope_scaling_type(gguf.RopeScalingType.NONE)
    else:
        w.add_rope_freq_base(rope["rope_theta"])
        w.add_rope_dimension_count(int(head_dim * rope.get("partial_rotary_factor", 1.0)))
        _rope_scaling(w, rope)
        if "mrope_section" in rope:  # Qwen2-VL: the sections, padded to four
            w.add_rope_dimension_sections(list(rope["mrope_section"]) + [0] * (4 - len(rope["mrope_section"])))
    if arch == "exaone4" and cfg.sliding_window is not None:  # the converter lists the sliding layers where the
        w.add_sliding_window(cfg.sliding_window)  # config has a window, and writes neither where it has none
        w.add_sliding_window_pattern([t == "sliding_attention" for t in cfg.layer_types])
    if arch == "gemma2":
        w.add_attn_logit_softcapping(cfg.attn_logit_softcapping)
    if arch in ("granite", "granitemoe"):
        w.add_attention_scale(cfg.attention_multiplier)
    if arch == "mistral3" and "llama_4_scaling_beta" in rope:  # Ministral 3: its query temperature
        w.add_attn_temperature_scale(rope["llama_4_scaling_beta"])
        w.add_attn_temperature_length(rope["original_max_position_embeddings"])
    if arch == "llama4":  # the converter's expert count (llama.cpp: 128 experts, Maverick, has no QK norm)
        w.add_expert_count(cfg.num_local_experts)


def write_gguf(case_name: str, folder: str, path: Path, per_layer_pattern: bool = False, extra=()) -> Path:
    """A GGUF file of the case's saved weights, with the converter's conventions for its architecture: Q/K rows
    permuted where llama.cpp rotates pairs, every Gemma norm gain stored as 1 + weight, StableLM's per-head QK norm
    gains stacked, a fused QKV kept fused; ``extra``: (GGUFWriter method, value) pairs written after the rest."""
    import gguf
    from safetensors.numpy import load_file

    arch = GGUF_ARCHS[case_name]
    tensors = {}
    for f in sorted(Path(folder).glob("*.safetensors")):
        tensors |= load_file(str(f))
    cfg = getattr(transformers_module(), CASES[case_name].config).from_pretrained(folder)
    cfg = getattr(cfg, "text_config", cfg)  # an image-text model: the converter writes its text model
    at_layers = next(k for k in tensors if re.search(r"layers\.0\.self_attn\.q(kv)?_proj\.weight$", k)
                     and "vision" not in k)
    at_layers = at_layers[:at_layers.index("layers.0.") + len("layers.")]  # model.layers., language_model.model...
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny {arch}")
    _metadata(w, arch, cfg, per_layer_pattern)
    for method, value in extra:
        getattr(w, method)(value)
    shift = 1.0 if arch in NORM_SHIFT else 0.0
    roles = {"q_proj": "attn_q", "k_proj": "attn_k", "qkv_proj": "attn_qkv", "q_norm": "attn_q_norm",
             "k_norm": "attn_k_norm", "query_layernorm": "attn_q_norm", "key_layernorm": "attn_k_norm"}
    for layer in range(cfg.num_hidden_layers):
        at = f"{at_layers}{layer}."
        for hf, role in roles.items():
            if (t := tensors.get(f"{at}self_attn.{hf}.weight")) is not None:
                heads = cfg.num_attention_heads if hf == "q_proj" else cfg.num_key_value_heads
                if arch in PERMUTED and hf in ("q_proj", "k_proj"):
                    t = permute(t, heads)
                w.add_tensor(f"blk.{layer}.{role}.weight", (t + (shift if "norm" in hf else 0.0)).astype(np.float32))
        for side, heads in (("q", cfg.num_attention_heads), ("k", cfg.num_key_value_heads)):
            parts = [tensors.get(f"{at}self_attn.{side}_layernorm.norms.{h}.weight") for h in range(heads)]
            if parts[0] is not None:
                w.add_tensor(f"blk.{layer}.attn_{side}_norm.weight", np.stack(parts).astype(np.float32))
        g = tensors.get(f"{at}input_layernorm.weight", tensors.get(f"{at}attention_layernorm.weight"))  # Apertus
        if g is not None:
            w.add_tensor(f"blk.{layer}.attn_norm.weight", (g + shift).astype(np.float32))
    if (rope := cfg.rope_parameters).get("rope_type") == "llama3":  # the converter's per-frequency divisors
        from tests.pipeline.test_gguf import converter_rope_factors

        w.add_tensor("rope_freqs.weight", converter_rope_factors(
            cfg.head_dim, rope["rope_theta"], rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"],
            rope["original_max_position_embeddings"]).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def transformers_module():
    from tests.tiny_models import transformers

    return transformers


@pytest.mark.parametrize("name", list(GGUF_ARCHS))
def test_gguf_of_each_architecture_reads_back_the_hf_weights(family_model, tmp_path, name):
    """A GGUF file written as llama.cpp's converter writes the family reads back as the Hugging Face checkpoint's
    layout and weights (float32 in the file: 1e-6), folded norm gains included."""
    from pipeline.sources.gguf import open_gguf

    _, folder, _ = family_model(name)
    path = write_gguf(name, folder, tmp_path / f"{name.replace('/', '-')}.gguf")
    local, ggml = open_checkpoint(folder), open_gguf(path)
    want, got = layout_from_config(local.config, CASES[name].tower), layout_from_config(ggml.config)
    assert got.shape == want.shape and got.qk_norm == want.qk_norm
    assert ggml.config["model_type"] == want.family and ggml.provenance.format == "gguf"
    if want.rope_scaling and dict(want.rope_scaling)["rope_type"] == "llama3":
        # the file holds Llama 3's divisors, not its parameters: the reader's parameters give the same frequencies
        assert dict(got.rope_scaling)["rope_type"] == "llama3" and not got.layers and not want.layers
        np.testing.assert_allclose(inverse_frequencies(got), inverse_frequencies(want), rtol=1e-6)
    else:
        assert (got.layers, got.rope_scaling) == (want.layers, want.rope_scaling)
        if want.positional == "rope" and not want.layers:  # the base too (Hunyuan's: its NTK-alpha base)
            np.testing.assert_allclose(inverse_frequencies(got), inverse_frequencies(want), rtol=1e-6)
    for layer in range(want.n_layers):
        for fold in (False, True):
            (gq, gk), (wq, wk) = layer_weights(ggml, got, layer, fold), layer_weights(local, want, layer, fold)
            np.testing.assert_allclose(gq, wq, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(gk, wk, rtol=1e-6, atol=1e-7)


def test_gemma3_gguf_with_its_sliding_pattern_per_layer(family_model, tmp_path):
    """Newer converters write Gemma 3's pattern as one flag per layer (true = sliding): the same layout."""
    from pipeline.sources.gguf import open_gguf

    _, folder, _ = family_model("gemma3_text")
    per_layer = layout_from_config(open_gguf(write_gguf("gemma3_text", folder, tmp_path / "p.gguf", True)).config)
    assert per_layer.layers == layout_from_config(open_checkpoint(folder).config).layers
    assert [p.rope_theta for p in per_layer.layers] == [100.0, 1000.0, 100.0]


def test_gguf_metadata_of_the_variants_each_architecture_reads(family_model, tmp_path):
    """Llama 4 with a sliding window of 0 (MobileLLM) rotates every layer; a mistral3 file with a temperature scale is
    Ministral 3's text model (``test_gguf_of_each_architecture_reads_back_the_hf_weights`` reads one back), without
    one Mistral's."""
    from pipeline.sources.gguf import open_gguf

    _, folder, _ = family_model("llama4_text")
    every = layout_from_config(open_gguf(write_gguf("llama4_text", folder, tmp_path / "l4.gguf",
                                                    extra=[("add_sliding_window", 0)])).config)
    assert every.layers == () and every.positional == "rope"  # every layer alike, rotary
    assert [p.kind for p in layout_from_config(open_checkpoint(folder).config).layers] == ["rope"] * 3 + ["none"]
    _, folder, _ = family_model("mistral3/text")
    plain = layout_from_config(open_gguf(write_gguf("mistral3/text", folder, tmp_path / "m3.gguf")).config)
    ministral = open_gguf(write_gguf("mistral3/text", folder, tmp_path / "m3t.gguf",
                                     extra=[("add_attn_temperature_scale", 0.1)]))
    assert (plain.family, layout_from_config(ministral.config).family) == ("mistral", "ministral3")


# ---------------------------------------------------------------------------- GGUF of latent attention


def write_deepseek2_gguf(case_name: str, folder: str, path: Path, split_kv_b: bool) -> Path:
    """A GGUF file of a DeepSeek case as llama.cpp's converter writes it (``deepseek2``; V3 told by its sigmoid
    expert gating): the latent sizes, the head's key and value sizes (newer files: ``key_length`` the compressed
    latent's, ``key_length_mla`` the head's), YaRN with ``yarn_log_multiplier`` 0.1 mscale_all_dim, the query latent's
    tensors or ``attn_q``, ``attn_kv_a_mqa`` and its norm, and ``kv_b_proj`` whole (``attn_kv_b``, older files) or
    split into ``attn_k_b`` (each head's key rows transposed) and ``attn_v_b`` (``split_kv_b``, newer files)."""
    import gguf
    from safetensors.numpy import load_file

    tensors = load_file(str(Path(folder) / "model.safetensors"))
    cfg = getattr(transformers_module(), CASES[case_name].config).from_pretrained(folder)
    H, rope, nope, v, kvr = (cfg.num_attention_heads, cfg.qk_rope_head_dim, cfg.qk_nope_head_dim, cfg.v_head_dim,
                             cfg.kv_lora_rank)
    w = gguf.GGUFWriter(str(path), "deepseek2")
    w.add_name(f"tiny {case_name}")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_embedding_length(cfg.hidden_size)
    w.add_head_count(H)
    w.add_head_count_kv(H)
    if cfg.q_lora_rank is not None:
        w.add_q_lora_rank(cfg.q_lora_rank)
    w.add_kv_lora_rank(kvr)
    if split_kv_b:
        w.add_key_length(kvr + rope)
        w.add_value_length(kvr)
        w.add_key_length_mla(nope + rope)
        w.add_value_length_mla(v)
    else:
        w.add_key_length(nope + rope)
        w.add_value_length(v)
    w.add_rope_dimension_count(rope)
    params = cfg.rope_parameters
    w.add_rope_freq_base(params["rope_theta"])
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(params["factor"])
    w.add_rope_scaling_orig_ctx_len(params["original_max_position_embeddings"])
    w.add_rope_scaling_yarn_log_mul(0.1 * params["mscale_all_dim"])
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID if cfg.model_type == "deepseek_v3"
                             else gguf.ExpertGatingFuncType.SOFTMAX)
    roles = {"q_proj": "attn_q", "q_a_proj": "attn_q_a", "q_a_layernorm": "attn_q_a_norm", "q_b_proj": "attn_q_b",
             "kv_a_proj_with_mqa": "attn_kv_a_mqa", "kv_a_layernorm": "attn_kv_a_norm"}
    for layer in range(cfg.num_hidden_layers):
        at = f"model.layers.{layer}."
        for hf, role in roles.items():
            if (t := tensors.get(f"{at}self_attn.{hf}.weight")) is not None:
                w.add_tensor(f"blk.{layer}.{role}.weight", t.astype(np.float32))
        kv_b = tensors[f"{at}self_attn.kv_b_proj.weight"].astype(np.float32)
        if split_kv_b:  # the converter's view (H, nope + v, rank), split, k_b transposed
            per = kv_b.reshape(H, nope + v, kvr)
            w.add_tensor(f"blk.{layer}.attn_k_b.weight", np.ascontiguousarray(per[:, :nope].transpose(0, 2, 1)))
            w.add_tensor(f"blk.{layer}.attn_v_b.weight", np.ascontiguousarray(per[:, nope:]))
        else:
            w.add_tensor(f"blk.{layer}.attn_kv_b.weight", kv_b)
        w.add_tensor(f"blk.{layer}.attn_norm.weight", tensors[f"{at}input_layernorm.weight"].astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("name, split_kv_b", [("deepseek_v2", True), ("deepseek_v2-no_q_lora", False),
                                              ("deepseek_v3", True)])
def test_gguf_of_a_latent_attention_reads_back_the_hf_weights(family_model, tmp_path, name, split_kv_b):
    """DeepSeek V2 / V3 as llama.cpp writes them (``deepseek2``): the layout (latent sizes, the scale with YaRN's
    mscale, the rotary part) and every layer's effective W_Q, W_K, fold-ln gain included, equal the Hugging Face
    checkpoint's, from a kv_b_proj whole or split into attn_k_b and attn_v_b."""
    from pipeline.sources.gguf import open_gguf

    _, folder, _ = family_model(name)
    ggml = open_gguf(write_deepseek2_gguf(name, folder, tmp_path / f"{name}.gguf", split_kv_b))
    local = open_checkpoint(folder)
    want, got = layout_from_config(local.config), layout_from_config(ggml.config)
    assert ggml.config["model_type"] == want.family and got.spec.latent == want.spec.latent
    assert (got.shape, got.qk_norm, got.layers, got.rope_scaling) == (want.shape, want.qk_norm, want.layers,
                                                                      want.rope_scaling)
    assert got.scale == pytest.approx(want.scale, rel=1e-7) and want.scale != want.d_head ** -0.5
    for layer in range(want.n_layers):
        for fold in (False, True):
            (gq, gk), (wq, wk) = layer_weights(ggml, got, layer, fold), layer_weights(local, want, layer, fold)
            np.testing.assert_allclose(gq, wq, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(gk, wk, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["t5", "umt5"])
def test_gguf_of_t5_reads_back_each_towers_hf_weights(family_model, tmp_path, name):
    """T5 and UMT5 as llama.cpp writes them (``t5``: the encoder's blocks ``enc.blk.N``, the decoder's ``dec.blk.N``
    and their count, heads of ``key_length``, the relative bias tables, block 0's or UMT5's every block's): each
    tower's layout and weights, fold-ln gain included, equal the Hugging Face checkpoint's."""
    import gguf
    from safetensors.numpy import load_file

    from pipeline.sources.gguf import open_gguf

    _, folder, _ = family_model(f"{name}/encoder")
    tensors = load_file(str(Path(folder) / "model.safetensors"))
    cfg = getattr(transformers_module(), CASES[f"{name}/encoder"].config).from_pretrained(folder)
    path = tmp_path / f"{name}.gguf"
    w = gguf.GGUFWriter(str(path), "t5")
    w.add_name(f"tiny {name}")
    w.add_block_count(cfg.num_layers)
    w.add_decoder_block_count(cfg.num_decoder_layers)
    w.add_embedding_length(cfg.d_model)
    w.add_head_count(cfg.num_heads)
    w.add_key_length(cfg.d_kv)
    w.add_value_length(cfg.d_kv)
    w.add_relative_attn_buckets_count(cfg.relative_attention_num_buckets)
    for short, tower, count in (("enc", "encoder", cfg.num_layers), ("dec", "decoder", cfg.num_decoder_layers)):
        for layer in range(count):
            at = f"{tower}.block.{layer}.layer.0."
            for hf, role in (("SelfAttention.q", "attn_q"), ("SelfAttention.k", "attn_k"), ("layer_norm", "attn_norm"),
                             ("SelfAttention.relative_attention_bias", "attn_rel_b")):
                if (t := tensors.get(f"{at}{hf}.weight")) is not None:
                    w.add_tensor(f"{short}.blk.{layer}.{role}.weight", t.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    local, ggml = open_checkpoint(folder), open_gguf(path)
    assert ggml.config["model_type"] == name
    for tower in ("encoder", "decoder"):
        want, got = layout_from_config(local.config, tower), layout_from_config(ggml.config, tower)
        assert (got.shape, got.scale, got.positional) == (want.shape, want.scale, want.positional)
        for layer in range(want.n_layers):
            for fold in (False, True):
                (gq, gk), (wq, wk) = layer_weights(ggml, got, layer, fold), layer_weights(local, want, layer, fold)
                np.testing.assert_allclose(gq, wq, rtol=1e-6, atol=1e-7)
                np.testing.assert_allclose(gk, wk, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------------- GGUF of fused Q/K/V layouts

# llama.cpp architecture -> the model it is written from: a case of cases.py, or a kind of tests/tiny_models.py's
# tiny models (the first eight families)
FUSED_GGUF = {"bloom": "bloom", "gptneox": "gpt_neox", "gpt2": "gpt2", "falcon": "falcon-multi_query",
              "falcon-new": "falcon-new_decoder_architecture", "starcoder": "gpt_bigcode-multi_query"}


def converted_qkv(arch: str, w: np.ndarray, heads: int, kv: int) -> np.ndarray:
    """The fused QKV weight as llama.cpp's converter writes it: rows [Q | K | V] (from BLOOM's and GPT-NeoX's per-head
    [q | k | v], Falcon's per key/value group [q ... | k | v]), GPT-2's Conv1D transposed; GPT-BigCode's kept."""
    if arch == "gpt2":
        return w.T
    if arch in ("bloom", "gptneox"):
        per = w.reshape(heads, 3, -1, w.shape[-1])
        return np.concatenate([per[:, i].reshape(-1, w.shape[-1]) for i in range(3)])
    if arch == "falcon":
        groups = w.reshape(kv, heads // kv + 2, -1, w.shape[-1])
        return np.concatenate([groups[:, :-2].reshape(-1, w.shape[-1]), groups[:, -2].reshape(-1, w.shape[-1]),
                               groups[:, -1].reshape(-1, w.shape[-1])])
    return w


def write_fused_gguf(arch: str, folder: str, path: Path) -> Path:
    """A GGUF file of a fused family's saved weights as llama.cpp's converter writes it: the shape keys (GPT-NeoX's
    rotary dimensions), ``blk.N.attn_qkv`` rearranged (``converted_qkv``), ``attn_norm`` (and Falcon's second norm
    ``attn_norm_2``)."""
    import gguf
    from safetensors.numpy import load_file

    tensors = {}
    for f in sorted(Path(folder).glob("*.safetensors")):
        tensors |= load_file(str(f))
    local = open_checkpoint(folder)
    layout = layout_from_config(local.config)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny {arch}")
    w.add_block_count(layout.n_layers)
    w.add_embedding_length(layout.d_model)
    w.add_head_count(layout.n_heads)
    w.add_head_count_kv(layout.n_kv_heads)
    if arch == "gptneox":
        w.add_rope_dimension_count(layout.rotary_dim)
    for layer in range(layout.n_layers):
        names = qk_tensor_names(layout, local.tensor_names(), layer, fold_ln=True)
        qkv = converted_qkv(arch, tensors[names["qkv"]], layout.n_heads, layout.n_kv_heads)
        w.add_tensor(f"blk.{layer}.attn_qkv.weight", np.ascontiguousarray(qkv, dtype=np.float32))
        w.add_tensor(f"blk.{layer}.attn_norm.weight", tensors[names["ln"]].astype(np.float32))
        if (second := next((n for n in tensors if n.endswith(f"h.{layer}.ln_mlp.weight")), None)) is not None:
            w.add_tensor(f"blk.{layer}.attn_norm_2.weight", tensors[second].astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("arch", list(FUSED_GGUF))
def test_gguf_of_a_fused_layout_reads_back_the_hf_weights(family_model, tiny_model, tmp_path, arch):
    """BLOOM, GPT-NeoX, GPT-2, Falcon (multi-query, and the new decoder architecture's key/value groups) and
    GPT-BigCode as llama.cpp writes them read back as the Hugging Face checkpoint's layout and weights, the
    fold-ln gain included; a fused tensor's q and k rows alone are dequantised."""
    from pipeline.sources import gguf as gguf_source
    from pipeline.sources.gguf import open_gguf

    source = FUSED_GGUF[arch]
    folder = family_model(source)[1] if source in CASES else tiny_model(source)[1]
    path = write_fused_gguf(arch.split("-")[0], folder, tmp_path / f"{arch}.gguf")
    local, ggml = open_checkpoint(folder), open_gguf(path)
    want, got = layout_from_config(local.config), layout_from_config(ggml.config)
    assert got.shape == want.shape and got.spec.split == want.spec.split and got.layers == want.layers
    assert ggml.config["model_type"] == want.family and ggml.provenance.format == "gguf"
    rows = []
    real = gguf_source.GGUFFile.read_rows

    def counted(self, name, ranges):
        rows.append(sum(b - a for a, b in ranges))
        return real(self, name, ranges)

    gguf_source.GGUFFile.read_rows = counted
    try:
        for layer in range(want.n_layers):
            for fold in (False, True):
                (gq, gk), (wq, wk) = layer_weights(ggml, got, layer, fold), layer_weights(local, want, layer, fold)
                np.testing.assert_allclose(gq, wq, rtol=1e-6, atol=1e-7)
                np.testing.assert_allclose(gk, wk, rtol=1e-6, atol=1e-7)
    finally:
        gguf_source.GGUFFile.read_rows = real
    if want.spec.split != "columns":  # GPT-2's Conv1D is read whole, as from its own files
        assert set(rows) == {(want.n_heads + want.n_kv_heads) * want.d_head}
