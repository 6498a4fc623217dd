"""Dashboard over the store: HoloViews views (``dashboard.views``) served by Panel or exported as static HTML.

Reads the store only through ``pipeline.store`` and ``pipeline.schema``; never imports torch or the
pipeline's heavy modules.
"""
