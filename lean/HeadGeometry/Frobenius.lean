import Mathlib

/-!
# Symmetric and antisymmetric parts: Frobenius orthogonality

For a real square matrix `L` let `S = (L + Lᵀ) / 2` and `T = (L - Lᵀ) / 2`. Then `L = S + T`,
`Sᵀ = S`, `Tᵀ = -T`, and the squared Frobenius norm splits:

  `‖L‖_F² = ‖S‖_F² + ‖T‖_F²`.

Entrywise, `S i j ^ 2 + T i j ^ 2 = L i j ^ 2 / 2 + L j i ^ 2 / 2`, and summing the second term
over all `i j` gives the same as the first (swap the two sums).

## Main statements

* `symPart_add_antisymPart`, `transpose_symPart`, `transpose_antisymPart`.
* `frobSq_eq_frobSq_symPart_add_frobSq_antisymPart`: the Frobenius orthogonality.
* `frobSq_eq_zero_iff`, `symPart_eq_zero_iff` (`S = 0 ↔ Lᵀ = -L`),
  `antisymPart_eq_zero_iff` (`T = 0 ↔ Lᵀ = L`).
-/

open scoped BigOperators Matrix

noncomputable section

namespace HeadGeometry

variable {n : Type*} [Fintype n]

/-- The squared Frobenius norm `‖A‖_F² = ∑ i j, A i j ^ 2`. -/
def frobSq (A : Matrix n n ℝ) : ℝ :=
  ∑ i, ∑ j, A i j ^ 2

/-- The symmetric part `S = (L + Lᵀ) / 2`. -/
def symPart (L : Matrix n n ℝ) : Matrix n n ℝ :=
  Matrix.of fun i j => (L i j + L j i) / 2

/-- The antisymmetric part `T = (L - Lᵀ) / 2`. -/
def antisymPart (L : Matrix n n ℝ) : Matrix n n ℝ :=
  Matrix.of fun i j => (L i j - L j i) / 2

@[simp]
theorem symPart_apply (L : Matrix n n ℝ) (i j : n) : symPart L i j = (L i j + L j i) / 2 :=
  rfl

@[simp]
theorem antisymPart_apply (L : Matrix n n ℝ) (i j : n) :
    antisymPart L i j = (L i j - L j i) / 2 :=
  rfl

/-! ### The parts as matrices -/

theorem symPart_eq (L : Matrix n n ℝ) : symPart L = (2 : ℝ)⁻¹ • (L + Lᵀ) := by
  ext i j
  rw [symPart_apply, Matrix.smul_apply, Matrix.add_apply, Matrix.transpose_apply, smul_eq_mul]
  ring

theorem antisymPart_eq (L : Matrix n n ℝ) : antisymPart L = (2 : ℝ)⁻¹ • (L - Lᵀ) := by
  ext i j
  rw [antisymPart_apply, Matrix.smul_apply, Matrix.sub_apply, Matrix.transpose_apply, smul_eq_mul]
  ring

theorem symPart_add_antisymPart (L : Matrix n n ℝ) : symPart L + antisymPart L = L := by
  ext i j
  rw [Matrix.add_apply, symPart_apply, antisymPart_apply]
  ring

theorem transpose_symPart (L : Matrix n n ℝ) : (symPart L)ᵀ = symPart L := by
  ext i j
  rw [Matrix.transpose_apply, symPart_apply, symPart_apply]
  ring

theorem transpose_antisymPart (L : Matrix n n ℝ) : (antisymPart L)ᵀ = -antisymPart L := by
  ext i j
  rw [Matrix.transpose_apply, Matrix.neg_apply, antisymPart_apply, antisymPart_apply]
  ring

/-! ### Double sums -/

theorem sum_sum_add (f g : n → n → ℝ) :
    ∑ i, ∑ j, (f i j + g i j) = ∑ i, ∑ j, f i j + ∑ i, ∑ j, g i j := by
  simp only [Finset.sum_add_distrib]

theorem sum_sum_swap (f : n → n → ℝ) : ∑ i, ∑ j, f j i = ∑ i, ∑ j, f i j :=
  Finset.sum_comm

/-- A sum of nonnegative reals over a finite type vanishes exactly when every term does. -/
theorem sum_eq_zero_iff_forall_eq_zero {ι : Type*} [Fintype ι] (f : ι → ℝ)
    (hf : ∀ i, 0 ≤ f i) : ∑ i, f i = 0 ↔ ∀ i, f i = 0 := by
  constructor
  · intro h i
    exact (Finset.sum_eq_zero_iff_of_nonneg fun j _ => hf j).mp h i (Finset.mem_univ i)
  · intro h
    exact Finset.sum_eq_zero fun i _ => h i

