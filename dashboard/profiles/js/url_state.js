// defines: read_url_state, apply_url_state, write_url
// uses: url_escape_html, url_note
// Deep links: the page's state in the URL's query string,
//   ?model=NAME&tab=profiles&d=17&color=type&stat=rho&heads=3.5,3.7 (color: layer, type or cluster)
// (tab: profiles, analyses or training (a run's page), the page's own tabs (ctx.page_tabs), or another page's tab;
// heads as layer.head;
// stat: the statistic of the per-head heat map; the compare tab's models and
// quantity, compare_url.js, are kept as they are). read_url_state parses and checks a query string
// against the page (ctx.profile_meta: model, n_layers, n_heads, D); anything it cannot use is left at its default
// and described in st.notes. apply_url_state sets the page's widgets from it (the widgets' own callbacks
// redraw); write_url puts the page's current state back into the URL with history.replaceState,
// debounced, so it works served and in a static page opened with file://.
const URL_COLORS = ['layer', 'type', 'cluster'];
const URL_OTHER_TABS = ['models', 'quantity', 'step', 'head'];  // other tabs' parameters (training: training_url.js)
const URL_PAGE_TABS = ['profiles', 'analyses', 'training'];  // ctx.page_tabs' tabs, in order (page_analyses.PAGE_TABS)

function url_meta(ctx) {
  const m = ctx.profile_meta.data;
  return {model: String(m.model[0]), L: Number(m.n_layers[0]), H: Number(m.n_heads[0]), D: Number(m.n_offsets[0])};
}

function read_url_state(ctx, search) {
  const p = new URLSearchParams(search || '');
  const meta = url_meta(ctx);
  const st = {notes: []};
  const shown = (s) => '<code>' + url_escape_html(s.length > 60 ? s.slice(0, 60) + '…' : s) + '</code>';
  if (p.has('model')) { st.model = p.get('model'); }
  if (p.has('tab')) { st.tab = p.get('tab'); }
  if (p.has('d')) {
    const s = p.get('d').trim();
    if (/^\d+$/.test(s) && Number(s) <= meta.D - 1) {
      st.d = Number(s);
    } else if (meta.D <= 1) {
      st.notes.push('d = ' + shown(s) + ': the form of this model does not depend on position; showing its one profile');
    } else {
      st.notes.push('d = ' + shown(s) + ' is not an offset of this model (0 to ' + (meta.D - 1) + '); showing d = 0');
    }
  }
  if (p.has('color')) {
    const s = p.get('color');
    if (URL_COLORS.includes(s)) {
      st.color = s;
    } else {
      st.notes.push('color = ' + shown(s) + ' is not a colour mode (' + URL_COLORS.slice(0, -1).join(', ') + ' or ' + URL_COLORS[URL_COLORS.length - 1] + '); colouring by layer');
    }
  }
  if (p.has('stat')) {
    const s = p.get('stat');
    const known = ctx.statistic_select != null ? ctx.statistic_select.options.map((o) => Array.isArray(o) ? o[0] : o) : [];
    if (known.includes(s)) {
      st.stat = s;
    } else if (known.length === 0) {
      st.notes.push('stat = ' + shown(s) + ': no per-head statistics are shown for this model');
    } else {
      st.notes.push('stat = ' + shown(s) + ' is not a statistic (' + known.join(', ') + '); showing ' + ctx.statistic_select.value);
    }
  }
  if (p.has('heads') && p.get('heads').trim() !== '') {
    const s = p.get('heads');
    const out = [];
    let bad = null;
    for (const part of s.split(',')) {
      const m = /^\s*(\d+)\.(\d+)\s*$/.exec(part);
      if (m == null || Number(m[1]) >= meta.L || Number(m[2]) >= meta.H) { bad = part; break; }
      const i = Number(m[1]) * meta.H + Number(m[2]);
      if (!out.includes(i)) { out.push(i); }
    }
    if (bad == null) {
      st.heads = out;
    } else {
      st.notes.push('heads = ' + shown(s) + ': ' + shown(bad) + ' is not a head layer.head of this model (layers 0 to '
        + (meta.L - 1) + ', heads 0 to ' + (meta.H - 1) + '); no head selected');
    }
  }
  return st;
}

