"""The fault tests' figures, printed in pytest's terminal summary: how many bad inputs were tried, kill points
survived and concurrent trials held. Each test module counts into a module-level collection as its tests
run; a module that did not run (deselected, or not collected) prints nothing."""

from __future__ import annotations

import sys

# (test module, its collection, the summary line for a non-empty collection)
FIGURES = (
    ("tests.faults.test_store_bad_inputs", "TRIED",
     lambda tried: f"bad inputs tried: {len(tried)} ({len(set(tried))} kinds)"),
    ("tests.faults.test_store_kills", "SURVIVED",
     lambda survived: "kill points survived: " + ", ".join(f"{k} {v}" for k, v in survived.items())
     + f"; total {sum(survived.values())}"),
    ("tests.faults.test_store_concurrent", "HELD",
     lambda held: "concurrent trials held: " + ", ".join(f"{k} {v}" for k, v in held.items())),
)


def figure_lines() -> list[str]:
    lines = []
    for module, name, line in FIGURES:
        collected = getattr(sys.modules.get(module), name, None)
        if collected:
            lines.append(line(collected))
    return lines


def pytest_terminal_summary(terminalreporter) -> None:
    lines = figure_lines()
    if lines:
        terminalreporter.write_sep("-", "fault-test figures")
        for line in lines:
            terminalreporter.write_line(line)