/-! ### Frobenius orthogonality -/

/-- Entrywise: `S i j ^ 2 + T i j ^ 2 = L i j ^ 2 / 2 + L j i ^ 2 / 2`. -/
theorem symPart_sq_add_antisymPart_sq (L : Matrix n n ℝ) (i j : n) :
    symPart L i j ^ 2 + antisymPart L i j ^ 2 = L i j ^ 2 / 2 + L j i ^ 2 / 2 := by
  rw [symPart_apply, antisymPart_apply]
  ring

/-- `‖L‖_F² = ‖S‖_F² + ‖T‖_F²`. -/
theorem frobSq_eq_frobSq_symPart_add_frobSq_antisymPart (L : Matrix n n ℝ) :
    frobSq L = frobSq (symPart L) + frobSq (antisymPart L) := by
  have hswap : ∑ i, ∑ j, L j i ^ 2 / 2 = ∑ i, ∑ j, L i j ^ 2 / 2 :=
    sum_sum_swap fun i j => L i j ^ 2 / 2
  calc frobSq L
      = ∑ i, ∑ j, L i j ^ 2 / 2 + ∑ i, ∑ j, L i j ^ 2 / 2 := by
        unfold frobSq
        rw [← sum_sum_add]
        exact Finset.sum_congr rfl fun i _ => Finset.sum_congr rfl fun j _ => by ring
    _ = ∑ i, ∑ j, L i j ^ 2 / 2 + ∑ i, ∑ j, L j i ^ 2 / 2 := by
        rw [hswap]
    _ = ∑ i, ∑ j, (symPart L i j ^ 2 + antisymPart L i j ^ 2) := by
        rw [← sum_sum_add]
        exact Finset.sum_congr rfl fun i _ => Finset.sum_congr rfl fun j _ =>
          (symPart_sq_add_antisymPart_sq L i j).symm
    _ = frobSq (symPart L) + frobSq (antisymPart L) :=
        sum_sum_add (fun i j => symPart L i j ^ 2) (fun i j => antisymPart L i j ^ 2)

/-! ### Vanishing -/

theorem frobSq_nonneg (A : Matrix n n ℝ) : 0 ≤ frobSq A := by
  unfold frobSq
  exact Finset.sum_nonneg fun i _ => Finset.sum_nonneg fun j _ => sq_nonneg (A i j)

theorem frobSq_eq_zero_iff (A : Matrix n n ℝ) : frobSq A = 0 ↔ A = 0 := by
  have hrow : ∀ i, 0 ≤ ∑ j, A i j ^ 2 := fun i =>
    Finset.sum_nonneg fun j _ => sq_nonneg (A i j)
  constructor
  · intro h
    have hrows := (sum_eq_zero_iff_forall_eq_zero (fun i => ∑ j, A i j ^ 2) hrow).mp h
    ext i j
    have hij := (sum_eq_zero_iff_forall_eq_zero (fun j => A i j ^ 2)
      fun j => sq_nonneg (A i j)).mp (hrows i) j
    rw [Matrix.zero_apply]
    exact mul_self_eq_zero.mp (by rw [← pow_two]; exact hij)
  · intro h
    rw [h]
    unfold frobSq
    simp only [Matrix.zero_apply, pow_two, mul_zero, Finset.sum_const_zero]

/-- `S = 0` exactly when `L` is antisymmetric. -/
theorem symPart_eq_zero_iff (L : Matrix n n ℝ) : symPart L = 0 ↔ Lᵀ = -L := by
  constructor
  · intro h
    ext i j
    have hji : symPart L j i = 0 := by rw [h, Matrix.zero_apply]
    rw [symPart_apply] at hji
    rw [Matrix.transpose_apply, Matrix.neg_apply]
    linarith
  · intro h
    ext i j
    have hij : Lᵀ i j = (-L) i j := by rw [h]
    rw [Matrix.transpose_apply, Matrix.neg_apply] at hij
    rw [symPart_apply, Matrix.zero_apply]
    linarith

/-- `T = 0` exactly when `L` is symmetric. -/
theorem antisymPart_eq_zero_iff (L : Matrix n n ℝ) : antisymPart L = 0 ↔ Lᵀ = L := by
  constructor
  · intro h
    ext i j
    have hji : antisymPart L j i = 0 := by rw [h, Matrix.zero_apply]
    rw [antisymPart_apply] at hji
    rw [Matrix.transpose_apply]
    linarith
  · intro h
    ext i j
    have hij : Lᵀ i j = L i j := by rw [h]
    rw [Matrix.transpose_apply] at hij
    rw [antisymPart_apply, Matrix.zero_apply]
    linarith

end HeadGeometry

end
