// The d slider moved: decode the profiles at that offset, retype the heads (and count them), project them,
// recount every histogram.
decode_d(ctx, cb_obj.value);
spectral_types(ctx);
project_all(ctx);
histograms(ctx, true);
