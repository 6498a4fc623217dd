"""Print the README's two commands, one a line: the ``bash`` code blocks of its "Two commands" section.

``.ci/run`` runs what this prints, verbatim, so CI runs the commands a newcomer copies and they cannot drift apart.
The README's shape is checked, not guessed: the section must hold exactly two ``bash`` blocks of one line each, the
first installing the project and serving the dashboard (``pip install`` ... ``panel serve``), the second installing
the test extras and running pytest. Anything else is an error that names what it found (exit status 1).

Standard library only: it runs on the system interpreter before any environment exists.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SECTION = "## Two commands"
BLOCK = re.compile(r"^```bash\n(.*?)^```$", re.M | re.S)
# what each command must contain, in order, for .ci/run's handling of it to make sense (the first is served and
# checked in a browser, the second's exit status is pytest's)
SHAPES = (("pip install", "panel serve"), ("pip install", "pytest"))


def commands(readme: str) -> list[str]:
    """The two commands of ``readme``'s "Two commands" section; ValueError naming what is wrong."""
    start = re.search(rf"^{re.escape(SECTION)}$", readme, re.M)
    if start is None:
        raise ValueError(f"no line {SECTION!r}")
    body = readme[start.end():]
    end = re.search(r"^## ", body, re.M)
    body = body[:end.start()] if end else body
    blocks = [b.strip() for b in BLOCK.findall(body)]
    if len(blocks) != len(SHAPES):
        raise ValueError(f"{len(blocks)} bash code blocks under {SECTION!r}, not {len(SHAPES)}: {blocks}")
    for i, (block, parts) in enumerate(zip(blocks, SHAPES, strict=True), 1):
        if "\n" in block:
            raise ValueError(f"command {i} spans several lines: {block!r}")
        at = 0
        for part in parts:
            at = block.find(part, at)
            if at < 0:
                raise ValueError(f"command {i} does not contain {' ... '.join(parts)!r} in that order: {block!r}")
    return blocks


def main(argv: list[str]) -> int:
    path = Path(argv[1] if len(argv) > 1 else "README.md")
    try:
        found = commands(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        print(f"{path}: the README's shape changed, so CI cannot run its commands: {exc}", file=sys.stderr)
        return 1
    print("\n".join(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
