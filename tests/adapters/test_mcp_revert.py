"""MCP ``revert_patch(call_id)``, driven by the official MCP client over stdio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import ClientSession

from tests.conftest import Repo, stored_text
from tests.support.mcp_session import PATCH, SUCCESS, text_of, with_session


def test_revert_patch_undoes_a_call_once_and_a_repeat_replays(repo: Repo, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}
    original = repo.path.joinpath("src/util.py").read_bytes()

    async def scenario(session: ClientSession) -> None:
        listed = await session.list_tools()
        seen["tools"] = {tool.name: tool for tool in listed.tools}
        seen["apply"] = await session.call_tool(
            "apply_patch", {"patch": PATCH, "tool_call_id": "c1"}
        )
        seen["revert"] = await session.call_tool("revert_patch", {"call_id": "c1"})
        seen["again"] = await session.call_tool("revert_patch", {"call_id": "c1"})
        seen["commits"] = repo.commit_count()
        seen["unknown"] = await session.call_tool("revert_patch", {"call_id": "call_404"})
        seen["bad"] = await session.call_tool("revert_patch", {})

    with_session(repo, tmp_path / "server.err", scenario)
    tool: types.Tool = seen["tools"]["revert_patch"]
    assert tool.input_schema["required"] == ["call_id"]
    assert "exactly once" in (tool.description or "")
    assert text_of(seen["apply"]) == SUCCESS
    assert seen["revert"].is_error is False
    assert text_of(seen["revert"]) == SUCCESS  # the same file, changed back
    assert seen["again"].is_error is False
    assert stored_text(text_of(seen["again"])) == text_of(seen["revert"])
    assert text_of(seen["again"]).startswith("replayed: this call (")
    assert tool.output_schema is not None  # the structured result apply_patch has
    first, again = seen["revert"].structured_content, seen["again"].structured_content
    assert first is not None and again is not None
    assert first["status"] == "committed" and first["replayed"] is False
    assert first["commit"] == repo.head() and again["replayed"] is True
    assert first["files"] == [{"path": "src/util.py", "action": "update", "from": None}]
    assert "-VALUE = 2\n+VALUE = 1\n" in first["diff"]
    assert seen["commits"] == 3 and repo.commit_count() == 3
    assert repo.path.joinpath("src/util.py").read_bytes() == original
    assert repo.git("log", "-1", "--format=%s").strip() == "revert_patch: M src/util.py"
    for key, reason in [
        ("unknown", "error: no call 'call_404' in this repository"),
        ("bad", "error: bad arguments for revert_patch: call_id: Field required"),
    ]:
        assert seen[key].is_error is True, key
        assert text_of(seen[key]).startswith(reason) and text_of(seen[key]).count("\n") == 1
        assert seen[key].structured_content["status"] == "rejected"
    assert "Traceback" not in (tmp_path / "server.err").read_text()
