// uses: cb_obj, ctx, project_all
// Drag in the tetrahedron to turn the camera: 0.4 degree per pixel, from the camera at pan start.
// With angle sliders on the page (ctx.azimuth_slider, ctx.elevation_slider) the drag moves them and they project;
// alone (a notebook) it sets the camera and projects. Does nothing while a selection tool is active.
if (!(ctx.box_select && ctx.box_select.active) && !(ctx.lasso_select && ctx.lasso_select.active)) {
  const f = ctx.tetrahedron, cam = ctx.camera.data;
  if (cb_obj.event_name === 'panstart' || f.__drag == null) {
    f.__drag = {sx: cb_obj.sx, sy: cb_obj.sy, az: cam.az[0], el: cam.el[0]};
  }
  if (cb_obj.event_name === 'pan') {
    const s = f.__drag;
    let az = s.az - 0.4 * (cb_obj.sx - s.sx);
    az = ((az % 360) + 540) % 360 - 180;
    const el = Math.max(-90, Math.min(90, s.el + 0.4 * (cb_obj.sy - s.sy)));
    const r = (t) => Math.round(t * 10) / 10;
    if (ctx.azimuth_slider != null) {
      ctx.azimuth_slider.value = r(az);
      ctx.elevation_slider.value = r(el);
    } else {
      ctx.camera.data = {az: [r(az)], el: [r(el)]};
      project_all(ctx);
    }
  }
}
