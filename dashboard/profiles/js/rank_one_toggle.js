// uses: cb_obj, curve
// The rank-one curve's checkbox: show or hide the curve in the tetrahedron.
curve.visible = cb_obj.active.includes(0);
