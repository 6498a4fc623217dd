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

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from ..profile import cores, profile_of_cores, span_cores
from .config import METRICS, Config, adamw_epochs, is_frame, learning_rate, penalty_weight
from .equivariance import context_error2, random_contexts, triple_error2
from .model import circuits, init_params, table_forward
from .task import P, split_mask, targets


def eval_contexts(seed: int = 12345) -> torch.Tensor:
    """The fixed contexts every evaluation measures the context error on."""
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


@dataclass
class Training:
    """One seed's training state (:func:`setup`): the weights, the optimiser, the split, the context generator,
    and the frames and metrics recorded so far."""

    cfg: Config
    params: dict[str, torch.Tensor]
    opt: torch.optim.Optimizer
    mask: torch.Tensor
    tgt: torch.Tensor
    gen: torch.Generator
    eval_ctx: torch.Tensor
    log: object = None  # a callable receiving one line per frame, or None
    frames: dict[str, list] = field(default_factory=lambda: {"epoch": [], "M": [], "R": [], "profile": []})
    metrics: dict[str, list] = field(default_factory=lambda: {k: [] for k in METRICS})

    @property
    def trainable(self) -> list[torch.Tensor]:
        return [v for v in self.params.values() if v.requires_grad]

    def objective(self, w: float, ctx, decay: float = 0.0):
        """(loss, M, R): cross-entropy on the train split, plus w times the penalty, plus decay/2 ||theta||^2."""
        M, R = circuits(self.params)
        G = table_forward(M, R)
        ce = F.cross_entropy(G[self.mask], self.tgt[self.mask])
        loss = ce + w * penalty(self.cfg, M, R, ctx, G)
        if decay:
            loss = loss + 0.5 * decay * sum((v * v).sum() for v in self.trainable)
        return loss, M, R

    def contexts(self, count: int):
        """``count`` random contexts from the run's generator, or None when the context penalty is off."""
        if self.cfg.context_weight <= 0:
            return None
        return random_contexts(count, self.cfg.context_lengths, P, self.gen, self.cfg.context_kind)


def setup(cfg: Config, start: dict | None = None, context_state: torch.Tensor | None = None,
          log=None) -> Training:
    """The seeded init (or the weights ``start``), AdamW, the split, the targets and the context generator (at
    ``context_state`` when given), in the order ``train`` has always drawn them."""
    torch.manual_seed(cfg.seed)
    dtype = getattr(torch, check_dtype(cfg))
    params = initial_params(cfg, start)
    opt = torch.optim.AdamW(optimizer_groups(cfg, params), lr=cfg.lr)
    mask = torch.from_numpy(split_mask(cfg.train_fraction, cfg.seed, cfg.split))
    tgt = torch.from_numpy(targets()).long()
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    if context_state is not None:
        gen.set_state(context_state)
    return Training(cfg, params, opt, mask, tgt, gen, eval_contexts().to(dtype), log)


def record(run: Training, epoch: int, w: float) -> dict:
    """Keep a frame (M, R, the heads' profiles) and the metrics at ``epoch``; returns the metrics. A polishing
    that stopped on a frame records it once."""
    frames, metrics = run.frames, run.metrics
    if frames["epoch"] and frames["epoch"][-1] == epoch:
        for v in (*frames.values(), *metrics.values()):
            v.pop()
    with torch.no_grad():
        M, R = circuits(run.params)
    m = evaluate(M, R, run.mask, run.tgt, run.eval_ctx) | {"penalty_weight": w}
    frames["epoch"].append(epoch)
    frames["M"].append(M.numpy().astype(np.float32))
    frames["R"].append(R.numpy().astype(np.float32))  # frames are float32 in any dtype
    frames["profile"].append(qk_profiles(run.params))
    for k in METRICS:
        metrics[k].append(m[k])
    if run.log is not None:
        run.log(f"epoch {epoch} " + " ".join(f"{k}={v:.4g}" for k, v in m.items()))
    return m


def adamw_phase(run: Training, bar=None) -> None:
    """The AdamW epochs (cosine rate, then the held rate), recording the frames that fall in them."""
    cfg = run.cfg
    for epoch in range(adamw_epochs(cfg)):
        w = penalty_weight(cfg, epoch)
        if is_frame(cfg, epoch):
            m = record(run, epoch, w)
            if bar is not None:
                bar.set_postfix(train=f"{m['train_accuracy']:.3f}", held=f"{m['heldout_accuracy']:.3f}",
                                eq=f"{m['equivariance_error']:.1e}")
        for gparam in run.opt.param_groups:
            gparam["lr"] = learning_rate(cfg, epoch)
        ctx = run.contexts(cfg.context_batch)
        run.opt.zero_grad(set_to_none=True)
        loss, _, _ = run.objective(w, ctx)
        if not torch.isfinite(loss.detach()):
            raise FloatingPointError(f"the loss became {float(loss.detach())} at epoch {epoch}; "
                                     "lower --lr, --init-scale or the penalty")
        loss.backward()
        run.opt.step()
        if bar is not None:
            bar.update(1)