function apply_url_state(ctx, search) {
  let st;
  try {
    st = read_url_state(ctx, search);
  } catch (e) {
    url_note(ctx, ['the link could not be read (' + url_escape_html(e) + '); showing the defaults']);
    return;
  }
  const meta = url_meta(ctx);
  if (ctx.model_nav != null && st.model != null && st.model !== meta.model) {  // a static page: open that model's page
    const hit = ctx.model_nav.options.find((o) => o[1] === st.model);
    if (hit != null) {
      window.location.replace(hit[0] + window.location.search + window.location.hash);
      return;
    }
    st.notes.unshift('model = <code>' + url_escape_html(st.model) + '</code> is not among these pages; showing '
      + url_escape_html(meta.model));
  }
  const own_tab = st.tab != null && ctx.page_tabs != null && URL_PAGE_TABS.includes(st.tab);
  if (own_tab && URL_PAGE_TABS.indexOf(st.tab) < ctx.page_tabs.tabs.length) {
    ctx.page_tabs.active = URL_PAGE_TABS.indexOf(st.tab);
  } else if (own_tab) {  // a tab this model's page does not have (training: a model without a run)
    st.notes.push('tab = <code>' + url_escape_html(st.tab) + '</code>: ' + url_escape_html(meta.model)
      + ' has no training run in this store; showing the profiles');
  } else if (ctx.tab_pages != null && st.tab != null && !(st.tab in ctx.tab_pages)) {
    st.notes.push('tab = <code>' + url_escape_html(st.tab) + '</code> is not a tab (' + Object.keys(ctx.tab_pages).join(', ')
      + '); showing the profiles');
  } else if (ctx.tab_pages != null && st.tab != null && ctx.tab_pages[st.tab]) {  // another page of a static export
    window.location.replace(ctx.tab_pages[st.tab] + window.location.search + window.location.hash);  // its own link
    return;
  }
  if (st.color != null && ctx.colour_mode != null) { ctx.colour_mode.active = URL_COLORS.indexOf(st.color); }
  if (st.d != null && ctx.d_slider != null && ctx.d_slider.visible) { ctx.d_slider.value = st.d; }
  if (st.stat != null) { ctx.statistic_select.value = st.stat; }
  if (st.heads != null) { ctx.heads.selected.indices = st.heads; }
  url_note(ctx, st.notes);
  ctx.profile_meta.__url_ready = true;  // on a model: every callback's ctx is its own object
  write_url(ctx, 0);
}

function url_query(ctx) {
  const meta = url_meta(ctx);
  const here = new URLSearchParams(window.location.search);
  const H = meta.H;
  const heads = Array.from(ctx.heads.selected.indices).sort((x, y) => x - y)
    .map((i) => Math.floor(i / H) + '.' + (i % H)).join(',');
  // a static profiles page is the profiles tab or the analyses tab (ctx.page_tabs); the served app's tabs write
  // their own (url_tab.js), and on the profiles tab the page's own tab is written
  const shown = ctx.page_tabs != null ? URL_PAGE_TABS[ctx.page_tabs.active] : 'profiles';
  const served = here.get('tab');
  const tab = (ctx.tab_pages != null || served == null || URL_PAGE_TABS.includes(served)) ? shown : served;
  let q = 'model=' + encodeURIComponent(meta.model) + '&tab=' + encodeURIComponent(tab);
  if (meta.D > 1 && ctx.d_slider != null) { q += '&d=' + ctx.d_slider.value; }
  if (ctx.colour_mode != null) { q += '&color=' + URL_COLORS[ctx.colour_mode.active]; }
  if (ctx.statistic_select != null) { q += '&stat=' + encodeURIComponent(ctx.statistic_select.value); }
  if (heads !== '') { q += '&heads=' + heads; }
  for (const k of URL_OTHER_TABS) {  // the compare tab's parameters (compare_url.js) stay as they are
    if (here.has(k)) { q += '&' + k + '=' + encodeURIComponent(here.get(k)).replace(/%2C/g, ','); }
  }
  return '?' + q;
}

function write_url(ctx, delay_ms) {
  if (!ctx.profile_meta.__url_ready) { return; }  // nothing is written before the link's own state is applied
  window.__hgUrl = window.__hgUrl || {timer: null};
  const w = window.__hgUrl;
  if (w.timer != null) { clearTimeout(w.timer); }
  w.timer = setTimeout(() => {
    w.timer = null;
    const q = url_query(ctx);
    if (q !== window.location.search) {
      try { window.history.replaceState(window.history.state, '', q + window.location.hash); } catch (e) { /* a sandboxed frame */ }
    }
  }, delay_ms == null ? 200 : delay_ms);
}
