// defines: training_quantiles
// uses: training_y_range
// The statistic chosen (ctx.training_statistic): its quantiles over the heads at every frame
// (training_quantile_values.data.q[(s * F + f) * 5 + j], j the 10, 25, 50, 75, 90 % quantiles) as the two bands
// (HoloViews' Area patches: x forward then back, the upper quantile forward then the lower one back) and the median.
function training_quantiles(ctx) {
  const m = ctx.training_meta.data, F = m.n_frames[0];
  const options = ctx.training_statistic.options.map((o) => Array.isArray(o) ? o[0] : o);
  const s = options.indexOf(ctx.training_statistic.value), q = ctx.training_quantile_values.data.q;
  const x = ctx.training_steps.data.x, at = (j) => Float64Array.from({length: F}, (_, f) => q[(s * F + f) * 5 + j]);
  const band = (lo, hi) => {
    const xs = new Float64Array(2 * F), ys = new Float64Array(2 * F), low = at(lo), high = at(hi);
    for (let f = 0; f < F; f++) { xs[f] = x[f]; ys[f] = high[f]; xs[2 * F - 1 - f] = x[f]; ys[2 * F - 1 - f] = low[f]; }
    return {x: xs, y: ys};
  };
  const outer = ctx.training_quantile_curves[0], inner = ctx.training_quantile_curves[1];
  const median = ctx.training_quantile_curves[2];
  outer.data = Object.assign({}, outer.data, band(0, 4));
  inner.data = Object.assign({}, inner.data, band(1, 3));
  const column = Object.keys(median.data).find((k) => k !== 'step');
  median.data = Object.assign({}, median.data, {step: x, [column]: at(2)});
  training_y_range(ctx.training_quantile_y, [at(0), at(4)]);
  ctx.training_quantile_title.text = ctx.training_statistic.value + ' (d = 0): median, 25-75, 10-90 %';
}
