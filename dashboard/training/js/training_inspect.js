// defines: training_inspect, training_y_range
// uses: training_decode, training_frame, training_head
// The inspector shows the inspected head (training_show.js: training_head): its path over every frame at the d
// slider's offset (views into the decoded arrays), its first frame and its place at the step, its a, b, c, d and
// the chosen statistic (d = 0) over the steps, its per-head metrics; the movers table selects its row.

// A y range over the finite values of arrays (5 % margin), or [0, 1] when there are none.
function training_y_range(range, arrays) {
  let lo = Infinity, hi = -Infinity;
  for (const a of arrays) { for (const v of a) { if (Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); } } }
  if (!(hi >= lo)) { lo = 0; hi = 1; }
  const pad = hi > lo ? 0.05 * (hi - lo) : (Math.abs(hi) > 0 ? 0.05 * Math.abs(hi) : 0.5);
  range.setv({start: lo - pad, end: hi + pad});
}

function training_inspect(ctx) {
  const m = ctx.training_meta.data, F = m.n_frames[0], HH = m.n_layers[0] * m.n_heads[0];
  const i = training_head(ctx), f = training_frame(ctx);
  const dec = training_decode(ctx, ctx.training_d_slider.value), c = dec.cols;
  const at = (k) => c[k].subarray(i * F, (i + 1) * F);
  ctx.training_path.data = {x: at('x'), y: at('y')};
  ctx.training_path_start.data = {x: [c.x[i * F]], y: [c.y[i * F]]};
  ctx.training_path_dot.data = {x: [c.x[i * F + f]], y: [c.y[i * F + f]]};
  const x = ctx.training_steps.data.x;
  ['a', 'b', 'c', 'd'].forEach((k, j) => {
    const src = ctx.training_head_curves[j];
    src.data = Object.assign({}, src.data, {step: x, coordinate: at(k)});
  });
  // the statistic over the steps: training_statistic_values.data.v[(f * HH + h) * S + s]
  const options = ctx.training_statistic.options.map((o) => Array.isArray(o) ? o[0] : o);
  const S = options.length, s = options.indexOf(ctx.training_statistic.value), v = ctx.training_statistic_values.data.v;
  const values = new Float64Array(F);
  for (let g = 0; g < F; g++) { values[g] = v[(g * HH + i) * S + s]; }
  const stat = ctx.training_head_statistic;
  const column = Object.keys(stat.data).find((k) => k !== 'step');
  stat.data = Object.assign({}, stat.data, {step: x, [column]: values});
  training_y_range(ctx.training_head_statistic_y, [values]);
  const label = ctx.training_heads.data.label[i];
  ctx.training_head_statistic_title.text = 'head ' + label + ': ' + ctx.training_statistic.value + ' (d = 0)';
  // the per-head metrics: training_head_metric_values.data[name][f * HH + h]
  const hm = ctx.training_head_metric_values.data;
  for (const src of ctx.training_head_metric_curves) {
    const name = Object.keys(src.data).find((k) => k !== 'step');
    const w = hm[name], one = new Float64Array(F);
    for (let g = 0; g < F; g++) { one[g] = w[g * HH + i]; }
    src.data = Object.assign({}, src.data, {step: x, [name]: one});
  }
  ctx.training_head_title.text = '<h2 class="tight">Head inspector: head ' + label + '</h2><p class="note tight">'
    + 'Tap a head in the tetrahedron or a row of the table. Its path in the simplex (□: the first frame), its profile and '
    + 'the statistic over the steps' + (hm != null && Object.keys(hm).length ? ', its metrics' : '') + '.</p>';
  const rows = ctx.training_movers_rows, r = Array.from(rows.data.index).indexOf(i);
  if (r >= 0 && !(rows.selected.indices.length === 1 && rows.selected.indices[0] === r)) { rows.selected.indices = [r]; }
}
