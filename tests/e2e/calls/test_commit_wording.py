"""The commit's wording: ``--message`` (subject, optional body), ``--trailer KEY=VALUE``, an MCP or
adapter ``summary``; applyonce's trailers stay the last paragraph, where git finds them; and a
warning when no git identity is configured. Real CLI processes on real repositories.
"""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path
from typing import Any

import pygit2
import pytest
from pygit2.enums import ConfigLevel

from applyonce.adapters.agents import ToolCallAdapter
from tests.conftest import UTIL_PATCH, Repo, apply, git_trailers, run_cli, stored_text

pytestmark = pytest.mark.sampled(every=2, by="module")

OURS = ["Call-Id", "Contract-Sha256", "Attempt", "Tool", "Tool-Version", "Args-Sha256"]


def _parsed_trailers(repo: Repo) -> list[str]:
    """The trailers of HEAD as git's own parser reads them."""
    return [key for key, _ in git_trailers(repo.git("log", "-1", "--format=%B"))]


def test_message_sets_the_subject_and_body(repo: Repo) -> None:
    result = apply(repo, UTIL_PATCH, "--message", "Raise VALUE\n\nThe limit was too low.\nSee #12.")
    assert result.returncode == 0, result.stderr
    assert repo.git("log", "-1", "--format=%s").strip() == "Raise VALUE"
    assert repo.git("log", "-1", "--format=%b").startswith("The limit was too low.\nSee #12.\n\n")
    assert _parsed_trailers(repo) == OURS


def test_trailers_go_before_applyonces_in_the_last_paragraph(repo: Repo) -> None:
    result = apply(
        repo,
        UTIL_PATCH,
        "-m",
        "Raise VALUE",
        "--trailer",
        "Co-authored-by=Ada Lovelace <ada@example.invalid>",
        "--trailer",
        "Reviewed-by=Grace <grace@example.invalid>",
    )
    assert result.returncode == 0, result.stderr
    assert _parsed_trailers(repo) == ["Co-authored-by", "Reviewed-by", *OURS]
    co_author = repo.git("log", "-1", "--format=%(trailers:key=Co-authored-by,valueonly)")
    assert co_author.strip() == "Ada Lovelace <ada@example.invalid>"
    # git's own trailer reader still finds the call, and so does applyonce's audit.
    [call_id] = repo.call_ids()
    assert len(call_id) == 64
    audit = run_cli("audit", "--repo", str(repo.path))
    assert audit.returncode == 0, audit.stdout + audit.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--trailer", "Call-Id=" + "0" * 64], "--trailer Call-Id: applyonce writes that trailer"),
        (["--trailer", "args-sha256=x"], "--trailer args-sha256: applyonce writes that trailer"),
        (["--trailer", "Snapshot-For=x"], "--trailer Snapshot-For: applyonce writes"),
        (["--trailer", "Reverts-Call-Id=x"], "--trailer Reverts-Call-Id: applyonce writes"),
        (["--trailer", "Co authored=x"], "not a git trailer key"),
        (
            ["--trailer", "Note=two\nlines"],
            "--trailer Note: the value is empty or has a line break",
        ),
        (["--trailer", "Note="], "the value is empty"),
        (["--trailer", "Co-authored-by"], "is not KEY=VALUE"),
        (["--message", "  \n\n "], "the commit message is empty"),
        (["--message", "s\n\n# ------------------------ >8 ------------------------"], "scissors"),
    ],
    ids=[
        "call-id",
        "args-sha-any-case",
        "snapshot-for",
        "reverts-call-id",
        "bad-key",
        "newline-value",
        "empty-value",
        "no-equals",
        "empty-subject",
        "scissors",
    ],
)
def test_a_bad_message_or_trailer_is_a_usage_error_and_writes_nothing(
    repo: Repo, args: list[str], says: str
) -> None:
    head = repo.head()
    result = apply(repo, UTIL_PATCH, *args)
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert says in result.stderr
    assert "Traceback" not in result.stderr
    assert repo.head() == head and not repo.state_dir().exists()


def test_the_message_is_not_part_of_the_calls_identity(repo: Repo) -> None:
    first = apply(repo, UTIL_PATCH, "-m", "First wording")
    assert first.returncode == 0
    count = repo.commit_count()
    again = apply(repo, UTIL_PATCH, "-m", "Second wording", "--trailer", "X-Note=again")
    # The same call: its stored result, its first commit, worded as it was then.
    assert again.returncode == 0 and stored_text(again.stdout) == first.stdout
    assert repo.commit_count() == count
    assert repo.git("log", "-1", "--format=%s").strip() == "First wording"


def test_a_crash_after_the_publish_of_a_worded_commit_is_adopted_and_audits_clean(
    repo: Repo,
) -> None:
    args = ("-m", "Raise VALUE", "--trailer", "Co-authored-by=Ada <ada@example.invalid>")
    crashed = apply(repo, UTIL_PATCH, *args, env={"APPLYONCE_FAULT": "after-publish"})
    assert crashed.returncode == -9  # SIGKILL
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    retry = apply(repo, UTIL_PATCH, *args)
    assert retry.returncode == 0 and stored_text(retry.stdout).startswith("Success.")
    assert len(repo.call_ids()) == 1
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0


