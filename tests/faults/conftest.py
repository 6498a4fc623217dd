"""The fault tests' figures (:mod:`tests.faults.figures`): what each test recorded, put on its report."""

from __future__ import annotations

import pytest

from tests.faults.figures import FIGURE, drain


@pytest.fixture(autouse=True)
def _figures_of_the_test(request):
    drain()  # nothing left over from another test run in this process
    yield
    request.node.user_properties.extend((FIGURE, figure) for figure in drain())
