"""``python -m pipeline check``: a checkpoint's attention, run by transformers, against the forms the profiles read.

The modules: ``forward`` (one layer of a checkpoint through transformers' own attention, eager and float64, its
scores captured with memory for about one layer), ``names`` (checkpoint tensor names -> the model's parameters, as
transformers loads them), ``forms`` (the scores of the extracted forms L(d), and the captured scores with what is
no form taken off: the comparison ``tests/pipeline/families`` proves every family with), ``layers`` (one layer's
check and its line), ``stored`` (a store row against a fresh computation), ``unmapped`` (what an unsupported
model_type's attention holds that the family table would have to map). ``pipeline.cli.check`` is the command.
"""
