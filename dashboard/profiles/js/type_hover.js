// uses: ctx
// A type was hidden or shown (a click on its legend item): the hover answers for the types shown only.
if (ctx.head_hover != null && ctx.colour_mode.active === 1) { ctx.head_hover.renderers = ctx.type_dots.filter((r) => r.visible); }
