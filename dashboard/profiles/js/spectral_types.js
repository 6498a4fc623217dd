// defines: spectral_types
// The spectral type of every head from its current c and d (the JS twin of dashboard/common/geometry.py:
// spectral_types): imbalance = (c - d) / (c + d); 0 = Type I₊ when imbalance > 0.20 and c + d > 0.01,
// 2 = Type I₋ when imbalance < -0.20 and c + d > 0.01, 1 = Type II otherwise (a head without a profile
// too). Writes the heads' type and type_name columns and the legend's counts, "Type I₊ (n=K)".
function spectral_types(ctx) {
  const h = ctx.heads.data, n = h.c.length, names = ctx.type_names;
  const counts = [0, 0, 0];
  for (let i = 0; i < n; i++) {
    const c = h.c[i], d = h.d[i], s = c + d;
    const imbalance = s > 0 ? (c - d) / s : 0;
    const t = !(s > 0.01) ? 1 : (imbalance > 0.20 ? 0 : (imbalance < -0.20 ? 2 : 1));
    h.type[i] = t;
    h.type_name[i] = names[t];
    counts[t] += 1;
  }
  if (ctx.type_legend != null) {
    for (let k = 0; k < 3; k++) {
      const label = names[k] + ' (n=' + counts[k] + ')';
      const item = ctx.type_legend.items[k];
      if (item.label == null || item.label.value !== label) { item.label = {value: label}; }
    }
  }
  return counts;
}
