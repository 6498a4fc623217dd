// The served page's loading line (``app.LOADING_HTML``, in the page's HTML before its root), until BokehJS holds
// the session's document: the seconds so far, counted here; the line is removed once the document has come.
(() => {
  const line = window.document.getElementById('loading'), t0 = performance.now();
  const tick = () => {
    if (window.Bokeh && Bokeh.documents.length > 0) { line.remove(); return; }
    line.querySelector('span').textContent = Math.floor((performance.now() - t0) / 1000);
    setTimeout(tick, 250);
  };
  tick();
})();
