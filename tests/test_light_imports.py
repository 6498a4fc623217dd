"""Viewing the store must not need torch: the light modules never import the heavy ones."""

import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "safetensors", "huggingface_hub", "dask.distributed")


@pytest.mark.parametrize("module", ["pipeline", "pipeline.schema", "pipeline.store", "pipeline.cli.verify",
                                    "dashboard"])
def test_light_module_imports_nothing_heavy(module):
    code = (
        f"import sys, {module}\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"importing {module} pulled in {out}"
