"""headgeometry-dashboard: serve the dashboard, or export it as static pages (the installed console script).

``headgeometry-dashboard serve [OPTIONS]`` is ``python -m dashboard [OPTIONS]`` (itself ``panel serve
dashboard/app.py`` bound to localhost), and ``headgeometry-dashboard export OUT [OPTIONS]`` is
``python -m dashboard.export OUT [OPTIONS]``: the options are passed on unchanged. Both first check that
the installed Bokeh and Panel are the tested releases (:mod:`dashboard.versions`).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from pipeline.store.location import DEFAULT_HELP
from pipeline.version import version_line

PROG = "headgeometry-dashboard"

# subcommand -> (module whose main(argv) runs it, its module form, what it does)
COMMANDS = {
    "serve": ("dashboard.__main__", "python -m dashboard",
              "serve the app on this machine (default http://127.0.0.1:5006/app)"),
    "export": ("dashboard.export", "python -m dashboard.export",
               "write the dashboard as static HTML pages into a folder (no server needed to open them)"),
}

EXAMPLES = f"""\
examples:
  {PROG} serve                           serve the default store at http://127.0.0.1:5006/app
  {PROG} serve --store my.zarr --show    serve another store and open a browser tab
  {PROG} export site/                    static pages: site/index.html, one page per model, orbits
  {PROG} export site/ --self-contained   pages that work offline (BokehJS inlined)
  {PROG} serve --help                    every option of a command
  {PROG} --version                       the installed version of headgeometry

The store is --store, else {DEFAULT_HELP};
the demo in place of a user or current-folder store with no computed model.
Module forms: {'; '.join(f"{name} = `{form}`" for name, (_m, form, _h) in COMMANDS.items())}.
Compute profiles with `headgeometry profiles MODEL` (= `python -m pipeline profiles MODEL`)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, usage=f"{PROG} {{{','.join(COMMANDS)}}} [OPTIONS]",
        description="The dashboard of the headgeometry store: every attention head of a model on the 3-simplex, "
        "and the orbit experiment.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_argument_group("commands")
    for name, (_module, form, what) in COMMANDS.items():
        group.add_argument(name, nargs="?", help=f"{what} (= {form})")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv and argv[0] == "--version":
        print(version_line(PROG))
        return 0
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"error: unknown command {command!r}; the commands are {', '.join(COMMANDS)} "
              f"(see `{PROG} --help`)", file=sys.stderr)
        return 2
    if not {"-h", "--help"} & set(rest):
        from dashboard.versions import VersionError, check_versions

        try:
            check_versions()
        except VersionError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    module = importlib.import_module(COMMANDS[command][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
