"""``applyonce mcp`` keeps answering while a long call runs, and still runs each call once."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import mcp_types as types
from mcp import ClientSession

from tests.conftest import Repo, stored_text
from tests.support.mcp_session import PATCH, SUCCESS, text_of, with_session

SLOW = "*** Begin Patch\n*** Add File: slow\n+takes a while to check\n*** End Patch\n"
# Only the call that adds ``slow`` has a slow check.
CHECK = "if [ -e slow ]; then sleep 3; fi"


def test_tools_list_and_patch_receipt_answer_while_a_long_check_runs(
    repo: Repo, tmp_path: Path
) -> None:
    seen: dict[str, object] = {}
    slow: list[types.CallToolResult] = []

    async def slow_call() -> None:
        slow.append(await session_ref[0].call_tool("apply_patch", {"patch": SLOW}))

    session_ref: list[ClientSession] = []

    async def scenario(session: ClientSession) -> None:
        session_ref.append(session)
        first = await session.call_tool("apply_patch", {"patch": PATCH, "tool_call_id": "call_1"})
        assert text_of(first) == SUCCESS
        async with anyio.create_task_group() as group:
            # Two agents send the same slow call at once: it must land once.
            group.start_soon(slow_call)
            group.start_soon(slow_call)
            await anyio.sleep(0.8)  # both are in flight, one in its 3 s check
            started = time.monotonic()
            listed = await session.list_tools()
            seen["list_s"] = time.monotonic() - started
            receipt = await session.call_tool("patch_receipt", {"call_id": "call_1"})
            seen["receipt_s"] = time.monotonic() - started
            seen["slow_done_by_then"] = len(slow)
            seen["tools"] = {tool.name for tool in listed.tools}
            seen["receipt"] = json.loads(text_of(receipt))

    with_session(repo, tmp_path / "server.err", scenario, "--check", CHECK)

    assert seen["tools"] == {"apply_patch", "patch_receipt", "revert_patch", "land_lane"}
    assert seen["slow_done_by_then"] == 0  # answered while the check ran
    assert seen["list_s"] < 1.0 and seen["receipt_s"] < 1.5, seen  # type: ignore[operator]
    assert seen["receipt"]["status"] == "committed"  # type: ignore[index]
    # One ran, the other replayed its result (and says so first): one commit, the same result.
    assert [r.is_error for r in slow] == [False, False]
    texts = sorted(text_of(r) for r in slow)
    assert texts[0] == "Success. Updated the following files:\nA slow\n"
    assert texts[1].startswith("replayed: this call (") and stored_text(texts[1]) == texts[0]
    assert len(repo.call_ids()) == 2 and repo.commit_count() == 3
