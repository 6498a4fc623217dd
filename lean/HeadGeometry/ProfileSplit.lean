import HeadGeometry.Coordinatewise

/-!
# Splitting `‖λ₊‖² + ‖λ₋‖²` into the profile coordinates `b`, `c`, `d`

Let `λ₊ λ₋ : Fin k → ℝ` be the positive eigenvalues of the symmetric part `S` and the absolute
values of its negative eigenvalues, zero-padded to a common length `k` (sorted decreasingly in the
pipeline; nothing here depends on the order). The profile uses

* `b = 2 ⟨λ₊, λ₋⟩`,
* `c = ‖(λ₊ - λ₋)₊‖²`,
* `d = ‖(λ₊ - λ₋)₋‖²`, where the negative part of `x` is `max (-x) 0`.

## Main statements

* `sqNorm_add_sqNorm_eq_profileB_add_profileC_add_profileD`:
  `‖λ₊‖² + ‖λ₋‖² = b + c + d` (summing `sq_add_sq_eq_cross_add_gaps` over the coordinates).
* `profileB_nonneg`, `profileC_nonneg`, `profileD_nonneg`: `b, c, d ≥ 0` for nonnegative entries.
* `profileB_eq_zero_and_profileD_eq_zero_iff`: with nonnegative entries, `b = d = 0` exactly when
  `λ₋ = 0`.
-/

open scoped BigOperators

noncomputable section

namespace HeadGeometry

variable {k : ℕ}

/-- `b = 2 ⟨λ₊, λ₋⟩`. -/
def profileB (lp ln : Fin k → ℝ) : ℝ :=
  2 * ∑ i, lp i * ln i

/-- `c = ‖(λ₊ - λ₋)₊‖²`. -/
def profileC (lp ln : Fin k → ℝ) : ℝ :=
  ∑ i, (max (lp i - ln i) 0) ^ 2

/-- `d = ‖(λ₊ - λ₋)₋‖²`; the negative part of `λ₊ i - λ₋ i` is `max (λ₋ i - λ₊ i) 0`. -/
def profileD (lp ln : Fin k → ℝ) : ℝ :=
  ∑ i, (max (ln i - lp i) 0) ^ 2

/-- `d` is `c` with the roles of `λ₊` and `λ₋` exchanged. -/
theorem profileD_eq_profileC_swap (lp ln : Fin k → ℝ) : profileD lp ln = profileC ln lp :=
  rfl

/-- `‖λ₊‖² + ‖λ₋‖² = b + c + d`, for any real vectors. -/
theorem sqNorm_add_sqNorm_eq_profileB_add_profileC_add_profileD (lp ln : Fin k → ℝ) :
    ∑ i, lp i ^ 2 + ∑ i, ln i ^ 2 = profileB lp ln + profileC lp ln + profileD lp ln := by
  unfold profileB profileC profileD
  rw [Finset.mul_sum, ← Finset.sum_add_distrib, ← Finset.sum_add_distrib,
    ← Finset.sum_add_distrib]
  refine Finset.sum_congr rfl fun i _ => ?_
  linear_combination sq_add_sq_eq_cross_add_gaps (lp i) (ln i)

theorem profileB_nonneg {lp ln : Fin k → ℝ} (hp : ∀ i, 0 ≤ lp i) (hn : ∀ i, 0 ≤ ln i) :
    0 ≤ profileB lp ln := by
  unfold profileB
  exact mul_nonneg zero_le_two (Finset.sum_nonneg fun i _ => mul_nonneg (hp i) (hn i))

theorem profileC_nonneg (lp ln : Fin k → ℝ) : 0 ≤ profileC lp ln := by
  unfold profileC
  exact Finset.sum_nonneg fun i _ => sq_nonneg (max (lp i - ln i) 0)

theorem profileD_nonneg (lp ln : Fin k → ℝ) : 0 ≤ profileD lp ln := by
  unfold profileD
  exact Finset.sum_nonneg fun i _ => sq_nonneg (max (ln i - lp i) 0)

/-- With nonnegative entries, `b = 0` and `d = 0` together hold exactly when `λ₋ = 0`. -/
theorem profileB_eq_zero_and_profileD_eq_zero_iff {lp ln : Fin k → ℝ} (hp : ∀ i, 0 ≤ lp i)
    (hn : ∀ i, 0 ≤ ln i) : (profileB lp ln = 0 ∧ profileD lp ln = 0) ↔ ∀ i, ln i = 0 := by
  unfold profileB profileD
  constructor
  · rintro ⟨hb, hd⟩ i
    have hdot : ∑ j, lp j * ln j = 0 := by linarith
    have hcross := (Finset.sum_eq_zero_iff_of_nonneg fun j _ => mul_nonneg (hp j) (hn j)).mp hdot
    have hgap := (Finset.sum_eq_zero_iff_of_nonneg fun j _ =>
      sq_nonneg (max (ln j - lp j) 0)).mp hd
    exact (cross_eq_zero_and_gap_eq_zero_iff (hp i) (hn i)).mp
      ⟨hcross i (Finset.mem_univ i), hgap i (Finset.mem_univ i)⟩
  · intro h0
    have hterms : ∀ j, lp j * ln j = 0 ∧ (max (ln j - lp j) 0) ^ 2 = 0 := fun j =>
      (cross_eq_zero_and_gap_eq_zero_iff (hp j) (hn j)).mpr (h0 j)
    have hdot : ∑ j, lp j * ln j = 0 := Finset.sum_eq_zero fun j _ => (hterms j).1
    refine ⟨?_, Finset.sum_eq_zero fun j _ => (hterms j).2⟩
    rw [hdot, mul_zero]

end HeadGeometry

end
