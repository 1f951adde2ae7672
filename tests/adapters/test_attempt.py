"""The optional ``attempt`` argument of the ``apply_patch`` tool (adapter and MCP), and the replay
facts a harness gets: a new attempt is a new call, as ``--attempt`` is on the command line."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
from mcp import ClientSession

from applyonce.adapters.agents import PatchRunner, ToolCallAdapter
from tests.conftest import Repo, stored_text
from tests.support.mcp_session import text_of, with_session

PATCH = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"
ADD = "*** Begin Patch\n*** Add File: docs/n.md\n+# n\n*** End Patch\n"
SUCCESS = "Success. Updated the following files:\nM src/util.py\n"


def _tool_use(n: int, **arguments: object) -> dict[str, object]:
    return {"type": "tool_use", "id": f"toolu_{n}", "name": "apply_patch", "input": arguments}


def test_adapter_attempt_is_a_new_call_after_an_undo(repo: Repo) -> None:
    adapter = ToolCallAdapter(repo.path)
    [first] = adapter.run([_tool_use(1, patch=PATCH)])
    assert first["content"] == SUCCESS and first["is_error"] is False
    commit = repo.head()
    repo.git("revert", "--no-edit", "HEAD")  # the user undoes it
    revert = repo.head()
    [again] = adapter.run([_tool_use(2, patch=PATCH)])
    # The stored result: nothing ran, and the model reads first that the change is gone, and
    # what to do about it, in the tool's own terms.
    assert again["content"] == (
        f"replayed: this call ({repo.call_ids()[0][:12]}) ran before and made commit "
        f"{commit[:12]} on main; nothing ran now.\n"
        f"reverted: commit {revert[:12]} (git revert) reverted it since: src/util.py no longer "
        "holds its change.\n"
        "to make this change again, send it again with attempt: 2.\n"
        "its stored result:\n" + SUCCESS
    )
    assert again["is_error"] is False
    assert len(repo.call_ids()) == 1 and (repo.path / "src/util.py").read_text() == "VALUE = 1\n"
    [second] = adapter.run([_tool_use(3, patch=PATCH, attempt=2)])
    assert second["content"] == SUCCESS and second["is_error"] is False
    assert (
        len(set(repo.call_ids())) == 2 and (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    )
    head = repo.head()
    [bad] = adapter.run([_tool_use(4, patch=PATCH, attempt=0)])
    assert bad["is_error"] is True
    assert bad["content"].startswith("error: bad tool arguments: attempt: Input should be greater")
    [wrong] = adapter.run([_tool_use(5, patch=PATCH, attempt="2")])
    assert wrong["is_error"] is True and "attempt" in wrong["content"]
    assert repo.head() == head


def test_runner_output_carries_the_replay_facts(repo: Repo) -> None:
    runner = PatchRunner(repo.path)
    first = runner.run(PATCH)
    assert first.replayed is False and first.replay is None
    repo.git("revert", "--no-edit", "HEAD")
    revert = repo.head()
    again = runner.run(PATCH)
    assert stored_text(again.text) == first.text and again.replayed is True
    assert again.text.startswith("replayed: this call (")
    assert f"reverted: commit {revert[:12]} (git revert) reverted it since" in again.text
    assert again.replay is not None and again.replay.reverted_by == revert
    assert again.replay is not None and first.receipt is not None
    assert again.replay.commit == first.receipt.commit and again.replay.on_branch
    assert [c.commit for c in again.replay.later] == [revert]
    assert again.replay.later[0].paths == ("src/util.py",)
    assert f"later commits changed its files: {revert[:12]} (src/util.py)" in again.replay.line()


def test_mcp_attempt_is_a_new_call(repo: Repo, tmp_path: Path) -> None:
    results: dict[str, types.CallToolResult] = {}

    async def scenario(session: ClientSession) -> None:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        attempt = tools["apply_patch"].input_schema["properties"]["attempt"]
        assert {"type": "integer", "minimum": 1, "maximum": 2**53 - 1} in attempt["anyOf"]
        results["first"] = await session.call_tool("apply_patch", {"patch": PATCH})
        repo.git("revert", "--no-edit", "HEAD")
        results["again"] = await session.call_tool("apply_patch", {"patch": PATCH})
        results["attempt"] = await session.call_tool("apply_patch", {"patch": PATCH, "attempt": 2})
        results["bad"] = await session.call_tool("apply_patch", {"patch": PATCH, "attempt": 0})
        # A dry run plans the call of that attempt.
        results["dry"] = await session.call_tool("apply_patch", {"patch": ADD, "dry_run": True})
        results["dry4"] = await session.call_tool(
            "apply_patch", {"patch": ADD, "attempt": 4, "dry_run": True}
        )
        results["add4"] = await session.call_tool("apply_patch", {"patch": ADD, "attempt": 4})

    with_session(repo, tmp_path / "server.err", scenario)
    assert text_of(results["first"]) == stored_text(text_of(results["again"])) == SUCCESS
    assert text_of(results["again"]).startswith("replayed: this call (")
    assert results["attempt"].is_error is False and text_of(results["attempt"]) == SUCCESS
    assert len(set(repo.call_ids())) == 3  # attempt 1, attempt 2, and the added file
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert results["bad"].is_error is True
    assert text_of(results["bad"]).startswith("error: bad arguments for apply_patch: attempt:")
    dry, dry4, add4 = (results[k].structured_content for k in ("dry", "dry4", "add4"))
    assert dry is not None and dry4 is not None and add4 is not None
    assert add4["status"] == "committed" and add4["call_id"] == dry4["call_id"] != dry["call_id"]
