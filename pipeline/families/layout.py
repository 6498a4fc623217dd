"""A checkpoint's :class:`Layout` from its ``config.json`` dict, read through its family's table entry.

One code path (:func:`layout_from_config`) reads every entry: the sizes from the entry's config keys, the
key/value grouping, the positional kind of each layer, the QK-norm and the softmax scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from pipeline.families.errors import ADDING_A_FAMILY, ArchitectureError
from pipeline.families.positions import layer_positionals
from pipeline.families.rotary import yarn_mscale
from pipeline.families.spec import Family, Positional
from pipeline.families.table import FAMILIES
from pipeline.schema import Conventions, ModelShape
from pipeline.schema.conventions import scaling_text


@dataclass(frozen=True)
class Layout(ModelShape):
    """Shape (the :class:`pipeline.schema.ModelShape` fields) and conventions of one checkpoint's attention.

    ``scale`` is the softmax scale of the scores (score = scale * k^T q) by the family's rule; a tanh soft-cap
    (``softcap``) and GPT-2's ``scale_attn_by_inverse_layer_idx`` change scores monotonically per layer and no
    profile. ``rotary_dim`` / ``rope_theta`` / ``rotary_style`` / ``rope_scaling`` (the (key, value) pairs of a
    scaled RoPE) are those of the model's first rotary layer; ``layers`` holds every layer's
    :class:`Positional` where they differ (SmolLM3's layers without rotary, Gemma 3's and ModernBERT's sliding
    and global layers), and is empty where all layers are alike. ``qk_norm`` names the norm on queries and keys
    ("" none, else "rms per head", "rms over the projection" or "layernorm per head", Llama 4's qualified as
    weightless, after the rotation and on the rotary layers, and followed by its query temperature). ``tower``
    names the tower of a multi-tower model ("" for others). ``spec`` is the family's table entry with the config's
    variants applied: what the tensor readers read.
    """

    rope_theta: float = 0.0
    rotary_style: str = ""
    rope_scaling: tuple = ()
    scale: float = 1.0
    pre_norm: bool = True
    layers: tuple[Positional, ...] = ()
    qk_norm: str = ""
    softcap: float = 0.0
    tower: str = ""
    spec: Family | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        super().__post_init__()
        if self.n_heads % self.n_kv_heads:
            raise ArchitectureError(f"{self.n_heads} attention heads cannot be grouped over {self.n_kv_heads} "
                                    "key/value heads; the config is inconsistent")
        if self.layers and len(self.layers) != self.n_layers:
            raise ArchitectureError(f"{len(self.layers)} per-layer positional kinds for {self.n_layers} layers")

    def positional_of(self, layer: int) -> Positional:
        """The positional kind of ``layer`` (every layer's is the model's where ``layers`` is empty)."""
        if self.layers:
            return self.layers[layer]
        return Positional(self.positional, self.rotary_dim, self.rope_theta, self.rotary_style, self.rope_scaling)

    def score_scale(self, layer: int) -> float:
        """The positive constant the scores of ``layer`` carry beside its form: ``scale``, times YaRN's attention
        factor squared on a YaRN layer (it multiplies cos and sin, so the query and the key). No profile changes."""
        p = self.positional_of(layer)
        factor = dict(p.scaling).get("attention_factor", 1.0) if p.kind == "rope" else 1.0
        return float(self.scale) * float(factor) ** 2

    def conventions(self) -> Conventions:
        """What the store records beside the shape (``pipeline.schema.Conventions``): the tower, the QK-norm, the
        scale and its rule, the soft-cap, and every layer's positional kind, rotary base and scaling."""
        per = [self.positional_of(layer) for layer in range(self.n_layers)]
        return Conventions(tower=self.tower, qk_norm=self.qk_norm, scale=float(self.scale),
                           scale_rule=self.spec.scale if self.spec is not None else "", softcap=float(self.softcap),
                           layer_positional=tuple(p.kind for p in per),
                           layer_rope_theta=tuple(float(p.rope_theta) if p.kind == "rope" else 0.0 for p in per),
                           layer_rope_scaling=tuple(scaling_text(p.scaling) if p.kind == "rope" else "" for p in per))


