// The model selector of a static page: open the chosen model's page.
if (cb_obj.value) { window.location.href = cb_obj.value; }
