"""The fault tests' figures, printed in pytest's terminal summary: how many bad inputs were tried, kill points
survived and concurrent trials held.

A test records its figures with :func:`record`; after the test they travel with its teardown report
(``user_properties``: ``tests/faults/conftest.py``), and the hooks here count them in the process that prints the
summary: pytest-xdist's controller under ``-n`` (which runs no test and loads no conftest below ``tests/``, so
``tests/conftest.py`` imports these hooks), else the one process. A figure of no test that ran prints nothing.
"""

from __future__ import annotations

from collections import Counter

FIGURE = "fault-test figure"  # the user_properties name of a recorded figure
# summary line -> how its counts (label -> amount) are written
LINES = {
    "bad inputs tried": lambda c: f"{sum(c.values())} ({len(c)} kinds)",
    "kill points survived": lambda c: ", ".join(f"{k} {v}" for k, v in c.items()) + f"; total {sum(c.values())}",
    "concurrent trials held": lambda c: ", ".join(f"{k} {v}" for k, v in c.items()),
}
_RECORDED: list[tuple[str, str, int]] = []  # this process's test, until its teardown
COUNTS: dict[str, Counter] = {}  # every test's, in the process that prints the summary


def record(line: str, label: str, amount: int = 1) -> None:
    """Count ``amount`` more of ``label`` on the summary line ``line`` (one of ``LINES``)."""
    assert line in LINES, line
    _RECORDED.append((line, label, amount))


def drain() -> list[tuple[str, str, int]]:
    """The figures recorded since the last call, forgotten here."""
    out = list(_RECORDED)
    _RECORDED.clear()
    return out


def pytest_runtest_logreport(report) -> None:
    if report.when != "teardown":
        return
    for line, label, amount in (value for name, value in report.user_properties if name == FIGURE):
        COUNTS.setdefault(line, Counter())[label] += amount


def figure_lines() -> list[str]:
    return [f"{line}: {write(COUNTS[line])}" for line, write in LINES.items() if COUNTS.get(line)]


def pytest_terminal_summary(terminalreporter) -> None:
    lines = figure_lines()
    if lines:
        terminalreporter.write_sep("-", "fault-test figures")
        for line in lines:
            terminalreporter.write_line(line)
