// uses: cb_obj, names
// The served app's tabs: write the tab shown into the URL's query string (names: the tabs' link names).
const q = new URLSearchParams(window.location.search);
q.set('tab', names[cb_obj.active]);
try { window.history.replaceState(window.history.state, '', '?' + q.toString() + window.location.hash); } catch (e) { /* a sandboxed frame */ }
