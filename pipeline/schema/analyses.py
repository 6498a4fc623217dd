"""The profiles group's values at d = 0 beyond the profile (head statistics, spectrum of S, the three spectra of T and
L, their checksums) and the fields that tag a random baseline's row: the analyses' part of the schema.

``pipeline.schema`` imports every name here and is where readers and writers take them from; this module keeps
``schema.py`` under 500 lines and imports nothing of the project, so there is no cycle. docs/architecture.md's store
contract describes the same variables.

**Statistics** (``STATISTICS_DATA``, optional: a store without them opens, and its models read "statistics not
computed" with their own command): per head at d = 0, the ``STATISTICS`` and the eigenvalues of S (``spectrum``).

**Spectra** (``SPECTRA_DATA``, optional in the same way: "spectra of T and L not computed"): per head at d = 0, the
singular values of T (``antisym_spectrum``), the absolute eigenvalues of L (``eig_abs``) and the singular values of L
(``singular_values``), each decreasing, scaled to ||L||_F = 1 and NaN-padded like ``spectrum``. float64, like
``spectrum``: the values are the computation's, not rounded (float32 would move them by up to 6e-8 of the largest),
and the committed store holds them for its computed models and their baselines within its 30 MB budget. They have
their own checksum, ``spectra_checksum``: ``statistics_checksum`` keeps its meaning (the statistics of a store written
before the spectra still verify), and a layer is done at d = 0 only with both, so the model's own command, without
--force, adds the spectra to a store that lacks them, as it adds missing statistics.

**Baselines** (``BASELINE_STATE``): a random baseline is a model row of its own, whose ``baseline_of`` names the model
it is the baseline of ("" for a trained model), ``baseline_kind`` is one of ``BASELINE_KINDS`` and ``baseline_seed``
its seed; :func:`trained_and_baselines` keeps the two kinds of rows apart.
"""

from __future__ import annotations

import hashlib

import numpy as np

# The per-head statistics at d = 0 (pipeline.profile.statistics), in the order of the ``statistic`` coordinate.
STATISTICS = ("symmetric_energy", "n_pos", "n_neg", "n_zero", "balance", "pairing", "rho", "pairing_bound",
              "pairing_gap", "lobe_departure", "b_sym", "c_sym", "d_sym", "trace_ratio", "participation_ratio",
              "stable_rank", "leading_share")
SPECTRA = ("antisym_spectrum", "eig_abs", "singular_values")
# Optional data variables of the profiles group (a store may lack them), written with each layer by every profiles
# run: name -> (dims, dtype, fill value). Coordinates: ``statistic`` (STATISTICS) and ``eigen`` (0 .. E-1, E >=
# 2 * d_head of every model registered since the variables were added).
STATISTICS_DATA = {
    "head_statistics": (("model", "layer", "head", "statistic"), "float64", np.nan),
    "spectrum": (("model", "layer", "head", "eigen"), "float64", np.nan),
    "statistics_checksum": (("model", "layer"), "str", ""),
}
SPECTRA_DATA = {**{name: (("model", "layer", "head", "eigen"), "float64", np.nan) for name in SPECTRA},
                "spectra_checksum": (("model", "layer"), "str", "")}
# The (model, layer) checksums of the optional values, and the ModelRow count each gives (layers with them).
CHECKSUMS = {"statistics_checksum": "statistics_layers", "spectra_checksum": "spectra_layers"}

BASELINE_KINDS = ("iid", "init")
# What a baseline's row records beside a trained model's fields: name -> (type, default).
BASELINE_STATE = {"baseline_of": ("str", ""), "baseline_kind": ("str", ""), "baseline_seed": ("int", 0)}
# Their per-model variables where the dtype is not the row's default (a seed may need 64 bits).
BASELINE_DATA = {"baseline_seed": (("model",), "int64", 0)}

