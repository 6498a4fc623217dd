"""The run's hyperparameters, schedules and metric definitions (light: no torch, so the CLI's --help is fast)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

METRICS = {
    "train_accuracy": "fraction of train query instances (a, b, c) whose argmax logit is (b + c) mod 24; "
    "a triple's three positions are three query instances",
    "heldout_accuracy": "the same on the held-out query instances",
    "loss": "cross-entropy on the train query instances (mean, nats), without the penalty",
    "equivariance_error": "relative equivariance error on all 24^3 length-3 inputs: ||G - avg_s G||_F / ||G||_F "
    "with G[a, b, c, :] the logits centred over classes and avg_s the average over the 24 shifts "
    "(G[a+s, b+s, c+s, k+2s] against G[a, b, c, k])",
    "context_error": "the same relative error on 8 fixed random sequences each of lengths 4, 8 and 16 "
    "(every query token, all 24 shifts of each)",
    "sharpened_error": "equivariance_error of the layer with every QK circuit doubled (M -> 2 M): 0 for heads in "
    "exact orbits at any scale; a layer whose equivariance is tuned to its own scale shows it here",
    "penalty_weight": "the weight w(t) of the squared relative equivariance errors in the objective",
}


@dataclass
class Config:
    seed: int = 0
    n_heads: int = 32
    d_model: int = 128
    d_head: int = 24
    init_scale: float = 1.0
    learn_embed: bool = True
    # one-hot tokens: W_E = W_U = identity, frozen (d_model must be 24). The heads then act on the token space
    # itself, M_h = W_Q^T W_K / sqrt(d_head) and R_h = W_O W_V, as in the structure theorem's statement.
    onehot: bool = False
    train_fraction: float = 0.5
    split: str = "orbit"
    epochs: int = 2000
    lr: float = 1e-3
    lr_final: float = 1e-5
    weight_decay: float = 1.0
    # AdamW decay of W_Q and W_K alone (None: weight_decay). Decay on the QK weights keeps the attention
    # soft; a soft softmax makes near-orbits almost exactly equivariant (see docs/orbits_sweep.md).
    weight_decay_qk: float | None = None
    penalty_start: float = 1.0
    penalty_end: float = 3000.0
    ramp_start: int = 200
    ramp_end: int = 1500
    context_weight: float = 1.0
    context_lengths: tuple[int, ...] = (4, 5, 6, 8)
    context_batch: int = 4
    context_kind: str = "tokens"
    # QK scales beta at which the penalty is taken: the layer with M -> beta M is the layer on inputs whose
    # embeddings are scaled by sqrt(beta) (R scales too, which a relative error ignores). (1.0,) is the plain
    # penalty; more scales ask for equivariance on more inputs, as the structure theorem's "all inputs" does.
    penalty_scales: tuple[float, ...] = (1.0,)
    polish_steps: int = 0
    polish_penalty: float | None = None  # the penalty weight during LBFGS polishing (None: penalty_end)
    dtype: str = "float32"  # "float64" trains and polishes in double precision (for errors below ~1e-5)
    frame_every: int = 25
    frame_every_late: int = 100
    frame_switch: int = 4000
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["context_lengths"] = list(self.context_lengths)
        d["penalty_scales"] = list(self.penalty_scales)
        return d


def penalty_weight(cfg: Config, epoch: int) -> float:
    """w(t): penalty_start before ramp_start, penalty_end after ramp_end, geometric in between."""
    if epoch <= cfg.ramp_start or cfg.ramp_end <= cfg.ramp_start:
        return cfg.penalty_start if epoch <= cfg.ramp_start else cfg.penalty_end
    if epoch >= cfg.ramp_end:
        return cfg.penalty_end
    f = (epoch - cfg.ramp_start) / (cfg.ramp_end - cfg.ramp_start)
    return float(cfg.penalty_start * (cfg.penalty_end / cfg.penalty_start) ** f)


def learning_rate(cfg: Config, epoch: int) -> float:
    """Cosine from lr to lr_final over the epochs."""
    f = min(epoch / max(cfg.epochs, 1), 1.0)
    return cfg.lr_final + 0.5 * (cfg.lr - cfg.lr_final) * (1 + math.cos(math.pi * f))


def is_frame(cfg: Config, epoch: int) -> bool:
    every = cfg.frame_every if epoch <= cfg.frame_switch else cfg.frame_every_late
    return epoch % every == 0
