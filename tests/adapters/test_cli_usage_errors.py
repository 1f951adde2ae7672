"""Usage errors found while typer parses the command line are usage errors (exit 2, typer's own
message), never an "internal error" with a crash log, and nothing is written."""

from __future__ import annotations

import pytest

from tests.conftest import Repo, run_cli

PATCH = "*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch\n"


@pytest.mark.parametrize(
    "args",
    [
        ["apply", "-", "--attempt", "abc"],
        ["apply", "-", "--attempt", "0"],
        ["apply", "-", "--bogus"],
        ["nosuchcommand"],
        ["resolve", "abcdef"],
        ["resolve", "abcdef", "--as", "rejected"],  # no --note
        ["resolve", "abcdef", "--release", "--as", "rejected"],
        ["apply", "-", "--lease-seconds", "0"],
        ["mcp", "--lease-seconds", "nan"],  # refused at start, not at every call
    ],
)
def test_a_parse_error_exits_2_without_a_crash_log(repo: Repo, args: list[str]) -> None:
    before = repo.commit_count()
    result = run_cli(*args, "--repo", str(repo.path), input=PATCH)
    assert result.returncode == 2, result.stderr
    assert "internal error" not in result.stderr and "crash" not in result.stderr
    assert repo.commit_count() == before and repo.call_ids() == []
    assert not repo.state_dir().exists()


@pytest.mark.parametrize("command", [["apply", "-"], ["audit"]])
def test_a_branch_name_that_is_not_utf8_is_a_usage_error(repo: Repo, command: list[str]) -> None:
    """Found by the fuzzer: a --branch argument that is not UTF-8 reached libgit2 as surrogates
    and crashed (exit 3)."""
    before = repo.commit_count()
    result = run_cli(*command, "--branch", "\udce9", "--repo", str(repo.path), input=PATCH)
    assert result.returncode == 2, result.stderr
    assert "not a valid branch name" in result.stderr
    assert repo.commit_count() == before and repo.call_ids() == []
