"""The profiles group's record of each model's attention conventions: part of the store's schema, which
:mod:`pipeline.schema` builds :class:`~pipeline.schema.ModelRow` and validation from (in a module of its own to keep
that one under 500 lines).

What a profile does not show but a reader needs beside it, written when a model is registered from its checkpoint's
``pipeline.families.Layout`` (a baseline from the layout of the model it is made for):

- per model: the ``tower`` of a multi-tower checkpoint (CLIP ``text`` / ``vision``, Whisper ``encoder`` /
  ``decoder``; "" for a model of one tower), the ``qk_norm`` folded into the form ("" none, ``rms per head``,
  ``rms over the projection``, ``layernorm per head``), and the softmax ``scale`` of the scores with the
  ``scale_rule`` that gave it (``1/sqrt(head_dim)``, ``1/sqrt(query_pre_attn_scalar)``, ``attention_multiplier``,
  ``1``) and the tanh soft-cap ``softcap`` (0 = none). Scale and soft-cap change no profile (a positive factor and
  a monotone map of each score); they are recorded because they change the scores.
- per layer: ``layer_positional``, the layer's positional kind (one of ``pipeline.schema.POSITIONAL_KINDS``), its
  rotary base ``layer_rope_theta`` (0 for a layer without rotary) and its frequency scaling ``layer_rope_scaling``
  ("" = none, else e.g. ``linear factor=8``). A layer moves with d exactly when its kind is ``rope``: the layers of
  another kind in a rotary model (SmolLM3's layers without rotary) have one form at every d, and Gemma 3's and
  ModernBERT's sliding and global layers rotate with their own bases. A hybrid model's layers that are not softmax
  attention (Jamba's Mamba layers, LFM2's convolutions, Qwen3-Next's and MiniMax's linear attention) are of kind
  ``no form``: no query-key product, their profiles and statistics NaN (written, so the model completes).

Optional within the schema version: a store written before these variables opens, and ``python -m pipeline verify
--upgrade`` or the next registration adds them, empty. A model stored before them reads as not recorded: ``tower``,
``qk_norm``, ``scale_rule`` "" and ``scale``, ``softcap`` NaN (a :class:`~pipeline.schema.ModelRow` reads NaN as 0.0),
and ``layer_positional`` "" for every layer, which means the model's ``positional`` for every layer (what the
pipeline stored then: every family it read had one kind for all layers). Rerunning the model's own command records
them without recomputing a layer. Past a model's layers the per-layer variables hold their fills ("", NaN).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np


@dataclass(frozen=True)
class Conventions:
    """A model's attention conventions (see the module docstring); the defaults read "not recorded"."""

    tower: str = ""
    qk_norm: str = ""
    scale: float = 0.0
    scale_rule: str = ""
    softcap: float = 0.0
    layer_positional: tuple = ()  # (n_layers,) str, () = not recorded
    layer_rope_theta: tuple = ()  # (n_layers,) float
    layer_rope_scaling: tuple = ()  # (n_layers,) str

    def fields(self) -> dict:
        return {f: getattr(self, f) for f in CONVENTION_FIELDS}


CONVENTION_FIELDS = tuple(f.name for f in fields(Conventions))
PER_LAYER_FIELDS = ("layer_positional", "layer_rope_theta", "layer_rope_scaling")
# Variables of the profiles group: name -> (dims, dtype, fill value). Chunks: one per model (``conventions_chunks``).
# NaN and "" = not recorded (or padding past a model's layers); a row reads them as its defaults, 0.0 and "".
CONVENTIONS_DATA = {
    "tower": (("model",), "str", ""),
    "qk_norm": (("model",), "str", ""),
    "scale": (("model",), "float64", np.nan),
    "scale_rule": (("model",), "str", ""),
    "softcap": (("model",), "float64", np.nan),
    "layer_positional": (("model", "layer"), "str", ""),
    "layer_rope_theta": (("model", "layer"), "float64", np.nan),
    "layer_rope_scaling": (("model", "layer"), "str", ""),
}
# The per-model variables (dims ``("model",)``, conventions and the rest of the row): MODEL_CHUNK rows to a chunk.
# They are written only under the store lock (a registration, a completion, a reset, verify's marking), so rows may
# share a chunk; a read of the table then reads one chunk per variable, not one per model.
MODEL_CHUNK = 256
LAYER_CHUNK = 4096  # the per-layer variables: one chunk per model, as long as the ``layer`` coordinate's

