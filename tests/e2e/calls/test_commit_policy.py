"""Commits that pass a repository's policy (docs/design.md §2): a DCO sign-off of the committer,
a bot author beside a human committer, co-authors, all before the ``Call-Id`` block, which stays
last and is read by the real ``git interpret-trailers``."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import ClientSession

from tests.conftest import UTIL_PATCH, Repo, apply, git_trailers, stored_json
from tests.support.mcp_session import PATCH, SUCCESS, text_of, with_session

HUMAN = {"GIT_COMMITTER_NAME": "Ada Human", "GIT_COMMITTER_EMAIL": "ada@example.invalid"}
BOT = "Patch Bot <bot@example.invalid>"


def _trailers(repo: Repo, rev: str = "HEAD") -> list[tuple[str, str]]:
    """The commit's trailers as git itself parses them."""
    return git_trailers(repo.git("log", "-1", "--format=%B", rev))


def test_signoff_author_and_co_authors_go_before_the_call_id_block(repo: Repo) -> None:
    result = apply(
        repo,
        UTIL_PATCH,
        "--signoff",
        "--author",
        BOT,
        "--co-author",
        "Ann Pair <ann@example.invalid>",
        "--co-author",
        "Bo Pair <bo@example.invalid>",
        "--trailer",
        "Refs=#42",
        env=HUMAN,
    )
    assert result.returncode == 0, result.stderr
    trailers = _trailers(repo)
    keys = [key for key, _ in trailers]
    assert trailers[:4] == [
        ("Refs", "#42"),
        ("Co-authored-by", "Ann Pair <ann@example.invalid>"),
        ("Co-authored-by", "Bo Pair <bo@example.invalid>"),
        ("Signed-off-by", "Ada Human <ada@example.invalid>"),
    ]
    # applyonce's block is last, whole: Call-Id first of it, nothing of the caller's after it.
    assert keys[4:] == [
        "Call-Id",
        "Contract-Sha256",
        "Attempt",
        "Tool",
        "Tool-Version",
        "Args-Sha256",
    ]
    assert (
        repo.git("log", "-1", "--format=%an <%ae>|%cn <%ce>")
        == f"{BOT}|Ada Human <ada@example.invalid>\n"
    )
    call_id = repo.git("log", "-1", "--format=%(trailers:key=Call-Id,valueonly)").strip()
    assert repo.call_ids() == [call_id]
    signed_off = repo.git("log", "-1", "--format=%(trailers:key=Signed-off-by,valueonly)")
    assert signed_off.strip() == "Ada Human <ada@example.invalid>"
    assert repo.git("fsck", "--strict", "--no-dangling") == ""


def test_applyonce_signoff_config_signs_off_every_call(repo: Repo) -> None:
    repo.git("config", "applyonce.signoff", "true")
    assert apply(repo, UTIL_PATCH, env=HUMAN).returncode == 0
    assert ("Signed-off-by", "Ada Human <ada@example.invalid>") in _trailers(repo)
    repo.git("reset", "-q", "--hard", "HEAD~1")
    other = "*** Begin Patch\n*** Add File: new.txt\n+new\n*** End Patch\n"
    assert apply(repo, other, "--no-signoff", env=HUMAN).returncode == 0
    assert "Signed-off-by" not in dict(_trailers(repo))


def test_a_sign_off_already_last_is_not_repeated(repo: Repo) -> None:
    result = apply(
        repo,
        UTIL_PATCH,
        "--signoff",
        "--trailer",
        "Signed-off-by=Ada Human <ada@example.invalid>",
        env=HUMAN,
    )
    assert result.returncode == 0, result.stderr
    assert [k for k, _ in _trailers(repo)].count("Signed-off-by") == 1


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ("--author", "Patch Bot"),
            "error: --author 'Patch Bot' is not 'Name <mail>'; write it as --author 'Name <mail@example.com>'\n",
        ),
        (
            ("--author", "<bot@example.invalid>"),
            "error: --author '<bot@example.invalid>' is not 'Name <mail>'",
        ),
        (("--co-author", "Ann <a b>"), "error: --co-author 'Ann <a b>' is not 'Name <mail>'"),
    ],
)
def test_a_bad_identity_is_a_usage_error_and_writes_nothing(
    repo: Repo, args: tuple[str, ...], says: str
) -> None:
    base = repo.head()
    result = apply(repo, UTIL_PATCH, *args)
    assert result.returncode == 2
    assert result.stderr.startswith(says)
    assert result.stderr.count("\n") == 1
    assert repo.head() == base and not repo.state_dir().exists()


def test_a_bad_applyonce_signoff_is_a_usage_error(repo: Repo) -> None:
    repo.git("config", "applyonce.signoff", "sometimes")
    result = apply(repo, UTIL_PATCH)
    assert result.returncode == 2
    assert result.stderr == (
        "error: git config applyonce.signoff is 'sometimes', which is not true or false; fix it"
        " with 'git config applyonce.signoff true' (or false)\n"
    )
    assert not repo.state_dir().exists()


def test_the_policy_is_not_part_of_the_calls_identity(repo: Repo) -> None:
    first = apply(repo, UTIL_PATCH, "--json")
    again = apply(repo, UTIL_PATCH, "--signoff", "--author", BOT, "--json")
    assert again.returncode == 0
    assert stored_json(first.stdout) == stored_json(again.stdout)
    assert repo.commit_count() == 2
    assert "Signed-off-by" not in dict(_trailers(repo))


def test_the_mcp_server_commits_with_its_policy(repo: Repo, tmp_path: Path) -> None:
    seen: dict[str, object] = {}

    async def scenario(session: ClientSession) -> None:
        seen["result"] = await session.call_tool("apply_patch", {"patch": PATCH})

    with_session(
        repo,
        tmp_path / "server.err",
        scenario,
        "--signoff",
        "--author",
        BOT,
        "--co-author",
        "Ann Pair <ann@example.invalid>",
    )
    assert text_of(seen["result"]) == SUCCESS  # type: ignore[arg-type]
    trailers = _trailers(repo)
    assert trailers[:2] == [
        ("Co-authored-by", "Ann Pair <ann@example.invalid>"),
        ("Signed-off-by", "Test Author <author@example.invalid>"),
    ]
    assert trailers[2][0] == "Call-Id"
    assert repo.git("log", "-1", "--format=%an <%ae>") == f"{BOT}\n"


def test_the_python_api_takes_the_same_policy(repo: Repo) -> None:
    from applyonce import Executor
    from applyonce.flow.options import CallOptions

    options = CallOptions(author=BOT, co_authors=["Ann Pair <ann@example.invalid>"], signoff=True)
    executor = Executor(repo.path)
    try:
        receipt = executor.call(UTIL_PATCH, options).receipt
    finally:
        executor.close()
    assert receipt.status == "committed" and receipt.signature is None
    assert [k for k, _ in _trailers(repo)][:3] == ["Co-authored-by", "Signed-off-by", "Call-Id"]
    assert repo.git("log", "-1", "--format=%an <%ae>") == f"{BOT}\n"


def test_the_python_api_refuses_a_bad_identity_at_once() -> None:
    from applyonce.errors import UsageError
    from applyonce.flow.options import CallOptions

    with pytest.raises(UsageError, match=r"--co-author 'nobody' is not 'Name <mail>'"):
        CallOptions(co_authors=["nobody"])
