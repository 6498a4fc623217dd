"""The command line's subcommands, one module each: ``profiles`` (profiles and list), ``verify``, ``demo``,
``real`` and ``report`` (report and baseline). ``python -m pipeline`` (``pipeline.__main__``) registers them with
``pipeline.orbits.cli``; each exposes ``register(subparsers)``."""
