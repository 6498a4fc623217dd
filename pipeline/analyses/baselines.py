"""Random baselines of a model: which kinds there are, a config for any registered shape, and a baseline's values
at d = 0 for the report.

The two kinds (``KINDS``) are the i.i.d. Gaussian products (:mod:`pipeline.analyses.iid_heads`) and the library's
own initialisation (:mod:`pipeline.analyses.init_heads`). Both start from a Hugging Face config dict, so a baseline
has the model's layout (its R(d) for a rotary model); :func:`baseline_heads` gives an object with ``layout`` and
``layer(l) -> LayerQK``, the form of a checkpoint's layer on its way to :func:`pipeline.profile.head_profiles`.

:func:`config_for_shape` writes the config of a registered shape without any weights (``--seed-models``): the
family's config class defaults for everything but the shape (the defaults of every supported family initialise
with standard deviation 0.02, as the registered models' own configs do). :func:`head_data` computes a baseline's
profiles, statistics and spectra at d = 0 through the profile route (for the report's trained-vs-random lines).
"""

from __future__ import annotations

from pipeline.analyses.head_data import HeadData, from_layers
from pipeline.schema import ModelShape

KINDS = ("iid", "init")
KIND_HELP = {"iid": "W_Q, W_K with i.i.d. standard normal entries at the model's shape",
             "init": "the heads transformers' own _init_weights gives a model of the config as training starts"}


def baseline_heads(config: dict, kind: str, seed: int):
    """The baseline of ``kind`` and ``seed`` for ``config`` (object with ``layout`` and ``layer(l)``)."""
    if kind not in KINDS:
        raise ValueError(f"baseline kind must be one of {', '.join(KINDS)}; got {kind!r}")
    if kind == "iid":
        from pipeline.analyses.iid_heads import IidHeads
        from pipeline.architectures import layout_from_config

        return IidHeads(layout_from_config(config), seed)
    from pipeline.analyses.init_heads import InitHeads

    return InitHeads(config, seed)


def config_for_shape(shape: ModelShape, rope_theta: float = 0.0) -> dict:
    """A config dict of ``shape``'s family with its shape and the family's defaults for everything else.

    ``rope_theta``: the rotary base of a rope model (0: the family's default). ValueError for a family without
    a config here."""
    f, N, H, L = shape.family, shape.d_model, shape.n_heads, shape.n_layers
    if f == "gpt2":
        return {"model_type": f, "n_embd": N, "n_head": H, "n_layer": L}
    if f == "bloom":
        return {"model_type": f, "hidden_size": N, "n_head": H, "n_layer": L}
    common = {"model_type": f, "hidden_size": N, "num_attention_heads": H, "num_hidden_layers": L,
              "intermediate_size": 4 * N}
    if f == "bert":
        return common
    if f == "opt":
        return common | {"ffn_dim": 4 * N, "word_embed_proj_dim": N}
    rope = {"rope_theta": float(rope_theta)} if rope_theta else {}
    if f == "gpt_neox":
        return common | {"rotary_pct": shape.rotary_dim / shape.d_head} | (
            {"rotary_emb_base": float(rope_theta)} if rope_theta else {})
    if f in ("mistral", "llama", "qwen2"):
        return common | {"num_key_value_heads": shape.n_kv_heads, "head_dim": shape.d_head} | rope
    raise ValueError(f"no config of family {f!r} can be written from a shape; give the model's config.json")


def head_data(heads, name: str, progress=None) -> HeadData:
    """A baseline's HeadData at d = 0: every layer of ``heads`` (from :func:`baseline_heads`) through
    :func:`pipeline.profile.head_profiles` (numpy route, statistics) and :func:`pipeline.analyses.spectra.head_spectra`.
    ``progress(layer)`` is called after each layer."""
    from pipeline.analyses.spectra import head_spectra
    from pipeline.profile import head_profiles

    layout, layers = heads.layout, []
    for layer in range(layout.n_layers):
        qk = heads.layer(layer)
        profile, _, statistics, spectrum = head_profiles(qk.W_Q, qk.W_K, kv_of_head=qk.kv_of_head, gain=qk.gain,
                                                         eigvalsh="numpy", at_zero=True).layer_values()
        spectra = head_spectra(qk.W_Q, qk.W_K, kv_of_head=qk.kv_of_head, gain=qk.gain)
        layers.append({"profile": profile, "statistics": statistics, "spectrum": spectrum} | spectra.as_dict())
        if progress is not None:
            progress(layer)
    return from_layers(name, layout.d_model, layout.d_head, layers)