def _tool_use(summary: Any, id: str = "toolu_01S") -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": id,
        "name": "apply_patch",
        "input": {"patch": UTIL_PATCH, "summary": summary},
    }


def test_a_summary_through_the_adapter_becomes_the_subject(repo: Repo) -> None:
    [result] = ToolCallAdapter(repo.path).run([_tool_use("Raise VALUE to 2")])
    assert result["is_error"] is False, result
    assert repo.git("log", "-1", "--format=%s").strip() == "Raise VALUE to 2"
    assert _parsed_trailers(repo)[-1] == "Tool-Call-Id"


@pytest.mark.parametrize(
    ("summary", "says"),
    [
        ("two\nlines", "String should match pattern"),
        ("x" * 101, "String should have at most 100 characters"),
        ("   ", "String should match pattern"),
        (7, "Input should be a valid string"),
    ],
    ids=["two-lines", "too-long", "blank", "not-text"],
)
def test_a_bad_summary_is_an_error_result_and_writes_nothing(
    repo: Repo, summary: Any, says: str
) -> None:
    head = repo.head()
    [result] = ToolCallAdapter(repo.path).run([_tool_use(summary)])
    assert result["is_error"] is True
    assert result["content"].startswith(f"error: bad tool arguments: summary: {says}")
    assert repo.head() == head and not repo.state_dir().exists()


def _no_identity_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "empty-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_AUTHOR", "GIT_COMMITTER"))}
    return {**env, "HOME": str(home), "XDG_CONFIG_HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}


WARNING = (
    "warning: no git identity configured (user.name/user.email); committed as applyonce "
    "<applyonce@localhost>; set them with git config\n"
)


def test_no_git_identity_warns_on_stderr_only(repo: Repo, tmp_path: Path) -> None:
    env = _no_identity_env(tmp_path)
    proc = subprocess.run(
        ["python3", "-m", "applyonce", "apply", "-", "--repo", str(repo.path)],
        input=UTIL_PATCH,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Success. Updated the following files:\nM src/util.py\n"
    assert proc.stderr == WARNING
    assert repo.git("log", "-1", "--format=%an <%ae>").strip() == "applyonce <applyonce@localhost>"


def test_a_configured_identity_signs_the_commit_and_no_warning(repo: Repo, tmp_path: Path) -> None:
    repo.git("config", "user.name", "Repo Person")
    repo.git("config", "user.email", "person@example.invalid")
    proc = subprocess.run(
        ["python3", "-m", "applyonce", "apply", "-", "--repo", str(repo.path)],
        input=UTIL_PATCH,
        capture_output=True,
        text=True,
        env=_no_identity_env(tmp_path),
        check=False,
    )
    assert proc.returncode == 0 and proc.stderr == ""
    assert (
        repo.git("log", "-1", "--format=%an <%ae>").strip()
        == "Repo Person <person@example.invalid>"
    )


def test_the_adapter_logs_the_identity_warning_and_keeps_it_out_of_the_tool_text(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for key in [k for k in os.environ if k.startswith(("GIT_AUTHOR", "GIT_COMMITTER"))]:
        monkeypatch.delenv(key)
    # libgit2 found the user's and the system's config when it was loaded, before the test
    # moved HOME: point it at an empty folder for this test.
    empty = tmp_path / "empty-config"
    empty.mkdir()
    levels = (ConfigLevel.SYSTEM, ConfigLevel.XDG, ConfigLevel.GLOBAL)
    saved = {level: pygit2.settings.search_path[level] for level in levels}
    try:
        for level in levels:
            pygit2.settings.search_path[level] = str(empty)
        with caplog.at_level(logging.WARNING, logger="applyonce.agents"):
            [result] = ToolCallAdapter(repo.path).run([_tool_use("Raise VALUE")])
    finally:
        for level, path in saved.items():
            pygit2.settings.search_path[level] = path
    assert result["content"] == "Success. Updated the following files:\nM src/util.py\n"
    assert WARNING.removeprefix("warning: ").strip() in caplog.text


def test_git_author_and_committer_variables_are_an_identity_as_for_git(
    repo: Repo, tmp_path: Path
) -> None:
    env = {
        **_no_identity_env(tmp_path),
        "GIT_AUTHOR_NAME": "Env Author",
        "GIT_AUTHOR_EMAIL": "author@example.invalid",
        "GIT_COMMITTER_NAME": "Env Committer",
        "GIT_COMMITTER_EMAIL": "committer@example.invalid",
    }
    proc = subprocess.run(
        ["python3", "-m", "applyonce", "apply", "-", "--repo", str(repo.path)],
        input=UTIL_PATCH,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0 and proc.stderr == ""
    people = repo.git("log", "-1", "--format=%an <%ae>|%cn <%ce>").strip()
    assert people == "Env Author <author@example.invalid>|Env Committer <committer@example.invalid>"
