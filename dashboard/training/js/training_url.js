// defines: training_url_apply, training_url_write
// uses: url_escape_html, url_note, training_frame, training_head
// The training view's part of the deep link: ?tab=training&step=S&head=L.H (S a training step of the run, L.H the
// inspected head; the profiles page's url_state.js keeps both when it writes the rest). training_url_apply sets the
// step slider and the inspected head from a query string, naming in the note (ctx.url_note) what it cannot use;
// training_url_write puts the step and the head shown back into the URL (history.replaceState), keeping the rest.
function training_url_apply(ctx, search) {
  const p = new URLSearchParams(search || ''), m = ctx.training_meta.data, notes = [];
  const shown = (s) => '<code>' + url_escape_html(s.length > 60 ? s.slice(0, 60) + '…' : s) + '</code>';
  const steps = Array.from(ctx.training_steps.data.step);
  if (p.has('step')) {
    const s = p.get('step').trim(), f = /^\d+$/.test(s) ? steps.indexOf(Number(s)) : -1;
    if (f >= 0) {
      ctx.frame_slider.value = f;
    } else {
      notes.push('step = ' + shown(s) + ' is not a step of the run ' + url_escape_html(m.name[0]) + ' (' + steps[0] + ' to '
        + steps[steps.length - 1] + ', ' + steps.length + ' frames); showing step ' + steps[training_frame(ctx)]);
    }
  }
  if (p.has('head')) {
    const s = p.get('head'), hit = /^\s*(\d+)\.(\d+)\s*$/.exec(s);
    const L = m.n_layers[0], H = m.n_heads[0];
    if (hit != null && Number(hit[1]) < L && Number(hit[2]) < H) {
      ctx.training_dots.selected.indices = [Number(hit[1]) * H + Number(hit[2])];
    } else {
      notes.push('head = ' + shown(s) + ' is not a head layer.head of this run (layers 0 to ' + (L - 1) + ', heads 0 to '
        + (H - 1) + '); showing head ' + ctx.training_heads.data.label[training_head(ctx)]);
    }
  }
  url_note(ctx, notes);
  ctx.training_meta.__url_ready = true;
}

function training_url_write(ctx) {
  if (!ctx.training_meta.__url_ready) { return; }  // nothing is written before the link's own state is applied
  const q = new URLSearchParams(window.location.search);
  q.set('step', String(ctx.training_steps.data.step[training_frame(ctx)]));
  q.set('head', ctx.training_heads.data.label[training_head(ctx)]);
  const out = '?' + q.toString().replace(/%2C/g, ',');
  if (out !== window.location.search) {
    try { window.history.replaceState(window.history.state, '', out + window.location.hash); } catch (e) { /* a sandboxed frame */ }
  }
}
