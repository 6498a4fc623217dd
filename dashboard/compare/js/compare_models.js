// The compare page's two model choosers: each coordinate panel's two bar sets show the chosen models'
// histograms (ctx.every['<model>|<k>']: the fraction of that model's heads per bin of coordinate k).
for (let j = 0; j < 2; j++) {
  const name = ctx.picks[j].value;
  for (let k = 0; k < ctx.bars.length; k++) {
    const src = ctx.bars[k][j];
    if (src == null) { continue; }
    src.data = Object.assign({}, src.data, {top: ctx.every.data[name + '|' + k]});
  }
  if (ctx.items[j] != null) { ctx.items[j].label = {value: name}; }
}
