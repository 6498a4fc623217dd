"""What the check can tell of a model whose ``model_type`` the family table lacks: the parts of its attention an
entry would have to map, read off transformers' own model of the config (built on the meta device, no weights).

Per part, what was found and why it is not mapped: the Q/K projections (their names and shapes; which rows are
queries and keys is what an entry's ``q`` / ``k`` / ``split`` says), the norms inside the attention (a QK-norm's
kind, place and gain), the positional kind (rotary parameters in the config, a learned position table, an additive
relative bias), other parameters of the attention (sinks, latent projections), and the layers of the layer list
without softmax attention (hybrids). An entry is added as docs/architecture.md, "Adding a family", describes.
"""

from __future__ import annotations

import re

from pipeline.families import ADDING_A_FAMILY

_QK_NAMES = re.compile(r"^(q|k|qk|qkv|query|key|query_key_value|c_attn|wqkv|in_proj|q_proj|k_proj|qkv_proj|q_lin|"
                       r"k_lin|.*q_a_proj|.*q_b_proj|.*kv_a_proj.*|.*kv_b_proj)$", re.IGNORECASE)


def _layer_list(model):
    import torch

    lists = [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.ModuleList) and len(m)
             and any("attention" in type(s).__name__.lower() for s in m[0].modules())]
    return max(lists, key=lambda nm: len(nm[1]), default=(None, None))


def _attention_of(layer):
    hits = [(n, m) for n, m in layer.named_modules() if n and "attention" in type(m).__name__.lower()
            and any(_QK_NAMES.match(c) for c, _ in m.named_children())]
    return hits[0] if hits else (None, None)


def unmapped_parts(config: dict) -> list[str]:
    """Lines naming what the check found of the attention of an unsupported ``model_type`` and could not map."""
    from pipeline.check.forward import CheckError, meta_model

    family = config.get("model_type")
    head = f"error: model_type {family!r} has no entry in the family table; the attention's parts it could not map:"
    try:
        model = meta_model(config)
    except CheckError as exc:
        return [head, f"  - the whole attention: {exc}"]
    lines = [head]
    list_name, layers = _layer_list(model)
    if layers is None:
        return [*lines, f"  - the layers: {type(model).__name__} has no list of layers holding an attention module"]
    name, attention = _attention_of(layers[0])
    if attention is None:
        return [*lines, f"  - the Q/K projections: layer 0 ({list_name}.0) has no attention module with named Q/K "
                        "projections"]
    where = f"{list_name}.0.{name}"
    projections = [(c, tuple(m.weight.shape)) for c, m in attention.named_children()
                   if _QK_NAMES.match(c) and getattr(m, "weight", None) is not None]
    lines.append(f"  - the Q/K weights ({type(attention).__name__} at {where}): "
                 + ", ".join(f"{c} {s}" for c, s in projections)
                 + "; which rows hold which head's queries and keys (q, k, split, grouping) is not mapped")
    norms = [(c, type(m).__name__) for c, m in attention.named_modules() if c and "norm" in type(m).__name__.lower()]
    if norms:
        lines.append("  - norms inside the attention: " + ", ".join(f"{c} ({t})" for c, t in norms)
                     + "; whether they act on queries and keys before the rotation, and their gain, is not mapped")
    rope = {k: config[k] for k in ("rope_parameters", "rope_scaling", "rope_theta", "rotary_emb_base",
                                   "partial_rotary_factor", "rotary_pct", "rotary_dim") if config.get(k) is not None}
    relative = [c for c, _ in attention.named_modules() if "relative" in c.lower()]
    if relative:
        lines.append(f"  - the positions: {', '.join(relative)} adds a position bias to the scores, which is no form "
                     "of the two tokens")
    elif rope:
        lines.append(f"  - the positions: rotary ({', '.join(f'{k}={v}' for k, v in rope.items())}); its style "
                     "(halves or interleaved pairs), its rotated dimensions and each layer's kind are not mapped")
    else:
        lines.append("  - the positions: no rotary parameters in the config; learned absolute or none, not mapped")
    mapped = {c for c, _ in projections} | {c.split(".")[0] for c, _ in norms}
    others = sorted({p.split(".")[0] for p, _ in attention.named_parameters()} - mapped
                    - {"v_proj", "o_proj", "value", "out_proj", "dense", "v_lin", "out_lin", "c_proj"})
    if others:
        lines.append(f"  - other parameters of the attention: {', '.join(others)}; their part in the scores is not "
                     "mapped")
    without = [i for i, layer in enumerate(layers) if _attention_of(layer)[1] is None]
    if without:
        lines.append(f"  - layers without softmax attention: {', '.join(map(str, without))} (a hybrid model); "
                     "they would be stored as layers without a form")
    lines.append(f"Add an entry for {family!r} ({ADDING_A_FAMILY}); then check this checkpoint again.")
    return lines
