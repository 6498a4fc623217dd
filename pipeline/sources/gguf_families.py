"""GGUF architectures as Hugging Face families: which llama.cpp architectures the GGUF reader takes, the Hugging Face
names of their tensors, the converter's conventions to undo, and the config keys each family's entry reads.

llama.cpp's converter (``convert_hf_to_gguf.py``) permutes the Q/K rows of the families that transformers rotates
by halves and llama.cpp rotates by pairs ("norm" RoPE), stores Gemma's norm gains as 1 + weight, stacks
StableLM's per-head QK-norm gains into one (heads, n) tensor and keeps Phi-3's fused ``qkv_proj`` as
``attn_qkv``; the reader gives the Hugging Face tensors back (``pipeline.sources.gguf``).
"""

from __future__ import annotations

import re


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
}
# The converter stores Gemma's norm gains as 1 + weight (what GemmaRMSNorm multiplies by): the reader gives the
# weight back, in float64 (exact), so that the family's own convention (``gain_offset``) applies to every format.
NORM_SHIFTS = {"gemma": 1.0, "gemma2": 1.0, "gemma3": 1.0}
_ROLES = {"attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
          "attn_qkv.weight": "self_attn.qkv_proj.weight", "attn_norm.weight": "input_layernorm.weight",
          "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight"}


def hf_name(gguf_name: str) -> str | None:
    """The Hugging Face name of a GGUF tensor this reader exposes (Q, K, fused QKV, attention and QK norms), else
    None."""
    m = re.fullmatch(r"blk\.(\d+)\.(.+)", gguf_name)
    if m is None or m.group(2) not in _ROLES:
        return None
    return f"model.layers.{m.group(1)}.{_ROLES[m.group(2)]}"


def hf_tensors(reader, arch: str) -> tuple[dict[str, tuple], dict[str, str]]:
    """HF name -> (type, HF shape, memory-mapped data) of the tensors this reader exposes, and HF name -> GGUF name.
    StableLM's per-head QK LayerNorm gains, stacked (heads, n) by the converter, are given back one tensor per head
    (``q_layernorm.norms.h.weight``) as transformers stores them."""
    tensors, gguf_names = {}, {}
    for t in reader.tensors:
        if (hf := hf_name(t.name)) is None:
            continue
        entry = (t.tensor_type, tuple(int(x) for x in reversed(t.shape.tolist())), t.data)
        side = next((s for s in ("q", "k") if hf.endswith(f"self_attn.{s}_norm.weight")), None)
        if arch == "stablelm" and side is not None and len(entry[1]) == 2:
            for h in range(entry[1][0]):
                per_head = hf.replace(f"{side}_norm.weight", f"{side}_layernorm.norms.{h}.weight")
                tensors[per_head], gguf_names[per_head] = (entry[0], entry[1][1:], entry[2][h]), t.name
            continue
        tensors[hf], gguf_names[hf] = entry, t.name
    return tensors, gguf_names


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
        pattern = metadata(reader, "gemma3.attention.sliding_window_pattern", 6)
        n = config["num_hidden_layers"]
        types = (["sliding_attention" if s else "full_attention" for s in pattern] if isinstance(pattern, list)
                 else ["full_attention" if (i + 1) % int(pattern) == 0 else "sliding_attention" for i in range(n)])
        full = {"rope_type": "default", "rope_theta": config["rope_theta"]} | config.get("rope_scaling", {})
        local = {"rope_type": "default", "rope_theta": float(metadata(reader, "gemma3.rope.freq_base_swa", 10000.0))}
        return {"query_pre_attn_scalar": head_dim, "layer_types": types,
                "rope_parameters": {"full_attention": full, "sliding_attention": local}}
    if arch == "granite":
        return {"attention_multiplier": float(metadata(reader, "granite.attention.scale", 1.0))}
    if arch == "stablelm":
        return {"qk_layernorm": qk_norm}
    if arch == "command-r":
        return {"use_qk_norm": qk_norm}
    if arch == "smollm3":  # llama.cpp leaves out the rotary of every fourth layer (n_no_rope_layer_step = 4)
        return {"no_rope_layer_interval": 4}
    return {}
