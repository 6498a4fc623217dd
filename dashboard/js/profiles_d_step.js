// The d slider moved: decode the profiles at that offset, project them, recount every histogram.
decode_d(ctx, cb_obj.value);
project_all(ctx);
histograms(ctx, true);
