"""Python's cyclic garbage collector in a process that builds pages: it runs less often there.

A page build allocates tens of thousands of objects (Bokeh models, HoloViews' plots, xarray's and zarr's
bookkeeping), and at Python's default thresholds (700, 10, 10) that sets off full collections, each a walk over
the whole heap: the imports' millions of objects, and in a server every open session's pages too. The entry points
that build pages call :func:`collect_less_often` (the served app's ``app.serve_settings``, the exporter's
``export.main``); importing a dashboard module changes nothing.
"""

from __future__ import annotations

import gc

GC_THRESHOLDS = (20_000, 20, 20)


def collect_less_often() -> None:
    """Set the collector's thresholds to ``GC_THRESHOLDS`` for the whole process."""
    gc.set_threshold(*GC_THRESHOLDS)
