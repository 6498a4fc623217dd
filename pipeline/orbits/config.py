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
    train_fraction: float = 0.5
    split: str = "orbit"
    epochs: int = 2000
    lr: float = 1e-3
    lr_final: float = 1e-5
    weight_decay: float = 1.0
    penalty_start: float = 1.0
    penalty_end: float = 3000.0
    ramp_start: int = 200
    ramp_end: int = 1500
    context_weight: float = 1.0
    context_lengths: tuple[int, ...] = (4, 5, 6, 8)
    context_batch: int = 4
    context_kind: str = "tokens"
    polish_steps: int = 0
    frame_every: int = 25
    frame_every_late: int = 100
    frame_switch: int = 4000
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["context_lengths"] = list(self.context_lengths)
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
