// defines: url_escape_html, url_note
// A deep link's parts the page cannot show: what the link holds, escaped (url_escape_html), and the
// note at the top of the page (ctx.url_note) listing each with what is shown instead. Used by the
// profiles page (url_state.js) and the compare page (compare_url.js).
function url_escape_html(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'})[c]);
}

function url_note(ctx, notes) {
  if (notes.length === 0) { return; }
  const items = notes.map((n) => '<li>' + n + '</li>').join('');
  const before = ctx.url_note.visible ? ctx.url_note.text.replace(/<\/ul><\/div>$/, '') : '<div class="warn">'
    + '<b>This link asked for something the page cannot show</b>; the rest is as it asked:<ul>';
  ctx.url_note.text = before + items + '</ul></div>';
  ctx.url_note.visible = true;
}
