// uses: apply_url_state, ctx
// The document is ready: apply the state the URL asks for (url_state.js), then keep the URL up to date.
apply_url_state(ctx, window.location.search || window.location.hash.replace(/^#/, '?'));
