"""Random baselines of a model: which kinds there are, a config for any registered shape, and a baseline's values
at d = 0 for the report.

The heads themselves are made in :mod:`pipeline.sources.baseline` (its ``baseline_heads``), from a Hugging Face
config dict, so a baseline has the model's layout (its R(d) for a rotary model).

:func:`config_for_shape` writes the config of a registered shape without any weights (``--seed-models``): the
family's config class defaults for everything but the shape (the defaults of every supported family initialise
with standard deviation 0.02, as the registered models' own configs do). :func:`head_data` computes a baseline's
profiles, statistics and spectra at d = 0 through the profile route (for the report's trained-vs-random lines).
"""

from __future__ import annotations

import numpy as np

from pipeline.analyses.head_data import HeadData, from_layers
from pipeline.schema import ModelShape


def config_for_shape(shape: ModelShape, rope_theta: float = 0.0) -> dict:
    """A config dict of ``shape``'s family (an entry of ``pipeline.families.table``) with its shape written in
    the family's own keys and its transformers config class's defaults for everything else.

    ``rope_theta``: the rotary base of a rope model (0: the family's default). Kept only when the family's
    reader gives ``shape`` back from the config; ValueError for a family whose config cannot be written from a
    shape (multi-tower models, a variant's switch)."""
    from pipeline.families import layout_from_config
    from pipeline.families.table import FAMILIES

    fam = FAMILIES.get(shape.family)
    refuse = ValueError(f"no config of family {shape.family!r} can be written from a shape; give the model's "
                        "config.json")
    if fam is None or fam.towers or fam.sub_config:
        raise refuse
    config = {"model_type": fam.name, fam.hidden[0]: shape.d_model, fam.heads[0]: shape.n_heads,
              fam.layers[0]: shape.n_layers} | ({"rope_theta": float(rope_theta)} if rope_theta else {})
    if fam.head_dim:
        config[fam.head_dim[0]] = shape.d_head
    if shape.n_kv_heads != shape.n_heads and fam.kv_keys:
        config[fam.kv_keys[0]] = shape.n_kv_heads
    if fam.rotary_dim_key:
        config[fam.rotary_dim_key] = shape.rotary_dim
    try:
        from transformers import AutoConfig

        config = AutoConfig.for_model(**config).to_dict() | config  # every other key the class's default
        layout = layout_from_config(config)
    except (ValueError, KeyError, TypeError) as e:  # the family needs more than its shape keys
        raise refuse from e
    if any(getattr(layout, k) != getattr(shape, k) for k in ("n_layers", "n_heads", "n_kv_heads", "d_model", "d_head",
                                                              "positional", "rotary_dim")):
        raise refuse
    return config


def head_data(heads, name: str, progress=None) -> HeadData:
    """A baseline's HeadData at d = 0: every layer of ``heads`` (from :func:`baseline_heads`) through
    :func:`pipeline.profile.head_profiles` (numpy route, statistics and spectra at d = 0, as a profiles run computes
    them). A hybrid model's layer without a form (Mamba, a convolution, linear attention) is made by neither kind:
    its heads hold NaN, as its profiles do (``pipeline.run.tasks.compute_layer``). ``progress(layer)`` is called
    after each layer."""
    from pipeline.profile import head_profiles
    from pipeline.schema import SPECTRA

    layout, layers = heads.layout, []
    for layer in range(layout.n_layers):
        if layout.positional_of(layer).kind == "no form":
            layers.append(None)  # filled with NaN below, at the widths of the layers with a form
        else:
            qk = heads.layer(layer)
            profile, _, statistics, spectrum, spectra = head_profiles(
                qk.W_Q, qk.W_K, kv_of_head=qk.kv_of_head, gain=qk.gain, eigvalsh="numpy", at_zero=True).layer_values()
            layers.append({"profile": profile, "statistics": statistics, "spectrum": spectrum}
                          | dict(zip(SPECTRA, spectra, strict=True)))
        if progress is not None:
            progress(layer)
    formed = next(x for x in layers if x is not None)  # a layout has a layer with a form
    layers = [x if x is not None else {k: np.full(v.shape, np.nan) for k, v in formed.items()} for x in layers]
    return from_layers(name, layout.d_model, layout.d_head, layers)
