"""The orbits page: the orbit experiment's movie. The frames packed for the browser (``frames``), the views
(``views``, ``search``), the page (``page``) and its browser code (``js/``)."""
