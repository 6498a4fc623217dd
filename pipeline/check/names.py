"""Checkpoint tensor names -> the parameter names of the transformers model built from its config.

transformers renames some checkpoints' tensors as it loads them (ViT's ``encoder.layer.N.attention.attention.query``
is ``layers.N.attention.q_proj`` in its 5.x model) and adds or strips the base-model prefix (``model.``) between a
head class and a bare model. :func:`parameter_sources` maps names the way transformers' own loading does, through
its conversion mapping: this module is the one user of those loading internals (``transformers.conversion_mapping``,
``transformers.core_model_loading``). A tensor that transformers builds from several (a converter: fused or split
on load) is named apart, so that a caller can refuse it rather than load it wrongly.
"""

from __future__ import annotations


def parameter_sources(model, tensor_names) -> tuple[dict[str, str], set[str]]:
    """(model parameter name -> checkpoint tensor name, the parameter names transformers makes by a converter)."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightConverter, WeightRenaming, rename_source_key
    except ImportError:  # a transformers without conversion mappings loads tensors under their own names
        return _by_prefix(model, tensor_names), set()
    transforms = get_model_conversion_mapping(model)
    renamings = [t for t in transforms if isinstance(t, WeightRenaming)]
    converters = [t for t in transforms if isinstance(t, WeightConverter)]
    params = dict(model.named_parameters(remove_duplicate=False))
    out, converted = {}, set()
    for name in tensor_names:
        target, pattern = rename_source_key(name, renamings, converters, model.base_model_prefix, params)
        if target in params:
            out.setdefault(target, name)
            if pattern is not None:
                converted.add(target)
    return out, converted


def _by_prefix(model, tensor_names) -> dict[str, str]:
    prefix = f"{model.base_model_prefix}." if model.base_model_prefix else ""
    params = dict(model.named_parameters(remove_duplicate=False))
    out = {}
    for name in tensor_names:
        for target in (name, name[len(prefix):] if prefix and name.startswith(prefix) else None, prefix + name):
            if target in params:
                out.setdefault(target, name)
                break
    return out
