"""Train K seeds of one recipe at once: the AdamW phase of ``train.train`` for every seed, batched.

Each seed gets exactly what ``train`` gives it: the seeded init (``train.initial_params``), its own orbit
split, its own context generator (seed + 1) and the same learning-rate and penalty schedules. The K seeds'
weights are stacked along a leading axis, each seed's loss is the circuit forward and the penalty of
``train`` taken through ``torch.func.vmap``, and one AdamW steps the stacked weights. AdamW is elementwise
(moments, bias correction and decoupled weight decay act on each entry alone, with the same two parameter
groups as ``train``; there is no gradient clipping), and the gradient of the summed losses with respect to
seed k's weights is the gradient of seed k's loss alone. So every seed follows its own ``train`` run; the
batched contractions only sum in another order (``tests/pipeline/orbits/test_orbits_batch.py`` measures the difference).

LBFGS polishing is not batched (its line search is per run): ``search.polish`` continues a seed with
``train`` from the weights and the context-generator state returned here.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import torch
import torch.nn.functional as F

from .config import Config, adamw_epochs, learning_rate, penalty_weight
from .equivariance import random_contexts
from .model import circuits, table_forward
from .task import P, split_mask, targets
from .train import check_dtype, eval_contexts, evaluate, initial_params, optimizer_groups, penalty


def resolve_device(device: str) -> torch.device:
    """``auto``: CUDA where torch sees a GPU, else the CPU; ``cpu``; ``cuda`` (an error where there is none)."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: torch sees no CUDA device here; use --device cpu or auto")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"--device must be auto, cpu or cuda; got {device!r}")
    return torch.device(device)


def train_batch(cfg: Config, seeds: Sequence[int], device: str = "cpu", bar=None) -> list[dict]:
    """AdamW for ``cfg.epochs`` + ``cfg.hold_epochs`` epochs on every seed of ``seeds`` at once (``cfg.seed``
    is ignored).

    Returns one dict per seed: ``seed``, ``params`` (numpy, the weights after AdamW), ``final`` (the metrics
    of ``train.evaluate`` on them, computed on the CPU as ``train`` does), ``context_state`` (the seed's
    context generator after AdamW, for polishing), ``failed_at`` (the first epoch whose loss was not finite,
    else None; ``train`` raises there, here the seed gets no gradient from then on and is reported failed),
    ``train_mask`` and ``seconds`` (the batch's wall time).
    ``bar``: an optional tqdm-like object advanced by len(seeds) per epoch.
    """
    seeds = [int(s) for s in seeds]
    if not seeds:
        return []
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct; got {seeds}")
    dev = resolve_device(device)
    dtype = getattr(torch, check_dtype(cfg))
    t0 = time.time()
    K = len(seeds)
    per_seed = [initial_params(replace(cfg, seed=s)) for s in seeds]
    params = {k: torch.stack([p[k].detach() for p in per_seed]).to(dev).requires_grad_(per_seed[0][k].requires_grad)
              for k in per_seed[0]}
    opt = torch.optim.AdamW(optimizer_groups(cfg, params), lr=cfg.lr)
    masks = np.stack([split_mask(cfg.train_fraction, s, cfg.split) for s in seeds])
    weight = torch.from_numpy(masks.reshape(K, -1)).to(dev, dtype)
    n_train = weight.sum(dim=1)
    tgt = torch.from_numpy(targets()).long().reshape(-1).to(dev)
    gens = [torch.Generator().manual_seed(s + 1) for s in seeds]
    use_ctx = cfg.context_weight > 0
    failed_at: list[int | None] = [None] * K

    def seed_loss(p, wmask, ntr, ctx, w):
        M, R = circuits(p)
        G = table_forward(M, R)
        # train's cross-entropy over G[mask] as a masked mean: vmap needs shapes that do not depend on the seed
        ce = (F.cross_entropy(G.reshape(-1, P), tgt, reduction="none") * wmask).sum() / ntr
        return ce + w * penalty(cfg, M, R, ctx if use_ctx else None, G)

    batched = torch.func.vmap(seed_loss, in_dims=(0, 0, 0, 0 if use_ctx else None, None))
    n_adamw = adamw_epochs(cfg)
    for epoch in range(n_adamw):
        w = penalty_weight(cfg, epoch)
        for g in opt.param_groups:
            g["lr"] = learning_rate(cfg, epoch)
        ctx = None
        if use_ctx:
            ctx = torch.stack([random_contexts(cfg.context_batch, cfg.context_lengths, P, g, cfg.context_kind)
                               for g in gens]).to(dev, dtype)
        opt.zero_grad(set_to_none=True)
        losses = batched(params, weight, n_train, ctx, w)
        bad = ~torch.isfinite(losses.detach())
        if bool(bad.any()):
            for k in torch.nonzero(bad).flatten().tolist():
                if failed_at[k] is None:
                    failed_at[k] = epoch
        losses.sum().backward()
        if any(f is not None for f in failed_at):  # a failed seed gets no more gradient; the others go on
            failed = torch.tensor([f is not None for f in failed_at], device=dev)
            for v in params.values():
                if v.grad is not None:
                    v.grad[failed] = 0.0
        opt.step()
        if bar is not None:
            bar.update(K)
    out = []
    mask_t = torch.from_numpy(masks)
    tgt3 = torch.from_numpy(targets()).long()
    eval_ctx = eval_contexts().to(dtype)
    for i, s in enumerate(seeds):
        p = {k: v[i].detach().cpu().clone() for k, v in params.items()}
        with torch.no_grad():
            M, R = circuits(p)
        final = evaluate(M, R, mask_t[i], tgt3, eval_ctx) | {"penalty_weight": penalty_weight(cfg, n_adamw)}
        out.append({"seed": s, "params": {k: v.numpy() for k, v in p.items()}, "final": final,
                    "context_state": gens[i].get_state(), "failed_at": failed_at[i], "train_mask": masks[i],
                    "seconds": time.time() - t0})
    return out
