"""Offline pipeline: attention-head profiles and the orbit experiment.

Importing this package is light (numpy, xarray, zarr only): the heavy modules
(torch, transformers, safetensors, huggingface_hub, dask) are imported only by
the submodules that need them.
"""

__version__ = "0.1.0"
