"""The demo runs end to end on a scratch repo; every command has help text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from applyonce.cli import app
from tests.conftest import run_cli


def test_demo_runs_end_to_end_outside_the_source_tree(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    result = run_cli("demo", "--into", str(target), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "killed by SIGKILL at after-publish" in out
    assert re.search(r"prepared\s+committed\s+commit [0-9a-f]{12} is on refs/heads/main", out)
    assert "settled by recover earlier; returned, not applied again" in out
    assert "replayed: the stored receipt, nothing ran" in out
    assert "rejected, exit 1: error: src/shop/cart.py: hunk 1" in out
    assert "audited 2 Call-Id commit(s) on refs/heads/main and 3 receipt(s): clean" in out
    counts = re.findall(r"commits carrying Call-Id [0-9a-f]{12}: (\d+)", out)
    assert counts == ["1", "1", "1"]
    assert out.rstrip().endswith(f"every step behaved as promised; the scratch repo stays at {target}")
    assert (target / ".git").is_dir()


def test_demo_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("x")
    result = run_cli("demo", "--into", str(tmp_path))
    assert result.returncode == 2 and result.stderr.startswith("error: ")
    assert not (tmp_path / ".git").exists()


COMMANDS = [c.name or c.callback.__name__ for c in app.registered_commands]  # type: ignore[union-attr]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert len(result.output.strip().splitlines()) > 3
    doc = next(c for c in app.registered_commands if (c.name or c.callback.__name__) == command)  # type: ignore[union-attr]
    assert doc.callback.__doc__ and doc.callback.__doc__.strip()  # type: ignore[union-attr]


def test_command_list_is_the_designed_one() -> None:
    assert set(COMMANDS) >= {"apply", "recover", "replay", "audit", "show", "log", "resolve", "demo"}
