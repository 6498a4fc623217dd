"""One layer of a checkpoint checked: transformers' scores against the scores of the extracted forms L(d).

The scores are captured by :class:`pipeline.check.forward.LayerRunner`; what is no form (QK-norm divisors, a query
temperature, a soft-cap, sinks, an ALiBi bias) is taken off by :func:`pipeline.check.forms.bare_scores`, and the
result is compared with c x_j^T L(i - j) x_i at the offsets i - j in :data:`OFFSETS`, L(d) = W_K^T R(d) W_Q from the
weights the profiles read (``pipeline.families.layer_qk``, the QK-norm's gain folded in, no layer-norm folding; a
head formed in float64 at a time). The error of a layer is the largest |difference| over those pairs relative to
the largest |score|.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.check.forms import bare_scores, divisors, form_scores, query_temperature, relative
from pipeline.families import ArchitectureError, layer_qk

OFFSETS = (0, 1, 7, 64)
DEFAULT_TOLERANCE = 1e-5  # transformers computes rotation angles and QK-norms in float32 (errors ~1e-7 here)
# positional kinds that add a bias to the scores (ALiBi, T5's bias per relative position), taken off before comparing
ADDITIVE_POSITIONS = ("alibi", "relative bias")


@dataclass(frozen=True)
class LayerResult:
    """The check of one layer: its largest relative error over the pairs at ``offsets`` (the offsets that had
    pairs the model did not mask; empty for a layer without rotary, whose one form is compared at every pair), or
    the ``problem`` that kept it from being compared."""

    layer: int
    error: float = float("nan")
    tolerance: float = DEFAULT_TOLERANCE
    offsets: tuple[int, ...] = ()
    tokens: int = 0
    problem: str = ""
    why: str = ""  # where a layer over the tolerance differs (:func:`diagnosis`)
    key_at_zero: bool = False  # compared with the key at position 0 alone (QK-norm gains after the rotation)
    no_form: str = ""  # a hybrid model's layer that is not softmax attention: what it is (nothing to compare)

    @property
    def holds(self) -> bool:
        return bool(self.no_form) or (not self.problem and self.error <= self.tolerance)

    def line(self) -> str:
        if self.no_form:
            return (f"layer {self.layer:>3}  no form: {self.no_form}, not softmax attention (stored as a layer "
                    "without a form); nothing to compare")
        if self.problem:
            return f"layer {self.layer:>3}  FAILS  {self.problem}"
        verdict = "holds" if self.holds else f"OVER the tolerance {self.tolerance:.0e}"
        if self.key_at_zero:
            return (f"layer {self.layer:>3}  max relative error {self.error:.1e} at the key at position 0, the "
                    f"queries at d = 0..{self.tokens - 1} (QK-norm gains after the rotation: the form of the key at "
                    f"0)  {verdict}")
        if not self.offsets:
            return (f"layer {self.layer:>3}  max relative error {self.error:.1e} at every pair of {self.tokens} "
                    f"tokens (no rotary: one form for every d)  {verdict}")
        beyond = [d for d in OFFSETS if d not in self.offsets and d >= self.tokens]
        masked = [d for d in OFFSETS if d not in self.offsets and d < self.tokens]
        note = "".join([f" (d = {', '.join(map(str, beyond))} not checked: beyond {self.tokens} tokens)" if beyond
                        else "", f" (d = {', '.join(map(str, masked))} not checked: the model masks every pair at "
                                 "that offset, a sliding window)" if masked else ""])
        return (f"layer {self.layer:>3}  max relative error {self.error:.1e} at d = "
                f"{', '.join(map(str, self.offsets))}  {verdict}{note}")

    def lines(self) -> list[str]:
        """:meth:`line`, and for a layer over the tolerance the line saying where it differs."""
        return [self.line()] + ([f"           {self.why}"] if self.why and not self.holds else [])


def _norm_problem(layout, layer: int, normed: bool, captured: dict) -> str:
    norm = layout.spec.qk_norm
    if normed and set(captured) != {"q", "k"}:
        return (f"the family table has a QK-norm ({norm.text()}) on this layer, but transformers' attention ran "
                f"{'none' if not captured else 'one on ' + ' and '.join(sorted(captured)) + ' alone'}")
    if not normed and captured:
        return ("transformers' attention normalises this layer's queries or keys, which the family table's "
                f"{layout.spec.name} entry does not foresee (a QK-norm the config switches on?)")
    return ""


def _latent_problem(latent, captured: dict) -> str:
    want = {"k"} | ({"q"} if latent.size("q_lora_rank") else set())
    if set(captured) != want:
        return (f"latent attention: the RMS norms of {' and '.join(sorted(want))} latents should run, transformers' "
                f"attention ran {' and '.join(sorted(captured)) or 'none'}")
    return ""


def check_layer(runner, layer: int, tolerance: float = DEFAULT_TOLERANCE) -> LayerResult:
    """Run layer ``layer`` through transformers (``runner``: a :class:`~pipeline.check.forward.LayerRunner`) and
    compare its scores with its forms'."""
    from pipeline.check.forward import CheckError

    layout, ckpt = runner.layout, runner.ckpt
    if layout.positional_of(layer).kind == "no form":  # a hybrid's convolution, Mamba or linear-attention layer
        return LayerResult(layer, tolerance=tolerance, no_form=layout.spec.hybrid.other)
    try:
        capture = runner.run(layer)
        T, H = len(capture.x), layout.n_heads
        norm, latent = layout.spec.qk_norm, getattr(layout.spec, "latent", None)
        normed = norm is not None and not (norm.rotary_only and layout.positional_of(layer).kind != "rope")
        problem = _latent_problem(latent, capture.norms) if latent is not None else \
            _norm_problem(layout, layer, normed, capture.norms)
        if problem:
            return LayerResult(layer, tolerance=tolerance, tokens=T, problem=problem)
        q_div = k_div = r_kv = None
        if latent is not None:  # the query latent's divisor multiplies the score; the key latent's divides a part
            if "q" in capture.norms:
                q_div = divisors(*capture.norms["q"], "rms", H, T)
            r_kv = divisors(*capture.norms["k"], "rms", 1, T)[:, 0]
        elif normed:
            q_div = divisors(*capture.norms["q"], norm.kind, H, T)
            k_div = divisors(*capture.norms["k"], norm.kind, layout.n_kv_heads, T)
        bias = None
        if layout.positional_of(layer).kind in ADDITIVE_POSITIONS:  # the scores with Q/K zero: the bias alone
            zero = runner.run(layer, zero_qk=True)
            bias = bare_scores(layout, layer, zero.scores, sinks=zero.sinks)[0]
        got, allowed = bare_scores(layout, layer, capture.scores, sinks=capture.sinks, q_divisors=q_div,
                                   k_divisors=k_div, temperature=query_temperature(layout, layer,
                                                                                   runner.tower_config(layer), T),
                                   bias=bias)
        rotary = layout.positional_of(layer).kind == "rope"
        key_at_zero = normed and norm.after_rotation and norm.gain != "none"  # Hunyuan: the form of the key at 0
        want = form_scores(layout, layer, layer_qk(ckpt, layout, layer), capture.x, capture.x,
                           OFFSETS if rotary and not key_at_zero else None, r_kv)
        if key_at_zero:
            allowed = allowed & (np.arange(T) == 0)[None, :]
    except (CheckError, ArchitectureError, ValueError) as exc:
        return LayerResult(layer, tolerance=tolerance, problem=" ".join(str(exc).split()))
    present = tuple(d for d in OFFSETS if d < T and np.diagonal(allowed, -d).any()) if rotary else ()
    error = relative(got, want, allowed)
    why = diagnosis(layout, layer, runner.tower_config(layer), got, want, allowed, tolerance) if error > tolerance \
        else ""
    return LayerResult(layer, error, tolerance, () if key_at_zero else present, T, why=why, key_at_zero=key_at_zero)


