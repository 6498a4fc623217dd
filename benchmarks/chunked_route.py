"""The chunked route: the comparison the pipeline's numpy route is measured against, kept here for that.

A head's rotary offsets are solved in chunks of about ``chunk_bytes`` of (k, k) float64 work arrays, one numpy
``eigvalsh`` call per chunk, and each head's span is factored by numpy's ``qr`` on a copy. The pipeline's numpy
route (``pipeline.profile.lapack``) solves the offsets one at a time in the CPU cache with LAPACK in place and
factors the span through its Gram matrix; the two give the same values to rounding (within 1e-12:
``tests/test_benchmarks_chunked_route.py``), and ``benchmarks/scale_bench.py`` times both against the
eigensolver's floor. Built from the pipeline's public pieces: the span (``pipeline.profile.span``), the profile of
a work array of cores (``pipeline.profile.spectra.profile_of_top``) and the d = 0 collector
(``pipeline.profile.at_zero``).
"""

from __future__ import annotations

import functools

import numpy as np

from pipeline.profile import HeadProfiles
from pipeline.profile.at_zero import AtZeroCollector
from pipeline.profile.eigen import default_threads, eigvalsh_fn, thread_limit
from pipeline.profile.kernels import DEFAULT_KERNELS
from pipeline.profile.span import head_span, rotation_pairs, span_work
from pipeline.profile.spectra import CHUNK_BYTES, DEFAULT_RTOL, profile_of_top


def numpy_qr(span, work=None) -> np.ndarray:
    """The span's factor by numpy's ``qr`` (on a copy of the whole span, ``pipeline.profile.span.Span``)."""
    return np.linalg.qr(span.whole(), mode="r")


def _rotary_head(Km, Pt, rotations, pairs, rtol, eig, bufs, keep_d0) -> tuple[np.ndarray, ...]:
    """Profiles (D, 4), norms (D,) and the eigenvalues at d = 0 (k,) of one head, offsets in chunks."""
    S, scratch, KR_buf, tmp_buf = bufs
    D, m, step = len(rotations), len(Km), len(S)
    prof, norm, lam0 = np.empty((D, 4)), np.empty(D), None
    Kp = Km[:, pairs[1]] if pairs is not None else None
    for start in range(0, D, step):
        sl = slice(start, start + step)
        KR = KR_buf[:len(rotations[sl])]  # K R(d), (step, m, n)
        if pairs is None:
            np.matmul(Km, rotations[sl], out=KR)
        else:
            tmp = tmp_buf[:len(KR)]
            np.multiply(Km, pairs[0][sl, None, :], out=KR)
            np.multiply(Kp, pairs[2][sl, None, :], out=tmp)
            KR += tmp
        work = S[:len(KR)]  # rows m: stay zero: only the top rows are ever written
        np.matmul(KR, Pt, out=work[:, :m])
        if start == 0:
            keep_d0(work[0, :m])
        prof[sl], norm[sl], lam = profile_of_top(work, m, rtol, eig, scratch)
        if start == 0:
            lam0 = lam[0]
    return prof, norm, lam0


def chunked_profiles(W_Q, W_K, rotations=None, rtol: float = DEFAULT_RTOL, *, kv_of_head=None, gain=None,
                     chunk_bytes: int = CHUNK_BYTES, at_zero: bool = False, factor=numpy_qr,
                     eigvalsh=None) -> HeadProfiles:
    """``pipeline.profile.head_profiles`` (numpy route, one BLAS thread) by the chunked route: same arguments and
    result. ``factor(span, work)``: the span's factor (numpy's ``qr``); ``eigvalsh``: the chunks' eigensolver (numpy's
    ``eigvalsh``, upper triangles read); benchmarks/scale_bench.py wraps both to time them."""
    W_Q, W_K = np.asarray(W_Q), np.asarray(W_K)
    H, n, N = W_Q.shape
    kv_of_head = np.arange(H) if kv_of_head is None else np.asarray(kv_of_head, dtype=np.int64)
    k = min(N, 2 * n)
    m = min(n, k)
    collector = AtZeroCollector(H, m, DEFAULT_KERNELS) if at_zero else None
    keep = (lambda h, top: None) if collector is None else collector.keep
    span = span_work(n, N)
    eig = eigvalsh_fn("numpy", None) if eigvalsh is None else functools.partial(eigvalsh, UPLO="U")
    with thread_limit(default_threads(None, "numpy"), "numpy"):
        if rotations is None:  # every head's core in one work array, each solved in place
            S = np.zeros((H, k, k))
            for h in range(H):
                K, P = head_span(W_Q, W_K, h, kv_of_head[h], gain, factor, span)
                np.matmul(K[:m], P.T, out=S[h, :m])
                keep(h, S[h, :m])
            prof, norm, lam0 = profile_of_top(S, m, rtol, eig, np.empty((H, m, m)))
            prof, norm = prof[:, None], norm[:, None]
        else:
            rotations = np.asarray(rotations, dtype=np.float64)
            D = len(rotations)
            step = max(1, -(-D // max(1, -(-D * k * k * 8 // max(1, chunk_bytes)))))
            bufs = np.zeros((step, k, k)), np.empty((step, m, m)), np.empty((step, m, n)), np.empty((step, m, n))
            prof, norm, lam0 = np.empty((H, D, 4)), np.empty((H, D)), np.empty((H, k))
            pairs = rotation_pairs(rotations)
            for h in range(H):
                K, P = head_span(W_Q, W_K, h, kv_of_head[h], gain, factor, span)
                prof[h], norm[h], lam0[h] = _rotary_head(K[:m], np.ascontiguousarray(P.T), rotations, pairs, rtol,
                                                         eig, bufs, lambda top, h=h: keep(h, top))
        zero = None if collector is None else collector.result(prof[:, 0], norm[:, 0], lam0)
    if rotations is None:
        prof, norm = prof[:, 0], norm[:, 0]
    return HeadProfiles(prof, norm, zero)
