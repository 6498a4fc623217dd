// defines: read_compare_state, apply_compare_state, write_compare_url
// uses: url_escape_html, url_note
// The compare page's deep link: ?tab=compare&models=A,B&quantity=rho (models: model 1, then model 2
// optionally; quantity: the depth chart's coordinate or statistic). read_compare_state checks a query
// string against the page's choosers (ctx.model_selects, ctx.quantity_select); what it cannot use is left at its default
// and described in st.notes, escaped (url_note.js). write_compare_url puts the
// choosers' values back into the URL, keeping its other parameters (the served app's model, tab, d, ...).
function compare_options(select) {
  return select.options.map((o) => Array.isArray(o) ? o[0] : o);
}

function read_compare_state(ctx, search) {
  const p = new URLSearchParams(search || '');
  const st = {notes: []};
  const shown = (s) => '<code>' + url_escape_html(s.length > 60 ? s.slice(0, 60) + '…' : s) + '</code>';
  if (p.has('models')) {
    const s = p.get('models');
    const names = compare_options(ctx.model_selects[0]);
    const asked = s.split(',');
    const bad = asked.find((n) => !names.includes(n));
    if (asked.length > ctx.model_selects.length) {
      st.notes.push('models = ' + shown(s) + ' names ' + asked.length + ' models; the page compares at most '
        + ctx.model_selects.length + ' (model 1, model 2)');
    } else if (bad != null) {
      st.notes.push('models = ' + shown(s) + ': ' + shown(bad) + ' is not a computed model of this page ('
        + names.map(url_escape_html).join(', ') + '); showing ' + ctx.model_selects.map((c) => url_escape_html(c.value)).join(' and '));
    } else {
      st.models = asked;
    }
  }
  if (p.has('quantity')) {
    const s = p.get('quantity');
    const known = compare_options(ctx.quantity_select);
    if (known.includes(s)) {
      st.quantity = s;
    } else {
      st.notes.push('quantity = ' + shown(s) + ' is not a coordinate or statistic (' + known.join(', ') + '); showing '
        + url_escape_html(ctx.quantity_select.value));
    }
  }
  return st;
}

function apply_compare_state(ctx, search) {
  const st = read_compare_state(ctx, search);
  if (st.models != null) { st.models.forEach((name, j) => { ctx.model_selects[j].value = name; }); }
  if (st.quantity != null) { ctx.quantity_select.value = st.quantity; }
  url_note(ctx, st.notes);
}

function write_compare_url(ctx) {
  const q = new URLSearchParams(window.location.search);
  q.set('models', ctx.model_selects.map((c) => c.value).join(','));
  q.set('quantity', ctx.quantity_select.value);
  const out = '?' + q.toString().replace(/%2C/g, ',');
  if (out !== window.location.search) {
    try { window.history.replaceState(window.history.state, '', out + window.location.hash); } catch (e) { /* a sandboxed frame */ }
  }
}
