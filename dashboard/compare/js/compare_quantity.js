// The compare page's quantity chooser: every model's line and dots show its per-layer medians of the chosen
// coordinate or statistic (ctx.medians[k]: model k's medians of every quantity, computed with the page).
const q = ctx.select.value;
for (let k = 0; k < ctx.medians.length; k++) {
  const y = ctx.medians[k].data[q];
  for (const src of [ctx.lines[2 * k], ctx.lines[2 * k + 1]]) {
    const data = Object.assign({}, src.data);
    data[ctx.y] = y;
    src.data = data;
  }
}
ctx.title.text = 'median ' + q + ' per layer';
ctx.axis.axis_label = 'median ' + q;
