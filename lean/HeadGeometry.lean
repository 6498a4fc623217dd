import HeadGeometry.Coordinatewise
import HeadGeometry.ProfileSplit
import HeadGeometry.Frobenius
import HeadGeometry.Profile
import HeadGeometry.Orbit

/-!
# HeadGeometry

Lean 4 formalizations of the mathematics the pipeline relies on. One file per topic:

* `HeadGeometry.Coordinatewise`: `p² + q² = 2pq + (p - q)₊² + (q - p)₊²`, and the signs.
* `HeadGeometry.ProfileSplit`: `‖λ₊‖² + ‖λ₋‖² = b + c + d`.
* `HeadGeometry.Frobenius`: `‖L‖_F² = ‖S‖_F² + ‖T‖_F²`, `Sᵀ = S`, `Tᵀ = -T`.
* `HeadGeometry.Profile`: the profile is nonnegative, sums to `‖L‖_F²`, and its vertices.
* `HeadGeometry.Orbit`: heads in orbits make the attention layer equivariant.

See `README.md` beside this file for the map from each theorem to the code that relies on it.
-/
