// defines: training_rows, training_types_at
// What follows the d slider besides the frames: the movers table (every head by path length at offset d, longest
// first, with its displacement and that displacement's rank: training_moved.data.path[d * HH + h]) and the type
// counts over the steps (training_type_counts.data.n[(d * F + f) * 3 + k]).
function training_rows(ctx, d) {
  const m = ctx.training_meta.data, HH = m.n_layers[0] * m.n_heads[0], D = m.n_offsets[0];
  const dd = Math.max(0, Math.min(D - 1, Math.round(Number(d) || 0)));
  const mv = ctx.training_moved.data, label = ctx.training_heads.data.label;
  const path = mv.path.slice(dd * HH, (dd + 1) * HH), disp = mv.displacement.slice(dd * HH, (dd + 1) * HH);
  const key = (v) => Number.isFinite(v) ? v : -1;
  const order = Array.from({length: HH}, (_, h) => h).sort((p, q) => key(path[q]) - key(path[p]) || p - q);
  const by_disp = Array.from({length: HH}, (_, h) => h).sort((p, q) => key(disp[q]) - key(disp[p]) || p - q);
  const disp_rank = new Array(HH);
  by_disp.forEach((h, r) => { disp_rank[h] = r + 1; });
  const rows = ctx.training_movers_rows;
  rows.data = Object.assign({}, rows.data, {index: order, rank: order.map((_, r) => r + 1),
    head: order.map((h) => label[h]), path_length: order.map((h) => path[h]),
    displacement: order.map((h) => disp[h]), displacement_rank: order.map((h) => disp_rank[h])});
}

function training_types_at(ctx, d) {
  const m = ctx.training_meta.data, F = m.n_frames[0], D = m.n_offsets[0];
  const dd = Math.max(0, Math.min(D - 1, Math.round(Number(d) || 0)));
  const n = ctx.training_type_counts.data.n, x = ctx.training_steps.data.x;
  ctx.training_type_curves.forEach((src, k) => {
    const y = new Float64Array(F);
    for (let f = 0; f < F; f++) { y[f] = n[(dd * F + f) * 3 + k]; }
    src.data = Object.assign({}, src.data, {step: x, heads: y});
  });
}
