"""GGUF architectures as Hugging Face families: which llama.cpp architectures the GGUF reader takes, the Hugging Face
names of their tensors, the converter's conventions to undo, and the config keys each family's entry reads.

llama.cpp's converter (``convert_hf_to_gguf.py``) permutes the Q/K rows of the families that transformers rotates by
halves and llama.cpp rotates by pairs ("norm" RoPE: Llama, Granite, Granite MoE, SmolLM3, Arcee; GLM-4 and ERNIE 4.5 are
rotated by pairs in both and kept), stores Gemma's and Nemotron's norm gains as 1 + weight, stacks StableLM's per-head
QK-norm gains into one (heads, n) tensor, keeps Phi-3's fused ``qkv_proj`` as ``attn_qkv``, writes OLMo 3 as ``olmo2``
with its sliding layers listed (``attention.sliding_window_pattern``; OLMo 2 has none), EXAONE 4's sliding layers where
its config has a window, and a YaRN scaling by its parameters without its ``truncate``. It writes the fused QKV tensor
of BLOOM, GPT-NeoX, Falcon, GPT-2 and GPT-BigCode (llama.cpp's ``starcoder``) as ``attn_qkv`` with the rows [Q (H n) | K
(Hkv n) | V (Hkv n)]: BLOOM's and GPT-NeoX's per-head [q | k | v] and Falcon's per key/value group [q ... | k | v]
rearranged so, GPT-2's Conv1D transposed; the reader gives the Hugging Face tensors back (``pipeline.sources.gguf``),
reading a fused tensor's q and k rows alone. Hunyuan's (``hunyuan-dense``) NTK-alpha rotary is written as its scaled
base, its QK-norm gains as ``attn_{q,k}_norm``. T5's (``t5``, mT5's and UMT5's too) encoder and decoder
self-attention are ``enc.blk.N.attn_{q,k}`` and ``dec.blk.N.attn_{q,k}``; an encoder alone (``T5EncoderModel``,
written as ``t5encoder``: no decoder block, no decoder block count) has the ``enc.blk.N`` tensors only. DeepSeek V2 /
V3 (``deepseek2``) keep their latent tensors, newer files with ``kv_b_proj`` split into ``attn_k_b`` (each head's key
rows transposed) and ``attn_v_b``, joined back.
"""

from __future__ import annotations

import re

import numpy as np


def metadata(header, key: str, default=None):
    """A metadata value of a parsed GGUF header (``default`` when the file has none)."""
    return header.fields.get(key, default)


# GGUF architecture -> (model_type, whether the converter permuted the Q/K rows): llama.cpp's converter permutes
# the rows of the families it rotates as interleaved pairs ("norm" RoPE in llama.cpp) while transformers rotates
# halves; the families llama.cpp rotates by halves ("neox" RoPE) keep the Hugging Face row order.
ARCHITECTURES = {
    "llama": ("llama", True), "qwen2": ("qwen2", False), "qwen3": ("qwen3", False), "qwen3moe": ("qwen3_moe", False),
    "gemma": ("gemma", False), "gemma2": ("gemma2", False), "gemma3": ("gemma3_text", False), "phi3": ("phi3", False),
    "olmo2": ("olmo2", False), "starcoder2": ("starcoder2", False), "stablelm": ("stablelm", False),
    "command-r": ("cohere", False), "granite": ("granite", True), "smollm3": ("smollm3", True),
    "bloom": ("bloom", False), "gptneox": ("gpt_neox", False), "falcon": ("falcon", False), "gpt2": ("gpt2", False),
    "starcoder": ("gpt_bigcode", False),
    "olmoe": ("olmoe", False), "glm4": ("glm4", False), "exaone4": ("exaone4", False), "ernie4_5": ("ernie4_5", False),
    "ernie4_5-moe": ("ernie4_5_moe", False), "seed_oss": ("seed_oss", False), "apertus": ("apertus", False),
    "arcee": ("arcee", True), "granitemoe": ("granitemoe", True), "nemotron": ("nemotron", False),
    "gpt-oss": ("gpt_oss", False), "llama4": ("llama4_text", False), "qwen2vl": ("qwen2_vl_text", False),
    "mistral3": ("mistral", True), "deepseek2": ("deepseek_v2", False), "hunyuan-dense": ("hunyuan_v1_dense", False),
    "t5": ("t5", False), "t5encoder": ("t5", False),
}
T5_ARCHITECTURES = ("t5", "t5encoder")  # enc.blk.N / dec.blk.N tensor names (T5, mT5, UMT5)
# Architectures whose Q/K are one fused ``attn_qkv`` of rows [Q | K | V]: the Hugging Face names of that tensor and of
# the attention norm's gain (Falcon's with two norms per layer, ``attn_norm_2`` in the file: ``ln_attn``).
FUSED = {
    "bloom": ("h.{l}.self_attention.query_key_value.weight", "h.{l}.input_layernorm.weight"),
    "gptneox": ("layers.{l}.attention.query_key_value.weight", "layers.{l}.input_layernorm.weight"),
    "falcon": ("h.{l}.self_attention.query_key_value.weight", "h.{l}.input_layernorm.weight"),
    "gpt2": ("h.{l}.attn.c_attn.weight", "h.{l}.ln_1.weight"),
    "starcoder": ("h.{l}.attn.c_attn.weight", "h.{l}.ln_1.weight"),
}
QK_ROLES = ("attn_q.weight", "attn_k.weight", "attn_qkv.weight",  # the GGUF tensors that hold W_Q and W_K
            "attn_q_a.weight", "attn_q_b.weight", "attn_kv_a_mqa.weight", "attn_kv_b.weight", "attn_k_b.weight")
