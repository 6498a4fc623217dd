"""The span factor of a head and its cores: ``[W_K^T | W_Q^T] = Q [K | P]``, ``C(d) = K R(d) P^T``.

One factorisation per head serves every offset d. Only ``[K | P]`` is needed, and any upper triangular R with
R^T R = A^T A gives the same cores up to an orthogonal similarity, so the same profiles, norms and spectra: the
numpy route takes the Cholesky factor of the Gram matrix when the span is well conditioned, else the Householder QR
(:func:`span_r`). :func:`span_cores` and :func:`cores` are the plain numpy forms (the orbit experiment's route and
the benchmarks' reference); :func:`rotation_pairs` finds the rotary structure that lets R(d) be applied
elementwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline import optional_imports

GRAM_RCOND = 1e-4  # a head's span is factored through its Gram matrix when R's reciprocal condition is at least
# this, else by Householder QR (span_r); 0 always takes the QR
QR_BLOCK = 32  # dgeqrt's block size for the QR of a span (qr_r_in_place); None: dgeqrf, LAPACK's default
SPAN_BLOCK_BYTES = 1 << 19  # a span's rows are converted and multiplied into its Gram matrix in blocks of about this
# size, which the CPU's L2 cache holds: the span is never held whole (benchmarks/families_bench.py --sections 3
# prints the span's factor by blocks against the whole span converted first, side by side)


def span_cores(W_Q: np.ndarray, W_K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Factor the span of the key and query directions once per head.

    Parameters
    ----------
    W_Q, W_K : (..., n, N) arrays
        Query and key weights of each head (for grouped-query attention pass the key head that the
        query head uses).

    Returns
    -------
    K, P : (..., k, n) arrays, k = min(N, 2n)
        Coordinates of the columns of W_K^T and W_Q^T in an orthonormal basis Q of their span,
        so that ``W_K^T = Q K`` and ``W_Q^T = Q P``; the core of ``L(d)`` is ``K R(d) P^T``.
    """
    W_Q = np.asarray(W_Q, dtype=np.float64)
    W_K = np.asarray(W_K, dtype=np.float64)
    if W_Q.shape != W_K.shape or W_Q.ndim < 2:
        raise ValueError(f"W_Q and W_K must both have shape (..., n, N); got {W_Q.shape} and {W_K.shape}")
    n = W_Q.shape[-2]
    A = np.concatenate([np.swapaxes(W_K, -1, -2), np.swapaxes(W_Q, -1, -2)], axis=-1)  # (..., N, 2n)
    # Householder QR on the tall (N, 2n) matrix: orthonormal Q even when the span is rank deficient,
    # and no squared conditioning (unlike a Cholesky of the Gram matrix).
    R = np.linalg.qr(A, mode="r")  # (..., k, 2n)
    return R[..., :n], R[..., n:]


def cores(K: np.ndarray, P: np.ndarray, rotations: np.ndarray | None = None) -> np.ndarray:
    """The k x k cores ``C = K R P^T``.

    K, P : (..., k, n); rotations : (D, n, n) or None (identity).
    Returns (..., k, k) without rotations, (..., D, k, k) with them.
    """
    Pt = np.swapaxes(P, -1, -2)
    if rotations is None:
        return K @ Pt
    return (K[..., None, :, :] @ rotations) @ Pt[..., None, :, :]


