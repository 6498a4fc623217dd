// The "Clear selection" button.
heads.selected.indices = [];
