// The selection changed: the inspector shows the first selected head.
const s = ctx.heads.selected.indices;
if (s.length > 0) { inspect(ctx, s[0], ctx.dslider != null ? ctx.dslider.value : 0); }
