"""The torch routes: a whole layer at a time on a torch device (a GPU, or the CPU), batched.

1. QR of every head's ``[W_K[kv]^T | W_Q^T]`` (``torch.linalg.qr``, R only, float64), in groups of heads whose
   float64 (N, 2n) inputs fill about ``chunk_bytes``; the heads travel to the device in their storage dtype.
2. The (heads x offsets) pairs, in order, in chunks of ``chunk_bytes`` of (k, k) float64 work arrays (at most
   EIG_BATCH): the top rows ``K[:m] R(d) P^T`` of their cores (R(d) applied elementwise when ``rotation_pairs``
   finds the rotary structure, else a batched product), norms, ||antisym|| and the upper triangle of 2 sym(C)
   unscaled, as the numpy route forms them (``pipeline.profile.lapack.head_offsets``), and one batched
   ``eigvalsh``.
3. Eigenvalues, norms and ||T|| come back to the CPU (a few numbers per matrix) for ``profile_of_spectra``.

A GPU needs large batches (one head's offsets are too few eigenproblems to fill it), and one torch path means the
tests on CPU torch run the very code a GPU runs. Nothing is lost on the CPU by it: torch on the CPU took the same
time either way (CPU time of two (5120, 128) heads x 129 offsets, one thread, medians of 3 on a loaded 2-core
machine: 0.87 s one head at a time, 0.89 s batched; the numpy route 0.70 s, and it stays the CPU route that "auto"
takes without a GPU).

Memory: a chunk's intermediates (K R(d), the gathered P^T, the top rows) and the eigensolver's own copy of its
input come to about twice its (B, k, k) work array: peak memory about 3 x ``chunk_bytes`` beyond the layer's
factors (K[:m] and P^T: n (m + k) float64 per head).
"""

from __future__ import annotations

import numpy as np

from pipeline import optional_imports

from .span import nonfinite_head, rotation_pairs
from .spectra import CHUNK_BYTES, profile_of_spectra

DEVICE_CHUNK_BYTES = 1 << 30  # per (heads x offsets x k x k) float64 work array on a torch device other than the CPU
EIG_BATCH = 1 << 15  # at most this many matrices per torch eigvalsh call: under CUDA's grid limit of 65 535 blocks,
# which batched cuSOLVER calls of one block per matrix reach


def _on_device(x, dev):
    """A numpy array as a tensor on ``dev``; read-only arrays are copied (torch.from_numpy needs writable memory)."""
    return optional_imports.torch().from_numpy(np.require(x, requirements=["C", "W"])).to(dev)


