"""A call whose checkout does not follow it (the sync is left for later: the user's git holds
``index.lock``, or a file the call changed was edited meanwhile) says so everywhere the model or
the user reads: the CLI's stdout after its summary, ``--json`` (``checkout_behind``), the MCP
text and structured result, ``recover`` (not settled: exit 4) and ``show`` — each time with the
command that brings the checkout in line."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp import ClientSession

from tests.conftest import NEW_FILE_PATCH, UTIL_PATCH, Repo, apply, run_cli
from tests.support.mcp_session import SUCCESS, text_of, with_session

pytestmark = pytest.mark.sampled(every=2, by="module")

SUMMARY = "Success. Updated the following files:\nM src/util.py\n"


def hold_index_lock(repo: Repo) -> Path:
    """``index.lock`` created as git creates it (O_CREAT|O_EXCL), left as a killed git leaves it."""
    lock = repo.path / ".git" / "index.lock"
    os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    return lock


def not_updated(lock: Path) -> str:
    return (
        f"it was not updated: {lock} stays held by another git process; if no git command is"
        f" running, remove it with rm {lock}"
    )


def recover(repo: Repo) -> tuple[int, str]:
    done = run_cli("recover", "--repo", str(repo.path))
    return done.returncode, done.stdout


def test_a_sync_the_users_git_holds_off_is_said_until_recover_brings_the_checkout_in_line(
    repo: Repo,
) -> None:
    lock = hold_index_lock(repo)
    first = apply(repo, UTIL_PATCH)
    assert first.returncode == 0, first.stderr
    assert first.stdout == SUMMARY + (
        f"note: the checkout does not show this commit of main ({not_updated(lock)}); run"
        " 'applyonce recover' to bring it in line\n"
    )
    second = apply(repo, NEW_FILE_PATCH, "--json")
    assert second.returncode == 0, second.stderr
    receipt = json.loads(second.stdout)
    assert receipt["status"] == "committed"
    assert receipt["checkout_behind"] == [
        {
            "worktree": None,
            "branch": "main",
            "paths": [],
            "reason": not_updated(lock),
            "command": "applyonce recover",
        }
    ]
    # Not settled while the checkout is behind: recover says so, call by call, and exits 4.
    code, out = recover(repo)
    assert code == 4, out
    behind = [line for line in out.splitlines() if "checkout behind" in line]
    assert len(behind) == 2, out
    assert "not everything is settled" in out
    call = receipt["call_id"]
    shown = run_cli("show", call[:12], "--repo", str(repo.path))
    assert shown.returncode == 0, shown.stderr
    assert (
        "checkout  behind: the checkout sync after its commit did not finish;"
        " run 'applyonce recover'"
    ) in shown.stdout
    shown_json = json.loads(run_cli("show", call[:12], "--repo", str(repo.path), "--json").stdout)
    assert [n["command"] for n in shown_json["checkout_behind"]] == ["applyonce recover"]
    # The user's git is done: recover brings the checkout in line, and nothing is said again.
    lock.unlink()
    code, out = recover(repo)
    assert code == 0, out
    assert repo.git("status", "--porcelain") == ""
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    shown = run_cli("show", call[:12], "--repo", str(repo.path))
    assert "checkout" not in shown.stdout.replace("checkout sync", "")
    assert (
        "checkout_behind"
        not in run_cli("show", call[:12], "--repo", str(repo.path), "--json").stdout
    )
    assert recover(repo) == (0, "nothing to recover: every call is settled\n")


def test_a_file_edited_after_the_publish_is_said_with_a_command_that_keeps_the_edit(
    repo: Repo,
) -> None:
    base = repo.head()
    edit = f"printf 'VALUE = 1  # mine\\n' > {repo.path}/src/util.py"
    done = apply(repo, UTIL_PATCH, "--check", edit)
    assert done.returncode == 0, done.stderr
    root = repo.path.resolve()
    command = (
        f"git checkout --detach && git reset --soft {base[:12]} && git stash && git checkout"
        " main && git stash pop"
    )
    assert done.stdout == SUMMARY + (
        f"note: the checkout at {root} does not show main's version of src/util.py (your"
        " uncommitted changes there were made on an older version, and are left as they are;"
        " the command that follows keeps them, a conflict marked in the file and kept in the"
        f" stash); run '{command}' to bring it in line\n"
    )
    assert (repo.path / "src/util.py").read_text() == "VALUE = 1  # mine\n"
    code, out = recover(repo)
    assert code == 4, out
    assert "checkout behind: your uncommitted changes there were made on an older version" in out
    assert f"run '{command}'" in out
    # The command: the edit and the branch's change both touch the line, so it is marked as a
    # conflict there (and kept in the stash), on the branch's tip; nothing is lost.
    ran = subprocess.run(["sh", "-c", command], cwd=repo.path, capture_output=True, text=True)
    assert ran.returncode != 0
    assert repo.git("symbolic-ref", "HEAD").strip() == "refs/heads/main"
    marked = (repo.path / "src/util.py").read_text()
    assert "VALUE = 1  # mine" in marked and "VALUE = 2" in marked and "<<<<<<<" in marked
    assert "+VALUE = 1  # mine" in repo.git("stash", "show", "-p")
    # The user resolves it: the checkout now shows the branch, their edit on top.
    (repo.path / "src/util.py").write_text("VALUE = 2  # mine\n")
    repo.git("reset", "-q", "--", "src/util.py")
    repo.git("stash", "drop", "-q")
    code, out = recover(repo)
    assert code == 0, out
    assert repo.git("status", "--porcelain") == " M src/util.py\n"


def test_the_mcp_text_and_structured_result_say_the_checkout_is_behind(
    repo: Repo, tmp_path: Path
) -> None:
    lock = hold_index_lock(repo)
    seen: dict[str, Any] = {}

    async def scenario(session: ClientSession) -> None:
        seen["tools"] = (await session.list_tools()).tools
        seen["call"] = await session.call_tool("apply_patch", {"patch": UTIL_PATCH})

    with_session(repo, tmp_path / "server.err", scenario)
    result = seen["call"]
    assert result.is_error is False
    assert text_of(result) == SUCCESS + (
        f"note: the checkout does not show this commit of main ({not_updated(lock)}); run"
        " 'applyonce recover' to bring it in line\n"
    )
    data = result.structured_content
    [tool] = [t for t in seen["tools"] if t.name == "apply_patch"]
    assert list(Draft202012Validator(tool.output_schema).iter_errors(data)) == []
    assert data["status"] == "committed"
    assert data["checkout_behind"] == [
        {
            "worktree": None,
            "branch": "main",
            "paths": [],
            "reason": not_updated(lock),
            "command": "applyonce recover",
        }
    ]
