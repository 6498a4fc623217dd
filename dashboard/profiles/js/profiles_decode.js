// defines: decode_d
// uses: head_codes
// The profile of every head at offset d, decoded from the packed cube shipped with the page (payload_decode.js):
// code = round(value * 65534), 65535 = NaN (dashboard/common/geometry.py: quantise).
// Writes the heads' a, b, c, d and their 3D position sum_k p_k V_k.
function decode_d(ctx, d) {
  const q = ctx.profile_cube.data.q, h = ctx.heads.data, n = h.layer.length, V = ctx.vertex_xyz;
  const D = n > 0 ? q.length / (n * 8) : 1;  // offsets shipped per head: 129 (rotary) or 1
  const dd = Math.max(0, Math.min(D - 1, d | 0));
  const cols = [h.a, h.b, h.c, h.d];
  for (let i = 0; i < n; i++) {
    const codes = head_codes(q, n, i);
    let x = 0, y = 0, z = 0, nan = false;
    for (let k = 0; k < 4; k++) {
      const code = codes[dd * 4 + k];
      const v = code === 65535 ? NaN : code / 65534;
      if (code === 65535) { nan = true; }
      cols[k][i] = v;
      x += v * V[3 * k]; y += v * V[3 * k + 1]; z += v * V[3 * k + 2];
    }
    h.x3[i] = nan ? NaN : x; h.y3[i] = nan ? NaN : y; h.z3[i] = nan ? NaN : z;
  }
}
