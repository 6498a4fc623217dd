"""The numpy route: one head at a time, a rotary head's offsets one by one in the CPU cache, LAPACK in place.

Each offset's k x k work array stays in the CPU cache from the core's product to the eigensolver, which reads it
in place (LAPACK ``dsyevd``, numpy's own driver, through scipy; without scipy numpy's ``eigvalsh``). The span of a
head is factored once (``Kernels.span_factor``) into work arrays made once per layer (``span.span_work``).

Where the time goes (one (N, n) = (5120, 128) rotary head, 129 offsets, 1 thread; each part timed inside the
routes in CPU time of the thread (``time.thread_time``, which a loaded machine's waits for a core do not inflate),
medians of 5-11 repeats on a 2-core machine, in % of the floor = numpy's ``eigvalsh`` on the (129, 256, 256)
stack; benchmarks/scale_bench.py --sections c prints the totals and the LAPACK parts). The chunked route is the
comparison kept in ``benchmarks/chunked_route.py``: a head's offsets in chunks, one ``eigvalsh`` per chunk.

====================================  ===============================  ==================================
part                                  chunked route (benchmarks/)      this route
====================================  ===============================  ==================================
eigensolver                           97-101 % (eigvalsh, copies)      89 % (dsyevd in place, dsytrd in
                                                                       blocks of 8: :func:`dsyevd_lwork`)
factor of [W_K^T | W_Q^T] (5120 x     11-16 % (numpy's qr, a copy)     4 % (Gram + Cholesky:
256)                                                                   ``span.span_r``; 10 % by dgeqrt)
core products K R(d) P^T              9-12 % (dense, 1.1 GFLOP)        6 % (trmm, half the flops)
norms, ||T||, sym(C), scaling         5-6 % (passes over 67 MB)        4 % (in cache, no scaling)
rotation R(d)                         2-3 %                            2 %
Python per call and head (pairs,      < 1 %                            ~3 %
buffers, thread limits)
total / floor (paired medians)        1.37-1.46                        1.06 (1.11 with the span's QR,
                                                                       1.22 with LAPACK's default
                                                                       blocking besides)
====================================  ===============================  ==================================

The eigensolver is two LAPACK steps of about equal cost here: ``dsytrd`` (the reduction to tridiagonal form,
103 ms of 212 for the 129 matrices) and ``dsterf`` (the tridiagonal's eigenvalues, 88 ms: a sequential
root-free QL iteration, bound by the latency of its divisions). Measured and not taken (CPU time, paired, 1
thread, k = 256): a padded leading dimension (k + 4, 8, 16: the same time as k, no cache-set conflict shows),
the two-stage driver ``dsyevd_2stage`` (1.5-1.6 x the floor), ``dsyevr`` (the same ``dsterf``), ``dstemr``'s dqds
for the tridiagonal (1.3-1.6 x ``dsterf``), the upper triangle in place of the lower (the same). Everything
besides the eigensolver (span factor, products, norms, rotation, Python) is ~18 % of the floor.
"""

from __future__ import annotations

import functools

import numpy as np

from pipeline import optional_imports

from .span import head_span, rotation_pairs, span_work
from .spectra import profile_of_spectra

SYTRD_BLOCK = 8  # dsytrd's block size on the per-offset route (dsyevd_lwork); None: LAPACK's default


