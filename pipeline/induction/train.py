"""The training pass: AdamW (its rate cosine-decayed) on fresh repeated sequences, every step measured on the fixed
evaluation batch, the steps the schedule keeps written as checkpoints, and the run's record in ``run.json``.

Step N's checkpoint holds the weights after N optimiser steps (checkpoint-0 is the init). The objective is the
mean next-token cross-entropy over every position of both halves, a language model's usual loss: the first half's
predictions can only learn the uniform distribution, the repeated half's can learn to copy.

Bit for bit: the init and the training sequences come from generators seeded by the run's seed alone, the
evaluation batch from a fixed seed; training runs at a fixed thread count with
``torch.use_deterministic_algorithms``. The global torch generator, the thread count and the determinism flag are
restored on return. The same settings on the same torch build (and CPU kind) write the same bytes in every
checkpoint; ``run.json`` differs only in its ``seconds``.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F

from ..version import version
from . import checkpoint, data, model, schedule, scores
from .settings import Settings, command_for


@contextlib.contextmanager
def pinned_torch(threads: int):
    """The thread count and deterministic algorithms for the block, and the global generator left as it was."""
    before = torch.get_num_threads()
    det, warn_only = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        torch.use_deterministic_algorithms(det, warn_only=warn_only)
        torch.set_num_threads(before)


def check_empty(out_dir: Path) -> None:
    """A run writes into a new or empty folder only: checkpoints of two runs in one folder would read as one run."""
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise FileExistsError(f"{out_dir} exists and is not an empty folder; give a new OUT_DIR")


def train(s: Settings, out_dir: str | Path, log=print) -> dict:
    """Train ``s`` into ``out_dir`` (a new or empty folder); returns the run's record (also ``run.json``)."""
    import transformers

    out_dir = Path(out_dir)
    check_empty(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    curve = {"step": [], "loss_first_half": [], "loss_repeated_half": [], "train_loss": []}
    kept: dict[int, list[str]] = {}
    with pinned_torch(s.threads):
        net = model.new_model(s, data.generator(s.seed, "init"))
        batches = data.generator(s.seed, "train")
        eval_tokens = data.eval_batch(s.eval_batch, s.half, s.vocab)
        opt = torch.optim.AdamW(net.parameters(), lr=s.lr, weight_decay=s.weight_decay)
        keeper = schedule.Keeper(s.steps, s.log_checkpoints, s.loss_step)
        train_loss: float | None = None  # the loss of the batch of the update that led here (none before step 1)
        for step in range(s.steps + 1):
            metrics = scores.measure(net, eval_tokens, s.half)
            first, repeated = (metrics["scalars"][k] for k in ("loss_first_half", "loss_repeated_half"))
            for k, v in (("step", step), ("loss_first_half", first), ("loss_repeated_half", repeated),
                         ("train_loss", train_loss)):
                curve[k].append(v)
            why = keeper.reasons(step, repeated)
            if why:
                kept[step] = why
                checkpoint.save(net, out_dir, step, metrics, {
                    "max_steps": s.steps, "seed": s.seed, "kept_because": why,
                    "log_history": [{"step": step, "loss_first_half": first, "loss_repeated_half": repeated,
                                     "train_loss": train_loss}]})
            if step % 100 == 0 or step == s.steps:
                log(f"step {step}: loss first half {first:.4f}, repeated half {repeated:.4f}; "
                    f"{len(kept)} checkpoints, {time.perf_counter() - start:.1f} s")
            if step == s.steps:
                break
            tokens = data.repeated(batches, s.batch, data.half_length(batches, s.min_half, s.max_half), s.vocab)
            logits = net(tokens).logits
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, s.vocab), tokens[:, 1:].reshape(-1))
            for group in opt.param_groups:
                group["lr"] = s.learning_rate(step)
            opt.zero_grad()
            loss.backward()
            opt.step()
            train_loss = float(loss.detach())
    record = {"command": command_for(s, str(out_dir)), "settings": asdict(s),
              "versions": {"headgeometry": version(), "torch": torch.__version__,
                           "transformers": transformers.__version__},
              "checkpoints": {str(k): v for k, v in kept.items()}, "curve": curve,
              "seconds": round(time.perf_counter() - start, 2)}
    checkpoint.write_json(out_dir / "run.json", record)
    log(f"{len(kept)} checkpoints in {out_dir} ({record['seconds']} s)")
    return record
