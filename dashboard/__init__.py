"""Dashboard over the store: linked HoloViews/Bokeh views, served or exported as static HTML.

Never imports torch or the pipeline's heavy modules; the store schema comes from pipeline.store.
"""
