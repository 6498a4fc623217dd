import Mathlib

/-!
# The coordinatewise identity behind the profile

For two reals `p q`,

  `p ^ 2 + q ^ 2 = 2 * p * q + (max (p - q) 0) ^ 2 + (max (q - p) 0) ^ 2`.

We call `2 * p * q` the *cross term* and `max (p - q) 0`, `max (q - p) 0` the two *gaps*
(the positive and the negative part of `p - q`). With `p = λ₊ i` and `q = λ₋ i` the three terms
on the right are the `i`-th summands of the profile coordinates `b`, `c` and `d`
(see `HeadGeometry.ProfileSplit`).

## Main statements

* `sq_add_sq_eq_cross_add_gaps`: the identity, for all reals.
* `cross_gaps_nonneg`: for `p q ≥ 0`, each of the three terms is `≥ 0`.
* `cross_eq_zero_and_gap_eq_zero_iff`: for `p q ≥ 0`, the cross term and the `q`-side gap
  both vanish exactly when `q = 0` (used for the vertices of the simplex).
-/

namespace HeadGeometry

/-- `p² + q² = 2pq + (p - q)₊² + (q - p)₊²` for all reals. -/
theorem sq_add_sq_eq_cross_add_gaps (p q : ℝ) :
    p ^ 2 + q ^ 2 = 2 * p * q + (max (p - q) 0) ^ 2 + (max (q - p) 0) ^ 2 := by
  rcases le_total p q with h | h
  · rw [max_eq_right (sub_nonpos.mpr h), max_eq_left (sub_nonneg.mpr h)]
    ring
  · rw [max_eq_left (sub_nonneg.mpr h), max_eq_right (sub_nonpos.mpr h)]
    ring

/-- For `p q ≥ 0` the cross term and both squared gaps are nonnegative. -/
theorem cross_gaps_nonneg {p q : ℝ} (hp : 0 ≤ p) (hq : 0 ≤ q) :
    0 ≤ 2 * p * q ∧ 0 ≤ (max (p - q) 0) ^ 2 ∧ 0 ≤ (max (q - p) 0) ^ 2 :=
  ⟨mul_nonneg (mul_nonneg zero_le_two hp) hq, sq_nonneg _, sq_nonneg _⟩

/-- For `p q ≥ 0`: `p * q = 0` and `(q - p)₊ ^ 2 = 0` together hold exactly when `q = 0`. -/
theorem cross_eq_zero_and_gap_eq_zero_iff {p q : ℝ} (hp : 0 ≤ p) (hq : 0 ≤ q) :
    (p * q = 0 ∧ (max (q - p) 0) ^ 2 = 0) ↔ q = 0 := by
  constructor
  · rintro ⟨hpq, hgap⟩
    have hmax : max (q - p) 0 = 0 := mul_self_eq_zero.mp (by rw [← pow_two]; exact hgap)
    have hqp : q - p ≤ 0 := le_trans (le_max_left (q - p) 0) (le_of_eq hmax)
    rcases mul_eq_zero.mp hpq with hp0 | hq0
    · exact le_antisymm (by linarith) hq
    · exact hq0
  · intro hq0
    have hmax : max (q - p) 0 = 0 := max_eq_right (by linarith)
    exact ⟨by rw [hq0, mul_zero], by rw [hmax, pow_two, mul_zero]⟩

end HeadGeometry
