"""R(d): the rotation that rotary position embeddings put between a query and a key d positions apart.

With q_i = R(i) W_Q x_i and k_j = R(j) W_K x_j, the score is k_j^T q_i = x_j^T W_K^T R(j)^T R(i) W_Q x_i,
and R(j)^T R(i) = R(i - j). So the bilinear form at offset d = query position - key position is
L(d) = W_K^T R(d) W_Q.

Styles
------
``"half"`` (GPT-NeoX, Llama, Mistral, Qwen, Gemma, Phi, StableLM, OLMo 2, ModernBERT, ... in transformers): the
first ``rotary_dim`` dimensions of a head are rotated, dimension i paired with i + rotary_dim/2, at angle
d * base**(-2i/rotary_dim); the remaining dimensions (partial rotary, e.g. Pythia's 16 of 64) are left alone.
``"interleaved"`` (GPT-J, Cohere): dimension 2i paired with 2i + 1.

Scaled RoPE
-----------
Some checkpoints change the frequencies themselves (``rope_scaling`` / ``rope_parameters`` in config.json);
:func:`scaled_inverse_frequencies` applies the types that transformers applies to the frequencies alone and
independent of the sequence length: ``linear`` (all divided by ``factor``), ``llama3`` (Llama 3.1 / 3.2:
long wavelengths divided by ``factor``, short ones kept, a smooth blend between) and ``yarn`` (OLMo 3, gpt-oss,
Qwen3's long context: NTK-by-parts, the frequencies between the dimensions ``beta_fast`` and ``beta_slow``
rotations of the original context blended linearly between kept and divided by ``factor``). YaRN also multiplies
cos and sin by its ``attention_factor``, so q and k both: the scores of its layers carry the positive constant
``attention_factor ** 2`` (:func:`yarn_attention_factor`), beside the softmax scale, and no profile changes.
"""

from __future__ import annotations

import math

import numpy as np

N_OFFSETS = 129  # d = 0..128


def inverse_frequencies(rotary_dim: int, base: float) -> np.ndarray:
    """theta_i = base ** (-2i / rotary_dim) for i < rotary_dim / 2, float64."""
    if rotary_dim <= 0 or rotary_dim % 2:
        raise ValueError(f"rotary_dim must be a positive even number; got {rotary_dim}")
    return 1.0 / (float(base) ** (np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim))


SCALED_ROPE_TYPES = ("default", "linear", "llama3", "yarn")


def yarn_mscale(scale: float, m: float = 1.0) -> float:
    """YaRN's mscale (transformers' ``yarn_get_mscale``): 0.1 m ln(scale) + 1, 1 for scale <= 1."""
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def yarn_attention_factor(factor: float, attention_factor=None, mscale=None, mscale_all_dim=None) -> float:
    """YaRN's factor on cos and sin (transformers' ``_compute_yarn_parameters``): the config's ``attention_factor``,
    else mscale(factor, mscale) / mscale(factor, mscale_all_dim) where both are given, else 0.1 ln(factor) + 1 (1 for
    factor <= 1)."""
    if attention_factor is not None:
        return float(attention_factor)
    if mscale and mscale_all_dim:
        return yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim)
    return yarn_mscale(factor)


def _yarn(inv: np.ndarray, rotary_dim: int, base: float, scaling: dict) -> np.ndarray:
    """YaRN's inverse frequencies (transformers' ``_compute_yarn_parameters``, in float64)."""
    factor, context = float(scaling["factor"]), float(scaling["original_max_position_embeddings"])
    fast, slow = float(scaling.get("beta_fast") or 32), float(scaling.get("beta_slow") or 1)

    def dimension(rotations: float) -> float:  # the dimension that turns ``rotations`` times over the context
        return rotary_dim * math.log(context / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = dimension(fast), dimension(slow)
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rotary_dim - 1)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
    ramp = np.clip((np.arange(rotary_dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    kept = 1 - ramp  # 1: the original frequency (extrapolation), 0: divided by the factor (interpolation)
    return inv / factor * (1 - kept) + inv * kept


def scaled_inverse_frequencies(rotary_dim: int, base: float, scaling: dict | None = None) -> np.ndarray:
    """The inverse frequencies after ``scaling`` (a ``rope_scaling`` dict with ``rope_type`` or ``type``), float64.

    ``None`` or type ``default`` gives :func:`inverse_frequencies`. Raises ValueError for other types
    (their rotation depends on the sequence length or rescales the scores; see SCALED_ROPE_TYPES).
    """
    inv = inverse_frequencies(rotary_dim, base)
    scaling = scaling or {}
    kind = scaling.get("rope_type") or scaling.get("type") or "default"
    if kind == "default":
        return inv
    if kind == "linear":
        return inv / float(scaling["factor"])
    if kind == "llama3":
        factor, low, high = (float(scaling[k]) for k in ("factor", "low_freq_factor", "high_freq_factor"))
        context = float(scaling["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv
        smooth = (context / wavelen - low) / (high - low)
        blended = (1 - smooth) * inv / factor + smooth * inv
        out = np.where(wavelen > context / low, inv / factor, inv)
        medium = (wavelen >= context / high) & (wavelen <= context / low)
        return np.where(medium, blended, out)
    if kind == "yarn":
        return _yarn(inv, rotary_dim, float(base), scaling)
    raise ValueError(f"rope type {kind!r} is not supported; supported: {', '.join(SCALED_ROPE_TYPES)}")


def rotation_matrices(
    head_dim: int,
    rotary_dim: int,
    base: float,
    offsets: np.ndarray | int = N_OFFSETS,
    style: str = "half",
    inv_freq: np.ndarray | None = None,
) -> np.ndarray:
    """R(d) for each offset, shape (D, head_dim, head_dim), float64.

    ``offsets`` is an array of d values or a count D (meaning d = 0..D-1). ``inv_freq`` overrides the
    default frequencies (e.g. to match a checkpoint's scaled RoPE or transformers' float32 angles).
    """
    d = np.arange(offsets) if np.isscalar(offsets) else np.asarray(offsets)
    if not 0 < rotary_dim <= head_dim:
        raise ValueError(f"rotary_dim must be in 1..head_dim={head_dim}; got {rotary_dim}")
    freqs = inverse_frequencies(rotary_dim, base) if inv_freq is None else np.asarray(inv_freq, np.float64)
    half = rotary_dim // 2
    if freqs.shape != (half,):
        raise ValueError(f"need {half} inverse frequencies, got shape {freqs.shape}")
    if style == "half":
        first, second = np.arange(half), np.arange(half) + half
    elif style == "interleaved":
        first, second = np.arange(0, rotary_dim, 2), np.arange(1, rotary_dim, 2)
    else:
        raise ValueError(f"unknown rotary style {style!r}; expected 'half' or 'interleaved'")
    angle = d[:, None].astype(np.float64) * freqs[None, :]  # (D, half)
    cos, sin = np.cos(angle), np.sin(angle)
    R = np.broadcast_to(np.eye(head_dim), (len(d), head_dim, head_dim)).copy()
    R[:, first, first] = cos
    R[:, second, second] = cos
    R[:, first, second] = -sin  # new_first = first*cos - second*sin
    R[:, second, first] = sin  # new_second = second*cos + first*sin
    return R