CONVENTION_ATTRS = {
    "conventions": "per model: tower (the tower of a multi-tower checkpoint, stored as NAME/tower; '' = one tower), "
    "qk_norm (the norm on queries and keys folded into the form: '' none, 'rms per head', 'rms over the projection', "
    "'layernorm per head'), scale (the softmax scale: score = scale * x_j^T L(d) x_i), scale_rule (what gave it: "
    "1/sqrt(head_dim), 1/sqrt(query_pre_attn_scalar), attention_multiplier, 1) and softcap (tanh soft-cap of the "
    "scores, 0 = none): scale and softcap change no profile. '' in scale_rule = not recorded (a model stored before "
    "these variables; scale and softcap then NaN)",
    "layer_positional": "per (model, layer): the layer's positional kind (learned absolute, alibi, rope, none, "
    "relative bias: T5's learned bias per relative position, added to each score and not a form of the two tokens, "
    "left out of the profile; no form: a hybrid model's layer that is not softmax attention, Mamba, a convolution or "
    "linear attention, its profiles NaN); a layer moves with d exactly when it is 'rope'. '' = not recorded: the "
    "model's positional. layer_rope_theta: the layer's rotary base (0 = no rotary, NaN = not recorded); "
    "layer_rope_scaling: its frequency scaling ('' = none, e.g. 'linear factor=8')",
}


def conventions_chunks(dims: tuple[str, ...]) -> tuple[int, ...]:
    """The chunk shape of a conventions variable: a per-model one ``MODEL_CHUNK`` rows, a per-layer one a chunk per
    model (written whole by a registration)."""
    return (MODEL_CHUNK,) if dims == ("model",) else (1, LAYER_CHUNK)


def scaling_text(pairs) -> str:
    """A scaled RoPE's (key, value) pairs as one line: '' for none, else 'linear factor=8', 'llama3 factor=32
    low_freq_factor=1 ...'."""
    given = dict(pairs)
    if not given:
        return ""
    kind = str(given.pop("rope_type", "scaled"))
    return " ".join([kind] + [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in given.items()])


def layer_values(conventions: Conventions, n_layers: int, width: int) -> dict[str, np.ndarray]:
    """The per-layer variables of one model's row, ``width`` long (the store's layer size), padded with their
    fills; every layer's kind '' where the conventions hold none."""
    out = {}
    for name in PER_LAYER_FIELDS:
        _dims, dtype, fill = CONVENTIONS_DATA[name]
        values = getattr(conventions, name)
        row = np.full(width, fill, dtype=object if dtype == "str" else dtype)
        row[:len(values)] = values[:n_layers]
        out[name] = row
    return out


def columns_of(cols: dict, i: int, n_layers: int, kinds: tuple[str, ...]) -> dict:
    """The conventions fields of row ``i`` from the profiles group's columns (those missing read as not recorded); the
    per-layer ones when every layer's kind is there (one not among ``kinds``, the positional kinds, reads "none")."""
    out = {}
    for name, (dims, dtype, _fill) in CONVENTIONS_DATA.items():
        if dims == ("model",) and name in cols:
            out[name] = _float(cols[name][i]) if dtype == "float64" else str(cols[name][i])
    stored = cols.get("layer_positional")
    if stored is not None and n_layers and all(str(k) for k in stored[i, :n_layers]):
        out["layer_positional"] = tuple(str(k) if str(k) in kinds else "none" for k in stored[i, :n_layers])
        for name, cast in (("layer_rope_theta", _float), ("layer_rope_scaling", str)):
            column = cols.get(name)
            out[name] = tuple(cast(v) for v in column[i, :n_layers]) if column is not None else ()
    return out


def _float(x) -> float:
    """A stored float as a row holds it: NaN (not recorded) as 0.0, so rows compare equal."""
    return 0.0 if np.isnan(x) else float(x)


class ConventionMethods:
    """What a ``pipeline.schema.ModelRow`` knows of its conventions beyond its fields."""

    @property
    def conventions(self) -> Conventions:
        return Conventions(**{f: getattr(self, f) for f in CONVENTION_FIELDS})

    @property
    def conventions_recorded(self) -> bool:
        """Whether the row holds its tower, QK-norm, scale and per-layer kinds (False for a model stored before)."""
        return bool(self.scale_rule)

    @property
    def layer_kinds(self) -> tuple[str, ...]:
        """Each layer's positional kind: the recorded ones, else the model's ``positional`` for every layer."""
        return self.layer_positional or (self.positional,) * self.n_layers

    @property
    def static_layers(self) -> tuple[int, ...]:
        """The layers whose form is the same at every offset d (any kind but rope, and a form). In a rotary model
        these are the layers a d slider does not move (SmolLM3's layers without rotary); in a model without rotary,
        all of them but those without a form."""
        return tuple(layer for layer, kind in enumerate(self.layer_kinds) if kind not in ("rope", "no form"))

    @property
    def formless_layers(self) -> tuple[int, ...]:
        """A hybrid model's layers without a form (kind "no form": Mamba, a convolution, linear attention), their
        profiles NaN."""
        return tuple(layer for layer, kind in enumerate(self.layer_kinds) if kind == "no form")
