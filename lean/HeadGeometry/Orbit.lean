import Mathlib

/-!
# Heads in orbits make the layer equivariant (the "if" direction of the orbit theorem)

A self-attention layer with a finite set of heads `H` acts on an input `X : Matrix ι m R`
(column `j` is the embedding of the token at position `j`, in a token space indexed by `ι`).
Head `h` has a QK matrix `M h : Matrix ι ι R` and an OV matrix `Rv h : Matrix κ ι R`; its scores are
`Xᵀ * M h * X` (entry `(i, j)` is `x_iᵀ M x_j`, query `i`, key `j`), an arbitrary map `attn` turns
scores into weights, and the layer's output is

  `layer attn M Rv X = ∑ h, Rv h * X * attn (Xᵀ * M h * X)`.

Suppose a group `G` acts on the heads, on the input space by matrices `P g` with `(P g)ᵀ * P g = 1`
(permutation matrices, for which `(P g)⁻¹ = (P g)ᵀ`), and on the output space by any matrices
`Q g`, such that

  `M (g • h) = P g * M h * (P g)ᵀ` and `Rv (g • h) = Q g * Rv h * (P g)ᵀ`.

Then `layer attn M Rv (P g * X) = Q g * layer attn M Rv X` for every `g`, every input, and every
weight map `attn`, over any commutative ring `R`. Softmax over the keys is one such `attn`
(`keySoftmax`, over `ℝ`).

In the experiment `G = C₂₄` acts on the 24 tokens by the shifts `T_s` (`P s = T_s`, `Q s = T_{2s}`).

## Main statements

* `scores_conj`: conjugating `M` by `P` and moving the input by `P` leaves the scores unchanged.
* `layer_conj_of_equiv`: one permutation `e` of the heads with the two hypotheses.
* `layer_equivariant`: the group version.
* `permMatrix_transpose_mul`: permutation matrices satisfy `Pᵀ * P = 1`, so
  `layer_equivariant_of_perm` needs no orthogonality hypothesis.
* `softmax_layer_equivariant`: the softmax instance.
-/

open scoped BigOperators Matrix

noncomputable section

namespace HeadGeometry

variable {R : Type*} [CommRing R]
variable {H ι κ m : Type*} [Fintype H] [Fintype ι] [DecidableEq ι] [Fintype κ] [Fintype m]

/-- Scores of a head with QK matrix `M` on the input `X`: `Xᵀ * M * X` (rows are queries, columns
keys). -/
def scores (M : Matrix ι ι R) (X : Matrix ι m R) : Matrix m m R :=
  Xᵀ * M * X

/-- The layer: `∑ h, Rv h * X * attn (scores (M h) X)`. The weight map `attn` sees only the
scores of one head. -/
def layer (attn : Matrix m m R → Matrix m m R) (M : H → Matrix ι ι R) (Rv : H → Matrix κ ι R)
    (X : Matrix ι m R) : Matrix κ m R :=
  ∑ h, Rv h * X * attn (scores (M h) X)

/-- Softmax over the keys: `keySoftmax S j i` is the weight that query `i` puts on key `j`,
`exp (S i j) / ∑ j', exp (S i j')`. With it, column `i` of `layer` is
`∑ h, ∑ j, softmax_j (x_iᵀ M h x_j) • Rv h x_j`, the usual attention output at position `i`. -/
def keySoftmax (S : Matrix m m ℝ) : Matrix m m ℝ :=
  Matrix.of fun j i => Real.exp (S i j) / ∑ j', Real.exp (S i j')

/-- The permutation matrix of `σ`. -/
def permMatrix (σ : Equiv.Perm ι) : Matrix ι ι R :=
  (Equiv.toPEquiv σ).toMatrix

/-- Permutation matrices are orthogonal: `Pᵀ * P = 1`. -/
theorem permMatrix_transpose_mul (σ : Equiv.Perm ι) :
    (permMatrix σ : Matrix ι ι R)ᵀ * (permMatrix σ : Matrix ι ι R) = 1 := by
  unfold permMatrix
  rw [← PEquiv.toMatrix_symm, ← PEquiv.toMatrix_trans, ← Equiv.toPEquiv_symm,
    ← Equiv.toPEquiv_trans, Equiv.symm_trans_self, Equiv.toPEquiv_refl, PEquiv.toMatrix_refl]

/-- Moving the input by `P` and conjugating the QK matrix by `P` leaves the scores unchanged. -/
theorem scores_conj {P : Matrix ι ι R} (hP : Pᵀ * P = 1) (M : Matrix ι ι R) (X : Matrix ι m R) :
    scores (P * M * Pᵀ) (P * X) = scores M X := by
  unfold scores
  calc (P * X)ᵀ * (P * M * Pᵀ) * (P * X)
      = Xᵀ * (Pᵀ * P) * M * (Pᵀ * P) * X := by
        simp only [Matrix.transpose_mul, Matrix.mul_assoc]
    _ = Xᵀ * M * X := by
        rw [hP, Matrix.mul_one, Matrix.mul_one]