TRANSPOSED = ("gpt2",)  # architectures whose ``attn_qkv`` the converter transposed (GPT-2's Conv1D)
# The converter stores Gemma's norm gains as 1 + weight (what GemmaRMSNorm multiplies by): the reader gives the
# weight back, in float64 (exact), so that the family's own convention (``gain_offset``) applies to every format.
NORM_SHIFTS = {"gemma": 1.0, "gemma2": 1.0, "gemma3": 1.0, "nemotron": 1.0}  # Nemotron's LayerNorm1P: 1 + weight too
# The Hugging Face name of the attention norm where it is not ``input_layernorm`` (under ``model.layers.N.``)
ATTN_NORMS = {"apertus": "attention_layernorm.weight"}
# The Hugging Face names of the QK-norm gains where they are not ``self_attn.{q,k}_norm`` (Hunyuan's)
QK_NORMS = {"hunyuan-dense": {"attn_q_norm.weight": "self_attn.query_layernorm.weight",
                              "attn_k_norm.weight": "self_attn.key_layernorm.weight"}}
_ROLES = {"attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
          "attn_qkv.weight": "self_attn.qkv_proj.weight", "attn_norm.weight": "input_layernorm.weight",
          "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
          # DeepSeek's latent attention (deepseek2); attn_k_b / attn_v_b, the converter's split of kv_b_proj, are
          # joined back into it (``latent_kv_b``)
          "attn_q_a.weight": "self_attn.q_a_proj.weight", "attn_q_a_norm.weight": "self_attn.q_a_layernorm.weight",
          "attn_q_b.weight": "self_attn.q_b_proj.weight",
          "attn_kv_a_mqa.weight": "self_attn.kv_a_proj_with_mqa.weight",
          "attn_kv_a_norm.weight": "self_attn.kv_a_layernorm.weight", "attn_kv_b.weight": "self_attn.kv_b_proj.weight",
          "attn_k_b.weight": "self_attn.k_b_proj.weight", "attn_v_b.weight": "self_attn.v_b_proj.weight"}


_T5_ROLES = {"attn_q": "SelfAttention.q.weight", "attn_k": "SelfAttention.k.weight", "attn_norm": "layer_norm.weight"}


def hf_name(gguf_name: str, arch: str = "", two_norms: bool = False) -> str | None:
    """The Hugging Face name of a GGUF tensor this reader exposes (Q, K, fused QKV, attention and QK norms), else
    None. ``two_norms``: a Falcon file with two norms per layer (its attention reads ``ln_attn``). T5's self-attention
    tensors are ``enc.blk.N.`` and ``dec.blk.N.``'s, under ``encoder.block.N.layer.0.`` and ``decoder...``."""
    if arch in T5_ARCHITECTURES:
        m = re.fullmatch(r"(enc|dec)\.blk\.(\d+)\.(attn_q|attn_k|attn_norm)\.weight", gguf_name)
        tower = {"enc": "encoder", "dec": "decoder"}
        return f"{tower[m.group(1)]}.block.{m.group(2)}.layer.0.{_T5_ROLES[m.group(3)]}" if m else None
    m = re.fullmatch(r"blk\.(\d+)\.(.+)", gguf_name)
    if m is None or m.group(2) not in _ROLES:
        return None
    if arch in FUSED:
        qkv, norm = FUSED[arch]
        template = {"attn_qkv.weight": qkv, "attn_norm.weight": norm}.get(m.group(2))
        if template is not None and two_norms and m.group(2) == "attn_norm.weight":
            template = "h.{l}.ln_attn.weight"
        return template.format(l=m.group(1)) if template is not None else None
    role = ATTN_NORMS.get(arch, _ROLES[m.group(2)]) if m.group(2) == "attn_norm.weight" else _ROLES[m.group(2)]
    role = QK_NORMS.get(arch, {}).get(m.group(2), role)
    return f"model.layers.{m.group(1)}.{role}"


