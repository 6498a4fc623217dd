// uses: cb_obj, ctx, training_show, training_inspect, training_rows, training_types_at, training_quantiles, training_url_apply, training_url_write
// Every change the training view follows, in one callback (one copy of its code on the page), by what changed
// (cb_obj): the d slider (the type counts over the steps, the movers table, the inspector and the frame at that
// offset), the statistic (its quantiles and the inspector), a tapped head (the inspector, the URL), a row of the movers
// table (its head selected among the dots, which then inspects it), the step slider, the trails' length or the colours
// (the frame, and the step in the URL); else the document is ready (named url_restore: page_widgets.restore_on_ready):
// the deep link's step and head applied, and the inspector drawn.
if (cb_obj === ctx.training_d_slider) {
  training_types_at(ctx, ctx.training_d_slider.value);
  training_rows(ctx, ctx.training_d_slider.value);
  training_inspect(ctx);
  training_show(ctx);
} else if (cb_obj === ctx.training_statistic) {
  training_quantiles(ctx);
  training_inspect(ctx);
} else if (cb_obj === ctx.training_dots.selected) {
  if (cb_obj.indices.length > 0) {
    training_inspect(ctx);
    training_url_write(ctx);
  }
} else if (cb_obj === ctx.training_movers_rows.selected) {
  const rows = ctx.training_movers_rows, dots = ctx.training_dots.selected;
  if (cb_obj.indices.length > 0) {
    const h = rows.data.index[cb_obj.indices[0]];
    if (!(dots.indices.length === 1 && dots.indices[0] === h)) { dots.indices = [h]; }
  }
} else if (cb_obj === ctx.frame_slider || cb_obj === ctx.training_trail || cb_obj === ctx.training_colour) {
  training_show(ctx);
  training_url_write(ctx);
} else {
  training_url_apply(ctx, window.location.search || window.location.hash.replace(/^#/, '?'));
  training_inspect(ctx);
  training_show(ctx);
}
