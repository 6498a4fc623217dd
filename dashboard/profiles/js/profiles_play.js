// uses: button, interval, slider
// Play / pause the d slider: one step every `interval` ms, looping from the last offset to 0.
const b = button;
if (b.__timer != null) {
  clearInterval(b.__timer); b.__timer = null; b.label = '▶ Play'; b.button_type = 'success';
} else {
  b.label = '❚❚ Pause'; b.button_type = 'warning';
  b.__timer = setInterval(() => {
    const s = slider;
    if (s.document == null) { clearInterval(b.__timer); b.__timer = null; return; }  // the view was replaced
    s.value = s.value >= s.end ? s.start : s.value + 1;
  }, interval);
}
