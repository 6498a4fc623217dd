// defines: histograms
// The per-coordinate histograms (fraction of all heads per bin, and of the selected heads) and, when
// heat_too, the per-layer heat maps (heads per layer and bin), from the heads' current a, b, c, d.
// Each histogram source holds the bars of the four coordinates, coordinate-major: bar k * B + b.
// The selected heads' outline is hidden while nothing is selected.
function histograms(ctx, heat_too) {
  const h = ctx.heads.data, n = h.layer.length, B = ctx.n_bins;
  const sel = ctx.heads.selected.indices;
  const names = ['a', 'b', 'c', 'd'];
  const all = ctx.hist_all.data.top, s = ctx.hist_selected.data.top;
  let top = ctx.profile_meta.data.hist_top[0];  // the height that covers every offset d
  for (let k = 0; k < 4; k++) {
    const col = h[names[k]], o = k * B;
    for (let b = 0; b < B; b++) { all[o + b] = 0; s[o + b] = 0; }
    const img = ctx.heat_sources[k].data.image[0];  // (layer, bin) counts, flat, row-major
    if (heat_too) { img.fill(0); }
    let n_all = 0, n_sel = 0;
    for (let i = 0; i < n; i++) {
      const v = col[i];
      if (!isFinite(v)) { continue; }
      const b = Math.min(B - 1, Math.floor(v * B));
      all[o + b] += 1; n_all += 1;
      if (heat_too) { img[h.layer[i] * B + b] += 1; }
    }
    for (const i of sel) {
      const v = col[i];
      if (!isFinite(v)) { continue; }
      s[o + Math.min(B - 1, Math.floor(v * B))] += 1; n_sel += 1;
    }
    for (let b = 0; b < B; b++) {
      all[o + b] = n_all > 0 ? all[o + b] / n_all : 0;
      s[o + b] = n_sel > 0 ? s[o + b] / n_sel : 0;
      if (s[o + b] * 1.05 > top) { top = s[o + b] * 1.05; }
    }
    if (heat_too) { ctx.heat_sources[k].change.emit(); }
  }
  ctx.hist_selected_bars.visible = sel.length > 0;
  ctx.hist_all.change.emit();
  ctx.hist_selected.change.emit();
  // the axis stays put while d moves (the range covers every d); only a selection can stretch it
  if (ctx.hist_y_range.end !== top) { ctx.hist_y_range.end = top; }
  const text = sel.length > 0 ? `<b>${sel.length}</b> of ${n} heads selected (orange)` : `${n} heads · none selected`;
  if (ctx.selection_info.text !== text) { ctx.selection_info.text = text; }
}
