// defines: face_step, layer_types_step, inspect, inspector_d
// uses: head_spectrum, head_codes
// The profiles page's other views, from the heads' current a, b, c, d and type (profiles_decode.js,
// spectral_types.js): the a = 0 face (the JS twin of dashboard/common/geometry.py: face_coordinates), the layer x
// type map (layer_type_fractions) and the head inspector (profiles/statistics.py: head_inspector), filled for one head from
// the data shipped with the page. Sizes come from ctx.profile_meta, whose data the served app swaps with the model's.
function face_step(ctx) {
  if (ctx.face_heads == null) { return; }
  const h = ctx.heads.data, f = ctx.face_heads.data, n = h.a.length, V = ctx.face_vertex_xy;
  const firsts = [-1, -1, -1], counts = [0, 0, 0];
  for (let i = 0; i < n; i++) {
    const rest = 1 - h.a[i];
    const bs = rest > 0 ? h.b[i] / rest : NaN, cs = rest > 0 ? h.c[i] / rest : NaN, ds = rest > 0 ? h.d[i] / rest : NaN;
    f.x[i] = bs * V[0] + cs * V[2] + ds * V[4];
    f.y[i] = bs * V[1] + cs * V[3] + ds * V[5];
    f.b_sym[i] = bs; f.c_sym[i] = cs; f.d_sym[i] = ds;
    const t = h.type[i];
    f.type_name[i] = h.type_name[i]; f.colour[i] = ctx.type_colors[t]; f.marker[i] = ctx.type_markers[t];
    counts[t] += 1;
    if (firsts[t] < 0) { firsts[t] = i; }
  }
  ctx.face_heads.change.emit();
  if (ctx.face_legend != null) {
    for (let k = 0; k < 3; k++) {
      const item = ctx.face_legend.items[k];
      const label = ctx.type_names[k] + ' (n=' + counts[k] + ')';
      item.setv({label: {value: label}, index: Math.max(firsts[k], 0), visible: counts[k] > 0});
    }
  }
}

function layer_types_step(ctx, d) {
  if (ctx.layer_types_image == null) { return; }
  const h = ctx.heads.data, n = h.a.length, L = Number(ctx.profile_meta.data.n_layers[0]);
  const img = ctx.layer_types_image.data.image[0];  // (layer, type), row-major, row 0 = layer 0
  const counts = new Float64Array(L * 3), totals = new Float64Array(L);
  for (let i = 0; i < n; i++) {
    if (!(Number.isFinite(h.a[i]) && Number.isFinite(h.b[i]) && Number.isFinite(h.c[i]) && Number.isFinite(h.d[i]))) { continue; }
    counts[h.layer[i] * 3 + h.type[i]] += 1; totals[h.layer[i]] += 1;
  }
  for (let l = 0; l < L; l++) {
    for (let k = 0; k < 3; k++) { img[l * 3 + k] = totals[l] > 0 ? counts[l * 3 + k] / totals[l] : NaN; }
  }
  ctx.layer_types_image.change.emit();
  ctx.layer_types_title.text = 'Layer × type (d = ' + d + ')';
}

function inspect(ctx, i, d) {
  const m = ctx.profile_meta.data, H = Number(m.n_heads[0]), layer = Math.floor(i / H), head = i % H, h = ctx.heads.data;
  const n = Number(m.n_layers[0]) * H;  // the heads whose data the page ships
  const kv = h.kv_head != null ? ' (kv head ' + h.kv_head[i] + ')' : '';
  ctx.inspector_title.text = '<h2>Head inspector</h2><p class="note">Tap a head in any view (or select some): the first '
    + 'selected head is shown. Now: <b>layer ' + layer + ', head ' + head + '</b>' + kv + ', ' + h.type_name[i]
    + ' at d = ' + d + '.</p>';
  if (ctx.head_spectra != null && ctx.inspector_up != null) {
    const s = head_spectrum(ctx.head_spectra.data.s, ctx.head_spectrum_scales.data.scale, n, i);
    const lp = [], lm = [];
    for (let e = 0; e < s.length; e++) {
      const v = s[e];
      if (v > 0) { lp.push(v); } else if (v < 0) { lm.push(-v); }
    }
    lp.sort((x, y) => y - x); lm.sort((x, y) => y - x);
    const bars = (vals, up) => ({left: vals.map((_, k) => k + 0.6), right: vals.map((_, k) => k + 1.4),
      bottom: vals.map((v) => up ? 0 : -v), top: vals.map((v) => up ? v : 0)});
    ctx.inspector_up.data = bars(lp, true);
    ctx.inspector_down.data = bars(lm, false);
    if (ctx.inspector_spectrum_title != null) { ctx.inspector_spectrum_title.text = 'layer ' + layer + ', head ' + head + ': spectrum of S (d = 0)'; }
  }
  if (ctx.head_statistics != null && ctx.inspector_statistics != null) {
    const names = ctx.inspector_statistics.data.statistic;
    // a statistic, or a percentile among the baseline's heads (percentile_<statistic>, in the heads' source)
    const column = (nm) => ctx.head_statistics.data[nm] != null ? ctx.head_statistics.data[nm] : ctx.heads.data[nm];
    ctx.inspector_statistics.data = {statistic: names, value: Array.from(names, (nm) => column(nm) != null ? column(nm)[i] : NaN)};
  }
  if (ctx.inspector_curves != null) {
    const codes = head_codes(ctx.profile_cube.data.q, n, i), D = Number(m.n_offsets[0]);
    for (let k = 0; k < 4; k++) {
      const dd = new Float64Array(D), v = new Float64Array(D);
      for (let t = 0; t < D; t++) {
        const code = codes[t * 4 + k];
        dd[t] = t; v[t] = code === 65535 ? NaN : code / 65534;
      }
      ctx.inspector_curves[k].data = {d: dd, value: v};
    }
  }
}

function inspector_d(ctx, d) {
  if (ctx.inspector_d != null) { ctx.inspector_d.location = d; }
  if (ctx.inspector_curves_title != null) { ctx.inspector_curves_title.text = 'a, b, c, d over d (now d = ' + d + ')'; }
  const s = ctx.heads.selected.indices;
  if (s.length > 0) { inspect(ctx, s[0], d); }
}
