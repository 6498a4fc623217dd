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
the Gram matrix when the span is well conditioned, else the QR (``span.span_r``).

Since ``[K | P]`` is upper triangular, only the first m = min(n, k) rows of K (and so of every core) are
nonzero: a core is ``[[A, B], [0, 0]]`` with A (m, m), B (m, k - m), and only that top block is formed.
Rotary R(d) of the usual kind (each column with at most one off-diagonal entry: rotate-half or
interleaved pairs) is applied elementwise, ``(K R)[:, j] = K[:, j] R[j, j] + K[:, p(j)] R[p(j), j]``.

Memory: the numpy route works one head at a time and a rotary head's offsets one at a time in a single k x k work
array; the torch routes work on the whole layer in chunks of about ``chunk_bytes``. The weights may stay in a compact
dtype (float32 decoded from bf16/fp16) and grouped-query key heads are shared through ``kv_of_head`` instead of
being copied per query head; a head is turned into float64 only when it is used, so results do not depend on the
storage dtype.

Exactness at the vertices: quantities below ``rtol`` relative to ||L|| (the antisymmetric part,
eigenvalues, and the differences lambda_+ - lambda_-) are set to exactly zero, and the four
coordinates are normalised by their own sum, so an antisymmetric, positive/negative semidefinite or
"H" form gives exactly 1 in its coordinate and exactly 0 in the others. ``L = 0`` has no profile:
NaN coordinates and norm 0, with no warning.

The modules of this package, each one step:

- ``heads``: :func:`head_profiles`, the profiles of a layer's heads (inputs checked, a route chosen) as a
  :class:`HeadProfiles`;
- ``span``: the span factor of a head (``[K | P]``) and its cores, and the rotary structure of R(d);
- ``lapack``: the numpy route, offset by offset in the CPU cache with LAPACK in place;
- ``device``: the torch routes, a whole layer batched on a torch device;
- ``eigen``: which eigensolver each ``eigvalsh`` route takes, and the BLAS thread limits around it;
- ``kernels``: :class:`Kernels`, the linear-algebra steps and their settings, a parameter of :func:`head_profiles`;
- ``spectra``: the profile from a core's spectra, with its thresholds, and :func:`profile_of_cores` for cores or
  dense forms given whole;
- ``at_zero``: each head's quantities at d = 0 (head statistics, spectrum) from the same cores.

This module names the public ones. No I/O; numpy (and scipy's LAPACK when installed) unless a torch route is asked
for (or "auto" finds torch and a GPU).
"""

from .at_zero import AtZero
from .eigen import EIGVALSH, eigen_route
from .heads import HeadProfiles, head_profiles
from .kernels import Kernels
from .span import cores, rotation_pairs, span_cores, span_work
from .spectra import DEFAULT_RTOL, naive_profiles, profile_of_cores

__all__ = ["DEFAULT_RTOL", "EIGVALSH", "AtZero", "HeadProfiles", "Kernels", "cores", "eigen_route", "head_profiles",
           "naive_profiles", "profile_of_cores", "rotation_pairs", "span_cores", "span_work"]
