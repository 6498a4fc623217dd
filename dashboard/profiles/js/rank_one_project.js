// uses: ctx, project_all
// The camera's data was written (an angle slider, a drag): turn the rank-one curve of tetrahedron() with
// it. Here ctx.heads is the curve's source (x3, y3, z3 -> x, y), projected by project.js like the heads.
project_all(ctx);
