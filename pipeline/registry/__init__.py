"""The model registry: the named models with their Hub ids, revisions and shapes (``models``), and how a name,
a folder, a file or a Hub id becomes an opened checkpoint (``checkpoints``)."""
