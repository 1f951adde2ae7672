"""A fresh ``applyonce`` process imports only what its command uses: cold start is import time.

Each case runs the real command line in a new interpreter and lists the modules it imported by
the time it exited (``sys.modules``, read at exit).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Repo, apply

PATCH = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"

# What no call needs: the adapters' (MCP, schemas, tool calls, the demo), the other commands' use
# cases, and typer's help panels.
NOT_FOR_A_CALL = [
    "rich",
    "mcp",
    "jsonschema",
    "anyio",
    "applyonce.adapters.mcp_server",
    "applyonce.adapters.agents",
    "applyonce.adapters.toolcalls",
    "applyonce.adapters.texteditor",
    "applyonce.adapters.schemas",
    "applyonce.adapters.results",
    "applyonce.adapters.demo",
    "applyonce.flow.inspect.audit",
    "applyonce.flow.inspect.replay",
    "applyonce.flow.call.revert",
    "applyonce.flow.inspect.view",
    # Recovery and the views of the calls: a call that takes over a dead one's loads recovery
    # then, and only then.
    "applyonce.flow.recovery",
    "applyonce.flow.inspect.calls",
    "typer.rich_utils",
    "tomllib",  # only a patch that writes a .toml file has it parsed
    # Only a postgresql:// ledger loads the driver; a call on the local ledger never does.
    "psycopg",
    "applyonce.state.postgres",
    # The other commands' modules: a command line loads the module of the command it runs.
    "applyonce.adapters.cli.revert",
    "applyonce.adapters.cli.inspect",
    "applyonce.adapters.cli.recovery",
    "applyonce.adapters.cli.serve",
]
# What printing the version or a command's help needs none of: Git, the ledger, the library (typer
# itself builds a command's options with pydantic's type adapters).
NOT_FOR_HELP = ["pygit2", "sqlite3", "applyonce.executor", "applyonce.flow", "applyonce.core"]


def imported_by(args: list[str], tmp_path: Path, *, stdin: str = "") -> tuple[str, list[str]]:
    """Run ``applyonce ARGS`` in a new interpreter: its stdout, and the modules it imported."""
    listing = tmp_path / "modules.json"
    code = (
        "import atexit, json, sys\n"
        f"atexit.register(lambda: open({str(listing)!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
        f"sys.argv = ['applyonce', *{args!r}]\n"
        "from applyonce.adapters.cli import main\n"
        "main()\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        input=stdin.encode(),
        capture_output=True,
        env=dict(os.environ),
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr.decode()
    return run.stdout.decode(), json.loads(listing.read_text())


def loaded(modules: list[str], names: list[str]) -> list[str]:
    return [m for m in modules if any(m == n or m.startswith(f"{n}.") for n in names)]


def test_a_call_imports_only_what_it_uses(repo: Repo, tmp_path: Path) -> None:
    stdout, modules = imported_by(["apply", "--repo", str(repo.path), "-"], tmp_path, stdin=PATCH)
    assert stdout == "Success. Updated the following files:\nM src/util.py\n"
    assert loaded(modules, NOT_FOR_A_CALL) == []
    # The call did use Git and the ledger: the listing is of a process that worked.
    assert {"pygit2", "sqlite3", "applyonce.flow.call.apply"} <= set(modules)


@pytest.mark.parametrize("args", [["--version"], ["apply", "--help"]])
def test_the_version_and_help_import_no_git_no_models(args: list[str], tmp_path: Path) -> None:
    stdout, modules = imported_by(args, tmp_path)
    assert stdout.startswith("applyonce 0.2.0" if args == ["--version"] else "Usage: applyonce")
    assert loaded(modules, NOT_FOR_HELP + NOT_FOR_A_CALL) == []
    # --version is the group's own option: no command's module at all.
    commands = ["applyonce.adapters.cli.apply"] if args == ["--version"] else []
    assert loaded(modules, commands) == []


def test_the_command_list_loads_every_command_but_no_library(tmp_path: Path) -> None:
    stdout, modules = imported_by(["--help"], tmp_path)
    assert stdout.startswith("Usage: applyonce")
    # Each command's one-line help is its function's docstring: every command module is loaded,
    # and nothing any of them imports only when it runs.
    for module in ("apply", "revert", "inspect", "recovery", "serve"):
        assert f"applyonce.adapters.cli.{module}" in modules
    assert loaded(modules, [*NOT_FOR_HELP, "mcp", "jsonschema", "psycopg", "rich"]) == []


@pytest.mark.parametrize(
    ("command", "module"), [("show", "inspect"), ("recover", "recovery"), ("revert", "revert")]
)
def test_another_command_loads_its_own_module_only(
    command: str, module: str, tmp_path: Path
) -> None:
    stdout, modules = imported_by([command, "--help"], tmp_path)
    assert stdout.startswith(f"Usage: applyonce {command}")
    others = {"apply", "revert", "inspect", "recovery", "serve"} - {module}
    if module == "revert":
        others.discard("apply")  # revert prints a call's result as apply does
    assert loaded(modules, [f"applyonce.adapters.cli.{other}" for other in others]) == []


def test_a_call_that_writes_toml_still_has_it_checked(repo: Repo) -> None:
    bad = "*** Begin Patch\n*** Add File: conf.toml\n+a = \n*** End Patch\n"
    result = apply(repo, bad)
    assert result.returncode == 1
    assert "conf.toml: Invalid value (at line 1, column 5)" in result.stderr
    assert not (repo.path / "conf.toml").exists()
