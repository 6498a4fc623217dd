// uses: ctx, write_compare_url
// A compare chooser changed: write the models and the quantity into the URL (compare_url.js).
write_compare_url(ctx);
