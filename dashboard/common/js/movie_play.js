// uses: ctx
// Play / pause a movie (the orbits page's, the training view's): a setTimeout chain on a window-level handle per
// slider, reading the ms per frame from the spinner at every tick; the last frame is held hold_ms before the movie
// loops to the first.
const slider = ctx.frame_slider, play = ctx.play_toggle, speed = ctx.interval_spinner, hold_ms = ctx.hold_ms;
window.__movies = window.__movies || {};
const st = window.__movies[slider.id] = window.__movies[slider.id] || {timer: null};
if (st.timer !== null) { clearTimeout(st.timer); st.timer = null; }
const delay = () => Math.max(1, Number(speed.value) || 100);
function tick() {
  if (slider.value >= slider.end) { slider.value = slider.start; } else { slider.value = slider.value + 1; }
  st.timer = setTimeout(tick, slider.value >= slider.end ? Math.max(hold_ms, delay()) : delay());
}
if (play.active) {
  play.label = '❚❚ Pause';
  if (slider.value >= slider.end) { slider.value = slider.start; }
  st.timer = setTimeout(tick, delay());
} else {
  play.label = '▶ Play';
}
