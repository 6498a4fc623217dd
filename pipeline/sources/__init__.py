"""Checkpoint sources: readers that turn a file or a Hub repository into a Checkpoint (see base.py)."""