def polish_phase(run: Training, bar=None) -> int | None:
    """``polish_steps`` LBFGS steps on fixed contexts, counted as epochs after AdamW, recording their frames.
    Returns the step whose weights went non-finite (the last finite ones are kept and polishing stops), or None."""
    cfg, trainable = run.cfg, run.trainable
    n_adamw, w = adamw_epochs(cfg), polish_weight(cfg)
    lbfgs = torch.optim.LBFGS(trainable, lr=1.0, max_iter=10, history_size=50, line_search_fn="strong_wolfe")
    ctx = run.contexts(2 * cfg.context_batch)

    def closure():
        lbfgs.zero_grad(set_to_none=True)
        loss, _, _ = run.objective(w, ctx, cfg.polish_decay)
        loss.backward()
        return loss

    for i in range(cfg.polish_steps):
        if is_frame(cfg, n_adamw + i):
            record(run, n_adamw + i, w)
        saved = [v.detach().clone() for v in trainable]
        lbfgs.step(closure)
        if not all(bool(torch.isfinite(v).all()) for v in trainable):
            # LBFGS's line search can step into overflow; keep the last finite weights and stop polishing
            with torch.no_grad():
                for v, w0 in zip(trainable, saved, strict=True):
                    v.copy_(w0)
            if run.log is not None:
                run.log(f"polishing stopped at step {i}: the weights became non-finite; kept the last finite ones")
            return i
        if bar is not None:
            bar.update(1)
    return None


def polish_weight(cfg: Config) -> float:
    """The penalty weight while polishing: ``polish_penalty``, else ``penalty_end``."""
    return cfg.penalty_end if cfg.polish_penalty is None else cfg.polish_penalty


def result(run: Training, final: dict, stopped_at: int | None, seconds: float) -> dict:
    """What ``train`` returns: the config (with the polishing's stop, if any), the frames, metrics and weights."""
    cfg = run.cfg
    return {
        "config": cfg.to_dict() | ({} if stopped_at is None else
                                   {"extra": cfg.extra | {"polish_stopped_at": stopped_at}}),
        "epoch": np.array(run.frames["epoch"]),
        "M": np.stack(run.frames["M"]),
        "R": np.stack(run.frames["R"]),
        "profile": np.stack(run.frames["profile"]),
        "metrics": {k: np.array(v) for k, v in run.metrics.items()},
        "final": final,
        "params": {k: v.detach().numpy().copy() for k, v in run.params.items()},
        "train_mask": run.mask.numpy(),
        "seconds": seconds,
    }


def train(cfg: Config, progress: bool = True, log=None, start: dict | None = None,
          context_state: torch.Tensor | None = None) -> dict:
    """Train one layer; returns the config, frames (epochs, M, R, metrics), final params and metrics.

    ``log``: optional callable receiving one line of text per frame (for sweep logs).
    ``start``: optional weights {name: array} to continue from (e.g. ``epochs=0, hold_epochs=0,
    polish_steps=N`` polishes a saved run further) instead of the seeded init.
    ``context_state``: the state of the context generator to start from (``batch.train_batch`` returns it
    after AdamW, so that polishing a batched seed with ``epochs=0`` draws the contexts ``train`` would).
    Setup (:func:`setup`), the AdamW epochs (:func:`adamw_phase`), polishing (:func:`polish_phase`), the last
    frame (:func:`record`) and the result (:func:`result`).
    """
    run = setup(cfg, start, context_state, log)
    t0 = time.time()
    n_adamw = adamw_epochs(cfg)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_adamw + cfg.polish_steps, desc=f"orbits seed {cfg.seed}", unit="epoch")
    adamw_phase(run, bar)
    stopped_at = polish_phase(run, bar) if cfg.polish_steps else None
    last = n_adamw + cfg.polish_steps if stopped_at is None else n_adamw + stopped_at
    final = record(run, last, penalty_weight(cfg, last) if not cfg.polish_steps else polish_weight(cfg))
    if bar is not None:
        bar.close()
    return result(run, final, stopped_at, time.time() - t0)
