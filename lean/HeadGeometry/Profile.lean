import HeadGeometry.ProfileSplit
import HeadGeometry.Frobenius

/-!
# The profile `(a, b, c, d)`: nonnegative, summing to `‖L‖_F²`, and its vertices

For a real square matrix `L` with symmetric part `S` and antisymmetric part `T`, the profile is

* `a = ‖T‖_F²`,
* `b = 2 ⟨λ₊, λ₋⟩`, `c = ‖(λ₊ - λ₋)₊‖²`, `d = ‖(λ₊ - λ₋)₋‖²`,

where `λ₊` are the positive eigenvalues of `S` and `λ₋` the absolute values of its negative ones,
zero-padded to a common length `k`. The pipeline divides by `‖L‖_F²` to land on the 3-simplex.

The only spectral fact used is `‖λ₊‖² + ‖λ₋‖² = ‖S‖_F²` (the eigenvalues of `S` are the entries
of `λ₊`, the negated entries of `λ₋` and zeros, and `‖S‖_F² = tr S² = ∑ μ²`). It is taken as the
hypothesis `IsSpectralSplit`, together with the nonnegativity of the entries; the ordering of
`λ₊` and `λ₋` plays no role in any statement below.

## Main statements

* `profile_nonneg`: `a, b, c, d ≥ 0`.
* `profile_sum`: `a + b + c + d = ‖L‖_F²`; `normalized_profile_sum`: the scaled profile sums to 1.
* `profileA_eq_frobSq_iff`: `a = ‖L‖_F²` exactly when `L` is antisymmetric.
* `profileC_eq_frobSq_iff`: `c = ‖L‖_F²` exactly when `T = 0` and `λ₋ = 0`
  (`L` symmetric positive semidefinite).
* `profileD_eq_frobSq_iff`: `d = ‖L‖_F²` exactly when `T = 0` and `λ₊ = 0`
  (`L` symmetric negative semidefinite).
-/

open scoped BigOperators Matrix

noncomputable section

namespace HeadGeometry

variable {n : Type*} [Fintype n] {k : ℕ}

/-- `a = ‖T‖_F²`. -/
def profileA (L : Matrix n n ℝ) : ℝ :=
  frobSq (antisymPart L)

/-- Vertex `a`: `a = ‖L‖_F²` exactly when `L` is antisymmetric. -/
theorem profileA_eq_frobSq_iff (L : Matrix n n ℝ) : profileA L = frobSq L ↔ Lᵀ = -L := by
  have horth := frobSq_eq_frobSq_symPart_add_frobSq_antisymPart L
  have hS := frobSq_eq_zero_iff (symPart L)
  have hanti := symPart_eq_zero_iff L
  unfold profileA
  constructor
  · intro ha
    exact hanti.mp (hS.mp (by linarith))
  · intro hL
    have hS0 : frobSq (symPart L) = 0 := hS.mpr (hanti.mpr hL)
    linarith

/-- `λ₊ λ₋ : Fin k → ℝ` split the spectrum of the symmetric part of `L`: nonnegative entries and
`‖λ₊‖² + ‖λ₋‖² = ‖S‖_F²` (the sum of the squared eigenvalues of `S`). -/
structure IsSpectralSplit (L : Matrix n n ℝ) (lp ln : Fin k → ℝ) : Prop where
  pos_nonneg : ∀ i, 0 ≤ lp i
  neg_nonneg : ∀ i, 0 ≤ ln i
  sqNorm_add_sqNorm : ∑ i, lp i ^ 2 + ∑ i, ln i ^ 2 = frobSq (symPart L)

variable {L : Matrix n n ℝ} {lp ln : Fin k → ℝ}

/-- The hypothesis is symmetric in `λ₊` and `λ₋`. -/
theorem IsSpectralSplit.swap (h : IsSpectralSplit L lp ln) : IsSpectralSplit L ln lp :=
  ⟨h.neg_nonneg, h.pos_nonneg, (add_comm _ _).trans h.sqNorm_add_sqNorm⟩

theorem profile_nonneg (h : IsSpectralSplit L lp ln) :
    0 ≤ profileA L ∧ 0 ≤ profileB lp ln ∧ 0 ≤ profileC lp ln ∧ 0 ≤ profileD lp ln :=
  ⟨frobSq_nonneg (antisymPart L), profileB_nonneg h.pos_nonneg h.neg_nonneg, profileC_nonneg lp ln,
    profileD_nonneg lp ln⟩

/-- `a + b + c + d = ‖L‖_F²`. -/
theorem profile_sum (h : IsSpectralSplit L lp ln) :
    profileA L + profileB lp ln + profileC lp ln + profileD lp ln = frobSq L := by
  have hsplit := sqNorm_add_sqNorm_eq_profileB_add_profileC_add_profileD lp ln
  have horth := frobSq_eq_frobSq_symPart_add_frobSq_antisymPart L
  have hspec := h.sqNorm_add_sqNorm
  unfold profileA
  linarith

/-- Scaled by `‖L‖_F²`, the profile sums to `1`: a point of the 3-simplex. -/
theorem normalized_profile_sum (h : IsSpectralSplit L lp ln) (hL : frobSq L ≠ 0) :
    profileA L / frobSq L + profileB lp ln / frobSq L + profileC lp ln / frobSq L +
      profileD lp ln / frobSq L = 1 := by
  rw [← add_div, ← add_div, ← add_div, profile_sum h, div_self hL]

/-- Vertex `c`: `c = ‖L‖_F²` exactly when `T = 0` and `λ₋ = 0`, i.e. `L` is symmetric and
positive semidefinite. -/
theorem profileC_eq_frobSq_iff (h : IsSpectralSplit L lp ln) :
    profileC lp ln = frobSq L ↔ antisymPart L = 0 ∧ ∀ i, ln i = 0 := by
  have hsum := profile_sum h
  have hA := frobSq_nonneg (antisymPart L)
  have hB := profileB_nonneg h.pos_nonneg h.neg_nonneg
  have hD := profileD_nonneg lp ln
  have hT := frobSq_eq_zero_iff (antisymPart L)
  have hBD := profileB_eq_zero_and_profileD_eq_zero_iff h.pos_nonneg h.neg_nonneg
  unfold profileA at hsum
  constructor
  · intro hC
    have hA0 : frobSq (antisymPart L) = 0 := le_antisymm (by linarith) hA
    have hB0 : profileB lp ln = 0 := le_antisymm (by linarith) hB
    have hD0 : profileD lp ln = 0 := le_antisymm (by linarith) hD
    exact ⟨hT.mp hA0, hBD.mp ⟨hB0, hD0⟩⟩
  · rintro ⟨hT0, hneg⟩
    have hA0 : frobSq (antisymPart L) = 0 := hT.mpr hT0
    have hBD0 := hBD.mpr hneg
    linarith [hBD0.1, hBD0.2]

/-- Vertex `d`: `d = ‖L‖_F²` exactly when `T = 0` and `λ₊ = 0`, i.e. `L` is symmetric and
negative semidefinite. -/
theorem profileD_eq_frobSq_iff (h : IsSpectralSplit L lp ln) :
    profileD lp ln = frobSq L ↔ antisymPart L = 0 ∧ ∀ i, lp i = 0 := by
  rw [profileD_eq_profileC_swap]
  exact profileC_eq_frobSq_iff h.swap

end HeadGeometry

end
