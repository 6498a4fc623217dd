// uses: ctx, project_all
// The camera's data was written (an angle slider, a drag): turn the baseline's cloud of tetrahedron() with
// it. Here ctx.heads is the cloud's source (x3, y3, z3 -> x, y), projected by project.js like the heads.
project_all(ctx);
