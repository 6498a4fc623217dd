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


def latent_qk(layout, names: dict[str, str], read, read_rows) -> tuple[np.ndarray, np.ndarray]:
    """W_Q, W_K (H, n, N) float64 of one layer, rows [rope | nope] per head, the latents' gains folded in.
    ``read(name)``, ``read_rows(name, ranges)``: the checkpoint's readers (compact arrays)."""
    lat, H, N, offset = layout.spec.latent, layout.n_heads, layout.d_model, layout.spec.gain_offset
    kvr, nope, rope = lat.size("kv_lora_rank"), lat.size("qk_nope_head_dim"), lat.size("qk_rope_head_dim")

    def f64(name):
        return np.asarray(read(name), dtype=np.float64)

    order = np.r_[nope:nope + rope, 0:nope]  # a head's [nope | rope] rows as [rope | nope]
    if "q" in names:
        W_Q = np.ascontiguousarray(f64(names["q"]).reshape(H, nope + rope, N)[:, order])
    else:  # the product written once, in its final row order (one (H, n, N) float64 array at the peak)
        down = (offset + f64(names["q_a_norm"]))[:, None] * f64(names["q_a"])  # G_qa W_qa
        W_Q = np.matmul(f64(names["q_b"]).reshape(H, nope + rope, -1)[:, order], down)
    kv_a = f64(names["kv_a"])
    latent = (offset + f64(names["kv_a_norm"]))[:, None] * kv_a[:kvr]  # G_kva W_kva's latent rows
    up = np.asarray(read_rows(names["kv_b"], key_rows(lat, H)), dtype=np.float64).reshape(H, nope, kvr)
    W_K = np.empty((H, rope + nope, N))
    W_K[:, :rope] = kv_a[kvr:]  # the rotary key, shared by every head
    np.matmul(up, latent, out=W_K[:, rope:])
    return W_Q, W_K
