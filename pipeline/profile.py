"""The profile (a, b, c, d) of a bilinear form on the 3-simplex: low-rank, batched, exact at the vertices.

For a head with query and key weights ``W_Q, W_K`` of shape (n, N) (torch Linear layout, ``q = W_Q x``),
the bilinear form is ``L = W_K^T W_Q`` (N x N) and the attention score between query x_i and key x_j
is ``x_j^T L x_i`` (times the softmax scale). With rotary embeddings ``L(d) = W_K^T R(d) W_Q`` where
``d = i - j`` is query position minus key position.

Scale ``L`` to unit Frobenius norm, split ``L = S + T`` (symmetric + antisymmetric), and let lambda_+,
lambda_- be the positive eigenvalues of S and the absolute values of its negative ones, both sorted in
decreasing order and zero-padded to a common length. Then::

    a = ||T||^2,  b = 2 <lambda_+, lambda_->,  c = ||(lambda_+ - lambda_-)_+||^2,  d = ||(lambda_+ - lambda_-)_-||^2

The N x N matrix is never formed. The columns of W_K^T and W_Q^T span a subspace of dimension
k <= 2n that holds all of L's action: with a QR factorisation ``[W_K^T | W_Q^T] = Q [K | P]`` we have
``L(d) = Q C(d) Q^T`` with the k x k *core* ``C(d) = K R(d) P^T``. Q has orthonormal columns, so C has
the same Frobenius norm as L, sym(C) has the nonzero spectrum of S, and ||antisym(C)|| = ||T||.
One factorisation per head serves every offset d. Only ``[K | P]`` is needed, and any upper triangular R with
R^T R = A^T A gives the same cores up to an orthogonal similarity: the numpy route takes the Cholesky factor of
the Gram matrix when the span is well conditioned, else the QR (:func:`_span_r`).

Since ``[K | P]`` is upper triangular, only the first m = min(n, k) rows of K (and so of every core) are
nonzero: a core is ``[[A, B], [0, 0]]`` with A (m, m), B (m, k - m), and only that top block is formed.
Rotary R(d) of the usual kind (each column with at most one off-diagonal entry: rotate-half or
interleaved pairs) is applied elementwise, ``(K R)[:, j] = K[:, j] R[j, j] + K[:, p(j)] R[p(j), j]``.

Memory: on the numpy route :func:`head_profiles` works one head at a time and the offsets of a head one
at a time in a single k x k work array; the torch routes work on the whole layer in chunks of about
``chunk_bytes`` (:func:`_layer_on_device`). The weights may stay in a compact dtype (float32 decoded from
bf16/fp16) and grouped-query key heads are shared through ``kv_of_head`` instead of being copied per query
head. Heads are turned into float64 only when they are used, so results do not depend on the storage dtype.

Exactness at the vertices: quantities below ``rtol`` relative to ||L|| (the antisymmetric part,
eigenvalues, and the differences lambda_+ - lambda_-) are set to exactly zero, and the four
coordinates are normalised by their own sum, so an antisymmetric, positive/negative semidefinite or
"H" form gives exactly 1 in its coordinate and exactly 0 in the others. ``L = 0`` has no profile:
NaN coordinates and norm 0, with no warning.

Head statistics: ``head_profiles(..., statistics=True)`` also returns each head's statistics and the spectrum
of S at d = 0 (``pipeline.head_statistics``), from the same cores: the eigenvalues the profile is computed
from, and the Gram matrix of the core's top rows for the singular values of L.

Eigen routes (``eigvalsh``): ``"numpy"`` (float64 LAPACK ``dsyevd``, numpy's driver, called through scipy on
the work array in place when scipy is installed, else numpy's ``eigvalsh``; the fastest measured on this
project's CPUs, see benchmarks/scale_bench.py), ``"torch"`` (float64), ``"torch-float32"`` (needs an explicit ``tol``:
thresholds become max(rtol, tol) and the coordinates agree with the float64 route to within ``tol``),
and ``"auto"`` (the default): torch float64 on CUDA when torch is installed and sees a GPU, else numpy.
The torch routes take a layer at a time on their device (:func:`_layer_on_device`): batched QR over heads,
batched core products and one batched ``eigvalsh`` per chunk of (heads x offsets) cores.
No I/O here; numpy (and scipy's LAPACK when installed) unless a torch route is asked for (or "auto" finds torch
installed).
"""

from __future__ import annotations

import contextlib
import functools
import glob
import importlib.util
import os
import sys

import numpy as np

COORDINATES = ("a", "b", "c", "d")
DEFAULT_RTOL = 1e-10
EIGVALSH = ("auto", "numpy", "torch", "torch-float32")
CHUNK_BYTES = 24_000_000  # per (offsets x k x k) float64 work array of one head; the torch routes on the CPU
DEVICE_CHUNK_BYTES = 1 << 30  # per (heads x offsets x k x k) float64 work array on a torch device other than the CPU
EIG_BATCH = 1 << 15  # at most this many matrices per torch eigvalsh call: under CUDA's grid limit of 65 535 blocks,
# which batched cuSOLVER calls of one block per matrix reach
SYTRD_BLOCK = 8  # dsytrd's block size on the per-offset route (_dsyevd_lwork); None: LAPACK's default
QR_BLOCK = 32  # dgeqrt's block size for the QR of a span (_qr_r_in_place); None: dgeqrf, LAPACK's default
SPECTRA_BLOCK_BYTES = 1 << 16  # per temporary of _profile_of_spectra: under glibc's 128 KiB mmap threshold
GRAM_RCOND = 1e-4  # a head's span is factored through its Gram matrix when R's reciprocal condition is at least
# this, else by Householder QR (_span_r); 0 always takes the QR


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


