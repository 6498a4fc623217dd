// uses: ctx, histograms
// The selection of heads changed (in the tetrahedron or a per-layer view): redraw the histograms.
histograms(ctx, false);
