// uses: a, b
// Two sources of the same heads in the same order (the tetrahedron's and the a = 0 face's): a selection in
// one (a) becomes the selection in the other (b).
const x = Array.from(a.selected.indices), y = Array.from(b.selected.indices);
if (x.length !== y.length || x.some((v, i) => v !== y[i])) { b.selected.indices = x; }
