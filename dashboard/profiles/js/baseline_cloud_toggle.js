// uses: cb_obj, cloud
// The baseline cloud's checkbox: show or hide the baseline's heads behind the model's in the tetrahedron.
cloud.visible = cb_obj.active.includes(0);
