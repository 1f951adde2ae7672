"""What a model reads over MCP (the official client, the real server over stdio): a replay says
so first, names the revert that undid the call and what to do in tool arguments; hints name tool
arguments and server options, never command-line flags; every error result says whether it is
retryable."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mcp import ClientSession

from applyonce.core.hints import OPTIONS
from tests.conftest import Repo
from tests.support.mcp_session import PATCH, SUCCESS, text_of, with_session

# An applyonce option as the command line spells it (git's own, 'diff --git', aside).
_FLAG = re.compile(r"(?<![\w-])--(?:" + "|".join(map(re.escape, OPTIONS)) + r")\b")


def test_a_replay_after_a_revert_says_so_first_in_tool_terms(repo: Repo, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    async def scenario(session: ClientSession) -> None:
        seen["apply"] = await session.call_tool("apply_patch", {"patch": PATCH})
        seen["commit"] = repo.head()
        seen["revert"] = await session.call_tool(
            "revert_patch", {"call_id": seen["apply"].structured_content["call_id"]}
        )
        seen["undo"] = repo.head()
        seen["again"] = await session.call_tool("apply_patch", {"patch": PATCH})
        seen["attempt"] = await session.call_tool("apply_patch", {"patch": PATCH, "attempt": 2})

    with_session(repo, tmp_path / "server.err", scenario)
    assert text_of(seen["apply"]) == SUCCESS
    call_id = seen["apply"].structured_content["call_id"]
    note = (
        f"replayed: this call ({call_id[:12]}) ran before and made commit "
        f"{seen['commit'][:12]} on main; nothing ran now.\n"
        f"reverted: commit {seen['undo'][:12]} (applyonce revert) reverted it since: src/util.py "
        "no longer holds its change.\n"
        "to make this change again, send it again with attempt: 2."
    )
    again = seen["again"]
    assert again.is_error is False  # the words change, not the protocol
    assert text_of(again) == note + "\nits stored result:\n" + SUCCESS
    structured = again.structured_content
    assert structured["replayed"] is True and structured["replay_note"] == note
    assert seen["apply"].structured_content["replay_note"] is None
    # Following the note makes the change again, once.
    assert text_of(seen["attempt"]) == SUCCESS and seen["attempt"].is_error is False
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert not _FLAG.search(text_of(again))


def test_hints_name_tool_arguments_and_server_options_and_errors_say_retryable(
    repo: Repo, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}
    (repo.path / "src/util.py").write_text("VALUE = 9\n")  # the user's uncommitted edit
    stale = PATCH.replace("VALUE = 1", "VALUE = 7")

    async def scenario(session: ClientSession) -> None:
        listed = await session.list_tools()
        seen["schema"] = {t.name: t.output_schema for t in listed.tools}
        seen["dirty"] = await session.call_tool("apply_patch", {"patch": PATCH})
        (repo.path / "src/util.py").write_text("VALUE = 1\n")
        seen["stale"] = await session.call_tool("apply_patch", {"patch": stale})
        seen["garbage"] = await session.call_tool("apply_patch", {"patch": "not a patch"})
        seen["bad"] = await session.call_tool("apply_patch", {"patch": PATCH, "attempt": 0})
        seen["unknown"] = await session.call_tool("revert_patch", {"call_id": "call_404"})

    with_session(repo, tmp_path / "server.err", scenario)
    dirty = seen["dirty"]
    assert dirty.is_error is True
    text = text_of(dirty)
    assert text.startswith("error: ") and "\n" not in text.rstrip("\n")
    assert "git config applyonce.dirty commit" in text and "the server's dirty option" in text
    error = dirty.structured_content["error"]
    assert error["kind"] == "dirty-path" and error["retryable"] is True
    assert "git config applyonce.dirty commit" in error["hint"]
    assert (repo.path / "src/util.py").read_text() == "VALUE = 1\n"  # nothing written
    for name in ("dirty", "stale", "garbage", "bad", "unknown"):
        result = seen[name]
        assert result.is_error is True, name
        assert not _FLAG.search(text_of(result)), (name, text_of(result))
        found = result.structured_content["error"]
        assert isinstance(found["retryable"], bool), name
        assert not _FLAG.search(found["hint"]), (name, found["hint"])
    assert seen["stale"].structured_content["error"]["retryable"] is False
    for name in ("apply_patch", "revert_patch", "patch_receipt"):
        schema = seen["schema"][name]
        error = schema["$defs"]["ResultError"]
        assert "retryable" in error["required"], name
