// uses: ctx
// The compare page's quantity chooser: every model's line and dots show its per-layer medians of the chosen
// coordinate or statistic (ctx.model_medians[k]: model k's medians of every quantity, computed with the page),
// and the y axis spans them (ctx.median_ranges: each quantity's [start, end], compare/views.py: median_range).
const q = ctx.quantity_select.value;
for (let k = 0; k < ctx.model_medians.length; k++) {
  const y = ctx.model_medians[k].data[q];
  for (const src of [ctx.depth_lines[2 * k], ctx.depth_lines[2 * k + 1]]) {
    const data = Object.assign({}, src.data);
    data[ctx.median_column] = y;
    src.data = data;
  }
}
const range = ctx.median_ranges.data[q];
ctx.depth_y_range.setv({start: range[0], end: range[1]});
ctx.depth_title.text = 'median ' + q + ' per layer';
ctx.depth_y_axis.axis_label = 'median ' + q;
