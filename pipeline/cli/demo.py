"""``python -m pipeline demo PATH``: copy the demo store out as a writable store."""

from __future__ import annotations

import argparse
import sys

HELP = """\
Copy the demo store (the committed store's profiles and orbit experiment, bundled with the package and
read-only) to PATH, a new folder, as a store you can write: add models with
`headgeometry profiles MODEL --store PATH`, view it with `headgeometry-dashboard serve --store PATH`, or make
it the default with HEADGEOMETRY_STORE=PATH. Nothing is overwritten: PATH must not exist (or be an empty
folder).
"""


def register(sub) -> None:
    p = sub.add_parser("demo", help="copy the bundled demo store out as a writable store",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="example:\n  headgeometry demo ~/demo.zarr && headgeometry list --store ~/demo.zarr")
    p.add_argument("path", metavar="PATH", help="the new store's folder")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from pipeline.store import StoreError
    from pipeline.store.demo import copy_demo
    from pipeline.store.location import demo_store

    try:
        dest = copy_demo(args.path)
    except (StoreError, OSError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(f"copied the demo store {demo_store()} to {dest}; use it with --store {dest} or HEADGEOMETRY_STORE={dest}")
    return 0
