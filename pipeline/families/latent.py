"""Multi-head latent attention (DeepSeek V2 / V3): one layer's effective W_Q, W_K per head from its latent tensors.

transformers' ``DeepseekV2Attention`` / ``DeepseekV3Attention`` compute, for the attention input x,

    q_h = W_qb[h] G_qa W_qa x / r_qa(x)         (or W_q[h] x where the config's q_lora_rank is null)
    [c | k_rope] = W_kva x,   k_h = [W_kvb_k[h] G_kva c / r_kva(x) | k_rope]

with G the latents' RMS-norm gains and r their divisors (each latent's RMS, with the norm's epsilon); q_h splits into
[q_nope (qk_nope_head_dim) | q_rope (qk_rope_head_dim)], the rope parts of q and k are rotated, and k_rope is one
vector shared by every head. The score of heads h is then

    s_h(i, j) = c / r_qa(i) * [ x_j^T A_h x_i / r_kva(j) + x_j^T B_h(i - j) x_i ]

where A_h pairs the non-rotary parts and B_h(d) the rotary ones: the key latent's divisor r_kva divides the first
part alone. No one form gives these scores at every input. The convention (docs/architecture.md, "Latent
attention"): **the form at unit-RMS latents**, L_h(d) = A_h + B_h(d), the scores with r_qa = r_kva = 1 and the norms'
gains folded into the weights. The query latent's divisor is an ordinary QK-norm divisor of the whole head (a positive
per-query factor); the key latent's is not removable from the total, and ``tests/pipeline/families/test_forward.py``
proves the decomposition itself: the captured scores times r_qa(i) equal c (x_j^T A_h x_i / r_kva(j) + x_j^T B_h(i - j)
x_i) with A_h and B_h the blocks of the form read here, so at unit-RMS latents the scores are c x_j^T L_h(i - j) x_i.

The effective head of n = qk_rope_head_dim + qk_nope_head_dim dimensions puts the rotary ones first ([rope | nope]),
so that the rotation of the first ``rotary_dim`` dimensions (``pipeline.families.rotary``) is the forward pass's.
Of ``kv_b_proj`` (per head [k_nope | v] rows) only the key rows are read.

Memory: a layer's (H, n, N) float64 W_Q and W_K are far larger than the tensors they come from (a DeepSeek-V3 layer:
2.8 GB against 123 MB of bf16 query and key tensors), so they are never formed whole. :func:`latent_qk` keeps the
factors as they are stored (:class:`LatentHeads`: bf16 values as their 16 bits, read in parts of ``PART_BYTES``) and
each head's float64 rows are formed when the profile core takes that head (``head[h]``), in column blocks of
``BLOCK_BYTES``: a layer then holds its stored Q/K bytes and one head in float64, as the other layouts hold their
compact Q/K (``pipeline.sources.base.COMPACT``) and widen a head while it is profiled.
"""

from __future__ import annotations

import numpy as np

ROLES = ("q", "q_a", "q_a_norm", "q_b", "kv_a", "kv_a_norm", "kv_b")


def roles(latent, layer: int) -> dict[str, str]:
    """Role -> tensor suffix of ``layer``: q_proj alone, or the query latent's three tensors; the key's three."""
    query = ("q_a", "q_a_norm", "q_b") if latent.size("q_lora_rank") else ("q",)
    return {role: getattr(latent, role).format(l=layer) for role in query + ("kv_a", "kv_a_norm", "kv_b")}


def shape(layout, role: str) -> tuple[int, ...]:
    """The shape config.json gives the tensor of ``role`` (torch Linear layout)."""
    lat, H, N = layout.spec.latent, layout.n_heads, layout.d_model
    qr, kvr, nope, rope, v = (lat.size(k) for k in lat.keys)
    return {"q": (H * (nope + rope), N), "q_a": (qr, N), "q_a_norm": (qr,), "q_b": (H * (nope + rope), qr),
            "kv_a": (kvr + rope, N), "kv_a_norm": (kvr,), "kv_b": (H * (nope + v), kvr)}[role]


