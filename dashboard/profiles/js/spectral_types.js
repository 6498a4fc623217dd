// defines: spectral_types
// uses: type_code
// The spectral type of every head from its current c and d (type_rule.js: the JS twin of
// dashboard/common/geometry.py: spectral_types). Writes the heads' type and type_name columns and the legend's
// counts, "Type I₊ (n=K)".
function spectral_types(ctx) {
  const h = ctx.heads.data, n = h.c.length, names = ctx.type_names;
  const counts = [0, 0, 0];
  for (let i = 0; i < n; i++) {
    const t = type_code(h.c[i], h.d[i]);
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
