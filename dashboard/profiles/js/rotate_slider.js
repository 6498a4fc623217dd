// An angle slider moved: the camera follows both sliders, then every view of the heads is projected.
ctx.camera.data = {az: [ctx.azimuth.value], el: [ctx.elevation.value]};
project_all(ctx);