def rotation_pairs(rotations: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """R(d) as ``(diag, partner, off)`` when each column has at most one off-diagonal entry (over all d).

    Then ``(K R(d))[:, j] = K[:, j] diag[d, j] + K[:, partner[j]] off[d, j]`` (rotate-half and interleaved
    rotary are of this kind). Returns None for any other R (the caller then multiplies densely).
    diag, off : (D, n);  partner : (n,) int (j itself where a column has no off-diagonal entry, off = 0).
    """
    D, n, _ = rotations.shape
    cols = np.arange(n)
    mask = np.any(rotations != 0, axis=0)
    mask[cols, cols] = False
    count = mask.sum(axis=0)
    if count.max(initial=0) > 1:
        return None
    partner = np.where(count == 1, mask.argmax(axis=0), cols)
    diag = rotations[:, cols, cols]
    off = np.where(count == 1, rotations[:, partner, cols], 0.0)
    return np.ascontiguousarray(diag), partner, np.ascontiguousarray(off)


def qr_r_in_place(A: np.ndarray, block: int | None = QR_BLOCK) -> np.ndarray:
    """R (min(M, c), c) of the QR factorisation of an F-ordered float64 A (M, c): LAPACK ``dgeqrf`` (numpy's own
    call) through scipy, on A in place (A is overwritten; numpy's ``qr`` works on a copy of it). Without scipy:
    numpy's ``qr``.

    With ``block`` set, ``dgeqrt`` in blocks of that many columns instead: the same Householder reflections with
    recursive panels (``dgeqrt3``); on (5120, 256) it took ~12 % less time than ``dgeqrf``, on (2048, 128) ~20 %
    (CPU time, paired medians, 1 thread)."""
    linalg = optional_imports.scipy_linalg()
    if linalg is None:
        return np.linalg.qr(A, mode="r")
    lapack = linalg[1]
    M, c = A.shape
    if block:
        qr, _, info = lapack.dgeqrt(max(1, min(block, M, c)), A, overwrite_a=1)
    else:
        qr, _, _, info = lapack.dgeqrf(A, lwork=int(lapack.dgeqrf_lwork(M, c)[0]), overwrite_a=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"LAPACK QR failed (info {info})")
    return np.triu(qr[:min(M, c)])


@dataclass(frozen=True)
class Span:
    """One head's span input ``A = [W_K^T | W_Q^T]`` (N, 2n), times the layer-norm gain on its rows when there is one,
    in float64, never held whole on the Gram route: :meth:`rows` writes a block of its rows. ``w_k``, ``w_q``: the
    key and query weights (n, N), any float dtype (or a stack's head formed on demand); ``gain``: (N,) or None."""

    w_k: np.ndarray
    w_q: np.ndarray
    gain: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int]:
        n, N = self.w_q.shape
        return N, 2 * n

    def rows(self, r0: int, r1: int, out: np.ndarray) -> np.ndarray:
        """Rows r0:r1 of A written into ``out`` (r1 - r0, 2n), converted to float64 there; returns ``out``."""
        n = self.w_q.shape[0]
        out[:, :n] = self.w_k[:, r0:r1].T
        out[:, n:] = self.w_q[:, r0:r1].T
        if self.gain is not None:
            out *= np.asarray(self.gain[r0:r1], dtype=np.float64)[:, None]
        return out

    def whole(self) -> np.ndarray:
        """A, F-ordered (LAPACK's layout), made afresh."""
        return self.rows(0, self.shape[0], np.empty(self.shape, order="F"))


