// uses: ctx
// The statistic chooser: the heat map shows the chosen statistic of every head (ctx.head_statistics: one column per
// statistic, layer-major), its colours span that statistic's range, its baseline sentence is the chosen one's.
const s = ctx.statistic_select.value, v = ctx.head_statistics.data[s];
if (v != null) {
  const img = ctx.statistic_image.data.image[0];  // (layer, head), row-major, row 0 = layer 0
  let lo = Infinity, hi = -Infinity;
  for (let i = 0; i < v.length; i++) {
    img[i] = v[i];
    if (Number.isFinite(v[i])) { lo = Math.min(lo, v[i]); hi = Math.max(hi, v[i]); }
  }
  if (!(hi > lo)) { lo = Number.isFinite(lo) ? lo - 0.5 : 0; hi = lo + 1; }
  ctx.statistic_colours.setv({low: lo, high: hi});
  ctx.statistic_image.change.emit();
  ctx.statistic_title.text = s + ' per head (d = 0)';
  ctx.statistic_baseline.text = ctx.baseline_texts.data[s][0];
}
