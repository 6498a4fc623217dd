"""The positional kind of every layer, from a config through its family's entry.

Rotary parameters come from transformers 5's ``rope_parameters`` (flat, or keyed by attention type as Gemma 3
and ModernBERT write them) or from the older flat keys (``rope_theta``, ``rotary_emb_base``, ``rope_scaling``,
``partial_rotary_factor``, ``rotary_pct``; per type the entry's ``type_theta`` keys such as Gemma 3's
``rope_local_base_freq``), the keys the config leaves out already filled with the family's transformers config
class's defaults (``spec.Family.filled``). Scaled RoPE of the types in
``pipeline.families.rotary.SCALED_ROPE_TYPES`` is kept as (key, value) pairs (YaRN's with its attention factor);
other types change the rotation with the sequence length, and are refused.
"""

from __future__ import annotations

from pipeline.families.errors import ArchitectureError
from pipeline.families.spec import Family, Positional

_SCALING_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


def _error(message: str) -> ArchitectureError:
    return ArchitectureError(message)


def _first(config: dict, keys, default):
    return next((config[k] for k in keys if config.get(k) is not None), default)


def _scaling(kind: str, given: dict, config: dict, truncate: bool = True) -> tuple:
    """The (key, value) pairs of a scaled RoPE of ``kind`` (``()`` for default); ``truncate``: YaRN's."""
    from pipeline.families.rotary import SCALED_ROPE_TYPES

    if kind not in SCALED_ROPE_TYPES:
        raise _error(f"rope type {kind!r} (scaled rotary embeddings) is not supported; supported: "
                     f"{', '.join(SCALED_ROPE_TYPES)}. Open an issue with the model id if you need it.")
    if kind == "default":
        return ()
    if "original_max_position_embeddings" not in given and config.get("max_position_embeddings"):
        given = given | {"original_max_position_embeddings": config["max_position_embeddings"]}
    if kind == "yarn":
        return _yarn(given, config, truncate)
    need = _SCALING_KEYS[:1] if kind == "linear" else _SCALING_KEYS
    missing = [k for k in need if given.get(k) is None]
    if missing:
        raise _error(f"rope type {kind!r} needs {', '.join(missing)} in rope_scaling; config.json is incomplete")
    return (("rope_type", kind),) + tuple((k, float(given[k])) for k in need)


def _yarn(given: dict, config: dict, truncate: bool) -> tuple:
    """YaRN's pairs, as transformers reads them: ``factor`` (null: max_position_embeddings over the original),
    ``beta_fast`` 32 and ``beta_slow`` 1 unless given, ``truncate`` and the ``attention_factor`` on cos and sin
    (``pipeline.families.rotary.yarn_attention_factor``)."""
    from pipeline.families.rotary import yarn_attention_factor

    context = given.get("original_max_position_embeddings")
    if context is None or ("factor" not in given and not config.get("max_position_embeddings")):
        raise _error("rope type 'yarn' needs factor and original_max_position_embeddings in rope_scaling; "
                     "config.json is incomplete")
    factor = given.get("factor")
    factor = float(factor) if factor is not None else float(config["max_position_embeddings"]) / float(context)
    attention = yarn_attention_factor(factor, given.get("attention_factor"), given.get("mscale"),
                                      given.get("mscale_all_dim"))
    return (("rope_type", "yarn"), ("factor", factor), ("original_max_position_embeddings", float(context)),
            ("beta_fast", float(given.get("beta_fast") or 32)), ("beta_slow", float(given.get("beta_slow") or 1)),
            ("truncate", bool(truncate)), ("attention_factor", attention))


def _rope_of(entry: Family, config: dict, n: int, layer_type: str | None):
    """(theta, rotary dimension, scaling pairs) of the layers of ``layer_type`` (None: every layer)."""
    params = config.get("rope_parameters") or {}
    scaling = config.get("rope_scaling") or {}
    if entry.fixed_rope_theta:  # the model reads none of the config's rope keys (GPT-J): its own base, no scaling
        params, scaling = {"rope_theta": entry.fixed_rope_theta, "rope_type": "default"}, {}
    if layer_type is not None and isinstance(params.get(layer_type), dict):
        params, scaling = params[layer_type], {}  # transformers 5: each type's parameters whole
    elif layer_type is not None and any(isinstance(v, dict) for v in params.values()):
        raise _error(f"rope_parameters has no entry for the layer type {layer_type!r}; config.json is inconsistent")
    type_keys = {t: (keys, default) for t, keys, default in entry.type_theta}
    if layer_type in type_keys and not params.get("rope_theta"):
        keys, default = type_keys[layer_type]
        theta = _first(config, keys, default)
        if layer_type != "full_attention":  # the old flat rope_scaling applies to the global layers alone
            scaling = {}
    else:
        theta = params.get("rope_theta", _first(config, ("rope_theta", "rotary_emb_base"), 10000.0))
    # the type under its key or the legacy key ``type``, which transformers reads in either dict
    kind = (params.get("rope_type") or params.get("type") or scaling.get("rope_type") or scaling.get("type")
            or "default")
    alpha = (params | scaling).get("alpha")
    if entry.ntk_alpha and kind == "dynamic" and alpha:  # a fixed base: transformers' ntk_alpha (Hunyuan)
        theta, kind = float(theta) * float(alpha) ** (n / (n - 2)), "default"
    if kind == "mrope":  # Qwen2-VL's multimodal rotary: on text tokens its three position ids are equal, so it is the
        kind = "default"  # ordinary rotary of the text positions, and transformers reads it as default
    # transformers reads YaRN's truncate from the top of rope_parameters, never from one layer type's entry
    top = (config.get("rope_parameters") or {}) | (config.get("rope_scaling") or {})
    pairs = _scaling(kind, params | scaling, config, top.get("truncate", True))
    if entry.rotary_dim_key:
        rotary = int(config.get(entry.rotary_dim_key) or n)
    else:
        factor = params.get("partial_rotary_factor",
                            _first(config, ("partial_rotary_factor", "rotary_pct"), 1.0))
        rotary = int(n * float(factor))
    if rotary <= 0 or rotary % 2 or rotary > n:
        raise _error(f"rotary dimension {rotary} of head size {n} is not a positive even number up to the head "
                     "size; check rotary_pct / partial_rotary_factor / rotary_dim in config.json")
    return float(theta), rotary, pairs