def _hints(layout, layer: int, config) -> str:
    """What in the config the family's entry may read otherwise than the model: a head_dim the entry does not take,
    the rotary scaling it applies."""
    out = []
    head_dim = getattr(config, "head_dim", None)
    if isinstance(head_dim, int) and head_dim != layout.d_head:
        out.append(f"config.json gives head_dim = {head_dim}, the {layout.spec.name} entry reads a head size of "
                   f"{layout.d_head} (hidden / heads)")
    p = layout.positional_of(layer)
    rope = getattr(config, "rope_parameters", None)
    read = (rope or {}).get("rope_type") if isinstance(rope, dict) else None  # transformers' reading, flat configs
    mine = dict(p.scaling).get("rope_type", "default") if p.kind == "rope" else None
    if p.kind == "rope" and isinstance(read, str) and read != mine:
        out.append(f"transformers reads the rope type {read!r} from config.json, the entry {mine!r}")
    elif p.kind == "rope" and p.scaling:
        out.append(f"the entry applies the rotary scaling {dict(p.scaling)} of config.json")
    return "; ".join(out)


def diagnosis(layout, layer: int, config, got: np.ndarray, want: np.ndarray, allowed: np.ndarray,
              tolerance: float) -> str:
    """Where a layer's scores differ from its forms': at d = 0 (the weights as read: their heads, grouping, QK-norm,
    scale), or only at d > 0 (the rotation R(d): rotated dimensions, base, style, scaling), with the config's
    values that the family's entry may read otherwise."""
    p = layout.positional_of(layer)
    at_zero = np.full_like(want, np.nan)
    np.einsum("hii->hi", at_zero)[...] = np.einsum("hii->hi", want)
    hints = _hints(layout, layer, config)
    hint = f" ({hints})" if hints else ""
    if p.kind == "rope" and relative(got, at_zero, allowed) <= tolerance:
        return (f"d = 0 holds, d > 0 does not: the model rotates otherwise than R(d) of the table (rotary on "
                f"{p.rotary_dim} of {layout.d_head} dimensions, base {p.rope_theta:g}, {p.style}){hint}")
    return ("the scores differ at d = 0: the model's Q/K heads, their grouping, QK-norm or scale differ from "
            f"what the {layout.spec.name} entry reads{hint}")