def supported(towered: bool | None = None) -> str:
    """The supported model types, for messages and --help: all of them (``towered`` None, multi-tower ones with
    their towers), or only those of one tower (False) or of several (True)."""
    names = []
    for name, f in FAMILIES.items():
        if towered is None or towered == bool(f.towers):
            names.append(name if not f.towers else f"{name} ({' + '.join(t for t, _ in f.towers)})")
    return ", ".join(names)


def towers(config: dict) -> tuple[str, ...]:
    """The towers of a multi-tower model's config (CLIP: text, vision; Whisper: encoder, decoder), those its
    checkpoint holds (a T5EncoderModel's: encoder); () for others."""
    entry = FAMILIES.get(config.get("model_type"))
    return entry.towers_held(config) if entry is not None else ()


def _get(config: dict, keys, what: str, default=None):
    for k in keys:
        if config.get(k) is not None:
            return config[k]
    if default is not None:
        return default
    raise ArchitectureError(f"config.json of this {what} checkpoint has none of the keys {tuple(keys)}; is it a "
                            "complete Hugging Face config?")


def _entry(config: dict, tower: str | None) -> tuple[Family, dict]:
    """The resolved entry and the (sub-)config it reads."""
    family = config.get("model_type")
    entry = FAMILIES.get(family)
    if entry is None:
        raise ArchitectureError(f"model_type {family!r} is not supported; supported families: {supported()}. To add "
                                f"one, see {ADDING_A_FAMILY}.")
    if entry.towers:
        names = [t for t, _ in entry.towers]
        held = entry.towers_held(config)
        if tower in names and tower not in held:
            classes = ", ".join(config.get("architectures") or ())
            raise ArchitectureError(f"this {family} checkpoint ({classes}) holds the {' and '.join(held)} tower "
                                    f"alone: it has no {tower} tower")
        if tower not in names:
            raise ArchitectureError(f"{family} is a model of {len(names)} towers ({', '.join(names)}): name one of "
                                    f"them{f', not {tower!r}' if tower else ''} (layout_from_config(config, tower=...)"
                                    "); the profiles command stores each tower as NAME/tower")
        entry = entry.tower(tower)
        if entry.sub_config:
            sub = config.get(entry.sub_config)
            if not isinstance(sub, dict) and any(k in config for k in entry.hidden):
                sub = config  # a flat config (Qwen2-VL's on the Hub): its text tower's keys at the top
            if not isinstance(sub, dict):
                raise ArchitectureError(f"config.json of this {family} checkpoint has no {entry.sub_config!r} "
                                        f"dict for its {tower} tower; is it a complete Hugging Face config?")
            config = sub
        if entry.by_model_type:
            inner = FAMILIES.get(config.get("model_type"))
            if inner is None or inner.towers or inner.by_model_type:
                raise ArchitectureError(f"the {tower} tower of this {family} checkpoint is a "
                                        f"{config.get('model_type')!r} model, which is not supported; supported "
                                        f"families: {supported(False)}")
            entry = replace(inner, within=entry.within)
    elif tower:
        raise ArchitectureError(f"{family} has no towers; it is profiled whole (asked for tower {tower!r})")
    config = entry.filled(config)  # the keys config.json leaves out, as the family's transformers config class fills
    entry = entry.resolved(config)
    if entry.unsupported:
        raise ArchitectureError(f"{family} with {entry.unsupported} is not supported")
    return entry, config


