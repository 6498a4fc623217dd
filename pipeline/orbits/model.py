"""The model: one H-head self-attention layer between an embedding W_E and an unembedding W_U.

No positions, no residual stream into the unembedding, no layer norm: the logits at a query are
``W_U sum_h W_O[h] sum_j softmax_j(q_h . k_h(x_j) / sqrt(d_head)) W_V[h] W_E[x_j]``. Everything the
layer computes therefore goes through two 24 x 24 matrices per head (the circuits):

- ``M[h, a, b] = W_E[a] W_Q[h]^T W_K[h] W_E[b] / sqrt(d_head)`` (QK: query token a, key token b),
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
                seed: int = 0, dtype=torch.float32) -> dict[str, torch.Tensor]:
    """Gaussian weights with std init_scale / sqrt(fan_in) (W_E: std init_scale).

    Returns W_E (p, d_model), W_Q, W_K, W_V (H, d_head, d_model), W_O (H, d_model, d_head), W_U (p, d_model).
    """
    g = torch.Generator().manual_seed(seed)

    def n(*shape, fan_in):
        return torch.randn(*shape, generator=g, dtype=dtype) * (init_scale / math.sqrt(fan_in))

    return {
        "W_E": n(p, d_model, fan_in=1),
        "W_Q": n(n_heads, d_head, d_model, fan_in=d_model),
        "W_K": n(n_heads, d_head, d_model, fan_in=d_model),
        "W_V": n(n_heads, d_head, d_model, fan_in=d_model),
        "W_O": n(n_heads, d_model, d_head, fan_in=d_head),
        "W_U": n(p, d_model, fan_in=d_model),
    }


def circuits(params: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The QK and OV circuits in the token basis: M (H, p, p) [query, key], R (H, p, p) [output, input]."""
    W_E, W_Q, W_K, W_V, W_O, W_U = (params[k] for k in ("W_E", "W_Q", "W_K", "W_V", "W_O", "W_U"))
    d_head = W_Q.shape[1]
    q = torch.einsum("hed,ad->hae", W_Q, W_E)  # (H, p, d_head)
    k = torch.einsum("hed,bd->hbe", W_K, W_E)
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
    v = torch.einsum("hed,bld->bhle", W_V, e)
    att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(W_Q.shape[1]), dim=-1)  # (B, H, L, L)
    z = att @ v  # (B, H, L, d_head)
    out = torch.einsum("hde,bhle->bld", W_O, z)
    return out @ W_U.T


def _weights(M: torch.Tensor, R: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """E[h, a, b] = exp(M[h, a, b] - max_b M[h, a, b]) and V[h, a, b, c] = E[h, a, b] R[h, c, b].

    The exponent is floored (-80 in float32, -700 in float64) so that no denominator underflows: a key
    further below its row's best key gets weight e^floor instead of less, which is exact whenever a
    row of M spans less than that (trained layers span far less; float64 is exact in practice).
    """
    floor = -80.0 if M.dtype in (torch.float32, torch.float16, torch.bfloat16) else -700.0
    E = torch.exp((M - M.amax(dim=2, keepdim=True)).clamp_min(floor))
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