def dsyevd_lwork(k: int, lapack, sytrd_block: int | None = SYTRD_BLOCK) -> tuple[int, int]:
    """``(lwork, liwork)`` for LAPACK ``dsyevd``, eigenvalues only, of a k x k matrix on the per-offset route.

    The work array's size sets the block size of ``dsytrd``, the reduction to tridiagonal form (about half of the
    eigensolver's time; ``dsterf``, the tridiagonal's eigenvalues, most of the rest): LAPACK's own query
    (``dsyevd_lwork``) leaves room for its default block (32 columns in OpenBLAS), and
    ``2k + 1 + sytrd_block * k`` makes it work in blocks of ``sytrd_block`` columns
    instead. On matrices of k = 64..512 that took 4-7 % less time than the default (CPU time, paired medians of
    5-15 interleaved repeats, 1 thread, scipy's OpenBLAS; benchmarks/scale_bench.py --sections c shows the
    whole route). The eigenvalues are the same to rounding either way (dsyevd only checks lwork >= 2k + 1)."""
    lwork, liwork = (int(x) for x in lapack.dsyevd_lwork(k, compute_v=0, lower=1)[:2])
    if sytrd_block:
        lwork = min(lwork, 2 * k + 1 + sytrd_block * k)
    return lwork, liwork


def lapack_in_place(k: int, sytrd_block: int | None = SYTRD_BLOCK):
    """``(eig, trmm)`` for the per-offset route: ``eig`` takes a (k, k) C-contiguous float64 array, reads its upper
    triangle and returns its eigenvalues ascending, overwriting that triangle (LAPACK ``dsyevd``, numpy's own
    driver, through scipy on the array in place: no copy; its work array sized by :func:`dsyevd_lwork`);
    ``trmm(K1, Z)`` sets Z (m, k) C-contiguous to K1 @ Z in place for an upper triangular K1 (m, m),
    C-contiguous. Without scipy: numpy's ``eigvalsh`` (one copy per matrix) and ``trmm = None`` (the caller
    multiplies densely)."""
    linalg = optional_imports.scipy_linalg()
    if linalg is None:
        return functools.partial(np.linalg.eigvalsh, UPLO="U"), None
    blas, lapack = linalg
    # A C-contiguous array seen by Fortran is its transpose: its upper triangle is Fortran's lower one.
    lwork, liwork = dsyevd_lwork(k, lapack, sytrd_block)

    def eig(S: np.ndarray) -> np.ndarray:
        w, _, info = lapack.dsyevd(S.T, compute_v=0, lower=1, lwork=lwork, liwork=liwork, overwrite_a=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"LAPACK dsyevd did not converge (info {info})")
        return w

    def trmm(K1: np.ndarray, Z: np.ndarray) -> None:
        # Z^T K1^T in Fortran's view: side right, K1^T lower triangular; Z^T is F-contiguous, so no copy is made
        blas.dtrmm(1.0, K1.T, Z.T, side=1, lower=1, overwrite_b=1)

    return eig, trmm


