"""``--diff`` on ``apply``, ``apply --dry-run`` and ``show``: the call's unified diff in git's
format, printed after the output (which stays byte for byte the agent's text), and ``git apply``
of it on the commit's parent gives the commit. In process (typer's runner), for speed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from applyonce.adapters.cli import app
from applyonce.executor import Executor
from tests.conftest import APP_PATCH, Repo, Run, stored_text


def run_cli(*args: str, input: str | None = None) -> Run:
    """The CLI in this process (the subprocess tests of the CLI live in test_cli.py)."""
    result = CliRunner().invoke(app, list(args), input=input)
    return Run(result.exit_code, result.stdout, result.stderr)


def apply(repo: Repo, patch: str, *args: str) -> Run:
    return run_cli("apply", "-", "--repo", str(repo.path), *args, input=patch)


SUCCESS = "Success. Updated the following files:\nM src/app.py\nA tests/test_app.py\n"


def test_apply_diff_prints_the_output_then_the_diff_and_git_apply_reproduces_the_commit(
    repo: Repo, tmp_path: Path
) -> None:
    result = apply(repo, APP_PATCH, "--diff")
    assert result.returncode == 0, result.stderr
    git_diff = repo.git("diff", "HEAD~1", "HEAD")
    assert result.stdout == SUCCESS + "\n" + git_diff  # the output first, unchanged

    where = tmp_path / "parent"
    repo.git("worktree", "add", "-q", "--detach", str(where), "HEAD~1")
    diff = result.stdout.removeprefix(SUCCESS + "\n").encode()
    done = subprocess.run(
        ["git", "-C", str(where), "apply", "--index", "-"],
        input=diff,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    tree = subprocess.run(
        ["git", "-C", str(where), "write-tree"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert tree == repo.git("rev-parse", "HEAD^{tree}").strip()

    # A repeat prints the same, from the commit; show --diff prints the same diff.
    again = apply(repo, APP_PATCH, "--diff")
    assert again.returncode == 0 and stored_text(again.stdout) == result.stdout
    [call_id] = repo.call_ids()
    shown = run_cli("show", call_id[:12], "--repo", str(repo.path), "--diff")
    assert shown.returncode == 0 and shown.stdout.endswith("\n\n" + git_diff)
    assert shown.stdout.startswith(f"call      {call_id}\n")


def test_apply_dry_run_diff_prints_the_plan_and_its_diff_and_writes_nothing(repo: Repo) -> None:
    head, status = repo.head(), repo.git("status", "--porcelain")
    objects = sorted(p.name for p in (repo.path / ".git" / "objects").rglob("*"))
    result = apply(repo, APP_PATCH, "--dry-run", "--diff")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("dry run: call ") and lines[1:3] == [
        "  update src/app.py  [match: exact]",
        "  add    tests/test_app.py",
    ]
    assert lines[3:5] == ["", "diff --git a/src/app.py b/src/app.py"]
    assert "+    return f'hello {name}!'\n" in result.stdout
    assert result.stdout.endswith("+assert greet('x') == 'hello x!'\nnothing was written\n")
    assert repo.head() == head and repo.git("status", "--porcelain") == status
    assert sorted(p.name for p in (repo.path / ".git" / "objects").rglob("*")) == objects
    assert not repo.state_dir().exists()

    # The diff it showed is the diff the call then commits.
    planned = (
        result.stdout.split("\n", 3)[3].removeprefix("\n").removesuffix("nothing was written\n")
    )
    assert apply(repo, APP_PATCH).returncode == 0
    assert planned == repo.git("diff", "HEAD~1", "HEAD")


def test_json_diff_fields(repo: Repo) -> None:
    dry = apply(repo, APP_PATCH, "--dry-run", "--diff", "--json")
    planned = json.loads(dry.stdout)
    assert planned["diffstat"]["files_changed"] == 2 and planned["diff"].startswith("diff --git")
    committed = json.loads(apply(repo, APP_PATCH, "--diff", "--json").stdout)
    assert committed["status"] == "committed" and committed["diff"] == planned["diff"]
    assert committed["diffstat"] == {
        "files_changed": 2,
        "insertions": 3,
        "deletions": 1,
        "files": [
            {"path": "src/app.py", "insertions": 1, "deletions": 1, "binary": False},
            {"path": "tests/test_app.py", "insertions": 2, "deletions": 0, "binary": False},
        ],
    }
    shown = run_cli("show", committed["call_id"], "--repo", str(repo.path), "--json", "--diff")
    assert json.loads(shown.stdout)["diff"] == committed["diff"]
    # Without --diff the receipt is printed as stored, byte for byte.
    plain = run_cli("show", committed["call_id"], "--repo", str(repo.path), "--json")
    receipt = repo.state_dir() / "receipts" / f"{committed['call_id']}.json"
    assert plain.stdout.encode() == receipt.read_bytes()


def test_a_rejected_call_has_no_diff(repo: Repo) -> None:
    stale = APP_PATCH.replace("return 'hello ' + name", "return 'bye'")
    result = apply(repo, stale, "--diff")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("error: src/app.py: hunk 1: expected lines not found")
    [call_id] = [p.stem for p in (repo.state_dir() / "receipts").glob("*.json")]
    shown = run_cli("show", call_id, "--repo", str(repo.path), "--diff")
    assert shown.stdout.endswith("diff      none: the call committed nothing\n")
    as_json = json.loads(
        run_cli("show", call_id, "--repo", str(repo.path), "--json", "--diff").stdout
    )
    assert as_json["diff"] is None and as_json["diffstat"] is None


def test_a_diff_that_cannot_be_read_never_turns_a_committed_call_into_an_error(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Executor, receipt: object) -> None:
        raise RuntimeError("object 1234 is missing")

    monkeypatch.setattr(Executor, "diff", broken)
    result = apply(repo, APP_PATCH, "--diff")
    assert result.returncode == 0 and result.stdout == SUCCESS
    assert result.stderr.startswith("warning: cannot show the diff of call ")
    assert "RuntimeError: object 1234 is missing" in result.stderr
    assert len(repo.call_ids()) == 1
