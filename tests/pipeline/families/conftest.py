"""One tiny model per case, built, saved and probed once per test session (per xdist worker)."""

from __future__ import annotations

import pytest

from tests.pipeline.families.cases import CASES, build, probe, save


@pytest.fixture(scope="session")
def family_model(tmp_path_factory):
    """``family_model(case_name) -> (model, folder, probe)``: the case's model, its save_pretrained folder (named
    ``tiny-<case>``) and what its forward pass computed (``cases.probe``)."""
    made = {}

    def get(name: str):
        if name not in made:
            case = CASES[name]
            model = build(case)
            folder = save(model, case, tmp_path_factory.mktemp("families") / f"tiny-{name.replace('/', '-')}")
            made[name] = (model, folder, probe(model, case))
        return made[name]

    return get