def hf_row_order(arch: str, heads: int, kv_heads: int, head_dim: int) -> np.ndarray | None:
    """For a fused ``attn_qkv`` whose Hugging Face rows are grouped per key/value head, [q (H/Hkv heads) | k | v]
    each (BLOOM's and GPT-NeoX's per head, Falcon's with several key heads): the file's row of each Hugging Face
    row. None where the file keeps the Hugging Face order (one key head: [q | k | v] either way)."""
    if arch not in ("bloom", "gptneox") and not (arch == "falcon" and kv_heads > 1):
        return None
    r, n = heads // kv_heads, head_dim
    q = np.arange(heads * n).reshape(kv_heads, r, n)
    k = heads * n + np.arange(kv_heads * n).reshape(kv_heads, 1, n)
    return np.concatenate([q, k, k + kv_heads * n], axis=1).reshape(-1)


def hf_tensors(reader, arch: str) -> tuple[dict[str, tuple], dict[str, str]]:
    """HF name -> (type, HF shape, memory-mapped data) of the tensors this reader exposes, and HF name -> GGUF name.
    StableLM's per-head QK LayerNorm gains, stacked (heads, n) by the converter, are given back one tensor per head
    (``q_layernorm.norms.h.weight``) as transformers stores them."""
    tensors, gguf_names = {}, {}
    two_norms = arch == "falcon" and any(t.name.endswith(".attn_norm_2.weight") for t in reader.tensors)
    for t in reader.tensors:
        if (hf := hf_name(t.name, arch, two_norms)) is None:
            continue
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))
        if arch in TRANSPOSED and t.name.endswith("attn_qkv.weight"):
            shape = shape[::-1]  # the converter transposed GPT-2's Conv1D (N, 3N) into Linear rows
        entry = (t.tensor_type, shape, t.data)
        side = next((s for s in ("q", "k") if hf.endswith(f"self_attn.{s}_norm.weight")), None)
        if arch == "stablelm" and side is not None and len(entry[1]) == 2:
            for h in range(entry[1][0]):
                per_head = hf.replace(f"{side}_norm.weight", f"{side}_layernorm.norms.{h}.weight")
                tensors[per_head], gguf_names[per_head] = (entry[0], entry[1][1:], entry[2][h]), t.name
            continue
        tensors[hf], gguf_names[hf] = entry, t.name
    return tensors, gguf_names


def latent_kv_b(tensors: dict, gguf_names: dict) -> dict[str, tuple]:
    """DeepSeek's ``kv_b_proj`` from the converter's split of it (newer llama.cpp, for its absorbed attention):
    ``attn_k_b`` holds each head's key rows transposed, (H, kv_lora_rank, qk_nope_head_dim), ``attn_v_b`` its value
    rows, (H, v_head_dim, kv_lora_rank). Takes both out of ``tensors`` and puts ``kv_b_proj`` in, of its Hugging Face
    shape (H (nope + v), kv_lora_rank), and returns kv_b_proj's name -> (k_b entry, v_b entry) for the reader to
    join (``GGUFFile``): per head [k_b[h]^T | v_b[h]]."""
    joined = {}
    for k_name in [n for n in tensors if n.endswith("self_attn.k_b_proj.weight")]:
        v_name = k_name.replace("k_b_proj", "v_b_proj")
        kv_name = k_name.replace("k_b_proj", "kv_b_proj")
        k, v = tensors.pop(k_name), tensors.pop(v_name)
        (heads, rank, nope), value = k[1], v[1][1]
        tensors[kv_name] = (k[0], (heads * (nope + value), rank), k[2])
        gguf_names[kv_name] = gguf_names.pop(k_name)
        gguf_names.pop(v_name)
        joined[kv_name] = (k, v)
    return joined