# ------------------------------------------------------------------------------------------- eigen


@functools.lru_cache(maxsize=1)
def _cuda_available() -> bool:
    """torch sees a GPU. Without torch loaded and without GPU device nodes, torch is not imported to ask
    (the import alone costs ~180 MB of resident memory per process)."""
    if "torch" not in sys.modules:
        if importlib.util.find_spec("torch") is None:
            return False
        if not (glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/kfd")):
            return False
    import torch

    return bool(torch.cuda.is_available())


def eigen_route(eigvalsh: str = "auto", device: str | None = None) -> tuple[str, str | None]:
    """Resolve ``eigvalsh`` / ``device`` to the route used: ("numpy", None) or ("torch[-float32]", device)."""
    if eigvalsh not in EIGVALSH:
        raise ValueError(f"eigvalsh must be one of {EIGVALSH}; got {eigvalsh!r}")
    if eigvalsh == "auto":
        if device is not None:
            return "torch", device
        return ("torch", "cuda") if _cuda_available() else ("numpy", None)
    if eigvalsh == "numpy":
        if device not in (None, "cpu"):
            raise ValueError(f"the numpy eigen route runs on the CPU only; got device={device!r}. "
                             "Use eigvalsh='torch' for another device.")
        return "numpy", None
    return eigvalsh, device or ("cuda" if _cuda_available() else "cpu")


def _eigvalsh_fn(route: str, device: str | None):
    """A function (B, k, k) float64, upper triangle read -> (B, k) float64 ascending eigenvalues."""
    if route == "numpy":
        return functools.partial(np.linalg.eigvalsh, UPLO="U")
    import torch

    eig_t = _torch_eigvalsh(route)

    def eig(S: np.ndarray) -> np.ndarray:
        return eig_t(torch.from_numpy(S).to(device=device)).cpu().numpy()

    return eig


def _torch_eigvalsh(route: str):
    """A function (B, k, k) float64 tensor, upper triangle read -> (B, k) float64 ascending eigenvalues on the same
    device, solved in float64 ("torch") or float32 ("torch-float32")."""
    import torch

    dtype = torch.float32 if route == "torch-float32" else torch.float64

    def eig(S):
        return torch.linalg.eigvalsh(S.to(dtype=dtype), UPLO="U").to(dtype=torch.float64)

    return eig


_CONTROLLER: list = [None, -1]  # threadpoolctl's controller and len(sys.modules) when it was made


def _thread_controller():
    """threadpoolctl's ThreadpoolController of the BLAS/OpenMP libraries loaded now, made again only when a module
    was imported since (a new extension may have loaded a library). Making one scans the process's memory maps
    (about 1-4 ms, once per layer before); limiting through a kept one takes microseconds."""
    from threadpoolctl import ThreadpoolController

    if _CONTROLLER[0] is None or _CONTROLLER[1] != len(sys.modules):
        _CONTROLLER[:] = [ThreadpoolController(), len(sys.modules)]
    return _CONTROLLER[0]


@contextlib.contextmanager
def _thread_limit(threads: int | None, route: str):
    """Limit BLAS/LAPACK (and torch) threads inside the block; ``None`` leaves them as they are."""
    if threads is None:
        yield
        return
    if threads < 1:
        raise ValueError(f"threads must be a positive number of threads; got {threads}")
    if importlib.util.find_spec("threadpoolctl") is None:  # pragma: no cover - depends on the environment
        raise ImportError("threads=... needs the threadpoolctl package: pip install threadpoolctl")
    torch = None
    if route == "numpy":  # threadpoolctl limits the BLAS libraries loaded when the block starts: scipy's one too
        with contextlib.suppress(ImportError):
            import scipy.linalg.lapack  # noqa: F401
    else:
        import torch
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
    try:
        with _thread_controller().limit(limits=threads):
            yield
    finally:
        if torch is not None:
            torch.set_num_threads(before)


# ------------------------------------------------------------------------------------------ profile


def _profile_of_top(S: np.ndarray, m: int, rtol: float, eig,
                    scratch: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Profiles of cores ``C = [[A, B], [0, 0]]`` held in the work array ``S`` (batch, k, k), in place.

    On entry ``S[:, :m, :] = [A | B]`` (A (m, m), B (m, k - m)) and ``S[:, m:, :]`` is zero. On exit the
    upper triangle of ``S`` is that of sym(C) / ||C|| (its lower-left block is left as zeros; the eigen
    step reads the upper triangle only). ``scratch`` is (>= batch, m, m). Returns profile (batch, 4),
    norm (batch,) and the eigenvalues of S (batch, k), ascending, |lambda| <= rtol set to 0 (NaN where L = 0).
    """
    nb = S.shape[0]
    top = S[:, :m, :]
    norm = np.sqrt(np.einsum("bij,bij->b", top, top))
    alive = norm > 0
    top *= (0.5 / np.where(alive, norm, 1.0))[:, None, None]  # A' = A / (2 ||C||), B' = B / (2 ||C||)
    A, B = S[:, :m, :m], S[:, :m, m:]
    D = np.subtract(A, np.swapaxes(A, -1, -2), out=scratch[:nb])  # the top-left block of T = antisym(C)
    # ||T||^2 = ||(A - A^T) / 2||^2 + 2 ||B / 2||^2
    t = np.sqrt(np.einsum("bij,bij->b", D, D) + 2.0 * np.einsum("bij,bij->b", B, B))
    a = np.where(t <= rtol, 0.0, t * t)
    A *= 2.0
    A -= D  # (A + A^T) / 2 = 2 A' - (A' - A'^T); with B' above it, the upper triangle of sym(C)

    return _profile_of_spectra(a, eig(S), norm, rtol)


def _profile_of_spectra(a: np.ndarray, lam: np.ndarray, norm: np.ndarray,
                        rtol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Profiles (batch, 4), norms and thresholded eigenvalues from a = ||T||^2 (already thresholded), the
    eigenvalues ``lam`` (batch, k) of sym(C) / ||C|| and the norms ||C|| (0 where L = 0).

    Worked in blocks of rows whose temporaries stay under SPECTRA_BLOCK_BYTES: every step is row by row, so the
    values are those of one pass, and ``malloc`` serves the temporaries from its heap (see :func:`span_work`: a
    rotary head's (129, k) temporaries were each faulted in afresh on a dask worker)."""
    rows = max(1, SPECTRA_BLOCK_BYTES // (8 * max(1, lam.shape[-1])))
    if lam.ndim != 2 or len(lam) <= rows:
        return _profile_of_spectra_block(a, lam, norm, rtol)
    parts = [_profile_of_spectra_block(a[i:i + rows], lam[i:i + rows], norm[i:i + rows], rtol)
             for i in range(0, len(lam), rows)]
    prof, _, lam_out = (np.concatenate(x) for x in zip(*parts, strict=True))
    return prof, norm, lam_out


def _profile_of_spectra_block(a: np.ndarray, lam: np.ndarray, norm: np.ndarray,
                              rtol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    alive = norm > 0
    lam = np.where(np.abs(lam) <= rtol, 0.0, lam)
    pos = -np.sort(-np.maximum(lam, 0.0), axis=-1)  # decreasing
    neg = -np.sort(-np.maximum(-lam, 0.0), axis=-1)
    diff = pos - neg
    diff = np.where(np.abs(diff) <= rtol, 0.0, diff)
    b = 2.0 * np.sum(pos * neg, axis=-1)
    c = np.sum(np.maximum(diff, 0.0) ** 2, axis=-1)
    d = np.sum(np.maximum(-diff, 0.0) ** 2, axis=-1)

    prof = np.stack([a, b, c, d], axis=-1)
    total = prof.sum(axis=-1, keepdims=True)
    prof = prof / np.where(alive[..., None], total, 1.0)
    prof = np.where(alive[..., None], prof, np.nan)
    return prof, norm, np.where(alive[..., None], lam, np.nan)


def _thresholds(rtol: float, route: str, tol: float | None) -> float:
    if route == "torch-float32":
        if tol is None:
            raise ValueError("eigvalsh='torch-float32' needs an explicit tol (e.g. tol=1e-5): its eigenvalues carry "
                             "float32 rounding, so thresholds become max(rtol, tol) and the coordinates agree with "
                             "the float64 route only to within tol")
        if not 1e-6 <= tol < 1:
            raise ValueError(f"tol for float32 eigenvalues must be in [1e-6, 1) (float32 rounding); got {tol}")
        return max(rtol, tol)
    return rtol


def profile_of_cores(C: np.ndarray, rtol: float = DEFAULT_RTOL, *, eigvalsh: str = "numpy",
                     tol: float | None = None, device: str | None = None,
                     chunk_bytes: int = CHUNK_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """Profiles of a batch of bilinear forms given by their cores (or by the dense matrices themselves).

    Parameters
    ----------
    C : (..., k, k) array
        Cores (see module docstring); a dense N x N form L is its own core. Not modified.
    rtol : float
        Relative threshold below which the antisymmetric part, eigenvalues of the symmetric part and
        differences lambda_+ - lambda_- count as exactly zero (relative to ||L||_F).
    eigvalsh, tol, device :
        Eigen route (module docstring); "numpy" by default here.
    chunk_bytes : int
        Forms are processed in groups of about this many bytes of float64 work array.

    Returns
    -------
    profile : (..., 4) float64, coordinates (a, b, c, d) summing to 1; NaN where L = 0
    norm : (...) float64, ||L||_F before scaling
    """
    C = np.asarray(C)
    if C.ndim < 2 or C.shape[-1] != C.shape[-2]:
        raise ValueError(f"cores must have shape (..., k, k); got {C.shape}")
    route, device = eigen_route(eigvalsh, device)
    rtol = _thresholds(rtol, route, tol)
    eig = _eigvalsh_fn(route, device)
    batch, k = C.shape[:-2], C.shape[-1]
    flat = C.reshape((-1, k, k))
    count = flat.shape[0]
    step = max(1, min(count, chunk_bytes // max(1, k * k * 8)))
    S, scratch = np.empty((step, k, k)), np.empty((step, k, k))
    profs, norms = np.empty((count, 4)), np.empty(count)
    for start in range(0, count, step):
        part = flat[start:start + step]
        if not np.all(np.isfinite(part)):
            raise ValueError("the bilinear form has NaN or Inf entries; check the weights it was built from")
        work = S[:len(part)]
        work[...] = part  # a float64 copy: worked on in place
        profs[start:start + step], norms[start:start + step], _ = _profile_of_top(work, k, rtol, eig, scratch)
    return profs.reshape(batch + (4,)), norms.reshape(batch)


# ------------------------------------------------------------------------------------------- heads


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


def _dsyevd_lwork(k: int, lapack) -> tuple[int, int]:
    """``(lwork, liwork)`` for LAPACK ``dsyevd``, eigenvalues only, of a k x k matrix on the per-offset route.

    The work array's size sets the block size of ``dsytrd``, the reduction to tridiagonal form (about half of the
    eigensolver's time; ``dsterf``, the tridiagonal's eigenvalues, most of the rest): LAPACK's own query
    (``dsyevd_lwork``) leaves room for its default block (32 columns in OpenBLAS), and
    ``2k + 1 + SYTRD_BLOCK * k`` makes it work in blocks of ``SYTRD_BLOCK`` columns
    instead. On matrices of k = 64..512 that took 4-7 % less time than the default (CPU time, paired medians of
    5-15 interleaved repeats, 1 thread, scipy's OpenBLAS; benchmarks/scale_bench.py --sections c shows the
    whole route). The eigenvalues are the same to rounding either way (dsyevd only checks lwork >= 2k + 1)."""
    lwork, liwork = (int(x) for x in lapack.dsyevd_lwork(k, compute_v=0, lower=1)[:2])
    if SYTRD_BLOCK:
        lwork = min(lwork, 2 * k + 1 + SYTRD_BLOCK * k)
    return lwork, liwork


def _lapack_in_place(k: int):
    """``(eig, trmm)`` for the per-offset route: ``eig`` takes a (k, k) C-contiguous float64 array, reads its upper
    triangle and returns its eigenvalues ascending, overwriting that triangle (LAPACK ``dsyevd``, numpy's own
    driver, through scipy on the array in place: no copy; its work array sized by :func:`_dsyevd_lwork`);
    ``trmm(K1, Z)`` sets Z (m, k) C-contiguous to K1 @ Z in place for an upper triangular K1 (m, m),
    C-contiguous. Without scipy: numpy's ``eigvalsh`` (one copy per matrix) and ``trmm = None`` (the caller
    multiplies densely)."""
    try:
        from scipy.linalg import blas, lapack
    except ImportError:
        return functools.partial(np.linalg.eigvalsh, UPLO="U"), None
    # A C-contiguous array seen by Fortran is its transpose: its upper triangle is Fortran's lower one.
    lwork, liwork = _dsyevd_lwork(k, lapack)

    def eig(S: np.ndarray) -> np.ndarray:
        w, _, info = lapack.dsyevd(S.T, compute_v=0, lower=1, lwork=lwork, liwork=liwork, overwrite_a=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"LAPACK dsyevd did not converge (info {info})")
        return w

    def trmm(K1: np.ndarray, Z: np.ndarray) -> None:
        # Z^T K1^T in Fortran's view: side right, K1^T lower triangular; Z^T is F-contiguous, so no copy is made
        blas.dtrmm(1.0, K1.T, Z.T, side=1, lower=1, overwrite_b=1)

    return eig, trmm


def _rotary_offsets(K1: np.ndarray, Pt: np.ndarray, rows, rotations: np.ndarray, rtol: float, lapack_fns,
                    work: np.ndarray, bufs: tuple[np.ndarray, np.ndarray, np.ndarray],
                    keep_d0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Profiles (D, 4), norms (D,) and eigenvalues (D, k) of one head's cores ``K1 R(d) P^T``, one offset at a time.

    Each offset's k x k work array stays in the CPU cache from the core's product to the eigensolver, which
    reads it in place. K1 (m, n) = the top rows of K; Pt = P^T (n, k); ``rows``: :func:`rotation_pairs` of
    R(d)^T (the rows of R(d)) or None; ``work`` (k, k); ``bufs`` = Z (n, k), tmp (n, k), Dm (m, m) scratch.
    The product is ``K1 @ (R(d) P^T)``, R(d) applied to the rows of P^T elementwise and K1 triangular (``trmm``,
    half a dense product's flops) when m = n. The eigensolver gets 2 sym(C) unscaled; its eigenvalues and ||T||
    are divided by 2 ||C|| afterwards (no scaling pass).

    Where the time goes (one (N, n) = (5120, 128) rotary head, 129 offsets, 1 thread; each part timed inside the
    routes in CPU time of the thread (``time.thread_time``, which a loaded machine's waits for a core do not
    inflate), medians of 5-11 repeats on a 2-core machine, in % of the floor = numpy's ``eigvalsh`` on the
    (129, 256, 256) stack; benchmarks/scale_bench.py --sections c prints the totals and the LAPACK parts):

    ====================================  ===============================  ==================================
    part                                  chunked route (batched_offsets)  this route
    ====================================  ===============================  ==================================
    eigensolver                           97-101 % (eigvalsh, copies)      89 % (dsyevd in place, dsytrd in
                                                                           blocks of 8: :func:`_dsyevd_lwork`)
    factor of [W_K^T | W_Q^T] (5120 x     11-16 % (numpy's qr, a copy)     4 % (Gram + Cholesky:
    256)                                                                   :func:`_span_r`; 10 % by dgeqrt)
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
    besides the eigensolver (span factor, products, norms, rotation, Python) is ~18 % of the floor. Threads:
    threadpoolctl limits only the BLAS libraries loaded when its block starts, so :func:`_thread_limit` loads
    scipy's first (left unlimited, its 2 threads on these 256 x 256 problems ran 20-30 x slower in one measurement
    on the loaded 2-core machine).
    """
    eig, trmm = lapack_fns
    D, (m, n), k = len(rotations), K1.shape, Pt.shape[1]
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
        if rows is None:
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
    return _profile_of_spectra(np.where(ts <= rtol, 0.0, ts * ts), lam, norms, rtol)


def _qr_r_in_place(A: np.ndarray) -> np.ndarray:
    """R (min(M, c), c) of the QR factorisation of an F-ordered float64 A (M, c): LAPACK ``dgeqrf`` (numpy's own
    call) through scipy, on A in place (A is overwritten; numpy's ``qr`` works on a copy of it). Without scipy:
    numpy's ``qr``.

    With QR_BLOCK set, ``dgeqrt`` in blocks of QR_BLOCK columns instead: the same Householder reflections with
    recursive panels (``dgeqrt3``); on (5120, 256) it took ~12 % less time than ``dgeqrf``, on (2048, 128) ~20 %
    (CPU time, paired medians, 1 thread)."""
    try:
        from scipy.linalg import lapack
    except ImportError:
        return np.linalg.qr(A, mode="r")
    M, c = A.shape
    if QR_BLOCK:
        qr, _, info = lapack.dgeqrt(max(1, min(QR_BLOCK, M, c)), A, overwrite_a=1)
    else:
        qr, _, _, info = lapack.dgeqrf(A, lwork=int(lapack.dgeqrf_lwork(M, c)[0]), overwrite_a=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"LAPACK QR failed (info {info})")
    return np.triu(qr[:min(M, c)])


def _span_r(A: np.ndarray, G: np.ndarray | None = None) -> np.ndarray:
    """An upper triangular R (k, c) with R^T R = A^T A, for an F-ordered float64 A (M, c), M >= c: the factor
    :func:`head_profiles` needs (any R with R^T R = A^T A gives the same cores up to an orthogonal similarity, so the
    same profiles, norms and spectra). ``G``: an F-ordered float64 (c, c) work array the Gram matrix and its
    Cholesky factor are written into (then R is G); None: a new one.

    The Cholesky factor of the Gram matrix (BLAS ``dsyrk``, LAPACK ``dpotrf``) when it is well conditioned: LAPACK
    ``dtrcon``'s estimate of R's reciprocal condition number (1-norm) at least GRAM_RCOND. Otherwise, and when the
    Cholesky breaks down (a rank-deficient span: a zero head, N < 2n, shared rows), or M < c, or without scipy:
    the Householder QR of A (:func:`_qr_r_in_place`, which overwrites A; the Gram route leaves A as it is).

    Why: the Gram matrix and its Cholesky factor cost about a third of the QR's time (CPU time, one thread, medians
    of 11: 0.9 ms against 3.9 ms for dgeqrf on (2048, 128); 9.0 ms against 23 ms for dgeqrt on (5120, 256);
    benchmarks/scale_bench.py prints the whole route). Accuracy: forming A^T A rounds relative to ||A||^2, which
    moves R by about cond(A) eps ||A||, so the eigenvalues of sym(C) by about cond(A) eps relative to ||C||. The guard
    keeps cond(A) near or below 1/GRAM_RCOND (the estimate is within a factor of about k of the 2-norm one).
    ``tests/pipeline/test_profile.py`` holds the profiles, norms and spectra of spans of condition numbers 1 to 1e8
    within 1e-13 of the QR's, and spans past the guard on the QR itself."""
    M, c = A.shape
    if M >= c and GRAM_RCOND > 0:
        try:
            from scipy.linalg import blas, lapack
        except ImportError:
            return _qr_r_in_place(A)
        # A^T A, upper triangle (A F-ordered: no copy); with beta = 0, BLAS does not read G's old values
        G = blas.dsyrk(1.0, A, trans=1, lower=0) if G is None else blas.dsyrk(1.0, A, c=G, trans=1, lower=0,
                                                                               overwrite_c=1)
        R, info = lapack.dpotrf(G, lower=0, clean=1, overwrite_a=1)
        if info == 0:
            rcond, info = lapack.dtrcon(R, norm="1", uplo="U")
            if info == 0 and rcond >= GRAM_RCOND:
                return R
    return _qr_r_in_place(A)


def span_work(n: int, N: int) -> tuple[np.ndarray, np.ndarray]:
    """The float64 work arrays :func:`_head_span` fills for every head of a layer: the span's input (N, 2n) and its
    Gram matrix (2n, 2n), both F-ordered (LAPACK's layout).

    Made once per layer, not per head. A process whose ``malloc`` returns large blocks to the system at once
    (dask's workers set ``MALLOC_TRIM_THRESHOLD_``, which fixes glibc's threshold for serving a block by ``mmap``
    at 128 KiB) otherwise maps, faults in and unmaps the N x 2n array for every head. On the opt-1.3b shape (24
    layers in one process with that setting) the layers took 675-689 thousand page faults and 1.4-1.6 s of system
    time, against 16-41 thousand and 0.2-0.4 s without it; these arrays were about 380 thousand of those faults,
    the reads' temporaries most of the rest (benchmarks/scaling_bench.py prints the workers' page faults). The
    orbit trainer changes its process's ``malloc`` instead (``pipeline.orbits.train.keep_freed_memory``): it owns
    its processes, while a profile task may run in a user's dask worker, whose memory policy is dask's."""
    return np.empty((N, 2 * n), order="F"), np.empty((2 * n, 2 * n), order="F")


def _head_span(W_Q, W_K, h: int, kv: int, gain, in_place: bool = True,
               work: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """K, P (k, n) of head h: its query weights and key head ``kv``, in float64 (times the gain).
    ``in_place``: the span's factor from :func:`_span_r` (which may overwrite the float64 input), else numpy's ``qr``
    on a copy. ``work``: :func:`span_work`'s arrays, overwritten (K and P may be views of them: used before the
    next head's call); None: new ones."""
    n, N = W_Q.shape[-2:]
    A, G = work if work is not None else span_work(n, N)
    A[:, :n] = W_K[kv].T
    A[:, n:] = W_Q[h].T
    if gain is not None:
        A *= np.asarray(gain, dtype=np.float64)[:, None]
    R = _span_r(A, G) if in_place else np.linalg.qr(A, mode="r")
    # NaN or Inf in A reaches R on every route (through the Gram matrix or the reflections), so R (k x k) is
    # checked instead of A (N x 2n): a k / N of the reads. A finite head whose factor is not finite overflowed.
    if not np.all(np.isfinite(R)):
        weights = (W_K[kv], W_Q[h]) + (() if gain is None else (np.asarray(gain),))
        if not all(np.all(np.isfinite(w)) for w in weights):
            raise _nonfinite_head(h)
        raise ValueError(f"head {h}: the factor of its weights overflowed float64 (entries near 1e154 or larger); "
                         "check the checkpoint it was read from")
    return R[:, :n], R[:, n:]


def _nonfinite_head(h: int) -> ValueError:
    return ValueError(f"head {h} has NaN or Inf weights; check the checkpoint it was read from")


def _layer_on_device(W_Q, W_K, rotations, kv_of_head, gain, rtol: float, route: str, device,
                     chunk_bytes: int | None, keep_d0, progress) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The torch routes: a whole layer's profiles (H, D, 4), norms (H, D) and eigenvalues at the first offset (H, k)
    (D = 1 without rotations), batched on the torch ``device``.

    1. QR of every head's ``[W_K[kv]^T | W_Q^T]`` (``torch.linalg.qr``, R only, float64), in groups of heads whose
       float64 (N, 2n) inputs fill about ``chunk_bytes``; the heads travel to the device in their storage dtype.
    2. The (heads x offsets) pairs, in order, in chunks of ``chunk_bytes`` of (k, k) float64 work arrays (at most
       EIG_BATCH): the top rows ``K[:m] R(d) P^T`` of their cores (R(d) applied elementwise when
       :func:`rotation_pairs` finds the rotary structure, else a batched product), norms, ||antisym|| and the upper
       triangle of 2 sym(C) unscaled, as :func:`_rotary_offsets` forms them, and one batched ``eigvalsh``.
    3. Eigenvalues, norms and ||T|| come back to the CPU (a few numbers per matrix) for :func:`_profile_of_spectra`.

    ``keep_d0(h, top)`` (or None) gets the unscaled top rows of each head's core at the first offset, as a numpy
    array. ``chunk_bytes`` None: CHUNK_BYTES on the CPU, DEVICE_CHUNK_BYTES on any other device. A chunk's
    intermediates (K R(d), the gathered P^T, the top rows) and the eigensolver's own copy of its input come to
    about twice its (B, k, k) work array: peak memory about 3 x ``chunk_bytes`` beyond the layer's factors
    (K[:m] and P^T: n (m + k) float64 per head).
    """
    import torch

    H, n, N = W_Q.shape
    k, D = min(N, 2 * n), 1 if rotations is None else len(rotations)
    m = min(n, k)
    dev = torch.device(device)
    if chunk_bytes is None:
        chunk_bytes = CHUNK_BYTES if dev.type == "cpu" else DEVICE_CHUNK_BYTES
    f64 = torch.float64

    def on_device(x):  # read-only arrays are copied (torch.from_numpy needs writable memory)
        return torch.from_numpy(np.require(x, requirements=["C", "W"])).to(dev)

    g = None if gain is None else on_device(np.asarray(gain, dtype=np.float64))[:, None]
    K1, Pt = torch.empty((H, m, n), dtype=f64, device=dev), torch.empty((H, n, k), dtype=f64, device=dev)
    group = max(1, chunk_bytes // max(1, N * 2 * n * 8))
    for start in range(0, H, group):
        heads = slice(start, min(H, start + group))
        Wq, Wk = on_device(W_Q[heads]).to(f64), on_device(W_K[kv_of_head[heads]]).to(f64)  # sent in storage dtype
        A = torch.cat([Wk.mT, Wq.mT], dim=-1)  # (heads, N, 2n)
        del Wq, Wk
        if g is not None:
            A *= g
        finite = torch.isfinite(A).flatten(1).all(dim=1).cpu().numpy()
        if not finite.all():
            raise _nonfinite_head(start + int(np.argmin(finite)))
        R = torch.linalg.qr(A, mode="r").R  # (heads, k, 2n)
        del A
        K1[heads] = R[:, :m, :n]
        Pt[heads] = R[:, :, n:].mT

    pairs = None if rotations is None else rotation_pairs(rotations)
    if pairs is not None:
        diag, partner, off = (on_device(x) for x in pairs)
    elif rotations is not None:
        R_all = on_device(rotations)
    total = H * D
    n_chunks = -(-total // max(1, min(EIG_BATCH, chunk_bytes // max(1, k * k * 8))))
    step = max(1, -(-total // max(1, n_chunks)))  # chunks of equal size
    work = torch.zeros((step, k, k), dtype=f64, device=dev)  # rows m: stay zero: only the top rows are written
    eig = _torch_eigvalsh(route)
    prof, norm, lam0 = np.empty((total, 4)), np.empty(total), np.empty((H, k))
    done = 0
    for start in range(0, total, step):
        stop = min(total, start + step)
        idx = np.arange(start, stop)
        hs, ds = idx // D, idx % D
        hs_t, ds_t = on_device(hs), on_device(ds)
        KR = K1[hs_t]  # K[:m] R(d), (B, m, n)
        if pairs is not None:  # (K R)[:, j] = K[:, j] diag[d, j] + K[:, partner[j]] off[d, j]
            KR = KR * diag[ds_t][:, None, :] + KR[:, :, partner] * off[ds_t][:, None, :]
        elif rotations is not None:
            KR = KR @ R_all[ds_t]
        top = KR @ Pt[hs_t]  # the core's nonzero rows [A | B], (B, m, k)
        del KR
        first = np.flatnonzero(ds == 0)
        if keep_d0 is not None and len(first):
            for h, t in zip(hs[first], top[first].cpu().numpy(), strict=True):
                keep_d0(int(h), t)
        nrm = torch.linalg.vector_norm(top, dim=(-2, -1))
        A, B = top[:, :, :m], top[:, :, m:]
        Dm = A - A.mT  # the top-left block of 2 antisym(C)
        ts = (Dm * Dm).sum(dim=(-2, -1)) + 2.0 * (B * B).sum(dim=(-2, -1))  # 4 ||antisym(C)||^2
        S = work[:len(idx)]
        S[:, :m, :m] = A + A.mT  # with B beside it, the upper triangle of 2 sym(C)
        S[:, :m, m:] = B
        del top, A, B, Dm
        scale = 2.0 * torch.where(nrm > 0, nrm, 1.0)  # ||C|| = 1 after: eigenvalues and ||T|| of 2 sym(C) / (2 ||C||)
        lam = (eig(S) / scale[:, None]).cpu().numpy()
        t = (torch.sqrt(ts) / scale).cpu().numpy()
        prof[start:stop], norm[start:stop], lam = _profile_of_spectra(np.where(t <= rtol, 0.0, t * t), lam,
                                                                      nrm.cpu().numpy(), rtol)
        lam0[hs[first]] = lam[first]
        if progress is not None:
            for h in range(done, stop // D):
                progress(h)
        done = stop // D
    return prof.reshape(H, D, 4), norm.reshape(H, D), lam0


def head_profiles(
    W_Q: np.ndarray,
    W_K: np.ndarray,
    rotations: np.ndarray | None = None,
    rtol: float = DEFAULT_RTOL,
    *,
    kv_of_head: np.ndarray | None = None,
    gain: np.ndarray | None = None,
    eigvalsh: str = "auto",
    tol: float | None = None,
    device: str | None = None,
    threads: int | None = None,
    chunk_bytes: int | None = None,
    progress=None,
    statistics: bool = False,
    batched_offsets: bool = False,
) -> tuple[np.ndarray, ...]:
    """Profiles of the heads of one layer, through the low-rank route: one head at a time on the numpy route, the
    whole layer batched on the torch routes.

    The torch routes (``eigvalsh`` "torch", "torch-float32", or "auto" on CUDA) always take the layer-batched path
    :func:`_layer_on_device`, on the CPU as on a GPU: a GPU needs large batches (one head's offsets are too few
    eigenproblems to fill it), and one torch path means the tests on CPU torch run the very code a GPU runs.
    Nothing is lost on the CPU by it: torch on the CPU took the same time either way (CPU time of two (5120, 128)
    heads x 129 offsets, one thread, medians of 3 on a loaded 2-core machine: 0.87 s one head at a time, 0.89 s
    batched; the numpy route 0.70 s, and it stays the CPU route that "auto" takes without a GPU), and the torch
    path's memory stays bounded by ``chunk_bytes``.

    Parameters
    ----------
    W_Q : (H, n, N)
        Query weights per head, any float dtype (float32 from bf16/fp16 checkpoints is exact); each head
        is converted to float64 when it is used.
    W_K : (H, n, N), or (Hkv, n, N) with ``kv_of_head``
        Key weights: per query head, or per key head for grouped-query models.
    rotations : (D, n, n) or None
        R(d) for the offsets d = 0..D-1 (see ``pipeline.rotary``); None for position-independent forms.
    rtol : float
        Threshold for exact zeros (module docstring).
    kv_of_head : (H,) ints or None
        Key head of each query head (grouped-query attention); None means W_K is per query head.
    gain : (N,) or None
        Layer-norm gain folded on both sides (W_Q diag(g), W_K diag(g)), applied in float64 per head.
    eigvalsh, tol, device : str, float, str
        Eigen route (module docstring). "auto" uses torch float64 on CUDA when available, else numpy.
    threads : int or None
        BLAS/LAPACK (and torch) threads during the call. None: one thread on the numpy route when threadpoolctl
        is installed (its k x k problems are too small to gain from BLAS threads, and threads that wait on each
        other made a head 20-40 x slower on a loaded 2-core machine, benchmarks/scale_bench.py), the process
        setting on the torch routes.
    chunk_bytes : int or None
        Bound on each float64 work array: a head's (offsets, k, k) on the numpy chunked route (below), the (heads x
        offsets, k, k) cores and the heads' (N, 2n) QR inputs on the torch routes. None: CHUNK_BYTES, or
        DEVICE_CHUNK_BYTES on a torch device other than the CPU.
    progress : callable or None
        Called with each head index when it is done (e.g. a tqdm update).
    statistics : bool
        Also return each head's statistics and spectrum at the first offset (d = 0), from the same cores
        (``pipeline.head_statistics``): one m x m Gram eigenproblem per head on top of the profile's.
    batched_offsets : bool
        With rotations on the numpy route, offsets are solved one at a time in the CPU cache (the default,
        ``_rotary_offsets``); True takes the chunked route: a head's offsets in chunks of ``chunk_bytes``, one
        ``eigvalsh`` call per chunk, and numpy's ``qr`` on a copy of each head (the default factors it in place).
        Same values to rounding (<= 1e-12); kept for comparison (benchmarks/scale_bench.py). No effect on the
        torch routes.

    Returns
    -------
    profile : (H, 4) or (H, D, 4);  norm : (H,) or (H, D)
    with ``statistics``, also: statistics (H, 17) in the order of ``pipeline.schema.STATISTICS`` and
    spectrum (H, k), the eigenvalues of S (||L||_F = 1) decreasing, k = min(N, 2n)
    """
    W_Q, W_K = np.asarray(W_Q), np.asarray(W_K)
    if W_Q.ndim != 3 or W_K.ndim != 3 or W_Q.shape[1:] != W_K.shape[1:]:
        raise ValueError(f"W_Q and W_K must both have shape (heads, n, N); got {W_Q.shape} and {W_K.shape}")
    H, n, N = W_Q.shape
    if kv_of_head is None:
        if W_K.shape[0] != H:
            raise ValueError(f"W_K has {W_K.shape[0]} heads and W_Q {H}; pass kv_of_head (the key head of each "
                             "query head) for grouped-query attention")
        kv_of_head = np.arange(H)
    kv_of_head = np.asarray(kv_of_head, dtype=np.int64)
    if kv_of_head.shape != (H,) or (H and (kv_of_head.min() < 0 or kv_of_head.max() >= W_K.shape[0])):
        raise ValueError(f"kv_of_head must give one key head in 0..{W_K.shape[0] - 1} per query head ({H}); "
                         f"got {kv_of_head}")
    if gain is not None and np.shape(gain) != (N,):
        raise ValueError(f"gain must have shape ({N},); got {np.shape(gain)}")
    route, device = eigen_route(eigvalsh, device)
    rtol = _thresholds(rtol, route, tol)
    if chunk_bytes is None and route == "numpy":
        chunk_bytes = CHUNK_BYTES
    k = min(N, 2 * n)
    m = min(n, k)  # nonzero rows of K: [K | P] is upper triangular
    gram, trace = (np.empty((H, m, m)), np.empty(H)) if statistics else (None, None)

    def keep_d0(h: int, top: np.ndarray) -> None:  # the unscaled top rows [A | B] of head h's core at d = 0
        if statistics:
            np.matmul(top, top.T, out=gram[h])
            trace[h] = np.trace(top[:, :m])

    def finish(prof, norm, prof0, norm0, lam0):
        if not statistics:
            return prof, norm
        from pipeline.head_statistics import head_statistics, singular_energies, spectrum

        h2, tr = singular_energies(gram, trace, norm0)
        return prof, norm, head_statistics(lam0, h2, tr, prof0), spectrum(lam0)

    if threads is None and route == "numpy" and importlib.util.find_spec("threadpoolctl") is not None:
        threads = 1
    if rotations is not None:
        rotations = np.asarray(rotations, dtype=np.float64)
        if rotations.ndim != 3 or rotations.shape[1:] != (n, n):
            raise ValueError(f"rotations must have shape (D, {n}, {n}); got {rotations.shape}")
    with _thread_limit(threads, route):
        if route != "numpy":
            prof, norm, lam0 = _layer_on_device(W_Q, W_K, rotations, kv_of_head, gain, rtol, route, device,
                                                chunk_bytes, keep_d0 if statistics else None, progress)
            prof0, norm0 = prof[:, 0], norm[:, 0]
            if rotations is None:
                prof, norm = prof0, norm0
            return finish(prof, norm, prof0, norm0, lam0)
        eig = _eigvalsh_fn(route, device)
        if rotations is None:
            one = _lapack_in_place(k)[0]  # each core's eigenvalues in place (dsyevd in blocks of SYTRD_BLOCK)

            def each(S: np.ndarray) -> np.ndarray:
                return np.stack([one(s) for s in S]) if len(S) else np.empty((0, k))

            S, span = np.zeros((H, k, k)), span_work(n, N)
            for h in range(H):
                K, P = _head_span(W_Q, W_K, h, kv_of_head[h], gain, in_place=not batched_offsets, work=span)
                np.matmul(K[:m], P.T, out=S[h, :m])
                keep_d0(h, S[h, :m])
                if progress is not None:
                    progress(h)
            prof, norm, lam = _profile_of_top(S, m, rtol, each, np.empty((H, m, m)))
            return finish(prof, norm, prof, norm, lam)
        D = rotations.shape[0]
        prof, norm = np.empty((H, D, 4)), np.empty((H, D))
        lam0 = np.empty((H, k))
        if route == "numpy" and not batched_offsets:  # offset by offset, in cache (_rotary_offsets)
            rows = rotation_pairs(np.swapaxes(rotations, -1, -2))
            fns = _lapack_in_place(k)
            work, bufs = np.zeros((k, k)), (np.empty((n, k)), np.empty((n, k)), np.empty((m, m)))
            span = span_work(n, N)
            for h in range(H):
                K, P = _head_span(W_Q, W_K, h, kv_of_head[h], gain, work=span)
                prof[h], norm[h], lam = _rotary_offsets(np.ascontiguousarray(K[:m]), np.ascontiguousarray(P.T), rows,
                                                        rotations, rtol, fns, work, bufs,
                                                        functools.partial(keep_d0, h))
                lam0[h] = lam[0]
                if progress is not None:
                    progress(h)
            return finish(prof, norm, prof[:, 0], norm[:, 0], lam0)
        pairs = rotation_pairs(rotations)  # batched_offsets: offsets in chunks, one eigensolver call per chunk
        n_chunks = -(-D * k * k * 8 // max(1, chunk_bytes))
        step = max(1, -(-D // max(1, n_chunks)))
        S, scratch = np.zeros((step, k, k)), np.empty((step, m, m))
        KR_buf, tmp_buf = np.empty((step, m, n)), np.empty((step, m, n))
        span = span_work(n, N)
        for h in range(H):
            K, P = _head_span(W_Q, W_K, h, kv_of_head[h], gain, in_place=False, work=span)
            Km, Pt = K[:m], np.ascontiguousarray(P.T)
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
                    keep_d0(h, work[0, :m])
                prof[h, sl], norm[h, sl], lam = _profile_of_top(work, m, rtol, eig, scratch)
                if start == 0:
                    lam0[h] = lam[0]
            if progress is not None:
                progress(h)
        return finish(prof, norm, prof[:, 0], norm[:, 0], lam0)


def naive_profiles(L: np.ndarray, rtol: float = DEFAULT_RTOL) -> tuple[np.ndarray, np.ndarray]:
    """Test oracle and benchmark baseline: the profile from the dense N x N form(s) L (..., N, N)."""
    return profile_of_cores(L, rtol)