def layout_from_config(config: dict, tower: str | None = None) -> Layout:
    """The :class:`Layout` of a checkpoint (or of its ``tower``, for CLIP and Whisper) from its config dict.

    Raises ArchitectureError for an unsupported ``model_type`` (listing the supported ones), a multi-tower
    model without a tower, or an inconsistent config.
    """
    entry, cfg = _entry(config, tower)
    what = repr(config.get("model_type"))
    N, H, L = (int(_get(cfg, keys, what)) for keys in (entry.hidden, entry.heads, entry.layers))
    if L < 1:
        raise ArchitectureError(f"the config gives {L} layers; a model needs at least one attention layer to profile.")
    if entry.grouping == "grouped":
        kv = int(_get(cfg, entry.kv_keys, what, default=H))
    else:
        kv = 1 if entry.grouping == "multi-query" else H
    n = int(_get(cfg, entry.head_dim, what, default=0)) if entry.head_dim else 0
    if entry.latent is not None:  # latent attention: a head of [rope | nope] dimensions, its sizes filled in
        entry = replace(entry, latent=_latent_sizes(entry.latent, cfg, what))
        n = entry.latent.size("qk_rope_head_dim") + entry.latent.size("qk_nope_head_dim")
    if not n:
        if N % H:
            raise ArchitectureError(f"hidden size {N} is not divisible by {H} heads; the config is inconsistent")
        n = N // H
    if entry.embedding_key and cfg.get(entry.embedding_key) not in (None, N):
        entry = replace(entry, ln_first="")  # embeddings projected after their norm: layer 0 reads no norm output
    layers = layer_positionals(entry, cfg, n, L)
    if entry.latent is not None:
        _refuse_latent_yarn_factor(layers, what)
    # the model's kind: its first rotary layer's, else its first layer with a form (a hybrid's softmax layer)
    first = next((p for p in layers if p.kind == "rope"), next(p for p in layers if p.kind != "no form"))
    uniform = all(p == layers[0] for p in layers)
    norms = ("" if entry.qk_norm is None else entry.qk_norm.text(), "" if entry.latent is None else entry.latent.text())
    qk = "; ".join(t for t in (*norms, entry.query_temperature) if t)
    return Layout(family=entry.name, n_layers=L, n_heads=H, n_kv_heads=kv, d_model=N, d_head=n,
                  positional=first.kind, rotary_dim=first.rotary_dim, rope_theta=first.rope_theta,
                  rotary_style=first.style, rope_scaling=first.scaling, scale=_scale(entry, cfg, n, what),
                  pre_norm="{p}" not in entry.ln, layers=() if uniform else tuple(layers), qk_norm=qk,
                  softcap=float(cfg.get(entry.softcap_key) or 0.0) if entry.softcap_key else 0.0,
                  tower=tower or "", spec=entry)


def _latent_sizes(latent, cfg: dict, what: str):
    """The latent's sizes from the config: q_lora_rank null (no query latent) is 0."""
    if "q_lora_rank" not in cfg:
        raise ArchitectureError(f"config.json of this {what} checkpoint has no q_lora_rank (null where the queries "
                                "have no latent); is it a complete Hugging Face config?")
    sizes = [int(cfg["q_lora_rank"] or 0)] + [int(_get(cfg, (key,), what)) for key in latent.keys[1:]]
    return replace(latent, sizes=tuple(sizes))


def _refuse_latent_yarn_factor(layers, what: str) -> None:
    """YaRN's attention factor multiplies cos and sin: in latent attention the rotary part of the score alone, which
    no constant beside the form gives. DeepSeek's configs set mscale = mscale_all_dim, a factor of 1; others are
    refused."""
    for p in layers:
        factor = dict(p.scaling).get("attention_factor", 1.0) if p.kind == "rope" else 1.0
        if abs(factor - 1.0) > 1e-12:
            raise ArchitectureError(f"{what} with a YaRN attention factor {factor:g} (it scales the rotary part of a "
                                    "latent attention's score alone, which no form states) is not supported")


def _scale(entry: Family, cfg: dict, n: int, what: str) -> float:
    if entry.scale == "1":
        return 1.0
    if entry.scale == "1/sqrt(head_dim)":
        return 1.0 / math.sqrt(n)
    if entry.scale == "1/sqrt(head_dim) yarn mscale_all_dim^2":  # transformers' yarn_apply_mscale (DeepSeek)
        rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
        kind = rope.get("rope_type") or rope.get("type") or "default"
        m = rope.get("mscale_all_dim") or 0
        return (yarn_mscale(float(rope["factor"]), float(m)) ** 2 if kind != "default" and m else 1.0) / math.sqrt(n)
    if entry.scale == "key_multiplier/sqrt(head_dim)":  # Falcon-H1: the keys times key_multiplier
        multiplier = float(cfg.get("key_multiplier") if cfg.get("key_multiplier") is not None else 1.0)
        if multiplier <= 0:  # a negative factor would turn the form's sign, which no positive scale states
            raise ArchitectureError(f"{what} with key_multiplier {multiplier:g} (not positive) is not supported")
        return multiplier / math.sqrt(n)
    if entry.scale == "1/sqrt(query_pre_attn_scalar)":
        return float(_get(cfg, ("query_pre_attn_scalar",), what)) ** -0.5
    return float(_get(cfg, ("attention_multiplier",), what))
