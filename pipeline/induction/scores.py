"""What a checkpoint records: the loss on each half of the fixed batch and every head's two attention scores.

For a sequence ``x`` of ``2 * half`` tokens with ``x[half + i] == x[i]``:

- ``loss_first_half``: mean cross-entropy (nats) of the predictions of ``x[1] .. x[half - 1]`` (made at positions
  0 .. half - 2); nothing in context predicts them, so its floor is ln(vocab).
- ``loss_repeated_half``: the same for ``x[half + 1] .. x[2 half - 1]`` (made at positions half .. 2 half - 2),
  each the token after the earlier occurrence of the current token, so copying predicts it. The prediction of
  ``x[half]`` (made at position half - 1) is in neither: it needs the length of a half, not copying.
- ``induction_score[l][h]``: mean attention probability, over the batch and every query position t of the
  repeated half (half .. 2 half - 1), from t to t - half + 1, the token just after t's earlier occurrence.
- ``previous_token_score[l][h]``: mean attention probability from t to t - 1, over the batch and every position
  t = 1 .. 2 half - 1 of the whole sequence (a previous-token head acts in both halves; the first half is where
  an induction circuit needs it).

Attention probabilities are the model's own (eager attention, ``output_attentions``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def half_losses(logits: torch.Tensor, tokens: torch.Tensor, half: int) -> tuple[float, float]:
    """(loss_first_half, loss_repeated_half) of ``logits`` (batch, 2 half, vocab) on ``tokens`` (batch, 2 half)."""
    nll = F.cross_entropy(logits[:, :-1].transpose(1, 2).double(), tokens[:, 1:], reduction="none")
    # nll[:, p] is the loss of predicting tokens[:, p + 1] at position p
    return float(nll[:, :half - 1].mean()), float(nll[:, half:].mean())


def induction_scores(attn: torch.Tensor, half: int) -> torch.Tensor:
    """(heads,) from one layer's attention probabilities ``attn`` (batch, heads, 2 half, 2 half)."""
    t = torch.arange(half, 2 * half)
    return attn[:, :, t, t - half + 1].double().mean(dim=(0, 2))


def previous_token_scores(attn: torch.Tensor) -> torch.Tensor:
    """(heads,) from one layer's attention probabilities ``attn`` (batch, heads, T, T)."""
    t = torch.arange(1, attn.shape[-1])
    return attn[:, :, t, t - 1].double().mean(dim=(0, 2))


@torch.no_grad()
def measure(model, tokens: torch.Tensor, half: int) -> dict:
    """``metrics.json``'s content for ``model`` on ``tokens``: {"scalars": {...}, "heads": {...}} (floats)."""
    out = model(tokens, output_attentions=True)
    first, repeated = half_losses(out.logits, tokens, half)
    return {"scalars": {"loss_first_half": first, "loss_repeated_half": repeated},
            "heads": {"induction_score": [induction_scores(a, half).tolist() for a in out.attentions],
                      "previous_token_score": [previous_token_scores(a).tolist() for a in out.attentions]}}
