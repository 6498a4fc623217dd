"""The entry type of the family table: what one family's attention looks like in its config and tensors.

An entry is data only: config key names, tensor name templates, the split of a fused Q/K tensor, the key/value
grouping, the positional rule, the QK-norm, the layer-norm gain that ``--fold-ln`` folds and the softmax scale
rule. ``pipeline.families.layout`` reads the config through an entry and ``pipeline.families.tensors`` reads
the weights; neither knows any family by name.

Templates name a tensor by the *suffix* of its name, with ``{l}`` the layer, ``{p}`` the layer before it
(post-norm families) and ``{h}`` a head (a norm stored as one tensor per head). A config whose flags change
the layout (Falcon's ``new_decoder_architecture``, GPT-BigCode's ``multi_query``, StableLM's
``qk_layernorm``, ...) picks a variant: every :class:`When` whose condition holds is applied in order, later
ones overriding earlier ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

# How the Q and K rows sit in the tensor(s) of one layer (torch Linear layout, rows = outputs):
SPLITS = {
    "separate": "q and k in tensors of their own, (H n, N) and (Hkv n, N)",
    "rows": "one fused tensor, rows [q (H n) | k (Hkv n) | v (Hkv n)]",
    "groups": "one fused tensor, per key/value group the rows [q (H/Hkv heads) | k | v]; per head [q | k | v] "
              "when every head is its own group",
    "columns": "a Conv1D weight (N, 3 N), columns [q | k | v] (x @ W)",
    "latent": "multi-head latent attention (DeepSeek V2 / V3): q from q_proj, or through a low-rank latent "
              "(q_a_proj, its RMS norm, q_b_proj); k from one compressed projection [key latent | one rotary key "
              "shared by every head] (kv_a_proj_with_mqa), the latent's RMS norm and kv_b_proj's key rows",
}
# How query heads share key heads: query head h reads key head h // (H / Hkv).
GROUPINGS = ("multi-head", "grouped", "multi-query")
# Per-layer positional rules of rotary families.
LAYER_RULES = {
    "": "every layer alike",
    "no_rope_layers": "config list, 1 = rotary, 0 = none (SmolLM3); else every no_rope_layer_interval-th none",
    "layer_types": "rotary parameters per attention type of each layer (Gemma 3, ModernBERT, OLMo 3)",
    "sliding_rotary": "rotary on the sliding-window layers, none on the full-attention ones, where the config has a "
                      "sliding window; every layer rotary where it has none (EXAONE 4)",
}
# Softmax scale rules: score = scale * k^T q.
SCALES = ("1/sqrt(head_dim)", "1", "1/sqrt(query_pre_attn_scalar)", "attention_multiplier",
          "1/sqrt(head_dim) yarn mscale_all_dim^2", "key_multiplier/sqrt(head_dim)")


@dataclass(frozen=True)
class Positional:
    """The positional kind of one layer: ``kind`` (learned absolute, alibi, rope, none) and, for rope, the
    rotated dimensions of a head, the base, the style (``half`` or ``interleaved``) and the scaling pairs."""

    kind: str
    rotary_dim: int = 0
    rope_theta: float = 0.0
    style: str = ""
    scaling: tuple = ()


@dataclass(frozen=True)
class QKNorm:
    """A norm on the queries and keys, applied before the rotation (or after it, where it has no gain: see below).

    ``kind``: ``rms`` (x / sqrt(mean x^2 + eps)) or ``layernorm`` (centred first, C = I - 11^T / n).
    ``over``: ``head`` (each head's n values) or ``projection`` (all H n values at once; RMS only).
    ``gain``: how the gain is stored: ``shared`` (n,) for every head, ``per_head`` (heads, n) in one tensor,
    ``each_head`` one (n,) tensor per head (``{h}`` in the template), ``projection`` (heads n,), or ``none``
    (a weightless norm, no tensors: Llama 4's). ``rotary_only``: the norm runs on the rotary layers alone.
    ``after_rotation``: it runs on the rotated q and k, an RMS norm over each head: a rotation keeps a head's RMS,
    so its divisor is that of the unrotated vector. Weightless (Llama 4's), the form is unchanged. With gains G_q, G_k
    (Hunyuan's, shared by every head) the score is x_j^T W_K^T R(j)^T G_k G_q R(i) W_Q x_i / (r_q r_k), no function of
    i - j alone (the gains do not commute with R): the form read is the one with the key at position 0 and the query
    at position d, L(d) = W_K^T G_k G_q R(d) W_Q, both gains folded into W_K.
    """

    kind: str
    over: str
    gain: str
    q: str = ""
    k: str = ""
    rotary_only: bool = False
    after_rotation: bool = False

    def __post_init__(self):
        if self.kind not in ("rms", "layernorm") or self.over not in ("head", "projection"):
            raise ValueError(f"QKNorm kind {self.kind!r} over {self.over!r} is not one the readers know")
        if self.gain not in ("shared", "per_head", "each_head", "projection", "none"):
            raise ValueError(f"QKNorm gain layout {self.gain!r} is not one the readers know")
        if self.over == "projection" and self.kind != "rms":
            raise ValueError("a LayerNorm over the whole projection does not factor per head")
        if self.after_rotation and ((self.kind, self.over) != ("rms", "head") or self.gain not in ("none", "shared")):
            raise ValueError("a norm after the rotation is read only as an RMS norm per head, weightless or with one "
                             "gain shared by every head")
        if (self.gain == "none") == bool(self.q or self.k):
            raise ValueError("name the gain tensors of q and k, unless the norm is weightless")

    def text(self) -> str:
        """What the store records (``Conventions.qk_norm``): 'rms per head', 'layernorm per head', 'rms over the
        projection', with Llama 4's qualifiers."""
        out = f"{self.kind} per head" if self.over == "head" else f"{self.kind} over the projection"
        extra = [word for word, on in (("weightless", self.gain == "none"),
                                       ("after the rotation", self.after_rotation),
                                       ("with gains: the form of the key at position 0 and the query at d",
                                        self.after_rotation and self.gain != "none"),
                                       ("on the rotary layers", self.rotary_only)) if on]
        return out + (f" ({', '.join(extra)})" if extra else "")


@dataclass(frozen=True)
class Latent:
    """Multi-head latent attention's tensors (templates) and sizes (config keys; ``sizes`` their values, filled in
    from the config when a layout is read). Query head h is q_h = W_qb[h] G_qa W_qa x / r_qa(x), or W_q[h] x where
    ``q_a`` is "" (no query latent: DeepSeek-V2-Lite); key head h is [k_nope_h | k_rope] with k_nope_h =
    W_kvb_k[h] G_kva c(x) / r_kva(x), c(x) the first kv_lora_rank rows of W_kva x and k_rope its last
    qk_rope_head_dim rows, shared by every head, rotated and not normalised. The effective head puts the rotary
    dimensions first: [rope | nope] (``pipeline.families.latent``)."""

    kv_a: str
    kv_a_norm: str
    kv_b: str
    q: str = ""
    q_a: str = ""
    q_a_norm: str = ""
    q_b: str = ""
    keys: tuple[str, ...] = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
    sizes: tuple[int, ...] = ()

    def size(self, key: str) -> int:
        return self.sizes[self.keys.index(key)]

    def text(self) -> str:
        """What the store records (``Conventions.qk_norm``)."""
        which = "the query and key latents" if self.size("q_lora_rank") else "the key latent"
        return f"rms of {which} (latent attention): the form at unit-RMS latents, the norms' gains folded in"


@dataclass(frozen=True)
class Hybrid:
    """A hybrid model's layers of softmax attention, the only ones with a form; the others (``other``: Mamba, short
    convolutions, linear attention) hold no query-key product to profile and are stored as layers without a form
    (positional kind "no form", their profiles NaN). The softmax layers, from the first of these a config has:
    ``types_key`` (a list of each layer's type; the types in ``softmax``), ``index_key`` (the softmax layers'
    indices; absent: every layer), else ``period`` (period key, default, offset key, default): layer i is softmax
    where i % period == offset. These are the rules of the family's transformers config class."""

    other: str
    softmax: tuple[str, ...] = ("full_attention",)
    types_key: str = "layer_types"
    index_key: str = ""
    period: tuple = ()


class _Set:
    def __repr__(self) -> str:
        return "SET"


SET = _Set()  # a When value: the key is present and not null (OLMoE's clip_qkv), whatever its value


@dataclass(frozen=True)
class When:
    """A variant: where ``config[key]`` (``default`` when the key is absent) equals ``value`` (or, for ``SET``,
    is present and not null), the entry's fields named in ``changes`` take these values."""

    key: str
    value: object
    changes: tuple[tuple[str, object], ...]
    default: object = None

    def holds(self, config: dict) -> bool:
        got = config.get(self.key)
        if self.value is SET:
            return got is not None
        return (self.default if got is None else got) == self.value


def when(key: str, value, default=None, **changes) -> When:
    return When(key, value, tuple(changes.items()), default)


@dataclass(frozen=True)
class Family:
    """One family (or one tower of a multi-tower model): the table's entry. See the module docstring."""

    name: str
    kind: str  # decoder, encoder, vision, audio (for the docs and the error message)
    # config keys (first present wins); ``sub_config``: the config's sub-dict this tower reads
    hidden: tuple[str, ...] = ("hidden_size",)
    heads: tuple[str, ...] = ("num_attention_heads",)
    layers: tuple[str, ...] = ("num_hidden_layers",)
    head_dim: tuple[str, ...] = ()  # keys that may give the head size (else hidden / heads)
    sub_config: str = ""
    # a tower that is a model of its own family: the entry of its sub-config's model_type (Mistral 3's text_config)
    by_model_type: bool = False
    # a tower whose tensor names end like another tower's: only names holding one of these are its own
    within: tuple[str, ...] = ()
    # key/value grouping: "multi-head", "grouped" (kv_keys, else H) or "multi-query" (one key head)
    grouping: str = "multi-head"
    kv_keys: tuple[str, ...] = ("num_key_value_heads",)
    # the Q/K tensors: ``q`` and ``k`` templates, or ``q`` alone naming the fused tensor
    q: str = ""
    k: str = ""
    split: str = "separate"
    # positional: "learned absolute", "alibi", "rope" or "none"; rotary style and its dimension
    positional: str = "rope"
    rotary_style: str = "half"
    rotary_dim_key: str = ""  # a config key giving the rotary dimension itself (GPT-J's rotary_dim)
    # a rotary base the model fixes, whatever the config says: no rope key of the config is read, no scaling (GPT-J's)
    fixed_rope_theta: float = 0.0
    layer_rule: str = ""
    # layer_types derived from a period where the config has no list: (key, default period, phase): layer i is
    # full attention when (i + phase) % period == 0; and per type the old flat keys of its rope base, with the
    # config class's default: (type, keys, default)
    type_period: tuple = ()
    type_theta: tuple[tuple[str, tuple[str, ...], float], ...] = ()
    qk_norm: QKNorm | None = None
    latent: Latent | None = None  # split "latent": multi-head latent attention's tensors and sizes
    hybrid: Hybrid | None = None  # a hybrid model: which layers are softmax attention (the others have no form)
    # the query tensor holds per head [query (n rows) | output gate (n rows)] (Qwen3-Next's gated attention): its
    # query rows alone are read; the gate, a sigmoid on the attention's output, is no part of the score
    gated_query: bool = False
    # a positive per-query factor on the queries (Llama 4's attention temperature on its layers without rotary,
    # Ministral 3's on every layer), for the record: treated as the QK-norm divisors are, it changes no form
    query_temperature: str = ""
    gain_offset: float = 0.0  # every norm's gain is gain_offset + weight (Gemma: 1 + weight)
    # a rope type "dynamic" with an ``alpha`` is NTK-alpha scaling, a fixed base theta alpha^(n / (n - 2)) (Hunyuan's)
    ntk_alpha: bool = False
    # --fold-ln: the gain of the norm whose output enters layer l's attention ({p} = l - 1); ``ln_first`` for
    # layer 0 when it differs ("" = none); ``ln`` "" = no such norm (OLMo 2: attention reads the residual)
    ln: str = ""
    ln_first: str | None = None
    embedding_key: str = ""  # the embedding width, where a projection after the embeddings' norm may follow it
    scale: str = "1/sqrt(head_dim)"
    softcap_key: str = ""  # a config key for tanh soft-capping of the scores (does not change a profile)
    unsupported: str = ""  # set by a variant the readers cannot profile: the reason, for the error message
    # what the family's transformers config class gives where config.json leaves a key out: (key, value) for the keys
    # this table reads whose class default differs from the readers' own fallback (hidden / heads for head_dim, every
    # head its own key head, the rotary base 10000, rotary on the whole head, no scaling); ``rope_parameters`` (its
    # pairs) where the config has neither rope_parameters nor rope_scaling, as the class fills it (``filled``)
    defaults: tuple[tuple[str, object], ...] = ()
    variants: tuple[When, ...] = ()
    towers: tuple[tuple[str, Family], ...] = field(default=(), repr=False)
    # model classes whose checkpoints hold some of the towers alone, as config.json's ``architectures`` names them:
    # (class, its towers) (T5EncoderModel: the encoder); other checkpoints hold every tower
    towers_of_class: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __post_init__(self):
        if self.split not in SPLITS:
            raise ValueError(f"{self.name}: split {self.split!r} not among {tuple(SPLITS)}")
        if self.grouping not in GROUPINGS:
            raise ValueError(f"{self.name}: grouping {self.grouping!r} not among {GROUPINGS}")
        if self.layer_rule not in LAYER_RULES:
            raise ValueError(f"{self.name}: layer rule {self.layer_rule!r} not among {tuple(LAYER_RULES)}")
        if self.scale not in SCALES:
            raise ValueError(f"{self.name}: scale rule {self.scale!r} not among {SCALES}")
        if (self.split == "latent") != (self.latent is not None):
            raise ValueError(f"{self.name}: a latent split names its tensors in ``latent``, and only it does")
        if not self.towers and not self.by_model_type and self.split != "latent" and (
                not self.q or (self.split == "separate") != bool(self.k)):
            raise ValueError(f"{self.name}: name q and k for separate tensors, q alone for a fused one")
        if "{p}" in self.ln and self.ln_first is None:
            raise ValueError(f"{self.name}: a gain of the layer before ({self.ln!r}) needs ln_first for layer 0")

    def resolved(self, config: dict) -> Family:
        """The entry with every variant whose condition ``config`` meets applied (and no variants left)."""
        out = self
        for v in self.variants:
            if v.holds(config):
                out = replace(out, **dict(v.changes))
        return replace(out, variants=())

    def filled(self, config: dict) -> dict:
        """``config`` with ``defaults`` where it leaves their keys out; a key it gives, null included, is its own, as
        transformers' config classes read it (their ``rope_parameters`` default also replaces a null one, and a
        ``rope_scaling`` is taken in its stead)."""
        out = dict(config)
        for key, value in self.defaults:
            if key == "rope_parameters":
                if config.get(key) is None and not config.get("rope_scaling"):
                    out[key] = dict(value)
            elif key not in config:
                out[key] = value
        return out

    def tower(self, name: str) -> Family:
        return dict(self.towers)[name]

    def towers_held(self, config: dict) -> tuple[str, ...]:
        """The towers a checkpoint of ``config`` holds: those of the first class of its ``architectures`` that
        ``towers_of_class`` names, else every tower (() for a model of one)."""
        held = dict(self.towers_of_class)
        listed = config.get("architectures") or ()
        return next((held[c] for c in listed if c in held), tuple(t for t, _ in self.towers))


FAMILY_FIELDS = tuple(f.name for f in fields(Family))
