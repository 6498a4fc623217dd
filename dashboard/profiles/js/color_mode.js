// uses: ctx
// The colour toggle: by layer (one renderer and the layer colour bar) or by spectral type (one renderer
// per type, each shown again, and the legend with the counts; a click on a legend item hides that type).
// The heads' hover follows the renderers shown (a hidden renderer would still answer it).
const by_type = ctx.colour_mode.active === 1;
ctx.head_dots.visible = !by_type;
if (ctx.layer_colour_bar != null) { ctx.layer_colour_bar.visible = !by_type; }
for (const r of ctx.type_dots) { r.visible = by_type; }
ctx.type_legend.visible = by_type;
if (ctx.head_hover != null) { ctx.head_hover.renderers = by_type ? ctx.type_dots.filter((r) => r.visible) : [ctx.head_dots]; }
