// uses: ctx
// Show the frame in the slider: every panel's dots, their trails (frames start[f] .. f), the axis
// ranges (the largest radius over the trail), the metrics line and the cursor on the metrics charts.
// Positions: store.data.pos[((f * H + h) * P + p) * 2 + k] (dashboard/orbits/frames.py: pack_positions).
const frames = ctx.frame_data, store = ctx.positions, dots = ctx.panel_dots, trails = ctx.panel_trails, xr = ctx.panel_x_ranges, yr = ctx.panel_y_ranges;
const info = ctx.frame_info, cursors = ctx.metric_cursors, slider = ctx.frame_slider, H = ctx.n_heads, P = ctx.n_panels;
const F = frames.data.epoch.length;
const f = Math.max(0, Math.min(F - 1, Math.round(slider.value)));
const s = frames.data.start[f];
const pos = store.data.pos;
for (let p = 0; p < P; p++) {
  const heads = dots[p].data.head;
  const n = heads.length;
  const x = new Float64Array(n), y = new Float64Array(n);
  const xs = [], ys = [];
  for (let i = 0; i < n; i++) {
    const h = heads[i];
    const o = ((f * H + h) * P + p) * 2;
    x[i] = pos[o]; y[i] = pos[o + 1];
    const tx = new Float64Array(f - s + 1), ty = new Float64Array(f - s + 1);
    for (let g = s; g <= f; g++) {
      const q = ((g * H + h) * P + p) * 2;
      tx[g - s] = pos[q]; ty[g - s] = pos[q + 1];
    }
    xs.push(tx); ys.push(ty);
  }
  dots[p].data = Object.assign({}, dots[p].data, {x: x, y: y});
  trails[p].data = Object.assign({}, trails[p].data, {xs: xs, ys: ys});
  let r = 1.1 * frames.data['r' + p][f];
  if (!(r > 0)) { r = 1; }
  xr[p].setv({start: -r, end: r});
  yr[p].setv({start: -r, end: r});
}
const d = frames.data;
const pct = (v) => Number.isFinite(v) ? (100 * v).toFixed(1) + '%' : '—';
const num = (v) => !Number.isFinite(v) ? '—' : (v !== 0 && Math.abs(v) < 1e-3 ? v.toExponential(2) : v.toFixed(4));
info.text = '<b>epoch ' + d.epoch[f] + '</b> &nbsp;(frame ' + f + ' / ' + (F - 1) + ')'
  + ' &nbsp;·&nbsp; train acc <b>' + pct(d.train_accuracy[f]) + '</b>'
  + ' &nbsp;·&nbsp; held-out acc <b>' + pct(d.heldout_accuracy[f]) + '</b>'
  + ' &nbsp;·&nbsp; equivariance error <b>' + num(d.equivariance_error[f]) + '</b>'
  + ' (at 2× QK ' + num(d.sharpened_error[f]) + ')'
  + ' &nbsp;·&nbsp; loss ' + num(d.loss[f]);
for (const c of cursors) { c.location = d.epoch[f]; }
