// uses: cb_obj, heads, meta
// A tap on the statistic heat map (x: head, y: layer) selects the head under it.
const L = Number(meta.data.n_layers[0]), H = Number(meta.data.n_heads[0]);
const head = Math.round(cb_obj.x), layer = Math.round(cb_obj.y);
if (head >= 0 && head < H && layer >= 0 && layer < L) { heads.selected.indices = [layer * H + head]; }
