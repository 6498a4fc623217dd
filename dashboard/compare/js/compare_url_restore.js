// uses: apply_compare_state, ctx
// The document is ready: set the compare page's choosers as the URL asks (compare_url.js).
apply_compare_state(ctx, window.location.search || window.location.hash.replace(/^#/, '?'));
