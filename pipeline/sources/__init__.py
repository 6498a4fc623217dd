"""Checkpoint sources: readers that turn a file or a Hub repository into a Checkpoint (see base.py).

One module per source: ``local`` (a folder: ``safetensors_file`` through the safetensors library,
``torch_bin`` through ``torch.load(weights_only=True)``), ``hub`` (range reads pinned to a commit),
``gguf`` and ``onnx``; ``names`` validates the file names an index gives. ``pipeline.registry.checkpoints``
resolves what the user typed to one of them. None of them imports another's module or the resolver.
"""
