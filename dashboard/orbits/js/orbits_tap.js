// A click on a metrics chart: jump to the frame nearest the clicked epoch.
const slider = ctx.slider, play = ctx.play;
const e = ctx.frames.data.epoch;
let best = 0;
for (let i = 1; i < e.length; i++) { if (Math.abs(e[i] - cb_obj.x) < Math.abs(e[best] - cb_obj.x)) best = i; }
play.active = false;
slider.value = Math.min(best, slider.end);
