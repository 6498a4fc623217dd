"""The profiles page of one model: its views (``tetrahedron``, ``layers``, ``spectral``, ``statistics``), the
page that links them in the browser (``page``, ``page_details``, ``page_texts``) and its browser code (``js/``)."""
