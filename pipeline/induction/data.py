"""The sequences: uniform random tokens whose second half repeats the first, drawn from seeded generators."""

from __future__ import annotations

import numpy as np
import torch

# The evaluation batch's seed, the same for every run so that runs of different seeds are measured on one batch.
EVAL_SEED = 20220308


def generator(seed: int, stream: str) -> torch.Generator:
    """A torch generator for one named stream of a run (``"init"``, ``"train"``): seeds spread by numpy's
    SeedSequence, so the streams of one seed share no state and nearby seeds give unrelated streams."""
    words = [ord(c) for c in stream]
    state = np.random.SeedSequence([seed, *words]).generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))


def repeated(gen: torch.Generator, batch: int, half: int, vocab: int) -> torch.Tensor:
    """(batch, 2 * half) int64: each row ``x`` is ``half`` uniform tokens in [0, vocab) followed by the same
    ``half`` tokens again (``x[half + i] == x[i]``)."""
    first = torch.randint(0, vocab, (batch, half), generator=gen)
    return torch.cat([first, first], dim=1)


def half_length(gen: torch.Generator, low: int, high: int) -> int:
    """One training batch's half length, uniform in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def eval_batch(batch: int, half: int, vocab: int) -> torch.Tensor:
    """The fixed evaluation batch (seeded by EVAL_SEED alone)."""
    return repeated(generator(EVAL_SEED, "eval"), batch, half, vocab)
