"""The GGUF and ONNX openers' shared refusals: a missing reader package and a missing file, one line each."""

from __future__ import annotations

import sys

import pytest

from pipeline.sources.base import CheckpointError
from pipeline.sources.gguf import open_gguf
from pipeline.sources.onnx import open_onnx


@pytest.mark.parametrize("opener, package, what", [(open_gguf, "gguf", "GGUF"), (open_onnx, "onnx", "ONNX")])
def test_a_missing_reader_package_names_the_install_command(opener, package, what, tmp_path, monkeypatch):
    f = tmp_path / "model.bin"
    f.write_bytes(b"x")
    monkeypatch.setitem(sys.modules, package, None)  # the import fails as where the package is not installed
    with pytest.raises(CheckpointError) as err:
        opener(f)
    assert str(err.value) == f"reading {what} files needs the {package} package: pip install -e '.[pipeline]'"


@pytest.mark.parametrize("opener, what", [(open_gguf, "GGUF"), (open_onnx, "ONNX")])
def test_a_missing_file_is_named(opener, what, tmp_path):
    missing = tmp_path / "nowhere" / "model.file"
    with pytest.raises(CheckpointError) as err:
        opener(missing)
    assert str(err.value) == f"no such {what} file: {missing}"
