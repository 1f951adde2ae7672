"""Every command has help text, and the command list is the designed one."""

from __future__ import annotations

import json

import pytest
import typer.core
import typer.main
from typer.testing import CliRunner

from applyonce.adapters.cli import app
from applyonce.adapters.cli.app import COMMANDS as MODULES
from applyonce.adapters.cli.app import import_commands
from applyonce.errors import EXIT_USAGE
from tests.conftest import run_cli

COMMANDS = list(MODULES)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert len(result.output.strip().splitlines()) > 3
    # The command's module is loaded now that it ran: its registration can be read.
    doc = next(c for c in app.registered_commands if (c.name or c.callback.__name__) == command)  # type: ignore[union-attr]
    assert doc.callback.__doc__ and doc.callback.__doc__.strip()  # type: ignore[union-attr]


def test_command_list_is_the_designed_one() -> None:
    assert set(COMMANDS) >= {
        "apply",
        "recover",
        "replay",
        "audit",
        "show",
        "log",
        "resolve",
        "demo",
    }


def test_help_lists_the_commands_in_the_order_a_user_meets_them() -> None:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "100"})
    listed = result.output.split("Commands:\n", 1)[1].split()
    names = [word for word in listed if word in COMMANDS]
    assert names[:4] == ["apply", "revert", "recover", "audit"]
    assert sorted(names) == sorted(COMMANDS)


def test_every_command_a_module_registers_is_listed_with_its_module() -> None:
    """A command line loads only the module :data:`COMMANDS` names for its command: a command
    registered elsewhere, or listed under another module, would still run (an unknown name loads
    every module) but slowly, and ``--help`` would list it last."""
    import_commands()
    built = typer.main.get_command(app)
    assert isinstance(built, typer.core.TyperGroup)
    assert sorted(built.commands) == sorted(COMMANDS)
    for info in app.registered_commands:
        assert info.callback is not None
        name = info.name or info.callback.__name__.replace("_", "-")
        assert info.callback.__module__ == f"applyonce.adapters.cli.{MODULES[name]}", name


def test_an_unknown_command_is_a_usage_error_that_names_the_near_ones() -> None:
    """A name no module is known for loads them all, so that the suggestion can name commands
    that were not loaded yet; nothing runs, no traceback."""
    typo = run_cli("aply")
    assert (typo.returncode, typo.stdout) == (EXIT_USAGE, "")
    assert typo.stderr == (
        "error: no such command 'aply'. Did you mean 'apply', 'replay'?; see 'applyonce --help'\n"
    )
    assert "Traceback" not in typo.stderr
    unknown = run_cli("bogus", "--json")
    assert unknown.returncode == EXIT_USAGE
    error = json.loads(unknown.stdout)["error"]
    assert (error["kind"], error["message"]) == ("usage", "No such command 'bogus'.")


def test_shell_completion_lists_commands_of_every_module() -> None:
    env = {"_APPLYONCE_COMPLETE": "complete_bash", "COMP_WORDS": "applyonce re", "COMP_CWORD": "1"}
    asked = run_cli(env=env)
    assert (asked.returncode, asked.stdout.split()) == (
        0,
        ["revert", "recover", "replay", "resolve"],
    )
    # And the options of a command whose module a completion loads on its own.
    env = {**env, "COMP_WORDS": "applyonce show --js", "COMP_CWORD": "2"}
    assert run_cli(env=env).stdout.split() == ["--json"]
