"""Exact group-averaged equivariance errors of the layer under the shift group C_p.

Shifting every input token by s should shift every output logit by 2s: f(x + s) = T_2s f(x). Logits
are first centred over the output classes (a constant added to all logits at a query changes nothing
the layer predicts; it is also the gauge freedom of R's columns). For a family of inputs closed under
shifts, the equivariant part of the centred logits is their average over the 24 shifts, and

    relative equivariance error^2 = ||G - avg_s(G)||^2 / ||G||^2

which is 0 exactly when the layer is equivariant on that family, and is the penalty used in training.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from .model import context_forward, table_forward


def _centre(x: torch.Tensor) -> torch.Tensor:
    return x - x.mean(dim=-1, keepdim=True)


@lru_cache(maxsize=4)
def _triple_index(p: int, device=None) -> tuple[torch.Tensor, ...]:
    """Indices so that Gh[a, b', c', k'] = G[a, a + b', a + c', 2a + k'] (Gh is a-independent iff equivariant)."""
    a, b, c, k = torch.meshgrid(*(torch.arange(p, device=device),) * 4, indexing="ij")
    return a, (a + b) % p, (a + c) % p, (2 * a + k) % p


def triple_error2(G: torch.Tensor) -> torch.Tensor:
    """Squared relative equivariance error of the table G (p, p, p, p) over all length-3 inputs (scalar)."""
    p = G.shape[0]
    Gc = _centre(G)
    Gh = Gc[_triple_index(p, G.device)]
    dev = Gh - Gh.mean(dim=0, keepdim=True)
    return (dev * dev).sum() / (Gc * Gc).sum().clamp_min(1e-30)


def shifted_contexts(counts: torch.Tensor) -> torch.Tensor:
    """(n, p) -> (p, n, p): out[s, i, b] = counts[i, b - s] (every context shifted by every s)."""
    p = counts.shape[1]
    return torch.stack([torch.roll(counts, s, dims=1) for s in range(p)])


def context_error2(M: torch.Tensor, R: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Squared relative equivariance error on contexts (n, p) and all their shifts, at every query token.

    Y[s, i, a, k] = F(context i shifted by s)[a + s, k + 2s]; equivariance makes Y independent of s.
    """
    p = counts.shape[1]
    n = counts.shape[0]
    F = _centre(context_forward(M, R, shifted_contexts(counts).reshape(p * n, p))).reshape(p, n, p, p)
    Y = F[_context_index(p, n)]
    dev = Y - Y.mean(dim=0, keepdim=True)
    return (dev * dev).sum() / (Y * Y).sum().clamp_min(1e-30)


@lru_cache(maxsize=8)
def _context_index(p: int, n: int) -> tuple[torch.Tensor, ...]:
    s, i, a, k = torch.meshgrid(torch.arange(p), torch.arange(n), torch.arange(p), torch.arange(p), indexing="ij")
    return s, i, (a + s) % p, (k + 2 * s) % p


def random_contexts(n: int, lengths: tuple[int, ...], p: int, generator: torch.Generator,
                    kind: str = "tokens", alpha: float = 0.5) -> torch.Tensor:
    """(n, p) counts of random contexts: the other L-1 tokens of a length-L sequence (``tokens``, L drawn
    from ``lengths``), or (``dirichlet``) weights drawn from Dirichlet(alpha) times (L-1)."""
    L = torch.tensor(lengths)[torch.randint(len(lengths), (n,), generator=generator)]
    if kind == "dirichlet":
        g = torch._standard_gamma(torch.full((n, p), float(alpha)), generator=generator)
        return g / g.sum(dim=1, keepdim=True) * (L[:, None] - 1).float()
    if kind != "tokens":
        raise ValueError(f"context kind must be 'tokens' or 'dirichlet'; got {kind!r}")
    counts = torch.zeros(n, p)
    Lmax = int(L.max())
    toks = torch.randint(p, (n, Lmax - 1), generator=generator)
    valid = (torch.arange(Lmax - 1)[None, :] < (L[:, None] - 1)).float()
    counts.scatter_add_(1, toks, valid)
    return counts


def layer_error(M: torch.Tensor, R: torch.Tensor) -> float:
    """Relative equivariance error (not squared) on all length-3 inputs: the metric ``equivariance_error``."""
    with torch.no_grad():
        return float(triple_error2(table_forward(M, R)).sqrt())