def span_r(span: Span, work: tuple[np.ndarray, np.ndarray] | None = None, gram_rcond: float = GRAM_RCOND,
           qr_block: int | None = QR_BLOCK) -> np.ndarray:
    """An upper triangular R (k, c) with R^T R = A^T A for a head's :class:`Span` A (N, c): the factor the numpy
    route needs. ``work``: :func:`span_work`'s arrays for the span's shape, overwritten but for the Gram matrix's
    strict upper triangle, which must be zero (R may be a view of the Gram matrix); None: new ones.

    The Cholesky factor of the Gram matrix when it is well conditioned: the Gram matrix accumulated over blocks of
    A's rows (BLAS ``dsyrk``, lower triangle), each converted to float64 in the block array while the CPU's cache
    holds it, then LAPACK ``dpotrf``; taken when LAPACK ``dtrcon``'s estimate of the factor's reciprocal condition
    number (1-norm) is at least ``gram_rcond``. Otherwise, and when the Cholesky breaks down (a rank-deficient span:
    a zero head, N < 2n, shared rows), or N < c, or without scipy, or with ``gram_rcond`` 0: the Householder QR of
    the whole A (:func:`qr_r_in_place` in blocks of ``qr_block``).

    Why: the Gram matrix and its Cholesky factor cost about a third of the QR's time (CPU time, one thread, medians
    of 11: 0.9 ms against 3.9 ms for dgeqrf on (2048, 128); 9.0 ms against 23 ms for dgeqrt on (5120, 256)). By
    blocks, the span is never held whole in float64 (8 MiB at N = 4096, n = 128; 21 MiB for a DeepSeek-V3 head), and
    each block is multiplied while the cache holds it, in about the time of one product over the whole span (the
    benchmark's first line). The Gram matrix of a position-free head outweighs its eigensolve
    (benchmarks/families_bench.py --sections 3 prints the core against the two together). Accuracy: forming A^T A
    rounds relative to ||A||^2, which moves R by about cond(A) eps ||A||, so the eigenvalues of sym(C) by about
    cond(A) eps relative to ||C||. The guard keeps cond(A) near or below 1/GRAM_RCOND (the estimate is within a factor
    of about k of the 2-norm one).
    ``tests/pipeline/test_profile.py`` holds the profiles, norms and spectra of spans of condition numbers 1 to 1e8
    within 1e-13 of the QR's, and spans past the guard on the QR itself."""
    M, c = span.shape
    if M >= c and gram_rcond > 0:
        linalg = optional_imports.scipy_linalg()
        if linalg is None:
            return qr_r_in_place(span.whole(), qr_block)
        blas, lapack = linalg
        block, G = work if work is not None else span_work(c // 2, M)
        b = len(block)
        for r0 in range(0, M, b):
            rows = span.rows(r0, min(M, r0 + b), block[:min(b, M - r0)])
            # with beta = 0 (the first block), BLAS does not read G's old values
            blas.dsyrk(1.0, rows, c=G, trans=1, lower=1, beta=0.0 if r0 == 0 else 1.0, overwrite_c=1)
        # G = F F^T with F lower triangular, F-ordered: R = F^T is the same memory read in C order. G's strict upper
        # triangle is zero from span_work on, and neither dsyrk nor dpotrf writes it (lower=1), so F needs no cleaning
        F, info = lapack.dpotrf(G, lower=1, clean=0, overwrite_a=1)
        if info == 0:
            rcond, info = lapack.dtrcon(F, norm="1", uplo="L")
            if info == 0 and rcond >= gram_rcond:
                return F.T
    return qr_r_in_place(span.whole(), qr_block)


def span_work(n: int, N: int) -> tuple[np.ndarray, np.ndarray]:
    """The float64 work arrays :func:`span_r` fills for every head of a layer: a block of the span's rows (about
    ``SPAN_BLOCK_BYTES``, b x 2n) and the Gram matrix (2n, 2n), both F-ordered (LAPACK's layout). The Gram matrix's
    strict upper triangle is made zero here and stays so: :func:`span_r` writes only the lower triangle, and its
    factor R is the transpose of what is there.

    Made once per layer, not per head: dask starts its workers with ``MALLOC_TRIM_THRESHOLD_`` set, which fixes
    glibc's threshold for serving a block by ``mmap`` at 128 KiB, so an array of that size made per head would be
    mapped, faulted in and unmapped for every head (benchmarks/scaling_bench.py prints the workers' page faults). The
    orbit experiment's entry points change their process's ``malloc`` instead (``pipeline.orbits.malloc``): they
    own their processes, while a profile task may run in a user's dask worker, whose memory policy is dask's."""
    b = max(1, min(N, SPAN_BLOCK_BYTES // (16 * max(1, n))))
    return np.empty((b, 2 * n), order="F"), np.zeros((2 * n, 2 * n), order="F")


def head_span(W_Q, W_K, h: int, kv: int, gain, factor,
              work: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """K, P (k, n) of head h: its query weights and key head ``kv``, in float64 (times the gain), factored by
    ``factor(span, work)`` (:func:`span_r` or a kernel's) on its :class:`Span`. ``work``: :func:`span_work`'s
    arrays, overwritten (K and P may be views of them: used before the next head's call); None: new ones."""
    span = Span(W_K[kv], W_Q[h], gain)
    R = factor(span, work)
    # NaN or Inf in A reaches R on every route (through the Gram matrix or the reflections), so R (k x k) is
    # checked instead of A (N x 2n): a k / N of the reads. Its sum first (one pass, no temporary): finite when every
    # entry is, unless entries near the float64 limit overflow it, which the entrywise check then tells apart. A
    # finite head whose factor is not finite overflowed.
    if not np.isfinite(R.sum()) and not np.all(np.isfinite(R)):
        weights = (span.w_k, span.w_q) + (() if gain is None else (np.asarray(gain),))
        if not all(np.all(np.isfinite(w)) for w in weights):
            raise nonfinite_head(h)
        raise ValueError(f"head {h}: the factor of its weights overflowed float64 (entries near 1e154 or larger); "
                         "check the checkpoint it was read from")
    n = span.w_q.shape[0]
    return R[:, :n], R[:, n:]


def nonfinite_head(h: int) -> ValueError:
    return ValueError(f"head {h} has NaN or Inf weights; check the checkpoint it was read from")
