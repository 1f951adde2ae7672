"""The commit hooks through the real MCP server and the official client: a refusal is a tool
error carrying the hook's output; the server option --no-verify skips them."""

from __future__ import annotations

from pathlib import Path

from mcp import ClientSession

from tests.conftest import Repo
from tests.support.mcp_session import PATCH, SUCCESS, text_of, with_session

REFUSE = "#!/bin/sh\necho 'policy: VALUE may not change' >&2\nexit 1\n"


def install(repo: Repo) -> None:
    hook = repo.path / ".git" / "hooks" / "pre-commit"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(REFUSE)
    hook.chmod(0o755)


def test_a_refusing_hook_is_a_tool_error_with_its_output(repo: Repo, tmp_path: Path) -> None:
    install(repo)
    head = repo.head()

    async def scenario(session: ClientSession) -> None:
        result = await session.call_tool("apply_patch", {"patch": PATCH})
        assert result.is_error is True
        text = text_of(result)
        assert text.startswith(
            "error: the repository's pre-commit hook refused the commit (exit 1): policy: VALUE"
            " may not change;"
        )
        assert "output of the pre-commit hook:\npolicy: VALUE may not change\n" in text
        assert result.structured_content is not None
        assert result.structured_content["error"]["kind"] == "hook-failed"

    with_session(repo, tmp_path / "err.log", scenario)
    assert repo.head() == head


def test_the_server_option_no_verify_skips_the_hook(repo: Repo, tmp_path: Path) -> None:
    install(repo)

    async def scenario(session: ClientSession) -> None:
        result = await session.call_tool("apply_patch", {"patch": PATCH})
        assert not result.is_error
        assert text_of(result) == SUCCESS

    with_session(repo, tmp_path / "err.log", scenario, "--no-verify")
    assert len(repo.call_ids()) == 1
