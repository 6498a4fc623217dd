"""A kept step's folder, ``checkpoint-N/``: transformers' ``save_pretrained`` (config.json, model.safetensors),
``trainer_state.json`` (``global_step`` as transformers' Trainer writes it) and ``metrics.json``."""

from __future__ import annotations

import json
from pathlib import Path

from transformers.utils import logging as hf_logging


def folder_name(step: int) -> str:
    return f"checkpoint-{step}"


def write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=1) + "\n")


def save(model, out_dir: Path, step: int, metrics: dict, state: dict) -> Path:
    """Write ``out_dir/checkpoint-{step}/``; ``state`` joins ``global_step`` in trainer_state.json."""
    folder = out_dir / folder_name(step)
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # save_pretrained's bar over its one shard, once per checkpoint
    try:
        model.save_pretrained(folder)
    finally:
        if shown:
            hf_logging.enable_progress_bar()
    write_json(folder / "trainer_state.json", {"global_step": step, **state})
    write_json(folder / "metrics.json", metrics)
    return folder
