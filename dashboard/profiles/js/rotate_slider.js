// uses: ctx, project_all
// An angle slider moved: the camera follows both sliders, then every view of the heads is projected.
ctx.camera.data = {az: [ctx.azimuth_slider.value], el: [ctx.elevation_slider.value]};
project_all(ctx);
