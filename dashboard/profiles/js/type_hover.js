// A type was hidden or shown (a click on its legend item): the hover answers for the types shown only.
if (ctx.hover != null && ctx.color.active === 1) { ctx.hover.renderers = ctx.type_dots.filter((r) => r.visible); }
