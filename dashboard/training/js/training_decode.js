// defines: training_decode
// Every head's profile at every frame at offset d, decoded from the run's packed frames (ctx.training_frames.data.q:
// dashboard/training/frames.py, frame_cube, whose docstring gives the layout) once per d and kept on that source, so
// a step change only indexes arrays: row h * F + f is head h (layer-major) at frame f; a, b, c, d its profile (NaN:
// none) and x, y where the fixed camera draws it (ctx.training_vertex_xy: the four vertices' x, y).

// The codes of offset dd of every (head, frame) of q (n heads, F frames, D offsets): codes[(h * F + f) * 4 + k],
// round(v * 4094) or 4095 (NaN), restored exactly: each value summed along the offsets up to dd, then along the frames.
function training_codes(q, n, F, D, dd) {
  const half = q.length / 2, codes = new Float64Array(n * F * 4);
  for (let k = 0; k < 4; k++) {
    for (let h = 0; h < n; h++) {
      let run_f = 0;
      for (let f = 0; f < F; f++) {
        let run_d = 0;
        const base = ((k * n + h) * F + f) * D;
        for (let t = 0; t <= dd; t++) { run_d = (run_d + q[base + t] * 256 + q[half + base + t]) & 65535; }
        run_f = (run_f + run_d) & 65535;
        codes[(h * F + f) * 4 + k] = run_f;
      }
    }
  }
  for (let r = 0; r < n * F; r++) {
    const c = codes;
    c[r * 4 + 3] = (c[r * 4 + 3] + 4094 - c[r * 4] - c[r * 4 + 1] - c[r * 4 + 2]) & 65535;
  }
  return codes;
}

function training_decode(ctx, d) {
  const src = ctx.training_frames, m = ctx.training_meta.data;
  const F = m.n_frames[0], D = m.n_offsets[0], n = m.n_layers[0] * m.n_heads[0], rows = n * F;
  const dd = Math.max(0, Math.min(D - 1, Math.round(Number(d) || 0)));
  const q = src.data.q;
  const kept = src.__decoded;
  if (kept != null && kept.d === dd && kept.q === q) { return kept; }
  const V = ctx.training_vertex_xy, codes = training_codes(q, n, F, D, dd);
  const cols = {x: new Float64Array(rows), y: new Float64Array(rows), a: new Float64Array(rows),
                b: new Float64Array(rows), c: new Float64Array(rows), d: new Float64Array(rows)};
  const abcd = [cols.a, cols.b, cols.c, cols.d];
  for (let i = 0; i < rows; i++) {
    let x = 0, y = 0;
    for (let k = 0; k < 4; k++) {
      const code = codes[i * 4 + k];
      const v = code === 4095 ? NaN : code / 4094;
      abcd[k][i] = v;
      x += v * V[2 * k];
      y += v * V[2 * k + 1];
    }
    cols.x[i] = x;
    cols.y[i] = y;
  }
  src.__decoded = {d: dd, q: q, cols: cols};
  return src.__decoded;
}
