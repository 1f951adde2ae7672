"""Every command has help text, and the command list is the designed one."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from applyonce.adapters.cli import app

COMMANDS = [c.name or c.callback.__name__ for c in app.registered_commands]  # type: ignore[union-attr]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert len(result.output.strip().splitlines()) > 3
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
