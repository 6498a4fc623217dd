"""The scores a layer's extracted forms give, and the forward pass's scores with what is no form taken off.

For a layer of a :class:`~pipeline.families.Layout`, the pre-softmax scores of transformers' eager attention satisfy

    scores[h, i, j] * r_q(i, h) * r_k(j, h) / t(i) - bias[h, i, j] = c * x_j^T L_h(i - j) x_i,
    L_h(d) = W_K[h]^T R(d) W_Q[h]

with W_Q, W_K as ``pipeline.families.layer_qk`` reads them (QK-norm gain and centring folded in), R(d) the layer's
rotation (the identity without rotary), x the vectors entering the Q/K projections, r the divisors of the QK-norm
(1 without one), t Llama 4's query temperature on its layers without rotary (1 elsewhere), the bias an additive
position bias (ALiBi) and c the layer's ``score_scale``. A tanh soft-cap is undone first (Gemma 2), and gpt-oss's
sink column is dropped with the softmax's shift it carried added back.

:func:`bare_scores` applies those steps to captured scores; :func:`form_scores` gives the right-hand side;
:func:`relative` compares them over the entries the model did not mask. ``pipeline.check.forward`` captures a
user's checkpoint layer by layer, and ``tests/pipeline/families`` a tiny model of every family whole: both compare
through these functions.
"""

from __future__ import annotations

import numpy as np

from pipeline.families import rotations

MASKED = -1e30  # a captured score at or below this is a masked pair (transformers fills them with the dtype's min)


