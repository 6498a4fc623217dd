// uses: cb_obj, ctx
// A click on a metrics chart: jump to the frame nearest the clicked epoch.
const slider = ctx.frame_slider, play = ctx.play_toggle;
const e = ctx.frame_data.data.epoch;
let best = 0;
for (let i = 1; i < e.length; i++) { if (Math.abs(e[i] - cb_obj.x) < Math.abs(e[best] - cb_obj.x)) best = i; }
play.active = false;
slider.value = Math.min(best, slider.end);
