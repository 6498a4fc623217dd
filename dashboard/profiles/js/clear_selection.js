// uses: heads
// The "Clear selection" button.
heads.selected.indices = [];