def yarn_scaling(reader, arch: str, need) -> dict:
    """A YaRN ``rope_scaling`` from the converter's keys (``need(key)``: a key the file must hold): factor, original
    context, and the betas and attention factor where written. YaRN's ``truncate`` is not written (llama.cpp always
    truncates): transformers' default (true) unless the architecture's own says otherwise (``family_config``)."""
    out = {"rope_type": "yarn", "factor": float(need("rope.scaling.factor")),
           "original_max_position_embeddings": int(need("rope.scaling.original_context_length"))}
    for key, name in (("beta_fast", "yarn_beta_fast"), ("beta_slow", "yarn_beta_slow"),
                      ("attention_factor", "yarn_attn_factor")):
        if (value := metadata(reader, f"{arch}.rope.scaling.{name}")) is not None:
            out[key] = float(value)
    return out


def family_config(reader, arch: str, config: dict) -> dict:
    """The keys a family's entry reads beyond the shape, from llama.cpp's metadata and its fixed conventions."""
    names = {t.name for t in reader.tensors}
    qk_norm = "blk.0.attn_q_norm.weight" in names
    head_dim = config["head_dim"]
    if arch == "gemma2":  # the stored scale does not change a profile; llama.cpp scales by the head size
        return {"query_pre_attn_scalar": head_dim,
                "attn_logit_softcapping": metadata(reader, "gemma2.attn_logit_softcapping")}
    if arch == "gemma3":
        # llama.cpp: every sliding_window_pattern-th layer global (6 unless the file says), the sliding ones with
        # the base freq_base_swa (10000 unless the file says) and no scaling
        types = _layer_types(reader, arch, config, 6)
        return {"query_pre_attn_scalar": head_dim, "layer_types": types,
                "rope_parameters": _typed_rope(reader, arch, config, 10000.0)}
    if arch == "olmo2" and isinstance(metadata(reader, "olmo2.attention.sliding_window_pattern"), list):
        # the converter writes OLMo 3 as olmo2 with its sliding layers listed (OLMo 2 has no sliding window): OLMo 3
        return {"model_type": "olmo3", "layer_types": _layer_types(reader, arch, config, 4),
                "rope_parameters": _typed_rope(reader, arch, config, config["rope_theta"])}
    if arch == "exaone4":  # the sliding layers rotate, the global ones do not; no window written: every layer rotates
        window = metadata(reader, "exaone4.attention.sliding_window")
        if window is None:
            return {"sliding_window": None}
        return {"sliding_window": int(window), "layer_types": _layer_types(reader, arch, config, 4)}
    if arch == "llama4":
        # llama.cpp: every fourth layer without rotary (none where the file's sliding window is 0: MobileLLM), the
        # weightless QK norm on the others unless the model has 128 experts (Maverick, whose config turns it off)
        n = config["num_hidden_layers"]
        every = metadata(reader, "llama4.attention.sliding_window") == 0
        return {"no_rope_layers": [1 if every or (i + 1) % 4 else 0 for i in range(n)],
                "use_qk_norm": metadata(reader, "llama4.expert_count", 0) != 128}
    if arch == "mistral3" and metadata(reader, "mistral3.attention.temperature_scale") is not None:
        return {"model_type": "ministral3"}  # Ministral 3's text model (its query temperature)
    if arch == "deepseek2":
        return _latent_config(reader, config)
    if arch in T5_ARCHITECTURES:  # T5 and mT5 alike (the same attention); UMT5 by a relative bias table in every block
        return _t5_config(reader, arch, config, names)
    if arch == "gpt-oss" and "rope_scaling" in config:  # gpt-oss's YaRN is not truncated (GptOssConfig, its files)
        return {"rope_scaling": config["rope_scaling"] | {"truncate": False}}
    if arch in ("granite", "granitemoe"):
        return {"attention_multiplier": float(metadata(reader, f"{arch}.attention.scale", 1.0))}
    if arch == "stablelm":
        return {"qk_layernorm": qk_norm}
    if arch == "command-r":
        return {"use_qk_norm": qk_norm}
    if arch == "smollm3":  # llama.cpp leaves out the rotary of every fourth layer (n_no_rope_layer_step = 4)
        return {"no_rope_layer_interval": 4}
    return _fused_config(arch, config, names)


