"""Which steps become checkpoints, decided during one deterministic pass over the steps.

Two rules, a step kept when either keeps it:

- ``log``: step 0, the last step, and ``count`` steps spaced evenly in log(step) from 1 to the last (rounded; the
  early steps, where rounding merges them, count once), so every stretch of training is seen at its own scale;
- ``loss``: every step at which the lowest repeated-half loss so far (on the fixed evaluation batch, measured at
  every step) lies at least ``loss_step`` nats below its value at the last kept step (of either rule). The
  checkpoints crowd where the loss falls fastest, the phase change in which copying from context is learnt;
  the loss's step-to-step noise, up and back down, keeps none (the lowest value so far only falls), and this
  rule keeps at most (first loss - lowest loss) / ``loss_step`` steps in all.
"""

from __future__ import annotations

import numpy as np


def log_steps(last: int, count: int) -> set[int]:
    """{0, last} and ``count`` steps log-spaced from 1 to ``last`` (fewer where rounding merges them)."""
    spaced = np.geomspace(1, last, count) if count > 0 else np.array([])
    return {0, last} | {int(round(v)) for v in spaced}


class Keeper:
    """The two rules over one pass: :meth:`reasons` is called once per step, in order, with that step's loss."""

    def __init__(self, last: int, count: int, loss_step: float):
        self.logged = log_steps(last, count)
        self.loss_step = loss_step
        self.lowest = float("inf")  # the lowest loss so far
        self.kept_lowest: float | None = None  # its value at the last kept step (none before step 0)

    def reasons(self, step: int, loss_repeated: float) -> list[str]:
        """The rules that keep ``step`` ("log", "loss"), empty when neither does."""
        self.lowest = min(self.lowest, loss_repeated)
        why = ["log"] if step in self.logged else []
        if self.kept_lowest is not None and self.kept_lowest - self.lowest >= self.loss_step:
            why.append("loss")
        if why:
            self.kept_lowest = self.lowest
        return why
