// uses: ctx, write_url
// The page's state changed (d, colour mode, selection, the model shown): write it into the URL.
write_url(ctx);
