"""A run the project trains, in which induction heads form: ``python -m pipeline.induction train OUT_DIR``.

A two-layer rotary decoder of the Llama family (``pipeline.families.table``) learns next-token prediction on
sequences whose second half repeats the first (uniform random tokens), so copying from context is the only way to
predict the second half. Training keeps checkpoints in transformers' format (``OUT_DIR/checkpoint-N/``), denser
where the repeated half's loss moves, each with the losses of both halves and every head's induction and
previous-token scores (``metrics.json``). The same seed and command give the same bytes on the same torch build.

Modules: ``settings`` (the run's settings, light), ``data`` (the sequences), ``model`` (the decoder),
``scores`` (losses and head scores), ``schedule`` (which steps are kept), ``checkpoint`` (a kept step's folder),
``train`` (the loop), ``__main__`` (the command).
"""
