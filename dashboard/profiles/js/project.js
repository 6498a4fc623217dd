// defines: project_all
// The orthographic camera of dashboard/common/geometry.py's project(): turn by the azimuth about z, then
// look from the elevation. Rewrites the screen positions of the heads, the vertices and the edges
// from their 3D coordinates and the camera (ctx.camera.data.az[0], .el[0], in degrees).
function project_all(ctx) {
  const az = ctx.camera.data.az[0] * Math.PI / 180, el = ctx.camera.data.el[0] * Math.PI / 180;
  const ca = Math.cos(az), sa = Math.sin(az), ce = Math.cos(el), se = Math.sin(el);
  const px = (x, y, z) => x * ca - y * sa;
  const py = (x, y, z) => z * ce - (x * sa + y * ca) * se;
  const h = ctx.heads.data, n = h.x3.length;
  for (let i = 0; i < n; i++) {
    h.x[i] = px(h.x3[i], h.y3[i], h.z3[i]);
    h.y[i] = py(h.x3[i], h.y3[i], h.z3[i]);
  }
  const v = ctx.vertices.data;
  for (let k = 0; k < v.x3.length; k++) {
    v.x[k] = px(v.x3[k], v.y3[k], v.z3[k]);
    v.y[k] = py(v.x3[k], v.y3[k], v.z3[k]);
    v.dy[k] = v.y[k] >= 0 ? ctx.label_offset_px : -ctx.label_offset_px;
  }
  const e = ctx.edges.data, ei = ctx.edge_from, ej = ctx.edge_to;  // the edges join vertices ei[k] and ej[k]
  for (let k = 0; k < ei.length; k++) {
    e.x0[k] = v.x[ei[k]]; e.y0[k] = v.y[ei[k]];
    e.x1[k] = v.x[ej[k]]; e.y1[k] = v.y[ej[k]];
  }
  ctx.heads.change.emit(); ctx.vertices.change.emit(); ctx.edges.change.emit();
}
