"""The model: one H-head self-attention layer between an embedding W_E and an unembedding W_U.

No positions, no residual stream into the unembedding, no layer norm: the logits at a query are
``W_U sum_h W_O[h] sum_j softmax_j(q_h . k_h(x_j) / sqrt(d_head)) W_V[h] W_E[x_j]``. Everything the
layer computes therefore goes through two 24 x 24 matrices per head (the circuits):

- ``M[h, a, b] = W_E[a] W_Q[h]^T W_K[h] W_E[b] / sqrt(d_head)`` (QK: query token a, key token b; with
  query and key biases, ``(W_Q[h] W_E[a] + b_Q[h]) . (W_K[h] W_E[b] + b_K[h]) / sqrt(d_head)``),
- ``R[h, c, b] = W_U[c] W_O[h] W_V[h] W_E[b]`` (OV: output logit c, input token b).

Two forwards: ``token_forward`` (ordinary attention on token sequences, the check) and the exact
circuit forwards used in training, ``table_forward`` (every length-3 query instance at once) and
``context_forward`` (a query token against a multiset of other tokens, any length).
"""

from __future__ import annotations

import math

import torch

from .task import P


def init_params(n_heads: int = 32, d_model: int = 128, d_head: int = 24, p: int = P, init_scale: float = 1.0,
                seed: int = 0, dtype=torch.float32, qk_init_scale: float | None = None,
                qk_bias: bool = False) -> dict[str, torch.Tensor]:
    """Gaussian weights with std init_scale / sqrt(fan_in) (W_E: std init_scale; W_Q, W_K: qk_init_scale /
    sqrt(fan_in) when given, from the same draws).

    Returns W_E (p, d_model), W_Q, W_K, W_V (H, d_head, d_model), W_O (H, d_model, d_head), W_U (p, d_model),
    and with ``qk_bias`` also b_Q, b_K (H, d_head), zero.
    """
    g = torch.Generator().manual_seed(seed)
    qk = init_scale if qk_init_scale is None else qk_init_scale

    def n(*shape, fan_in, scale=init_scale):
        return torch.randn(*shape, generator=g, dtype=dtype) * (scale / math.sqrt(fan_in))

    out = {
        "W_E": n(p, d_model, fan_in=1),
        "W_Q": n(n_heads, d_head, d_model, fan_in=d_model, scale=qk),
        "W_K": n(n_heads, d_head, d_model, fan_in=d_model, scale=qk),
        "W_V": n(n_heads, d_head, d_model, fan_in=d_model),
        "W_O": n(n_heads, d_model, d_head, fan_in=d_head),
        "W_U": n(p, d_model, fan_in=d_model),
    }
    if qk_bias:
        out["b_Q"] = torch.zeros(n_heads, d_head, dtype=dtype)
        out["b_K"] = torch.zeros(n_heads, d_head, dtype=dtype)
    return out


def circuits(params: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The QK and OV circuits in the token basis: M (H, p, p) [query, key], R (H, p, p) [output, input]."""
    W_E, W_Q, W_K, W_V, W_O, W_U = (params[k] for k in ("W_E", "W_Q", "W_K", "W_V", "W_O", "W_U"))
    d_head = W_Q.shape[1]
    q = torch.einsum("hed,ad->hae", W_Q, W_E)  # (H, p, d_head)
    k = torch.einsum("hed,bd->hbe", W_K, W_E)
    if "b_Q" in params:
        q, k = q + params["b_Q"][:, None, :], k + params["b_K"][:, None, :]
    M = q @ k.transpose(1, 2) / math.sqrt(d_head)
    v = torch.einsum("hed,bd->hbe", W_V, W_E)  # (H, p, d_head)
    u = torch.einsum("cd,hde->hce", W_U, W_O)  # (H, p, d_head)
    R = u @ v.transpose(1, 2)
    return M, R


def token_forward(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Ordinary multi-head attention on token ids x (B, L): logits (B, L, p); every position sees every key."""
    W_E, W_Q, W_K, W_V, W_O, W_U = (params[k] for k in ("W_E", "W_Q", "W_K", "W_V", "W_O", "W_U"))
    e = W_E[x]  # (B, L, d)
    q = torch.einsum("hed,bld->bhle", W_Q, e)
    k = torch.einsum("hed,bld->bhle", W_K, e)
    if "b_Q" in params:
        q, k = q + params["b_Q"][None, :, None, :], k + params["b_K"][None, :, None, :]
    v = torch.einsum("hed,bld->bhle", W_V, e)
    att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(W_Q.shape[1]), dim=-1)  # (B, H, L, L)
    z = att @ v  # (B, H, L, d_head)
    out = torch.einsum("hde,bhle->bld", W_O, z)
    return out @ W_U.T


