"""The family table and its readers: how each supported ``model_type`` stores its attention.

``spec`` (the entry type and a layer's ``Positional``), ``table`` (one entry per family), ``layout`` (a config ->
:class:`~pipeline.families.layout.Layout`), ``positions`` (the positional kind of each layer), ``tensors`` (one
layer's W_Q, W_K, QK-norm folded in), ``errors``. ``pipeline.architectures`` is the public face of these modules.
"""
