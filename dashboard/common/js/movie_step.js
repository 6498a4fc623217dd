// uses: ctx
// One frame of a movie back or forward (step = -1 or +1), wrapping around; stops the movie.
const slider = ctx.frame_slider, play = ctx.play_toggle, step = ctx.step_by;
play.active = false;
const F = slider.end - slider.start + 1;
slider.value = slider.start + (((slider.value - slider.start + step) % F) + F) % F;
