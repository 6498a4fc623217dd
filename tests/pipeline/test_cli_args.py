"""pipeline.cli_args: the one dataclass -> argparse generator and the one command writer, for both CLIs."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import pytest

from pipeline import cli_args


@dataclass
class Options:
    paths: list[str] = field(default_factory=list, metadata={"help": "inputs", "positional": True, "metavar": "P"})
    name: str | None = field(default=None, metadata={"help": "a name"})
    count: int = field(default=3, metadata={"help": "how many"})
    rate: float | None = field(default=None, metadata={"help": "a rate of 5%"})
    loud: bool = field(default=False, metadata={"help": "say more"})
    sizes: tuple[int, ...] = field(default=(4, 8), metadata={"help": "sizes"})
    kind: str = field(default="a", metadata={"help": "which", "choices": ("a", "b")})


def _parser(**kw) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="x")
    cli_args.add_dataclass_arguments(p, Options, **kw)
    return p


def test_defaults_mode_gives_every_field_its_default_and_parses_each_kind():
    args = _parser().parse_args([])
    assert vars(args) == {"paths": [], "name": None, "count": 3, "rate": None, "loud": False, "sizes": (4, 8),
                          "kind": "a"}
    args = _parser().parse_args(["p1", "p2", "--name", "n", "--count", "5", "--rate", "0.5", "--loud",
                                 "--sizes", "1", "2", "3", "--kind", "b"])
    assert vars(args) == {"paths": ["p1", "p2"], "name": "n", "count": 5, "rate": 0.5, "loud": True,
                          "sizes": [1, 2, 3], "kind": "b"}
    with pytest.raises(SystemExit):
        _parser().parse_args(["--kind", "c"])
    with pytest.raises(SystemExit):
        _parser().parse_args(["--count", "many"])


def test_given_only_mode_leaves_out_what_was_not_given_and_shows_defaults_in_the_help():
    p = _parser(given_only=True, include=lambda f: f.name != "paths",
                section=lambda f: "numbers" if f.name in ("count", "rate", "sizes") else "rest")
    assert vars(p.parse_args([])) == {}
    assert vars(p.parse_args(["--no-loud", "--count", "2"])) == {"loud": False, "count": 2}
    text = p.format_help()
    assert "numbers:" in text and "rest:" in text and "paths" not in p.format_usage()
    assert "how many (default 3)" in text and "sizes (default 4 8)" in text and "a rate of 5%" in text


def test_a_written_command_parses_back_to_its_values():
    values = {"name": "m", "count": 7, "rate": 0.25, "loud": True, "sizes": (2, 6), "kind": "b"}
    line = cli_args.command("prog sub", ["in1", "in2"], values)
    assert line == "prog sub in1 in2 --name m --count 7 --rate 0.25 --loud --sizes 2 6 --kind b"
    back = vars(_parser().parse_args(line.split()[2:]))
    assert back == {"paths": ["in1", "in2"], **values, "sizes": [2, 6]}
    assert cli_args.flags({"loud": False, "rate": None, "x_y": 1e-5}) == ["--no-loud", "--x-y 1e-05"]


def test_both_clis_use_it():
    """profiles_cli and the orbits CLI keep no generator of their own; the commands they store are cli_args'."""
    import inspect

    from pipeline.cli import profiles as profiles_cli
    from pipeline.orbits import cli, config
    from pipeline.registry.models import compute_command

    assert profiles_cli.add_dataclass_arguments is cli_args.add_dataclass_arguments and not hasattr(config,
                                                                                                     "config_flags")
    assert "add_dataclass_arguments(p, RunOptions)" in inspect.getsource(profiles_cli.register)
    assert "add_dataclass_arguments" in inspect.getsource(cli.add_config_arguments)
    assert compute_command("./ckpt", "n", True) == cli_args.command("python -m pipeline profiles", ["./ckpt"],
                                                                    {"name": "n", "fold_ln": True})
    cfg = config.recipe_config("long", seed=9, qk_bias=True)
    assert config.command_for(cfg) == "python -m pipeline orbits --recipe long --seed 9 --qk-bias"
