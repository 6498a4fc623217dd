"""Synthetic checkpoints with the real tensor names, shapes and dtypes of the seed's largest families.

    python benchmarks/synthetic_checkpoints.py OUT_DIR [--family mistral-small-24b] [--layers 2]

Only the attention tensors (Q/K/V/O) of a handful of layers at the real width are written (random
normal / sqrt(N)), sharded like the Hub checkpoints (``model-0000i-of-0000k.safetensors`` + index), with
a config.json that the pipeline reads like the real one except for ``num_hidden_layers``. The ``rotary-*``
families are Llama-shaped sizes of no published model, for benchmarks that need a given amount of work.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _opt(width: int, heads: int) -> tuple[dict, str, list]:
    """An OPT-shaped fp16 checkpoint of ``width`` (config, dtype, tensor names and shapes per layer)."""
    config = {"model_type": "opt", "architectures": ["OPTForCausalLM"], "hidden_size": width,
              "num_attention_heads": heads, "ffn_dim": 4 * width, "word_embed_proj_dim": width,
              "do_layer_norm_before": True, "max_position_embeddings": 2048, "vocab_size": 50272,
              "torch_dtype": "float16"}
    tensors = [(f"model.decoder.layers.{{l}}.self_attn.{p}_proj.{w}", (width, width) if w == "weight" else (width,))
               for p in ("q", "k", "v", "out") for w in ("weight", "bias")]
    return config, "float16", tensors


def _llama(width: int, heads: int, kv_heads: int, head_dim: int = 64) -> tuple[dict, str, list]:
    """A Llama-shaped rotary bf16 checkpoint (grouped-query attention, every d = 0..128 profiled) of ``width``:
    not a published model, a size chosen for the work per layer (``heads`` x 129 eigenproblems of 2 head_dim)."""
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": width,
              "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
              "intermediate_size": 4 * width, "rope_theta": 10000.0, "max_position_embeddings": 4096,
              "vocab_size": 32000, "rms_norm_eps": 1e-05, "torch_dtype": "bfloat16"}
    q, kv = heads * head_dim, kv_heads * head_dim
    tensors = [("model.layers.{l}.self_attn.q_proj.weight", (q, width)),
               ("model.layers.{l}.self_attn.k_proj.weight", (kv, width)),
               ("model.layers.{l}.self_attn.v_proj.weight", (kv, width)),
               ("model.layers.{l}.self_attn.o_proj.weight", (width, q))]
    return config, "bfloat16", tensors


# family -> config (as on the Hub, or made up for the rotary-* sizes), dtype, per-layer tensors (name pattern, shape)
FAMILIES = {
    "mistral-small-24b": (
        {"model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 5120,
         "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 32768,
         "rope_theta": 100000000.0, "max_position_embeddings": 32768, "vocab_size": 131072,
         "rms_norm_eps": 1e-05, "torch_dtype": "bfloat16"},
        "bfloat16",
        [("model.layers.{l}.self_attn.q_proj.weight", (4096, 5120)),
         ("model.layers.{l}.self_attn.k_proj.weight", (1024, 5120)),
         ("model.layers.{l}.self_attn.v_proj.weight", (1024, 5120)),
         ("model.layers.{l}.self_attn.o_proj.weight", (5120, 4096))],
    ),
    # one DeepSeek-V3 layer's multi-head latent attention (its MoE left out): the query latent (q_a_proj, its norm,
    # q_b_proj), the key's compressed projection and norm, kv_b_proj whole (each head's key and value rows)
    "deepseek-v3": (
        {"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168,
         "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512,
         "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "intermediate_size": 18432,
         "rope_theta": 10000, "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                                               "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
         "max_position_embeddings": 163840, "vocab_size": 129280, "rms_norm_eps": 1e-06, "torch_dtype": "bfloat16"},
        "bfloat16",
        [("model.layers.{l}.self_attn.q_a_proj.weight", (1536, 7168)),
         ("model.layers.{l}.self_attn.q_a_layernorm.weight", (1536,)),
         ("model.layers.{l}.self_attn.q_b_proj.weight", (128 * 192, 1536)),
         ("model.layers.{l}.self_attn.kv_a_proj_with_mqa.weight", (512 + 64, 7168)),
         ("model.layers.{l}.self_attn.kv_a_layernorm.weight", (512,)),
         ("model.layers.{l}.self_attn.kv_b_proj.weight", (128 * 256, 512))],
    ),
    "opt-13b": _opt(5120, 40),
    "opt-1.3b": _opt(2048, 32),
    "rotary-1024": _llama(1024, 16, 4),  # ~1 s of single-thread profile work per layer
    "rotary-256": _llama(256, 4, 2),  # a fraction of that: quick checks of the benchmarks themselves
}


def qk_names(family: str, layers: int) -> list[str]:
    """The Q/K weight tensors the pipeline reads (biases are ignored by the profile)."""
    return [pat.format(l=layer) for layer in range(layers) for pat, _ in FAMILIES[family][2]
            if ("q_proj.weight" in pat or "k_proj.weight" in pat)]


def write_synthetic(family: str, folder: str | os.PathLike, layers: int, layers_per_shard: int = 1,
                    seed: int = 0) -> Path:
    """Write the checkpoint (skipped if ``folder`` already holds one with that many layers); returns it."""
    config, dtype, tensors = FAMILIES[family]
    return write_checkpoint(folder, config, dtype, tensors, layers, layers_per_shard, seed)


def write_checkpoint(folder: str | os.PathLike, config: dict, dtype: str, tensors: list, layers: int,
                     layers_per_shard: int = 1, seed: int = 0, single_file: bool = False) -> Path:
    """``config.json`` (with ``num_hidden_layers = layers``) and ``tensors`` (per layer: name pattern, shape) of
    ``layers`` layers, random normal / sqrt(fan in), in ``dtype``: ``model-0000i-of-0000k.safetensors`` shards of
    ``layers_per_shard`` layers and their index, or with ``single_file`` one ``model.safetensors`` and no index.
    Skipped if ``folder`` already holds one with that many layers; returns ``folder``."""
    import torch
    from safetensors.torch import save_file

    folder = Path(folder)
    marker = folder / "config.json"
    if marker.exists() and json.loads(marker.read_text()).get("num_hidden_layers") == layers:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    n_shards = 1 if single_file else -(-layers // layers_per_shard)
    layers_per_shard = layers if single_file else layers_per_shard
    weight_map, total = {}, 0
    for s in range(n_shards):
        fname = "model.safetensors" if single_file else f"model-{s + 1:05d}-of-{n_shards:05d}.safetensors"
        shard = {}
        for layer in range(s * layers_per_shard, min(layers, (s + 1) * layers_per_shard)):
            for pat, shape in tensors:
                t = torch.randn(shape, generator=gen) / shape[-1] ** 0.5
                shard[pat.format(l=layer)] = t.to(getattr(torch, dtype))
        save_file(shard, str(folder / fname), metadata={"format": "pt"})
        for name, t in shard.items():
            weight_map[name] = fname
            total += t.numel() * t.element_size()
        del shard
    if not single_file:
        (folder / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    marker.write_text(json.dumps(config | {"num_hidden_layers": layers}, indent=2))
    return folder


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--family", choices=sorted(FAMILIES), default="mistral-small-24b")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--layers-per-shard", type=int, default=1)
    args = ap.parse_args(argv)
    print(write_synthetic(args.family, args.out, args.layers, args.layers_per_shard))
    return 0


if __name__ == "__main__":
    sys.exit(main())
