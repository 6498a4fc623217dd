// uses: ctx, inspect
// The selection changed: the inspector shows the first selected head.
const s = ctx.heads.selected.indices;
if (s.length > 0) { inspect(ctx, s[0], ctx.d_slider != null ? ctx.d_slider.value : 0); }