def head_offsets(K1: np.ndarray, Pt: np.ndarray, rows, rotations: np.ndarray | None, rtol: float, lapack_fns,
                 work: np.ndarray, bufs: tuple[np.ndarray, np.ndarray, np.ndarray],
                 keep_d0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Profiles (D, 4), norms (D,) and eigenvalues (D, k) of one head's cores ``K1 R(d) P^T``, one offset at a time.

    K1 (m, n) = the top rows of K; Pt = P^T (n, k); ``rotations`` (D, n, n), or None for a position-free head (one
    core, R = I); ``rows``: ``rotation_pairs`` of R(d)^T (the rows of R(d)) or None; ``lapack_fns``:
    :func:`lapack_in_place`'s pair; ``work`` (k, k); ``bufs`` = Z (n, k), tmp (n, k), Dm (m, m) scratch;
    ``keep_d0(top)`` gets the unscaled top rows of the core at d = 0. The product is ``K1 @ (R(d) P^T)``, R(d)
    applied to the rows of P^T elementwise and K1 triangular (``trmm``, half a dense product's flops) when m = n.
    The eigensolver gets 2 sym(C) unscaled; its eigenvalues and ||T|| are divided by 2 ||C|| afterwards (no scaling
    pass). The module docstring says where the time goes.
    """
    eig, trmm = lapack_fns
    D, (m, n), k = 1 if rotations is None else len(rotations), K1.shape, Pt.shape[1]
    Z, tmp, Dm = bufs
    in_place = trmm is not None and m == n
    top, A, B = work[:m], work[:m, :m], work[:m, m:]  # the core's nonzero rows [A | B], unscaled
    if in_place:
        Z = top
    Ptp = Pt[rows[1]] if rows is not None else None
    norms, ts, lam = np.empty(D), np.empty(D), np.empty((D, k))
    for d in range(D):
        work[m:, m:] = 0.0  # rows m: of a core are zero: the eigensolver overwrote the upper triangle of this
        # block (the block left of it is below the diagonal: never read nor written, zero from the start)
        if rotations is None:  # R = I
            np.copyto(Z, Pt)
        elif rows is None:
            np.matmul(rotations[d], Pt, out=Z)
        else:  # (R P^T)[j] = diag[d, j] P^T[j] + off[d, j] P^T[partner[j]]
            np.multiply(Pt, rows[0][d][:, None], out=Z)
            np.multiply(Ptp, rows[2][d][:, None], out=tmp)
            Z += tmp
        if in_place:
            trmm(K1, top)
        else:
            np.matmul(K1, Z, out=top)
        if d == 0:
            keep_d0(top)
        flat = top.reshape(-1)
        norms[d] = np.sqrt(flat @ flat)
        np.subtract(A, A.T, out=Dm)  # the top-left block of 2 antisym(C)
        dm = Dm.reshape(-1)
        ts[d] = dm @ dm + 2.0 * np.einsum("ij,ij->", B, B)  # 4 ||antisym(C)||^2: ||A - A^T||^2 + 2 ||B||^2
        A *= 2.0
        A -= Dm  # A + A^T: with B beside it, the upper triangle of 2 sym(C)
        lam[d] = eig(work)
    scale = 2.0 * np.where(norms > 0, norms, 1.0)  # ||C|| = 1 after: eigenvalues and ||T|| of 2 sym(C) / (2 ||C||)
    lam /= scale[:, None]
    ts = np.sqrt(ts) / scale
    return profile_of_spectra(np.where(ts <= rtol, 0.0, ts * ts), lam, norms, rtol)


def numpy_layer(W_Q, W_K, rotations, kv_of_head, gain, rtol: float, kernels, keep,
                progress) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The numpy route on one layer: profiles (H, D, 4), norms (H, D) and the eigenvalues at d = 0 (H, k), D = 1
    without rotations. Arguments as ``pipeline.profile.heads.head_profiles`` checked them; ``kernels``: a
    ``Kernels``; ``keep(h, top)`` (or None) gets head h's unscaled top rows [A | B] at d = 0; ``progress(h)`` (or
    None) is called as each head is done."""
    keep = keep or (lambda h, top: None)
    H, n, N = W_Q.shape
    k = min(N, 2 * n)
    m = min(n, k)  # nonzero rows of K: [K | P] is upper triangular
    D = 1 if rotations is None else rotations.shape[0]
    prof, norm, lam0 = np.empty((H, D, 4)), np.empty((H, D)), np.empty((H, k))
    rows = None if rotations is None else rotation_pairs(np.swapaxes(rotations, -1, -2))
    fns = kernels.in_place_eigensolver(k)
    work, bufs = np.zeros((k, k)), (np.empty((n, k)), np.empty((n, k)), np.empty((m, m)))
    span = span_work(n, N)
    for h in range(H):
        K, P = head_span(W_Q, W_K, h, kv_of_head[h], gain, kernels.span_factor, span)
        # a position-free head's one core takes P^T by one copy into the work array: no contiguous copy before it
        Pt = P.T if rotations is None else np.ascontiguousarray(P.T)
        prof[h], norm[h], lam = head_offsets(np.ascontiguousarray(K[:m]), Pt, rows, rotations, rtol, fns, work, bufs,
                                             functools.partial(keep, h))
        lam0[h] = lam[0]
        if progress is not None:
            progress(h)
    return prof, norm, lam0
