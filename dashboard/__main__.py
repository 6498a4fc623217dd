"""python -m dashboard [--store PATH] [--port 5006] [--address 127.0.0.1]: serve the app on localhost.

The same as ``panel serve dashboard/app.py --address 127.0.0.1 --warm --args --store PATH``, with localhost as
the default address (``panel serve`` alone listens on every interface) and the pages built from the start
(``--warm``). Export static pages with ``python -m dashboard.export OUT/``.

A first argument naming a command of the console script (``serve``, ``export``) runs that command as
``headgeometry-dashboard`` does (``dashboard.cli``): ``python -m dashboard export OUT/`` exports.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from dashboard import cli, data
from pipeline.store.location import DEFAULT_HELP

APP = Path(__file__).resolve().parent / "app.py"


def serve_command(store: Path, port: int, address: str, show: bool) -> list[str]:
    """The ``panel serve`` command line: bound to ``address``, websocket origin limited to it, the app script run
    once at start (``--warm``: it starts building every page a first visit shows, ``app.warm``)."""
    cmd = [sys.executable, "-m", "panel", "serve", str(APP), "--port", str(port), "--address", address,
           "--allow-websocket-origin", f"{address}:{port}", "--warm"]
    if address in ("127.0.0.1", "localhost"):
        cmd += ["--allow-websocket-origin", f"localhost:{port}"]
    if show:
        cmd.append("--show")
    return cmd + ["--args", "--store", str(store)]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in cli.COMMANDS:  # `python -m dashboard export OUT`: the console script's command
        return cli.main(argv)
    parser = argparse.ArgumentParser(prog="python -m dashboard", description=__doc__.split("\n\n")[0],
                                     epilog="python -m dashboard export OUT [OPTIONS]: write static pages instead "
                                     "(= python -m dashboard.export)")
    parser.add_argument("--store", default=None, help=f"store to read (default: {DEFAULT_HELP}; the demo in "
                        "place of a user or current-folder store with no computed model)")
    parser.add_argument("--port", type=int, default=5006)
    parser.add_argument("--address", default="127.0.0.1",
                        help="interface to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--show", action="store_true", help="open a browser tab")
    args = parser.parse_args(argv)
    store = data.store_path(["--store", args.store] if args.store else [])
    cmd = serve_command(store, args.port, args.address, args.show)
    print(f"serving {store} at http://{args.address}:{args.port}/app", flush=True)
    os.execv(cmd[0], cmd)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