def _t5_config(reader, arch: str, config: dict, names: set[str]) -> dict:
    """T5's, mT5's and UMT5's sizes under their own keys. An encoder alone (``t5encoder``) is given the config that
    transformers saves with a ``T5EncoderModel`` (``UMT5EncoderModel``): its ``architectures``, and the decoder's
    layer count the config class gives where none is set, the encoder's; its decoder tower has no tensors here, as in
    that checkpoint."""
    layers = config["num_hidden_layers"]
    umt5 = "enc.blk.1.attn_rel_b.weight" in names
    out = {"model_type": "umt5" if umt5 else "t5", "d_model": config["hidden_size"],
           "num_heads": config["num_attention_heads"], "d_kv": config["head_dim"], "num_layers": layers,
           "num_decoder_layers": int(metadata(reader, f"{arch}.decoder_block_count", layers))}
    if arch == "t5encoder":
        out["architectures"] = ["UMT5EncoderModel" if umt5 else "T5EncoderModel"]
    return out


def _latent_config(reader, config: dict) -> dict:
    """DeepSeek V2 / V3 (llama.cpp's deepseek2; V3 by its sigmoid expert gating): the latent sizes (a null
    q_lora_rank where the file has none: V2-Lite's queries), the head's key and value sizes (``key_length_mla`` in
    newer files, where ``key_length`` is the compressed latent's), and YaRN's mscale: the converter writes 0.1
    mscale_all_dim as ``yarn_log_multiplier`` and llama.cpp's rotation takes mscale = mscale_all_dim (the attention
    factor 1 of DeepSeek's configs)."""
    def key(name, default=None):
        return metadata(reader, f"deepseek2.{name}", default)

    rope = key("rope.dimension_count")
    head = key("attention.key_length_mla", key("attention.key_length"))
    value = key("attention.value_length_mla", key("attention.value_length"))
    out = {"model_type": "deepseek_v3" if key("expert_gating_func") == 2 else "deepseek_v2",
           "q_lora_rank": key("attention.q_lora_rank") or None, "kv_lora_rank": key("attention.kv_lora_rank"),
           "qk_rope_head_dim": rope, "qk_nope_head_dim": None if None in (head, rope) else int(head) - int(rope),
           "v_head_dim": value}
    if "rope_scaling" in config and (log_mul := key("rope.scaling.yarn_log_multiplier")):
        mscale = float(log_mul) / 0.1
        out["rope_scaling"] = config["rope_scaling"] | {"mscale": mscale, "mscale_all_dim": mscale}
    return out


def _layer_types(reader, arch: str, config: dict, period: int) -> list[str]:
    """Each layer's attention type from ``attention.sliding_window_pattern``: one flag per layer (true = sliding), or
    a period (every period-th layer global; ``period`` where the file has none)."""
    pattern = metadata(reader, f"{arch}.attention.sliding_window_pattern", period)
    if isinstance(pattern, list):
        return ["sliding_attention" if s else "full_attention" for s in pattern]
    return ["full_attention" if (i + 1) % int(pattern) == 0 else "sliding_attention"
            for i in range(config["num_hidden_layers"])]


def _typed_rope(reader, arch: str, config: dict, swa_default: float) -> dict:
    """``rope_parameters`` per attention type: the global layers' base and scaling (``rope.freq_base``, the scaling
    keys), the sliding ones' base ``rope.freq_base_swa`` (``swa_default`` where the file has none), unscaled."""
    full = {"rope_type": "default", "rope_theta": config["rope_theta"]} | config.get("rope_scaling", {})
    local = {"rope_type": "default", "rope_theta": float(metadata(reader, f"{arch}.rope.freq_base_swa", swa_default))}
    return {"full_attention": full, "sliding_attention": local}


def _fused_config(arch: str, config: dict, names: set[str]) -> dict:
    """The keys of the fused families' entries: GPT-2's and GPT-BigCode's own size keys (GPT-BigCode in llama.cpp:
    multi-query only), Falcon's layout flags from its key heads (one: multi-query; several: the new decoder
    architecture, with one norm per layer unless the file has ``attn_norm_2``)."""
    sizes = {"n_embd": config["hidden_size"], "n_head": config["num_attention_heads"],
             "n_layer": config["num_hidden_layers"]}
    if arch == "gpt2":
        return sizes
    if arch == "starcoder":
        return sizes | {"multi_query": True}
    if arch == "falcon":
        kv = config["num_key_value_heads"]
        out = {"num_kv_heads": kv, "multi_query": kv == 1, "new_decoder_architecture": kv > 1, "alibi": False}
        return out | ({"num_ln_in_parallel_attn": 1} if kv > 1 and "blk.0.attn_norm_2.weight" not in names else {})
    return {}
