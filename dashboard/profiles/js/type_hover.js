// uses: ctx
// A type or a cluster was hidden or shown (a click on its legend item): the hover answers for the groups shown
// only.
if (ctx.head_hover != null && ctx.colour_mode.active === 1) { ctx.head_hover.renderers = ctx.type_dots.filter((r) => r.visible); }
if (ctx.head_hover != null && ctx.colour_mode.active === 2 && ctx.cluster_dots != null) {
  ctx.head_hover.renderers = ctx.cluster_dots.filter((r) => r.visible);
}
