"""The losses and head scores against a direct computation: the attention probabilities recomputed in numpy
from the model's weights (RMS norm, rotate-half rotary, causal softmax), then the scores by explicit loops that find
each token's earlier occurrence by searching the sequence."""

import numpy as np
import pytest
import torch

from pipeline.induction import data, model, scores
from pipeline.induction.settings import Settings

HALF = 8


@pytest.fixture(scope="module")
def peaked():
    """A model of the run's kind whose weights are redrawn with std 0.15, so attention is far from uniform (at the
    init's std 0.02 every head attends almost evenly, and an index off by one would go unseen)."""
    s = Settings(vocab=32, half=HALF, min_half=HALF, max_half=HALF, hidden=32, heads=4, layers=2, mlp_size=8)
    net = model.new_model(s, data.generator(0, "init"))
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in net.named_parameters():
            if "norm" not in name:
                p.copy_(0.15 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
    # first halves of distinct tokens, so each token of the repeated half has exactly one earlier occurrence
    first = torch.stack([torch.randperm(s.vocab, generator=gen)[:HALF] for _ in range(6)])
    return net, torch.cat([first, first], dim=1)


def rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def numpy_attention(net, tokens) -> list[np.ndarray]:
    """Each layer's attention probabilities (batch, heads, T, T), from the weights alone, in float64."""
    cfg = net.config
    W = {k: v.detach().double().numpy() for k, v in net.state_dict().items()}
    H, dh, eps = cfg.num_attention_heads, cfg.head_dim, cfg.rms_norm_eps
    theta = cfg.rope_parameters["rope_theta"]
    B, T = tokens.shape
    inv_freq = theta ** (-np.arange(0, dh, 2) / dh)
    angle = np.arange(T)[:, None] * inv_freq[None, :]  # (T, dh/2)
    cos, sin = np.cos(np.concatenate([angle, angle], -1)), np.sin(np.concatenate([angle, angle], -1))

    def rotate(x):  # x (B, H, T, dh): x cos + rotate_half(x) sin, rotate_half(x) = (-x2, x1)
        x1, x2 = x[..., : dh // 2], x[..., dh // 2:]
        return x * cos + np.concatenate([-x2, x1], -1) * sin

    h = W["model.embed_tokens.weight"][tokens.numpy()]
    probs = []
    for layer in range(cfg.num_hidden_layers):
        p = f"model.layers.{layer}."
        a = rms(h, W[p + "input_layernorm.weight"], eps)
        q, k, v = ((a @ W[p + f"self_attn.{n}_proj.weight"].T).reshape(B, T, H, dh).transpose(0, 2, 1, 3)
                   for n in "qkv")
        logits = rotate(q) @ rotate(k).transpose(0, 1, 3, 2) / np.sqrt(dh)
        logits = np.where(np.tril(np.ones((T, T), bool)), logits, -np.inf)
        e = np.exp(logits - logits.max(-1, keepdims=True))
        attn = e / e.sum(-1, keepdims=True)
        probs.append(attn)
        h = h + (attn @ v).transpose(0, 2, 1, 3).reshape(B, T, H * dh) @ W[p + "self_attn.o_proj.weight"].T
        m = rms(h, W[p + "post_attention_layernorm.weight"], eps)
        gate, up = m @ W[p + "mlp.gate_proj.weight"].T, m @ W[p + "mlp.up_proj.weight"].T
        h = h + (gate / (1 + np.exp(-gate)) * up) @ W[p + "mlp.down_proj.weight"].T
    return probs


def test_output_attentions_are_the_models_own_probabilities(peaked):
    net, tokens = peaked
    with torch.no_grad():
        out = net(tokens, output_attentions=True)
    for ours, theirs in zip(numpy_attention(net, tokens), out.attentions, strict=True):
        np.testing.assert_allclose(theirs.double().numpy(), ours, atol=2e-6)
    assert max(float(a.max()) for a in out.attentions) > 0.9  # peaked: the check below can see an offset


def test_scores_and_losses_against_loops(peaked):
    net, tokens = peaked
    got = scores.measure(net, tokens, HALF)
    probs = numpy_attention(net, tokens)
    B, T = tokens.shape
    x = tokens.tolist()

    def loop_scores(after: int, before: int) -> tuple[np.ndarray, np.ndarray]:
        """Mean attention to the token ``after`` places past the earlier occurrence (repeated half), and to the
        token ``before`` places back (every position that has one)."""
        induction, previous = np.zeros((2, 4)), np.zeros((2, 4))
        for layer, attn in enumerate(probs):
            for h in range(4):
                ind, prev = [], []
                for b in range(B):
                    for t in range(HALF, T):
                        (earlier,) = [s for s in range(HALF) if x[b][s] == x[b][t]]
                        ind.append(attn[b, h, t, earlier + after])
                    for t in range(before, T):
                        prev.append(attn[b, h, t, t - before])
                induction[layer, h], previous[layer, h] = np.mean(ind), np.mean(prev)
        return induction, previous

    induction, previous = loop_scores(1, 1)
    np.testing.assert_allclose(got["heads"]["induction_score"], induction, atol=1e-6)
    np.testing.assert_allclose(got["heads"]["previous_token_score"], previous, atol=1e-6)
    # an index off by one would be seen: the neighbouring offsets' scores lie far outside the tolerance
    for wrong in (loop_scores(0, 2), loop_scores(2, 0)):
        assert np.abs(np.array(got["heads"]["induction_score"]) - wrong[0]).max() > 1e-2
        assert np.abs(np.array(got["heads"]["previous_token_score"]) - wrong[1]).max() > 1e-2

    with torch.no_grad():
        logp = torch.log_softmax(net(tokens).logits.double(), -1).numpy()
    first = [-logp[b, p, x[b][p + 1]] for b in range(B) for p in range(0, HALF - 1)]
    repeated = [-logp[b, p, x[b][p + 1]] for b in range(B) for p in range(HALF, T - 1)]
    assert got["scalars"]["loss_first_half"] == pytest.approx(np.mean(first), abs=1e-6)
    assert got["scalars"]["loss_repeated_half"] == pytest.approx(np.mean(repeated), abs=1e-6)
    assert set(got) == {"scalars", "heads"}
