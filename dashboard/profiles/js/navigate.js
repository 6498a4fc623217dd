// uses: cb_obj
// The model selector of a static page: open the chosen model's page, in the same colour mode.
if (cb_obj.value) {
  const color = new URLSearchParams(window.location.search).get('color');
  window.location.href = cb_obj.value + (color ? '?color=' + encodeURIComponent(color) : '');
}
