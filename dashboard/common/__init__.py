"""What every page shares: the numbers of the simplex (``geometry``), a model's arrays (``selection``), the
simplex as drawn (``simplex``), rendering and naming (``render``), the browser code's loader (``jscode``), the
Gaussian baselines, and for the pages the widgets, the stylesheet and the models their browser code reads
(``page_widgets``, ``page_style``, ``page_models``)."""
