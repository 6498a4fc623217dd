// uses: ctx
// The tetrahedron beside the movie: every head's profile at the frame in the slider and its trail (frames
// start[f] .. f), projected once in Python (orbits/views.py: orbit_profile_positions):
// store.data.pos[(f * H + h) * 6 + k] is x, y (k = 0, 1) and a, b, c, d (k = 2 .. 5) of head h at frame f.
const frames = ctx.frame_data, store = ctx.tetra_positions, dots = ctx.tetra_dots, trails = ctx.tetra_trails, H = ctx.n_heads;
const F = frames.data.epoch.length;
const f = Math.max(0, Math.min(F - 1, Math.round(ctx.frame_slider.value)));
const s = frames.data.start[f];
const pos = store.data.pos;
const heads = dots.data.head;
const n = heads.length;
const cols = ['x', 'y', 'a', 'b', 'c', 'd'].map(() => new Float64Array(n));
const xs = [], ys = [];
for (let i = 0; i < n; i++) {
  const h = heads[i];
  for (let k = 0; k < 6; k++) { cols[k][i] = pos[(f * H + h) * 6 + k]; }
  const tx = new Float64Array(f - s + 1), ty = new Float64Array(f - s + 1);
  for (let g = s; g <= f; g++) { tx[g - s] = pos[(g * H + h) * 6]; ty[g - s] = pos[(g * H + h) * 6 + 1]; }
  xs.push(tx); ys.push(ty);
}
dots.data = Object.assign({}, dots.data, {x: cols[0], y: cols[1], a: cols[2], b: cols[3], c: cols[4], d: cols[5]});
trails.data = Object.assign({}, trails.data, {xs: xs, ys: ys});
