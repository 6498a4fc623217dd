// uses: ctx
// The compare page's two model choosers: each coordinate panel's two bar sets show the chosen models'
// histograms (ctx.model_fractions['<model>|<k>']: the fraction of that model's heads per bin of coordinate k).
for (let j = 0; j < 2; j++) {
  const name = ctx.model_selects[j].value;
  for (let k = 0; k < ctx.model_bars.length; k++) {
    const src = ctx.model_bars[k][j];
    if (src == null) { continue; }
    src.data = Object.assign({}, src.data, {top: ctx.model_fractions.data[name + '|' + k]});
  }
  if (ctx.legend_items[j] != null) { ctx.legend_items[j].label = {value: name}; }
}
