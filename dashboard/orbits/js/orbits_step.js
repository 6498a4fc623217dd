// One frame back or forward (step = -1 or +1), wrapping around; stops the movie.
const slider = ctx.slider, play = ctx.play, step = ctx.step;
play.active = false;
const F = slider.end - slider.start + 1;
slider.value = slider.start + (((slider.value - slider.start + step) % F) + F) % F;
