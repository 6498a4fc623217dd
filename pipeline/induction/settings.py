"""The run's settings: one dataclass, one flag per field (``pipeline.cli_args``); light, so ``--help`` is fast."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from ..cli_args import command

PROGRAM = "python -m pipeline.induction train"


def _f(default, help: str, **meta):
    return field(default=default, metadata={"help": help, **meta})


@dataclass(frozen=True)
class Settings:
    seed: int = _f(0, "seed of the init and of the training sequences (the evaluation batch is the same for "
                   "every seed)")
    vocab: int = _f(64, "number of token ids; tokens are drawn uniformly from all of them")
    half: int = _f(16, "length of each half of the evaluation batch's sequences (a sequence is 2 * HALF tokens)")
    min_half: int = _f(8, "each training step draws one half length for its batch, uniformly from MIN_HALF to "
                       "MAX_HALF: no fixed offset then finds the copied token, so the repeated half is learnt "
                       "by matching content (induction), not position")
    max_half: int = _f(24, "the longest half length of a training batch")
    batch: int = _f(64, "training sequences per step (fresh ones every step)")
    eval_batch: int = _f(64, "sequences of the fixed evaluation batch (losses and head scores)")
    hidden: int = _f(64, "residual width")
    heads: int = _f(4, "attention heads per layer (head dimension HIDDEN / HEADS)")
    layers: int = _f(2, "decoder layers")
    mlp_size: int = _f(0, "the MLP's intermediate size; 0 makes every MLP output exactly zero, an attention-only "
                       "model (see pipeline/induction/model.py)")
    lr: float = _f(1e-3, "AdamW's learning rate at the first step, cosine-decayed to --lr-final at the last")
    lr_final: float = _f(1e-4, "AdamW's learning rate at the last step")
    weight_decay: float = _f(0.0, "AdamW weight decay")
    steps: int = _f(2000, "optimiser steps; checkpoint-0 is the init, checkpoint-STEPS the end")
    log_checkpoints: int = _f(40, "log-spaced steps kept from 1 to STEPS (with step 0 and every step the loss rule "
                              "keeps)")
    loss_step: float = _f(0.05, "keep a step whenever the lowest repeated-half loss so far (evaluation batch) has "
                          "fallen by at least this much (nats) since the last kept step")
    threads: int = _f(1, "torch CPU threads while training (results are bit for bit the same only at the same "
                      "count on the same torch build)")

    def __post_init__(self):
        positive = ("vocab", "batch", "eval_batch", "hidden", "heads", "layers", "steps", "threads")
        bad = [f"--{k.replace('_', '-')} must be at least 1, not {getattr(self, k)}" for k in positive
               if getattr(self, k) < 1]
        if not 2 <= self.min_half <= self.max_half or self.half < 2:
            bad.append(f"--half and --min-half must be at least 2, and --min-half ({self.min_half}) at most "
                       f"--max-half ({self.max_half})")
        if self.hidden % self.heads:
            bad.append(f"--hidden ({self.hidden}) must be a multiple of --heads ({self.heads})")
        if (self.hidden // self.heads) % 2:
            bad.append(f"the head dimension --hidden / --heads ({self.hidden // self.heads}) must be even (rotary)")
        if self.mlp_size < 0 or self.log_checkpoints < 0:
            bad.append("--mlp-size and --log-checkpoints must be 0 or more")
        if not self.loss_step > 0 or not self.lr > 0 or self.lr_final < 0 or self.weight_decay < 0:
            bad.append("--loss-step and --lr must be positive, --lr-final and --weight-decay 0 or more")
        if bad:
            raise ValueError("; ".join(bad))

    def learning_rate(self, update: int) -> float:
        """The rate of optimiser update ``update`` (0 .. steps - 1): cosine from ``lr`` to ``lr_final``."""
        f = update / (self.steps - 1) if self.steps > 1 else 0.0
        return self.lr_final + (self.lr - self.lr_final) * (1 + math.cos(math.pi * f)) / 2

    @property
    def positions(self) -> int:
        """The longest sequence of the run (the model's ``max_position_embeddings``)."""
        return 2 * max(self.half, self.max_half)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def command_for(settings: Settings, out_dir: str) -> str:
    """The command that trains ``settings`` into ``out_dir``: the settings that differ from the defaults as flags."""
    changed = {k: v for k, v in asdict(settings).items() if v != Settings.__dataclass_fields__[k].default}
    return command(PROGRAM, [out_dir], changed)
