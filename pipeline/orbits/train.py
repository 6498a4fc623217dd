"""Training: full-batch cross-entropy on the train split plus an exact group-averaged equivariance penalty.

One epoch is one full-batch AdamW step on every train query instance (the fast circuit forward makes
this cheap). The objective at epoch t is

    CE(train) + w(t) * (E3^2 + context_weight * Ectx^2)

with E3 the relative equivariance error on every length-3 input (exact, all 24 shifts) and Ectx the
same on random contexts of other lengths (each context with all 24 of its shifts). w(t) ramps
geometrically from ``penalty_start`` to ``penalty_end`` over epochs [ramp_start, ramp_end]. The learning
rate falls along a cosine over ``epochs``; ``hold_epochs`` further AdamW epochs at the constant rate
``hold_lr`` may follow. Optionally ``polish_steps`` LBFGS steps follow (fixed contexts, penalty at
``penalty_end``, plus ``polish_decay``/2 ||theta||^2 when that is set), counted as further epochs.
Frames (M, R and the residual-space profile of every head, and the metrics) are kept every 25 epochs up to
4000, then every 100.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from .config import METRICS, Config, adamw_epochs, is_frame, learning_rate, penalty_weight  # noqa: F401 (re-exported)
from .equivariance import context_error2, random_contexts, triple_error2
from .model import circuits, init_params, table_forward
from .task import P, split_mask, targets

_MALLOC_STATE: list[str] = []  # what keep_freed_memory did in this process (set once)


def keep_freed_memory() -> str:
    """Have glibc keep freed memory for reuse instead of handing it back to the kernel (once per process).

    A training step allocates and frees the same large tensors every epoch: the context penalty's
    (contexts, heads, 24, 24) intermediates are 7 MB for one seed and K times that for K seeds in
    ``batch.train_batch``. Under glibc's defaults, blocks above the mmap threshold (at most 32 MB) are
    mmap'ed and unmapped on every free, and the heap's top is trimmed, so each epoch faults the same memory
    in again page by page and the kernel zeroes it: on one core this was a third of a single seed's step
    and more than half of a step of 32 seeds (``docs/orbits_search.md``, "CPU throughput"). With mmap off
    (M_MMAP_MAX 0) and trimming off (M_TRIM_THRESHOLD -1), freed blocks stay in the heap and the next
    epoch reuses them. The process keeps its peak memory until it ends; nothing else changes (the same
    operations on the same values, so the results are bit-equal).

    Not glibc (macOS, musl), or ``HEADGEOMETRY_MALLOC=default`` in the environment: does nothing.
    Returns ``"kept"``, ``"default"`` (opted out) or ``"unavailable"``.
    """
    if _MALLOC_STATE:
        return _MALLOC_STATE[0]
    state = "unavailable"
    if os.environ.get("HEADGEOMETRY_MALLOC", "") == "default":
        state = "default"
    elif sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = libc.mallopt
        except (OSError, AttributeError):
            mallopt = None
        M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # glibc's malloc.h
        if mallopt is not None and mallopt(M_MMAP_MAX, 0) == 1 and mallopt(M_TRIM_THRESHOLD, -1) == 1:
            state = "kept"
    _MALLOC_STATE.append(state)
    return state


def _eval_contexts(seed: int = 12345) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.cat([random_contexts(8, (L,), P, g) for L in (4, 8, 16)])


def evaluate(M, R, train_mask: torch.Tensor, tgt: torch.Tensor, eval_ctx: torch.Tensor | None = None) -> dict:
    """Every metric of METRICS (except penalty_weight) for circuits M, R (H, p, p)."""
    with torch.no_grad():
        G = table_forward(M, R)
        pred = G.argmax(-1)
        ok = pred == tgt
        out = {
            "train_accuracy": float(ok[train_mask].float().mean()),
            "heldout_accuracy": float(ok[~train_mask].float().mean()) if (~train_mask).any() else float("nan"),
            "loss": float(F.cross_entropy(G[train_mask], tgt[train_mask])),
            "equivariance_error": float(triple_error2(G).sqrt()),
            "sharpened_error": float(triple_error2(table_forward(2 * M, R)).sqrt()),
        }
        if eval_ctx is not None:
            out["context_error"] = float(context_error2(M, R, eval_ctx).sqrt())
    return out


def penalty(cfg: Config, M: torch.Tensor, R: torch.Tensor, ctx: torch.Tensor | None = None,
            G: torch.Tensor | None = None) -> torch.Tensor:
    """The penalty's sum of squares: the mean over ``cfg.penalty_scales`` beta of E3(beta M, R)^2 +
    context_weight * Ectx(beta M, R)^2 (contexts ``ctx``; G: the table of (M, R) if already computed)."""
    pen = 0.0
    for beta in cfg.penalty_scales:
        Mb = M if beta == 1.0 else beta * M
        Gb = G if (beta == 1.0 and G is not None) else table_forward(Mb, R)
        pen = pen + triple_error2(Gb)
        if cfg.context_weight > 0 and ctx is not None:
            pen = pen + cfg.context_weight * context_error2(Mb, R, ctx.to(M.dtype))
    return pen / len(cfg.penalty_scales)


def qk_profiles(params: dict[str, torch.Tensor]) -> np.ndarray:
    """(H, 4) float64: each head's profile (a, b, c, d) of L = W_K^T W_Q on the residual stream (d_model),
    through the same reduced eigenproblem as the profiles pipeline; biases are left out, as there. A head with
    L = 0 has a NaN profile."""
    from ..profile import cores, profile_of_cores, span_cores

    W_Q, W_K = (params[k].detach().to(torch.float64).numpy() for k in ("W_Q", "W_K"))
    return profile_of_cores(cores(*span_cores(W_Q, W_K)))[0]


def check_dtype(cfg: Config) -> str:
    if cfg.dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be float32 or float64, not {cfg.dtype!r}")
    return cfg.dtype


def initial_params(cfg: Config, start: dict | None = None) -> dict[str, torch.Tensor]:
    """The seeded init of ``train`` (or the weights ``start``) in the run's dtype, requires_grad set as trained."""
    dtype = getattr(torch, check_dtype(cfg))
    params = init_params(cfg.n_heads, cfg.d_model, cfg.d_head, P, cfg.init_scale, cfg.seed,
                         qk_init_scale=cfg.qk_init_scale, qk_bias=cfg.qk_bias)
    if cfg.onehot:
        if cfg.d_model != P:
            raise ValueError(f"onehot needs d_model = {P}; got {cfg.d_model}")
        params["W_E"] = torch.eye(P)
        params["W_U"] = torch.eye(P)
        # the circuits' scale at init as with a learned W_E (std 1 per coordinate): W_Q[:, a] here plays
        # W_Q W_E[a] there, whose entries have std init_scale, not init_scale / sqrt(d_model)
        for k in ("W_Q", "W_K", "W_V"):
            params[k] = params[k] * math.sqrt(P)
    if start is not None:
        params = {k: torch.as_tensor(np.asarray(start[k])).clone() for k in params}
    params = {k: v.to(dtype) for k, v in params.items()}
    for k, v in params.items():
        v.requires_grad_(not (cfg.onehot and k in ("W_E", "W_U")) and (cfg.learn_embed or k != "W_E"))
    return params


