"""R(d) and the convention score(i, j) = x_j^T L(i - j) x_i, checked against transformers' own rotary code."""

import numpy as np
import pytest
import torch
from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb as neox_apply
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as llama_apply

from pipeline.families.rotary import inverse_frequencies, rotation_matrices
from pipeline.profile import head_profiles


def transformers_scores(W_Q, W_K, X, rotary_dim, base, apply):
    """Pre-softmax q.k scores with transformers' apply_rotary_pos_emb, float64 angles.

    W_Q, W_K: (n, N); X: (T, N) hidden states. Returns (T, T) with [i, j] = query i, key j.
    """
    T = X.shape[0]
    q = torch.from_numpy(X @ W_Q.T)[None, None]  # (1, 1, T, n)
    k = torch.from_numpy(X @ W_K.T)[None, None]
    inv = torch.from_numpy(inverse_frequencies(rotary_dim, base))
    freqs = torch.arange(T, dtype=torch.float64)[:, None] * inv[None]
    emb = torch.cat([freqs, freqs], dim=-1)[None]  # (1, T, rotary_dim)
    cos, sin = emb.cos(), emb.sin()
    q_rot, k_rot = q[..., :rotary_dim], k[..., :rotary_dim]
    q_rot, k_rot = apply(q_rot, k_rot, cos, sin)
    q = torch.cat([q_rot, q[..., rotary_dim:]], dim=-1)
    k = torch.cat([k_rot, k[..., rotary_dim:]], dim=-1)
    return (q @ k.transpose(-1, -2))[0, 0].numpy()


@pytest.mark.parametrize("apply, rotary_dim", [(llama_apply, 16), (neox_apply, 4)])
def test_score_equals_x_j_L_of_i_minus_j_x_i(apply, rotary_dim):
    rng = np.random.default_rng(0)
    n, N, T, base = 16, 24, 9, 10000.0
    W_Q, W_K = rng.normal(size=(n, N)), rng.normal(size=(n, N))
    X = rng.normal(size=(T, N))
    scores = transformers_scores(W_Q, W_K, X, rotary_dim, base, apply)
    R = rotation_matrices(n, rotary_dim, base, np.arange(-T + 1, T))  # offsets -(T-1)..T-1
    L = W_K.T[None] @ R @ W_Q[None]  # L[d + T - 1]
    ours = np.array([[X[j] @ L[i - j + T - 1] @ X[i] for j in range(T)] for i in range(T)])
    np.testing.assert_allclose(ours, scores, atol=1e-10, rtol=1e-10)
    # the wrong conventions really are wrong: L(j - i), or Q and K swapped
    wrong_sign = np.array([[X[j] @ L[j - i + T - 1] @ X[i] for j in range(T)] for i in range(T)])
    swapped = np.array([[X[i] @ L[i - j + T - 1] @ X[j] for j in range(T)] for i in range(T)])
    assert np.abs(wrong_sign - scores).max() > 1e-3
    assert np.abs(swapped - scores).max() > 1e-3


def test_rotary_profiles_change_if_convention_flipped():
    """Using L(-d) instead of L(d) changes rotary profiles (so the convention matters for the store)."""
    rng = np.random.default_rng(4)
    W_Q, W_K = rng.normal(size=(2, 8, 20)), rng.normal(size=(2, 8, 20))
    d = np.arange(1, 20)
    right = head_profiles(W_Q, W_K, rotation_matrices(8, 8, 100.0, d)).profile
    flipped = head_profiles(W_Q, W_K, rotation_matrices(8, 8, 100.0, -d)).profile
    assert np.abs(right - flipped).max() > 1e-3


def test_rotation_matrices_are_orthogonal_group_homomorphism():
    R = rotation_matrices(12, 8, 500.0, np.arange(-5, 6))
    eye = np.eye(12)
    for Rd in R:
        np.testing.assert_allclose(Rd.T @ Rd, eye, atol=1e-14)
    # R(a) R(b) = R(a + b); R(0) = I; the unrotated tail is the identity
    np.testing.assert_allclose(R[5], eye, atol=0)
    np.testing.assert_allclose(R[5 + 2] @ R[5 + 3], R[5 + 5], atol=1e-13)
    np.testing.assert_array_equal(R[:, 8:, 8:], np.broadcast_to(np.eye(4), (11, 4, 4)))


def test_bad_rotary_arguments():
    with pytest.raises(ValueError, match="even"):
        rotation_matrices(8, 3, 10.0, 4)
    with pytest.raises(ValueError, match="rotary_dim"):
        rotation_matrices(8, 10, 10.0, 4)
    with pytest.raises(ValueError, match="style"):
        rotation_matrices(8, 8, 10.0, 4, style="spiral")


def test_scaled_frequencies_of_each_type_and_the_unsupported_ones():
    from pipeline.families.rotary import scaled_inverse_frequencies

    plain = inverse_frequencies(16, 1e4)
    np.testing.assert_array_equal(scaled_inverse_frequencies(16, 1e4, None), plain)
    np.testing.assert_allclose(scaled_inverse_frequencies(16, 1e4, {"type": "linear", "factor": 4.0}), plain / 4)
    llama3 = scaled_inverse_frequencies(16, 1e4, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 64})
    wavelen = 2 * np.pi / plain
    np.testing.assert_array_equal(llama3[wavelen < 16], plain[wavelen < 16])  # short wavelengths kept
    np.testing.assert_allclose(llama3[wavelen > 64], plain[wavelen > 64] / 8)  # long ones divided by the factor
    mid = (wavelen >= 16) & (wavelen <= 64)
    assert mid.any() and ((llama3[mid] < plain[mid]) & (llama3[mid] > plain[mid] / 8)).all()
    with pytest.raises(ValueError, match="rope type 'dynamic' is not supported; supported: default, linear, llama3"):
        scaled_inverse_frequencies(16, 1e4, {"rope_type": "dynamic", "factor": 2.0})