# Per dtype: the exponent floor, and how far below its row's reference the query's own key may lie.
_FLOOR = {torch.float64: -700.0}
_CEIL = {torch.float64: 600.0}
_OWN_BELOW = {torch.float64: 300.0}


def _weights(M: torch.Tensor, R: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """E[h, a, b] = exp(M[h, a, b] - ref[h, a]) and V[h, a, b, c] = E[h, a, b] R[h, c, b].

    Any per-row reference cancels in the softmax. ``ref`` is the row's largest entry (so E <= 1), except
    that it never lies more than 40 (float32; 300 in float64) above the query's own key M[h, a, a]. The
    own key is in every sequence, so every denominator is at least e^-40 and the backward pass, which
    squares the denominators' reciprocals, stays finite (float32 overflows at 3e38 = e^88.7): with the
    row's maximum alone, a row whose present keys all lie 44 or more below it gave infinite gradients
    (every init-scale-2 run failed so). Where the own key is within 40 of the maximum, ``ref`` is the
    maximum, as always. The exponent is also floored (-80 in float32, -700 in float64): a key further
    below ``ref`` gets weight e^floor instead of less, exact whenever a row spans less than that; and
    capped (60; 600) so that a row whose own key lies over 100 below its maximum cannot overflow.
    """
    floor = _FLOOR.get(M.dtype, -80.0)
    own = torch.diagonal(M, dim1=1, dim2=2)  # (H, p): M[h, a, a]
    ref = torch.minimum(M.amax(dim=2), own + _OWN_BELOW.get(M.dtype, 40.0))
    E = torch.exp((M - ref[:, :, None]).clamp(floor, _CEIL.get(M.dtype, 60.0)))
    V = E[:, :, :, None] * R.transpose(1, 2)[:, None, :, :]
    return E, V


def table_forward(M: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
    """Logits of every length-3 query instance, exactly: G (p, p, p, p) indexed [a, b, c, output].

    ``G[a, b, c]`` is the output at a query whose own token is a and whose other two tokens are b, c
    (symmetric in b, c). Never forms the (H, p^4) tensor: three batched contractions over heads.
    """
    H, p, _ = M.shape
    E, V = _weights(M, R)
    e_self = torch.diagonal(E, dim1=1, dim2=2)  # (H, p)
    S = torch.diagonal(V, dim1=1, dim2=2).transpose(1, 2)  # (H, p_a, p_out): E[a,a] R[:, a]
    den = e_self[:, :, None, None] + E[:, :, :, None] + E[:, :, None, :]  # (H, a, b, c)
    inv = 1.0 / den
    # self term: sum_h inv[h,a,b,c] S[h,a,k]
    t_self = torch.einsum("habc,hak->abck", inv, S)
    # key-b term: sum_h inv[h,a,b,c] V[h,a,b,k]; the key-c term is its (b, c) transpose.
    t_b = torch.bmm(inv.permute(1, 2, 3, 0).reshape(p * p, p, H), V.permute(1, 2, 0, 3).reshape(p * p, H, p))
    t_b = t_b.reshape(p, p, p, p)
    return t_self + t_b + t_b.transpose(1, 2)


def context_forward(M: torch.Tensor, R: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Logits of every query token against contexts, exactly: F (n, p, p) indexed [context, a, output].

    ``counts`` (n, p) holds how often each token occurs among the *other* tokens of a sequence (any
    non-negative weights: a Dirichlet mixture is the limit of a long sequence). The query's own token a
    adds one more key a, so F[n, a] is the output at a query with token a in a sequence made of a and
    the context n.
    """
    E, V = _weights(M, R)
    H, p, _ = M.shape
    n = counts.shape[0]
    num = (counts @ V.permute(2, 0, 1, 3).reshape(p, H * p * p)).reshape(n, H, p, p)  # sum_b c_b E R
    num = num + torch.diagonal(V, dim1=1, dim2=2).transpose(1, 2)[None]  # + E[a,a] R[:, a]
    den = counts @ E.permute(2, 0, 1).reshape(p, H * p)  # (n, H*p)
    den = den.reshape(n, H, p) + torch.diagonal(E, dim1=1, dim2=2)[None]
    return (num / den[..., None]).sum(dim=1)
