// uses: ctx
// The colour toggle: by layer (one renderer and the layer colour bar), by spectral type (one renderer per
// type, each shown again, and the legend with the counts) or by cluster (one renderer per cluster and its
// legend); a click on a legend item hides that type or cluster. The heads' hover follows the renderers shown
// (a hidden renderer would still answer it).
const mode = ctx.colour_mode.active;
const groups = mode === 1 ? ctx.type_dots : (mode === 2 && ctx.cluster_dots != null ? ctx.cluster_dots : null);
ctx.head_dots.visible = groups == null;
if (ctx.layer_colour_bar != null) { ctx.layer_colour_bar.visible = groups == null; }
for (const r of ctx.type_dots) { r.visible = mode === 1; }
ctx.type_legend.visible = mode === 1;
if (ctx.cluster_dots != null) { for (const r of ctx.cluster_dots) { r.visible = mode === 2; } }
if (ctx.cluster_legend != null) { ctx.cluster_legend.visible = mode === 2; }
if (ctx.head_hover != null) { ctx.head_hover.renderers = groups != null ? groups.filter((r) => r.visible) : [ctx.head_dots]; }