def optimizer_groups(cfg: Config, params: dict[str, torch.Tensor]) -> list[dict]:
    """AdamW's parameter groups: W_Q and W_K (and their biases) decay by ``weight_decay_qk`` (None:
    ``weight_decay``), the rest by ``weight_decay``. AdamW is elementwise, so the same groups over K stacked
    seeds step each seed alone."""
    wd_qk = cfg.weight_decay if cfg.weight_decay_qk is None else cfg.weight_decay_qk
    qk = [k for k in ("W_Q", "W_K", "b_Q", "b_K") if k in params]
    return [{"params": [v for k, v in params.items() if v.requires_grad and k not in qk],
             "weight_decay": cfg.weight_decay},
            {"params": [params[k] for k in qk], "weight_decay": wd_qk}]


def train(cfg: Config, progress: bool = True, log=None, start: dict | None = None,
          context_state: torch.Tensor | None = None) -> dict:
    """Train one layer; returns the config, frames (epochs, M, R, metrics), final params and metrics.

    ``log``: optional callable receiving one line of text per frame (for sweep logs).
    ``start``: optional weights {name: array} to continue from (e.g. ``epochs=0, hold_epochs=0,
    polish_steps=N`` polishes a saved run further) instead of the seeded init.
    ``context_state``: the state of the context generator to start from (``batch.train_batch`` returns it
    after AdamW, so that polishing a batched seed with ``epochs=0`` draws the contexts ``train`` would).
    """
    keep_freed_memory()
    torch.manual_seed(cfg.seed)
    dtype = getattr(torch, check_dtype(cfg))
    params = initial_params(cfg, start)
    trainable = [v for v in params.values() if v.requires_grad]
    groups = optimizer_groups(cfg, params)
    opt = torch.optim.AdamW(groups, lr=cfg.lr)
    mask = torch.from_numpy(split_mask(cfg.train_fraction, cfg.seed, cfg.split))
    tgt = torch.from_numpy(targets()).long()
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    if context_state is not None:
        gen.set_state(context_state)
    eval_ctx = _eval_contexts().to(dtype)
    frames = {"epoch": [], "M": [], "R": [], "profile": []}
    metrics: dict[str, list] = {k: [] for k in METRICS}

    def objective(w, ctx, decay=0.0):
        M, R = circuits(params)
        G = table_forward(M, R)
        ce = F.cross_entropy(G[mask], tgt[mask])
        loss = ce + w * penalty(cfg, M, R, ctx, G)
        if decay:
            loss = loss + 0.5 * decay * sum((v * v).sum() for v in trainable)
        return loss, M, R

    def record(epoch, w):
        if frames["epoch"] and frames["epoch"][-1] == epoch:  # polishing stopped on a frame: record it once
            for v in (*frames.values(), *metrics.values()):
                v.pop()
        with torch.no_grad():
            M, R = circuits(params)
        m = evaluate(M, R, mask, tgt, eval_ctx) | {"penalty_weight": w}
        frames["epoch"].append(epoch)
        frames["M"].append(M.numpy().astype(np.float32))
        frames["R"].append(R.numpy().astype(np.float32))  # frames are float32 in any dtype
        frames["profile"].append(qk_profiles(params))
        for k in METRICS:
            metrics[k].append(m[k])
        if log is not None:
            log(f"epoch {epoch} " + " ".join(f"{k}={v:.4g}" for k, v in m.items()))
        return m

    t0 = time.time()
    n_adamw = adamw_epochs(cfg)
    total = n_adamw + cfg.polish_steps
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=f"orbits seed {cfg.seed}", unit="epoch")
    m = {}
    for epoch in range(n_adamw):
        w = penalty_weight(cfg, epoch)
        if is_frame(cfg, epoch):
            m = record(epoch, w)
            if bar is not None:
                bar.set_postfix(train=f"{m['train_accuracy']:.3f}", held=f"{m['heldout_accuracy']:.3f}",
                                eq=f"{m['equivariance_error']:.1e}")
        for gparam in opt.param_groups:
            gparam["lr"] = learning_rate(cfg, epoch)
        ctx = None
        if cfg.context_weight > 0:
            ctx = random_contexts(cfg.context_batch, cfg.context_lengths, P, gen, cfg.context_kind)
        opt.zero_grad(set_to_none=True)
        loss, _, _ = objective(w, ctx)
        if not torch.isfinite(loss.detach()):
            raise FloatingPointError(f"the loss became {float(loss.detach())} at epoch {epoch}; "
                                     "lower --lr, --init-scale or the penalty")
        loss.backward()
        opt.step()
        if bar is not None:
            bar.update(1)
    polish_w = cfg.penalty_end if cfg.polish_penalty is None else cfg.polish_penalty
    stopped_at = None  # the polishing step whose weights went non-finite, if any
    if cfg.polish_steps:
        lbfgs = torch.optim.LBFGS(trainable, lr=1.0, max_iter=10, history_size=50, line_search_fn="strong_wolfe")
        ctx = None
        if cfg.context_weight > 0:
            ctx = random_contexts(2 * cfg.context_batch, cfg.context_lengths, P, gen, cfg.context_kind)

        def closure():
            lbfgs.zero_grad(set_to_none=True)
            loss, _, _ = objective(polish_w, ctx, cfg.polish_decay)
            loss.backward()
            return loss

        for i in range(cfg.polish_steps):
            epoch = n_adamw + i
            if is_frame(cfg, epoch):
                record(epoch, polish_w)
            saved = [v.detach().clone() for v in trainable]
            lbfgs.step(closure)
            if not all(bool(torch.isfinite(v).all()) for v in trainable):
                # LBFGS's line search can step into overflow; keep the last finite weights and stop polishing
                with torch.no_grad():
                    for v, w0 in zip(trainable, saved, strict=True):
                        v.copy_(w0)
                stopped_at = i
                total = epoch
                if log is not None:
                    log(f"polishing stopped at step {i}: the weights became non-finite; kept the last finite ones")
                break
            if bar is not None:
                bar.update(1)
    m = record(total, penalty_weight(cfg, total) if not cfg.polish_steps else polish_w)
    if bar is not None:
        bar.close()
    return {
        "config": cfg.to_dict() | ({} if stopped_at is None else
                                   {"extra": cfg.extra | {"polish_stopped_at": stopped_at}}),
        "epoch": np.array(frames["epoch"]),
        "M": np.stack(frames["M"]),
        "R": np.stack(frames["R"]),
        "profile": np.stack(frames["profile"]),
        "metrics": {k: np.array(v) for k, v in metrics.items()},
        "final": m,
        "params": {k: v.detach().numpy().copy() for k, v in params.items()},
        "train_mask": mask.numpy(),
        "seconds": time.time() - t0,
    }
