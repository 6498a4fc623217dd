"""Fixtures the pipeline's Hub tests share."""

import pytest


@pytest.fixture
def hub_env(monkeypatch, tmp_path):
    """A fresh Hub cache, no token, online, the default timeout, no retries (so failures are fast)."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    for var in ("HF_HUB_CACHE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HEADGEOMETRY_HUB_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HEADGEOMETRY_HUB_RETRIES", "0")
    return monkeypatch