def _layer_types(entry: Family, config: dict, n_layers: int) -> list[str]:
    types = config.get("layer_types")
    if types is not None:
        if len(types) != n_layers:
            raise _error(f"layer_types lists {len(types)} layers for {n_layers}; config.json is inconsistent")
        return list(types)
    key, default, phase = entry.type_period
    pattern = config.get(key) if key else None
    if isinstance(pattern, str):  # EXAONE 4's letters, repeated from layer 0: L sliding, G global ("LLLG")
        return ["sliding_attention" if pattern[i % len(pattern)] == "L" else "full_attention" for i in range(n_layers)]
    period = int(pattern or default)
    return ["full_attention" if (i + phase) % period == 0 else "sliding_attention" for i in range(n_layers)]


def _uses_rope(config: dict, n_layers: int) -> list[bool]:
    """SmolLM3: ``no_rope_layers[i]`` is 1 where layer i is rotary; else every interval-th layer has none."""
    flags = config.get("no_rope_layers")
    if flags is None:
        interval = int(config.get("no_rope_layer_interval") or 4)
        return [(i + 1) % interval != 0 for i in range(n_layers)]
    if len(flags) != n_layers:
        raise _error(f"no_rope_layers lists {len(flags)} layers for {n_layers}; config.json is inconsistent")
    return [bool(f) for f in flags]


def softmax_layers(entry: Family, config: dict, n_layers: int) -> list[bool]:
    """Whether each layer of a hybrid model is softmax attention (``spec.Hybrid``); every layer of another model."""
    h = entry.hybrid
    if h is None:
        return [True] * n_layers
    listed = config.get(h.types_key)
    if listed is not None:
        if len(listed) != n_layers:
            raise _error(f"{h.types_key} lists {len(listed)} layers for {n_layers}; config.json is inconsistent")
        return [t in h.softmax for t in listed]
    if h.index_key:
        index = config.get(h.index_key)
        return [True] * n_layers if index is None else [i in set(index) for i in range(n_layers)]
    period_key, period, offset_key, offset = h.period
    period = int(config.get(period_key) or period) if period_key else period
    offset = int(config.get(offset_key) if config.get(offset_key) is not None else offset) if offset_key else offset
    return [i % period == offset for i in range(n_layers)]


def layer_positionals(entry: Family, config: dict, n: int, n_layers: int) -> list:
    """The :class:`~pipeline.families.spec.Positional` of each layer: "no form" for a hybrid model's layers that are
    not softmax attention (:func:`softmax_layers`)."""
    kinds = _layer_positionals(entry, config, n, n_layers)
    softmax = softmax_layers(entry, config, n_layers)
    if not any(softmax):
        raise _error(f"this {entry.name} config has no layer of softmax attention: nothing has a form to profile")
    return [p if s else Positional("no form") for p, s in zip(kinds, softmax, strict=True)]


def _layer_positionals(entry: Family, config: dict, n: int, n_layers: int) -> list:
    def rope(layer_type: str | None) -> Positional:
        theta, rotary, pairs = _rope_of(entry, config, n, layer_type)
        return Positional("rope", rotary, theta, entry.rotary_style, pairs)

    if entry.positional != "rope":
        return [Positional(entry.positional)] * n_layers
    if entry.layer_rule == "layer_types":
        types = _layer_types(entry, config, n_layers)
        kinds = {t: rope(t) for t in sorted(set(types))}
        return [kinds[t] for t in types]
    if entry.layer_rule == "sliding_rotary":  # EXAONE 4: its global layers carry no position (NoPE)
        rotary = rope(None)
        if "sliding_window" in config and config["sliding_window"] is None:  # no window: every layer rotates
            return [rotary] * n_layers
        return [rotary if t == "sliding_attention" else Positional("none")
                for t in _layer_types(entry, config, n_layers)]
    if entry.layer_rule == "no_rope_layers":
        rotary = rope(None)
        return [rotary if used else Positional("none") for used in _uses_rope(config, n_layers)]
    return [rope(None)] * n_layers