_END = "NaN past k and past the model's 2n (eigen = the store's largest 2n); NaN where L = 0"
ANALYSES_ATTRS = {
    "head_statistics": "per head at d = 0, statistic = " + ", ".join(STATISTICS) + ". S, T as for profile; "
    "lambda = the k = min(N, 2n) eigenvalues of S on the span of W_K^T and W_Q^T (|lambda| <= 1e-10 set to 0, as for "
    "the profile), lambda_+/- as for profile, zero-padded to k; h = singular values of L. symmetric_energy = "
    "||S||^2 = 1 - a; n_pos, n_neg, n_zero = counts of lambda > c, < -c, and the rest, c = 1e-9 max|lambda|; "
    "balance = 1 - |n_pos - n_neg| / (n_pos + n_neg); pairing = 1 - ||lambda_+ - lambda_-|| / ||S||; rho = "
    "||lambda_-|| / ||lambda_+||; pairing_bound = 1 - |1 - rho| / sqrt(1 + rho^2); pairing_gap = pairing_bound - "
    "pairing; lobe_departure = ||lambda_- - rho lambda_+|| / ||lambda_-||; b_sym, c_sym, d_sym = (b, c, d) / "
    "(b + c + d) (= / (1 - a)); trace_ratio = |tr L| / ||L||; participation_ratio = (sum h^2)^2 / sum h^4; "
    "stable_rank = sum h^2 / h_1^2; leading_share = h_1^2 / sum h^2. A statistic whose denominator is zero is "
    "NaN: S = 0 (a = 1) makes balance, pairing, rho, pairing_bound, pairing_gap, lobe_departure and "
    "b/c/d_sym NaN; lambda_+ = 0 makes rho, pairing_bound, pairing_gap and lobe_departure NaN; lambda_- = 0 gives "
    "rho = 0, pairing_bound = 0 and lobe_departure NaN; L = 0 makes every statistic NaN. NaN where the layer's "
    "statistics are not computed",
    "spectrum": "eigenvalues of S (||L||_F = 1) at d = 0, decreasing: the k = min(N, 2n) eigenvalues of the "
    "head's span, " + _END,
    "statistics_checksum": "sha256 (hex) of head_statistics[model, layer, :n_heads] then spectrum[model, layer, "
    ":n_heads, :2 d_head] as little-endian float64 bytes in C order, written with the layer; '' = the layer's "
    "statistics are not computed (layer_checksum covers profile and norm alone, so stores written before the "
    "statistics stay valid)",
    "antisym_spectrum": "singular values of T = (L - L^T) / 2 (||L||_F = 1) at d = 0, decreasing, in equal pairs: "
    "the k = min(N, 2n) of the head's span, " + _END,
    "eig_abs": "absolute eigenvalues of L (||L||_F = 1) at d = 0, decreasing: the k of the head's span, of which "
    "k - min(n, k) are zero, " + _END,
    "singular_values": "singular values of L (||L||_F = 1) at d = 0, decreasing: the k of the head's span, of "
    "which k - min(n, k) are zero, " + _END,
    "spectra_checksum": "sha256 (hex) of antisym_spectrum, eig_abs, singular_values [model, layer, :n_heads, "
    ":2 d_head] in that order as little-endian float64 bytes in C order, written with the layer; '' = the layer's "
    "spectra are not computed (the layer then counts as not done at d = 0: the model's own command adds them; "
    "statistics_checksum does not cover them, so stores written before the spectra keep valid statistics)",
    "baseline": "baseline_of = the model a random baseline's row is the baseline of ('' for a trained model); "
    "baseline_kind = iid (W_Q, W_K with i.i.d. standard normal entries at the model's shape) or init (the "
    "transformers model class's own _init_weights, each attention module reseeded); baseline_seed = its seed",
}


def sha256_of(arrays) -> str:
    """sha256 (hex) of the arrays one after the other, as little-endian float64 bytes in C order."""
    h = hashlib.sha256()
    for x in arrays:
        h.update(np.ascontiguousarray(x, dtype="<f8").tobytes())
    return h.hexdigest()


def statistics_checksum(statistics: np.ndarray, spectrum: np.ndarray) -> str:
    """The checksum stored with a layer's statistics: sha256 of its (n_heads, 17) statistics and its
    (n_heads, 2 d_head) spectrum (the model's own columns, so growing ``eigen`` later keeps it)."""
    return sha256_of((statistics, spectrum))


def spectra_checksum(spectra: np.ndarray) -> str:
    """The checksum stored with a layer's spectra: sha256 of its (3, n_heads, 2 d_head) spectra, in ``SPECTRA``
    order (the model's own columns, so growing ``eigen`` later keeps it)."""
    return sha256_of((spectra,))


class AnalysesRowMethods:
    """What a ``pipeline.schema.ModelRow`` knows of its spectra and of being a baseline (one of its bases)."""

    @property
    def spectra_computed(self) -> bool:
        """Every written layer has its three spectra (``SPECTRA``; False where a layer lacks them)."""
        return self.computed and self.spectra_layers >= self.layers_done

    @property
    def spectra_note(self) -> str:
        """'' when the spectra are there (or nothing is computed); else what readers show: the model's own command
        adds them, as it adds missing statistics (``ModelRow.statistics_command``)."""
        if not self.computed or self.spectra_computed:
            return ""
        return f"spectra of T and L not computed; add them with `{self.statistics_command}`"

    @property
    def is_baseline(self) -> bool:
        """A random baseline's row (``baseline_of`` names its model)."""
        return bool(self.baseline_of)


def trained_and_baselines(rows: list) -> tuple[list, list]:
    """The rows of trained models and those of random baselines (``baseline_of`` set), each in store order."""
    return [r for r in rows if not r.baseline_of], [r for r in rows if r.baseline_of]


def baselines_of(rows: list, name: str) -> list:
    """The baseline rows of model ``name``: library initialisation first, then i.i.d., each by seed."""
    order = {kind: i for i, kind in enumerate(("init", "iid"))}
    found = [r for r in rows if r.baseline_of == name]
    return sorted(found, key=lambda r: (order.get(r.baseline_kind, len(order)), r.baseline_seed, r.name))
