// uses: cb_obj, ctx, decode_d, spectral_types, project_all, histograms, face_step, layer_types_step, inspector_d
// The d slider moved: decode the profiles at that offset, retype the heads (and count them), project them,
// recount every histogram, redraw the a = 0 face and the layer x type map, move the inspector's d.
decode_d(ctx, cb_obj.value);
spectral_types(ctx);
project_all(ctx);
histograms(ctx, true);
if (ctx.face_heads != null) {
  face_step(ctx);
  layer_types_step(ctx, cb_obj.value);
  inspector_d(ctx, cb_obj.value);
}
