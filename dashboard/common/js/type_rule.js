// defines: type_code
// The spectral type of a profile from its c and d (the JS twin of pipeline/analyses/types.py, as
// dashboard/common/geometry.py re-exports it: spectral_types): imbalance = (c - d) / (c + d); 0 = Type I₊ when
// imbalance > 0.20 and c + d > 0.01, 2 = Type I₋ when imbalance < -0.20 and c + d > 0.01, 1 = Type II otherwise
// (a profile of NaN too).
function type_code(c, d) {
  const s = c + d;
  const imbalance = s > 0 ? (c - d) / s : 0;
  return !(s > 0.01) ? 1 : (imbalance > 0.20 ? 0 : (imbalance < -0.20 ? 2 : 1));
}
