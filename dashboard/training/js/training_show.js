// defines: training_show, training_head, training_frame
// uses: training_decode, type_code
// Show the frame in the step slider (ctx.frame_slider): every head's dot at that frame and offset, its trail over
// the last K frames (ctx.training_trail; 0: every frame from the first) as views into the decoded arrays (no copy),
// the colours (by layer, by type at this frame, by cluster), the legend with the counts, the step's line on every
// chart over the steps, the inspected head's place, the step's checkpoint and metrics. One frame's values are read,
// and only canvases change (a Div's new text would lay the page out again).

function training_frame(ctx) {
  const F = ctx.training_meta.data.n_frames[0];
  return Math.max(0, Math.min(F - 1, Math.round(Number(ctx.frame_slider.value) || 0)));
}

// The inspected head (layer-major index): the first selected dot, else the last one inspected.
function training_head(ctx) {
  const m = ctx.training_meta.data, sel = ctx.training_dots.selected.indices;
  if (sel.length > 0) { m.head[0] = sel[0]; }
  return m.head[0];
}

function training_show(ctx) {
  const m = ctx.training_meta.data, F = m.n_frames[0], L = m.n_layers[0], HH = L * m.n_heads[0];
  const f = training_frame(ctx);
  const dec = training_decode(ctx, ctx.training_d_slider.value), c = dec.cols;
  const K = Math.round(Number(ctx.training_trail.value) || 0), s = K > 0 ? Math.max(0, f - K) : 0;
  const mode = ctx.training_colour.active, heads = ctx.training_heads.data;
  const cols = {x: new Float64Array(HH), y: new Float64Array(HH), a: new Float64Array(HH), b: new Float64Array(HH),
                c: new Float64Array(HH), d: new Float64Array(HH)};
  const type_name = new Array(HH), color = new Array(HH), xs = new Array(HH), ys = new Array(HH);
  const types = [0, 0, 0];
  for (let h = 0; h < HH; h++) {
    const r = h * F + f;
    for (const k of ['x', 'y', 'a', 'b', 'c', 'd']) { cols[k][h] = c[k][r]; }
    const t = type_code(c.c[r], c.d[r]);
    types[t] += 1;
    type_name[h] = ctx.type_names[t];
    color[h] = mode === 1 ? ctx.type_colors[t] : (mode === 2 ? heads.cluster_colour[h] : heads.layer_colour[h]);
    xs[h] = c.x.subarray(h * F + s, r + 1);
    ys[h] = c.y.subarray(h * F + s, r + 1);
  }
  ctx.training_dots.data = Object.assign({}, ctx.training_dots.data, cols, {type_name: type_name, color: color});
  ctx.training_trails.data = Object.assign({}, ctx.training_trails.data, {xs: xs, ys: ys, color: color.slice()});
  const st = ctx.training_steps.data, x = st.x[f];
  for (const line of ctx.training_cursors) { line.location = x; }
  const i = training_head(ctx);
  ctx.training_path_dot.data = {x: [c.x[i * F + f]], y: [c.y[i * F + f]]};
  const D = m.n_offsets[0], d = dec.d;
  ctx.training_tetra_title.text = m.name[0] + ' at step ' + st.step[f] + (D > 1 ? ', d = ' + d : '');
  // the legends: the one of the colour mode shown, the type counts at this frame in its labels
  ctx.training_legends.forEach((legend, k) => { if (legend.visible !== (k === mode)) { legend.visible = k === mode; } });
  ctx.training_legends[1].items.forEach((item, k) => {
    const label = ctx.type_names[k] + ' (n=' + types[k] + ')';
    if (item.label == null || item.label.value !== label) { item.label = {value: label}; }
  });
  // the step, its checkpoint and the run's metrics there
  const num = (v) => !Number.isFinite(v) ? '—' : (v !== 0 && Math.abs(v) < 1e-3 ? v.toExponential(2) : v.toFixed(4));
  let info = 'step ' + st.step[f] + '  (frame ' + (f + 1) + ' of ' + F + ', ' + st.revision[f] + ')';
  for (const key of Object.keys(st).sort()) {
    if (key.startsWith('metric_')) { info += '  ·  ' + key.slice(7) + ' ' + num(st[key][f]); }
  }
  ctx.training_info.text = info;
}
