"""The training view: a run of a model's checkpoints (``runs/NAME``, ``pipeline.schema.runs``) as a movie of its heads
in the 3-simplex, with the type counts, the statistics' quantiles, the heads that moved most, the head inspector and
the run's metrics over the steps. A tab of the profiles page (``?tab=training&step=S&head=L.H``)."""