def _factor_heads(W_Q, W_K, kv_of_head, gain, dev, chunk_bytes: int):
    """K[:m] (H, m, n) and P^T (H, n, k), float64 on ``dev``: the QR of every head's span, in groups of heads."""
    torch = optional_imports.torch()
    H, n, N = W_Q.shape
    k = min(N, 2 * n)
    m = min(n, k)
    f64 = torch.float64
    g = None if gain is None else _on_device(np.asarray(gain, dtype=np.float64), dev)[:, None]
    K1, Pt = torch.empty((H, m, n), dtype=f64, device=dev), torch.empty((H, n, k), dtype=f64, device=dev)
    group = max(1, chunk_bytes // max(1, N * 2 * n * 8))
    if getattr(W_Q, "heads_on_demand", False):  # heads formed in float64 in host memory (latent attention's
        # LatentHeads): groups of them within CHUNK_BYTES there, whatever the device's chunks
        group = min(group, max(1, CHUNK_BYTES // max(1, N * 2 * n * 8)))
    for start in range(0, H, group):
        heads = slice(start, min(H, start + group))
        Wq, Wk = _on_device(W_Q[heads], dev).to(f64), _on_device(W_K[kv_of_head[heads]], dev).to(f64)
        A = torch.cat([Wk.mT, Wq.mT], dim=-1)  # (heads, N, 2n)
        del Wq, Wk
        if g is not None:
            A *= g
        finite = torch.isfinite(A).flatten(1).all(dim=1).cpu().numpy()
        if not finite.all():
            raise nonfinite_head(start + int(np.argmin(finite)))
        R = torch.linalg.qr(A, mode="r").R  # (heads, k, 2n)
        del A
        K1[heads] = R[:, :m, :n]
        Pt[heads] = R[:, :, n:].mT
    return K1, Pt


def _rotation(rotations, dev):
    """A function (K[:m] of a chunk (B, m, n), its offsets (B,) on ``dev``) -> K[:m] R(d): elementwise for rotary
    pairs (``(K R)[:, j] = K[:, j] diag[d, j] + K[:, partner[j]] off[d, j]``), else a batched product; the identity
    without rotations."""
    pairs = None if rotations is None else rotation_pairs(rotations)
    if pairs is not None:
        diag, partner, off = (_on_device(x, dev) for x in pairs)
        return lambda KR, ds: KR * diag[ds][:, None, :] + KR[:, :, partner] * off[ds][:, None, :]
    if rotations is not None:
        R_all = _on_device(rotations, dev)
        return lambda KR, ds: KR @ R_all[ds]
    return lambda KR, ds: KR


def _symmetric_parts(top, work, m: int):
    """The upper triangle of 2 sym(C) in ``work[:B]`` (a zeroed (>= B, k, k) work array), the norms ||C|| (B,) and
    4 ||antisym(C)||^2 (B,) of a chunk's cores, from their unscaled top rows ``top`` (B, m, k)."""
    torch = optional_imports.torch()
    nrm = torch.linalg.vector_norm(top, dim=(-2, -1))
    A, B = top[:, :, :m], top[:, :, m:]
    Dm = A - A.mT  # the top-left block of 2 antisym(C)
    ts = (Dm * Dm).sum(dim=(-2, -1)) + 2.0 * (B * B).sum(dim=(-2, -1))  # 4 ||antisym(C)||^2
    S = work[:len(top)]
    S[:, :m, :m] = A + A.mT  # with B beside it, the upper triangle of 2 sym(C)
    S[:, :m, m:] = B
    return S, nrm, ts


def _scaled_spectra(lam2, nrm, ts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eigenvalues (B, k) and ||T|| (B,) of sym(C) / ||C||, and ||C|| (B,), on the CPU, from the eigenvalues
    ``lam2`` of 2 sym(C), the norms and 4 ||antisym(C)||^2 (:func:`_symmetric_parts`)."""
    torch = optional_imports.torch()
    scale = 2.0 * torch.where(nrm > 0, nrm, 1.0)  # ||C|| = 1 after: eigenvalues and ||T|| of 2 sym(C) / (2 ||C||)
    lam = (lam2 / scale[:, None]).cpu().numpy()
    t = (torch.sqrt(ts) / scale).cpu().numpy()
    return lam, t, nrm.cpu().numpy()


def device_layer(W_Q, W_K, rotations, kv_of_head, gain, rtol: float, route: str, device, chunk_bytes: int | None,
                 kernels, keep, progress) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A whole layer's profiles (H, D, 4), norms (H, D) and eigenvalues at the first offset (H, k) (D = 1 without
    rotations), batched on the torch ``device`` (module docstring). ``chunk_bytes`` None: CHUNK_BYTES on the CPU,
    DEVICE_CHUNK_BYTES on any other device; ``kernels.torch_eigensolver(route)`` solves each chunk; ``keep(h, top)``
    (or None) gets the unscaled top rows of each head's core at the first offset, as a numpy array; ``progress(h)``
    (or None) is called as each head is done."""
    torch = optional_imports.torch()
    H, n, N = W_Q.shape
    k, D = min(N, 2 * n), 1 if rotations is None else len(rotations)
    m = min(n, k)
    dev = torch.device(device)
    if chunk_bytes is None:
        chunk_bytes = CHUNK_BYTES if dev.type == "cpu" else DEVICE_CHUNK_BYTES
    K1, Pt = _factor_heads(W_Q, W_K, kv_of_head, gain, dev, chunk_bytes)
    rotate = _rotation(rotations, dev)
    total = H * D
    n_chunks = -(-total // max(1, min(EIG_BATCH, chunk_bytes // max(1, k * k * 8))))
    step = max(1, -(-total // max(1, n_chunks)))  # chunks of equal size
    work = torch.zeros((step, k, k), dtype=torch.float64, device=dev)  # rows m: stay zero: only the top rows are set
    eig = kernels.torch_eigensolver(route)
    prof, norm, lam0 = np.empty((total, 4)), np.empty(total), np.empty((H, k))
    done = 0
    for start in range(0, total, step):
        stop = min(total, start + step)
        idx = np.arange(start, stop)
        hs, ds = idx // D, idx % D
        hs_t = _on_device(hs, dev)
        top = rotate(K1[hs_t], _on_device(ds, dev)) @ Pt[hs_t]  # the core's nonzero rows [A | B], (B, m, k)
        first = np.flatnonzero(ds == 0)
        if keep is not None and len(first):
            for h, t in zip(hs[first], top[first].cpu().numpy(), strict=True):
                keep(int(h), t)
        S, nrm, ts = _symmetric_parts(top, work, m)
        del top
        lam, t, nrm = _scaled_spectra(eig(S), nrm, ts)
        prof[start:stop], norm[start:stop], lam = profile_of_spectra(np.where(t <= rtol, 0.0, t * t), lam, nrm, rtol)
        lam0[hs[first]] = lam[first]
        if progress is not None:
            for h in range(done, stop // D):
                progress(h)
        done = stop // D
    return prof.reshape(H, D, 4), norm.reshape(H, D), lam0