def normalised(u: np.ndarray, eps: float, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(u / r, r): a norm's output before its gain, and its divisor r over the last axis (``kind`` 'rms' or
    'layernorm', the latter centred first)."""
    if kind == "layernorm":
        c = u - u.mean(axis=-1, keepdims=True)
        r = np.sqrt((c * c).mean(axis=-1) + eps)
        return c / r[..., None], r
    r = np.sqrt((u * u).mean(axis=-1) + eps)
    return u / r[..., None], r


def divisors(u: np.ndarray, eps: float, kind: str, heads: int, tokens: int) -> np.ndarray:
    """r (tokens, heads) of a QK-norm from its input ``u``: (tokens, heads * n) for a norm over the whole projection
    (one divisor per token), else a head's n values per (token, head) in either order, (tokens, heads, n) or
    (heads, tokens, n)."""
    if u.ndim == 2:
        return np.repeat(normalised(u, eps, kind)[1][:, None], heads, axis=1)
    if u.shape[0] != tokens or u.shape[1] != heads:
        u = u.transpose(1, 0, 2)
    if u.shape[:2] != (tokens, heads):
        raise ValueError(f"a QK-norm input of shape {u.shape} is not (tokens {tokens}, heads {heads}, n)")
    return normalised(u, eps, kind)[1]


def form_scores(layout, layer: int, qk, xq: np.ndarray, xk: np.ndarray, offsets=None,
                key_divisor: np.ndarray | None = None) -> np.ndarray:
    """(H, T, T): c * xk_j^T W_K^T R(i - j) W_Q xq_i (c the layer's score scale), at every pair (i, j), or only at
    the pairs whose offset i - j is in ``offsets`` (NaN elsewhere).

    ``qk``: the layer's weights as the profiles read them (``pipeline.families.layer_qk``'s ``LayerQK``: W_Q per
    query head, W_K per key head with ``kv_of_head``, a layer's latent heads formed on demand, the gain when there is
    one). A head's weights are formed in float64 only while its queries and keys are computed, so memory holds the
    layer's compact weights, one head in float64 and the (H, T, n) queries and keys: not the layer's (H, n, N)
    float64 forms (2.8 GB for a DeepSeek-V3 layer).

    ``key_divisor`` (T,), for latent attention (``pipeline.families.latent``): the key latent's divisor r_kv(j),
    which divides the non-rotary part of each head's score alone, c (x_j^T A_h x_i / r_kv(j) + x_j^T B_h(i - j) x_i),
    A_h and B_h the blocks of the heads' [rope | nope] rows; at r_kv = 1 it is the form's."""
    H, n = qk.W_Q.shape[:2]
    Q, K = np.empty((H, len(xq), n)), np.empty((H, len(xk), n))
    for h in range(H):
        w_q, w_k = qk.head(h)
        Q[h], K[h] = xq @ w_q.T, xk @ w_k.T
    if key_divisor is None:
        return _pair_scores(layout, layer, Q, K, offsets)
    rope = np.arange(n) < layout.positional_of(layer).rotary_dim
    return (_pair_scores(layout, layer, Q * rope, K * rope, offsets)
            + _pair_scores(layout, layer, Q * ~rope, K * ~rope, offsets) / np.asarray(key_divisor)[None, None, :])


def _pair_scores(layout, layer: int, Q: np.ndarray, K: np.ndarray, offsets) -> np.ndarray:
    """c * K[h, j] . R(i - j) Q[h, i] at the pairs :func:`form_scores` asks for; Q, K (H, T, n)."""
    T = Q.shape[1]
    wanted = np.arange(-(T - 1), T) if offsets is None else np.array([d for d in offsets if -T < d < T], dtype=int)
    R = rotations(layout, wanted, layer)
    out = np.full((Q.shape[0], T, T), np.nan)
    for k, d in enumerate(wanted):
        i = np.arange(max(d, 0), min(T, T + d))  # the queries with a key at i - d
        q = Q[:, i] if R is None else Q[:, i] @ R[k].T
        out[:, i, i - d] = np.einsum("hin,hin->hi", K[:, i - d], q)
    return layout.score_scale(layer) * out


def query_temperature(layout, layer: int, config, tokens: int) -> np.ndarray | None:
    """(tokens,): the positive factor a family's attention puts on the query at each position of ``layer``, or None
    where it puts none (``Family.query_temperature`` empty, or Llama 4's layers with rotary). ``config``: the
    tower's transformers config. The formulas are those of the modelling files:

    - Llama 4, on the layers without rotary: 1 + attn_scale * log(1 + floor((i + 1) / floor_scale));
    - Ministral 3, on every layer: 1 + llama_4_scaling_beta * log(1 + floor(i / original_max_position_embeddings)).
    """
    spec = layout.spec
    if not spec.query_temperature:
        return None
    i = np.arange(tokens, dtype=np.float64)
    if spec.name == "llama4_text":
        if layout.positional_of(layer).kind != "none":
            return None
        return 1.0 + float(config.attn_scale) * np.log1p(np.floor((i + 1.0) / float(config.floor_scale)))
    if spec.name == "ministral3":
        rope = config.rope_parameters
        return 1.0 + float(rope["llama_4_scaling_beta"]) * np.log1p(
            np.floor(i / float(rope["original_max_position_embeddings"])))
    raise ValueError(f"the family table gives {spec.name} a query temperature ({spec.query_temperature}) whose "
                     "formula pipeline.check.forms.query_temperature does not know")


def bare_scores(layout, layer: int, scores: np.ndarray, *, sinks: np.ndarray | None = None,
                q_divisors: np.ndarray | None = None, k_divisors: np.ndarray | None = None,
                temperature: np.ndarray | None = None, bias: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(scores, allowed): the captured pre-softmax ``scores`` (H, T, T), or (H, T, T + 1) with gpt-oss's ``sinks``
    (H,), with what is no form taken off (module docstring), and the (T, T) pairs the model did not mask.

    ``q_divisors`` (T, H) and ``k_divisors`` (T, Hkv): the QK-norm's divisors (either alone where only one side has
    a divisor that multiplies the whole score: latent attention's queries); ``temperature`` (T,): a positive
    per-query factor; ``bias`` (H, T, T): an additive position bias, captured as this function gives it (the
    scores of the same layer with its Q/K weights zero). Masked entries keep their captured values."""
    got = np.array(scores, dtype=np.float64)
    H = layout.n_heads
    if sinks is not None:  # softmax([scores | sink] - m) per query: the sink column and the shift m taken off
        got = got[..., :-1] + (np.asarray(sinks)[:, None, None] - got[..., -1:])
    if got.ndim != 3 or got.shape[0] != H or got.shape[1] != got.shape[2]:
        raise ValueError(f"captured scores of shape {scores.shape}, expected ({H}, T, T)")
    allowed = (got > MASKED).all(axis=0)
    if layout.softcap:
        got[:, allowed] = layout.softcap * np.arctanh(got[:, allowed] / layout.softcap)
    if q_divisors is not None or k_divisors is not None:
        kv = layout.n_kv_heads
        r = np.ones(got.shape)
        if q_divisors is not None:
            r = r * q_divisors.T[:, :, None]
        if k_divisors is not None:
            r = r * k_divisors[:, np.arange(H) // (H // kv)].T[:, None, :]
        got = np.where(allowed, got * np.where(allowed, r, 1.0), got)
    if temperature is not None:
        got = np.where(allowed, got / np.asarray(temperature)[None, :, None], got)
    if bias is not None:
        got = np.where(allowed, got - np.where(allowed, bias, 0.0), got)
    return got, allowed


def relative(got: np.ndarray, want: np.ndarray, allowed: np.ndarray) -> float:
    """The largest |got - want| over the allowed pairs where ``want`` is given, relative to the largest |got| there
    (0 where nothing is compared)."""
    where = allowed[None] & ~np.isnan(want)
    if not where.any():
        return 0.0
    scale = np.abs(got[where]).max()
    return float(np.abs(got - want)[where].max() / scale) if scale else float(np.abs(want[where]).max())