def key_rows(latent, heads: int) -> list[tuple[int, int]]:
    """The rows of ``kv_b_proj`` that give the keys: per head the first qk_nope_head_dim of its [k_nope | v]."""
    nope, v = latent.size("qk_nope_head_dim"), latent.size("v_head_dim")
    return [(h * (nope + v), h * (nope + v) + nope) for h in range(heads)]


def latent_qk(layout, names: dict[str, str], read, read_rows, whole: bool) -> tuple:
    """W_Q, W_K (H, n, N) of one layer, rows [rope | nope] per head, the latents' gains folded in: W_K, and W_Q where
    the queries have a latent, as :class:`LatentHeads` (a head formed in float64 when it is taken), W_Q of q_proj as
    a compact array (its rows reordered). ``read(name)``: a tensor, compact; ``read_rows(name, ranges)``: its rows
    [a, b) for each (a, b), stacked, compact; ``whole``: the checkpoint has no row reads (``read_rows`` reads the whole
    tensor), so each tensor is read once, in one part, not once per part."""
    lat, H, N, offset = layout.spec.latent, layout.n_heads, layout.d_model, layout.spec.gain_offset
    qr, kvr, nope, rope = (lat.size(k) for k in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim"))
    n = nope + rope

    def gain(role):
        return offset + np.asarray(read(names[role]), dtype=np.float64)

    def rows_of(role, count, width):  # a 2-d tensor's first ``count`` rows, in parts
        return _read_parts(lambda a, b: read_rows(names[role], [(a, b)]), count, width, whole)

    order = np.r_[nope:n, 0:nope]  # a head's [nope | rope] rows as [rope | nope]
    if "q" in names:
        W_Q = np.asarray(read(names["q"])).reshape(H, n, N)[:, order]
    else:
        up = _read_parts(lambda a, b: read_rows(names["q_b"], [(a * n, b * n)]).reshape(b - a, n, qr)[:, order],
                         H, n * qr, whole)
        W_Q = LatentHeads(up, gain("q_a_norm"), rows_of("q_a", qr, N))
    kv_a = rows_of("kv_a", kvr + rope, N)
    keys = key_rows(lat, H)
    up = _read_parts(lambda a, b: read_rows(names["kv_b"], keys[a:b]).reshape(b - a, nope, kvr), H, nope * kvr,
                     whole)
    # the rotary key (kv_a's last rows) is shared by every head
    return W_Q, LatentHeads(up, gain("kv_a_norm"), kv_a[:kvr], shared=kv_a[kvr:])


PART_BYTES = 16 << 20  # a factor is read in parts of about this many float32 bytes, each packed before the next
BLOCK_BYTES = 4 << 20  # a head's rows are formed in column blocks of about this many float64 bytes of G down


class LatentHeads:
    """(H, n, N) float64 heads of one layer, each formed when it is taken: head h is the rows ``shared`` (the same
    for every head; none for the queries) above ``up[h] G down``, G = diag(``gain``), in float64 (the gain times
    ``down`` first, then the product; ``tests/pipeline/families/test_latent_memory.py`` holds them to the dense
    product).

    The factors are held as read, bf16 values as their 16 bits (:func:`_packed`). ``heads[h]``, ``heads[a:b]`` and
    ``heads[[h, ...]]`` (numpy's indexing of the head axis) form those heads, column block by column block of
    ``BLOCK_BYTES`` of G down; ``np.asarray(heads)`` forms them all (the layer in float64, as
    ``pipeline.families.layer_weights`` asks). ``nbytes``: what it holds (the factors); ``factors``: those arrays
    (``pipeline.run.frame_tasks.qk_digest`` hashes them). ``heads_on_demand`` tells ``pipeline.profile.head_profiles``
    to take it as it is: the profile core indexes one head (the numpy route) or a group of heads of bounded float64
    size (the torch routes) at a time."""

    heads_on_demand = True
    ndim = 3
    dtype = np.dtype(np.float64)

    def __init__(self, up: np.ndarray, gain: np.ndarray, down: np.ndarray, shared: np.ndarray | None = None):
        self.up, self.gain, self.down, self.shared = up, np.asarray(gain, dtype=np.float64), down, shared
        self.shape = (up.shape[0], (0 if shared is None else shared.shape[0]) + up.shape[1], down.shape[1])

    @property
    def factors(self) -> tuple:
        return self.shared, self.up, self.gain, self.down

    @property
    def nbytes(self) -> int:
        return sum(x.nbytes for x in self.factors if x is not None)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index) -> np.ndarray:
        heads = np.arange(self.shape[0])[index]  # numpy's indexing of the head axis: an int, a slice, an array
        out = self._form(heads.reshape(-1))
        return out.reshape(*heads.shape, *self.shape[1:])

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self._form(np.arange(self.shape[0]))
        return out if dtype is None else out.astype(dtype, copy=False)

    def _form(self, heads: np.ndarray) -> np.ndarray:
        _, n, N = self.shape
        s = n - self.up.shape[1]
        out = np.empty((len(heads), n, N))
        if s:
            out[:, :s] = _wide(self.shared)
        ups = [_wide(self.up[h]) for h in heads]
        # blocks of a multiple of 64 columns: each column's product then takes the path through BLAS's kernels
        # that one product of all of them takes (OpenBLAS: bit for bit; other widths change the edge columns')
        step = max(64, BLOCK_BYTES // (8 * self.down.shape[0]) // 64 * 64)
        for c in range(0, N, step):
            block = _wide(self.down[:, c:c + step])
            block *= self.gain[:, None]  # G down's columns c..c+step
            for i, up in enumerate(ups):
                out[i, s:, c:c + step] = up @ block
        return out


def _packed(x: np.ndarray) -> np.ndarray:
    """``x`` as stored, where that is exact: a float32 array whose values are all bfloat16 (their low 16 bits zero,
    as a bf16 checkpoint's compact read gives them) as those values' 16 bits (uint16: half the bytes, widened back
    exactly by :func:`_wide`); any other array as it is."""
    if x.dtype != np.float32:
        return x
    bits = np.ascontiguousarray(x).view(np.uint32).reshape(-1)
    step = 1 << 18  # values at a time: 1 MiB temporaries
    if any(np.any(bits[i:i + step] & 0xFFFF) for i in range(0, bits.size, step)):
        return x
    out = np.empty(bits.size, dtype=np.uint16)
    for i in range(0, bits.size, step):
        out[i:i + step] = bits[i:i + step] >> 16
    return out.reshape(x.shape)


def _float32(x: np.ndarray) -> np.ndarray:
    """A packed array (:func:`_packed`) as float32; any other array as it is."""
    return (x.astype(np.uint32) << 16).view(np.float32) if x.dtype == np.uint16 else x


def _wide(x: np.ndarray) -> np.ndarray:
    """A factor's values as float64 (a packed one's through float32: exact)."""
    return _float32(x).astype(np.float64)


def _read_parts(read_part, count: int, width: int, whole: bool) -> np.ndarray:
    """Items 0..count-1 (heads or rows of ``width`` values each) stacked, ``read_part(a, b)`` giving items a..b-1
    compact: in parts of about PART_BYTES as float32 (one part where ``whole``: the tensor is read once), each packed
    (:func:`_packed`) before the next is read, so that reading holds the factor as stored and one part."""
    step = count if whole else max(1, PART_BYTES // (4 * max(1, width)))
    out = None
    for a in range(0, count, step):
        b = min(count, a + step)
        part = _packed(np.asarray(read_part(a, b)))
        if out is None:
            out = np.empty((count, *part.shape[1:]), dtype=part.dtype)
        elif part.dtype != out.dtype:  # bf16 values in some parts only (a float32 tensor): float32 throughout
            out, part = _float32(out), _float32(part)
        out[a:b] = part
    return out