/-- One head's term, moved: with `Rv' = Q * Rv * Pᵀ` and `M' = P * M * Pᵀ`, the term of the moved
head on the moved input is `Q` times the term of the original head on the original input. -/
theorem head_term_conj {P : Matrix ι ι R} (hP : Pᵀ * P = 1) (Q : Matrix κ κ R)
    (attn : Matrix m m R → Matrix m m R) (M : Matrix ι ι R) (Rv : Matrix κ ι R)
    (X : Matrix ι m R) :
    Q * Rv * Pᵀ * (P * X) * attn (scores (P * M * Pᵀ) (P * X)) =
      Q * (Rv * X * attn (scores M X)) := by
  rw [scores_conj hP]
  calc Q * Rv * Pᵀ * (P * X) * attn (scores M X)
      = Q * (Rv * (Pᵀ * P) * X * attn (scores M X)) := by
        simp only [Matrix.mul_assoc]
    _ = Q * (Rv * X * attn (scores M X)) := by
        rw [hP, Matrix.mul_one]

/-- If a permutation `e` of the heads satisfies `M (e h) = P * M h * Pᵀ` and
`Rv (e h) = Q * Rv h * Pᵀ` with `Pᵀ * P = 1`, the layer commutes with the action:
`layer (P * X) = Q * layer X`. -/
theorem layer_conj_of_equiv (e : H ≃ H) {P : Matrix ι ι R} (hP : Pᵀ * P = 1)
    (Q : Matrix κ κ R) (attn : Matrix m m R → Matrix m m R) (M : H → Matrix ι ι R)
    (Rv : H → Matrix κ ι R) (hM : ∀ h, M (e h) = P * M h * Pᵀ)
    (hR : ∀ h, Rv (e h) = Q * Rv h * Pᵀ) (X : Matrix ι m R) :
    layer attn M Rv (P * X) = Q * layer attn M Rv X := by
  unfold layer
  rw [Matrix.mul_sum]
  symm
  apply Fintype.sum_equiv e
  intro h
  show Q * (Rv h * X * attn (scores (M h) X)) =
    Rv (e h) * (P * X) * attn (scores (M (e h)) (P * X))
  rw [hM h, hR h]
  exact (head_term_conj hP Q attn (M h) (Rv h) X).symm

/-- **The orbit theorem, "if" direction.** Heads permuted by a group action, with
`M (g • h) = P g * M h * (P g)⁻¹` and `Rv (g • h) = Q g * Rv h * (P g)⁻¹` where `(P g)⁻¹ = (P g)ᵀ`,
make the layer equivariant, whatever the weight map `attn`. -/
theorem layer_equivariant {G : Type*} [Group G] [MulAction G H] (P : G → Matrix ι ι R)
    (Q : G → Matrix κ κ R) (hP : ∀ g, (P g)ᵀ * P g = 1) (attn : Matrix m m R → Matrix m m R)
    (M : H → Matrix ι ι R) (Rv : H → Matrix κ ι R)
    (hM : ∀ g h, M (g • h) = P g * M h * (P g)ᵀ) (hR : ∀ g h, Rv (g • h) = Q g * Rv h * (P g)ᵀ)
    (g : G) (X : Matrix ι m R) :
    layer attn M Rv (P g * X) = Q g * layer attn M Rv X :=
  layer_conj_of_equiv (MulAction.toPerm g) (hP g) (Q g) attn M Rv (hM g) (hR g) X

/-- The same with `P g` the permutation matrix of a permutation `σ g` of the tokens: no
orthogonality hypothesis is needed. -/
theorem layer_equivariant_of_perm {G : Type*} [Group G] [MulAction G H] (σ : G → Equiv.Perm ι)
    (Q : G → Matrix κ κ R) (attn : Matrix m m R → Matrix m m R) (M : H → Matrix ι ι R)
    (Rv : H → Matrix κ ι R)
    (hM : ∀ g h, M (g • h) =
      (permMatrix (σ g) : Matrix ι ι R) * M h * (permMatrix (σ g) : Matrix ι ι R)ᵀ)
    (hR : ∀ g h, Rv (g • h) = Q g * Rv h * (permMatrix (σ g) : Matrix ι ι R)ᵀ) (g : G)
    (X : Matrix ι m R) :
    layer attn M Rv ((permMatrix (σ g) : Matrix ι ι R) * X) = Q g * layer attn M Rv X :=
  layer_equivariant (fun g => permMatrix (σ g)) Q (fun g => permMatrix_transpose_mul (σ g)) attn
    M Rv hM hR g X

/-- Softmax attention is an instance. -/
theorem softmax_layer_equivariant {G : Type*} [Group G] [MulAction G H] (P : G → Matrix ι ι ℝ)
    (Q : G → Matrix κ κ ℝ) (hP : ∀ g, (P g)ᵀ * P g = 1) (M : H → Matrix ι ι ℝ)
    (Rv : H → Matrix κ ι ℝ)
    (hM : ∀ g h, M (g • h) = P g * M h * (P g)ᵀ) (hR : ∀ g h, Rv (g • h) = Q g * Rv h * (P g)ᵀ)
    (g : G) (X : Matrix ι m ℝ) :
    layer keySoftmax M Rv (P g * X) = Q g * layer keySoftmax M Rv X :=
  layer_equivariant P Q hP keySoftmax M Rv hM hR g X

end HeadGeometry

end
