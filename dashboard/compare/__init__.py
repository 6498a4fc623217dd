"""The compare page: every computed model side by side. Its views (``views``), the page (``page``) and its
browser code (``js/``)."""
