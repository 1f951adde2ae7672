"""``replace_in_file``: the tool definitions (``schema --tool search-replace``) and the MCP
server's tool (``applyonce mcp --search-replace``), driven by the official MCP client.

The existing definitions stay as they were: ``schema --for mcp`` and the server without the flag
list the same tools, and ``apply_patch``'s definition does not change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import ClientSession

from applyonce.adapters.agents import ToolCallAdapter
from applyonce.adapters.schemas import mcp_tools, schema_for
from tests.conftest import Repo, run_cli, stored_text, without_replay_notes
from tests.support.mcp_session import text_of, with_session

DIFF = "------- SEARCH\nVALUE = 1\n=======\nVALUE = 2\n+++++++ REPLACE\n"


def test_schema_prints_replace_in_file_for_each_api() -> None:
    anthropic = json.loads(
        run_cli("schema", "--for", "anthropic", "--tool", "search-replace").stdout
    )
    assert anthropic["name"] == "replace_in_file"
    assert anthropic["input_schema"]["required"] == ["path", "diff"]
    openai = schema_for("openai", tool="search-replace")
    assert openai["type"] == "function" and openai["name"] == "replace_in_file"
    assert openai["strict"] is True
    assert schema_for("openai", api="chat", tool="search-replace")["function"]["name"] == (
        "replace_in_file"
    )
    (mcp,) = schema_for("mcp", tool="search-replace")
    assert mcp["name"] == "replace_in_file"
    assert set(mcp["inputSchema"]["properties"]) == {
        "path",
        "diff",
        "attempt",
        "summary",
        "tool_call_id",
        "dry_run",
        "lane",
    }


def test_the_existing_definitions_are_unchanged() -> None:
    assert [tool["name"] for tool in schema_for("mcp")] == [
        "apply_patch",
        "patch_receipt",
        "revert_patch",
        "land_lane",
    ]
    assert schema_for("anthropic")["name"] == "apply_patch"
    assert [tool.name for tool in mcp_tools(search_replace=True)][-1] == "replace_in_file"


def test_schema_refuses_a_grammar_variant_of_replace_in_file() -> None:
    result = run_cli("schema", "--for", "openai", "--tool", "search-replace", "--variant", "custom")
    assert result.returncode == 2
    assert result.stderr.startswith("error: --tool search-replace has no 'custom' variant")


def test_mcp_replace_in_file_commits_once_and_refuses_without_writing(
    repo: Repo, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    async def scenario(session: ClientSession) -> None:
        seen["tools"] = [tool.name for tool in (await session.list_tools()).tools]
        args = {"path": "src/util.py", "diff": DIFF, "tool_call_id": "c1"}
        seen["dry"] = await session.call_tool("replace_in_file", {**args, "dry_run": True})
        seen["commits_after_dry_run"] = repo.commit_count()
        seen["first"] = await session.call_tool("replace_in_file", args)
        seen["again"] = await session.call_tool("replace_in_file", args)
        seen["commits"] = repo.commit_count()
        seen["files"] = repo.files()
        seen["missing"] = await session.call_tool(
            "replace_in_file", {"path": "src/util.py", "diff": DIFF.replace("VALUE = 1", "NOPE")}
        )
        seen["bad_path"] = await session.call_tool(
            "replace_in_file", {"path": "a\nb", "diff": DIFF}
        )
        seen["commits_after_refusals"] = repo.commit_count()
        seen["files_after_refusals"] = repo.files()

    with_session(repo, tmp_path / "server.err", scenario, "--search-replace")
    assert seen["tools"] == [
        "apply_patch",
        "patch_receipt",
        "revert_patch",
        "land_lane",
        "replace_in_file",
    ]
    assert not seen["dry"].is_error and "src/util.py" in text_of(seen["dry"])
    assert seen["commits_after_dry_run"] == 1
    first, again = seen["first"], seen["again"]
    assert not first.is_error
    assert text_of(first) == "Success. Updated the following files:\nM src/util.py\n"
    assert stored_text(text_of(again)) == text_of(first)
    assert seen["commits"] == 2
    assert seen["files"]["src/util.py"] == b"VALUE = 2\n"
    missing = seen["missing"]
    assert missing.is_error
    assert text_of(missing).startswith(
        "error: src/util.py: block 1: the SEARCH lines are not in the file (first: 'NOPE')"
    )
    assert missing.structured_content["error"]["kind"] == "hunk-mismatch"
    assert seen["bad_path"].is_error
    assert text_of(seen["bad_path"]).startswith("error: the path must be one line")
    assert seen["commits_after_refusals"] == 2
    assert seen["files_after_refusals"] == seen["files"]


def test_mcp_without_the_flag_does_not_serve_replace_in_file(repo: Repo, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    async def scenario(session: ClientSession) -> None:
        seen["tools"] = [tool.name for tool in (await session.list_tools()).tools]
        seen["call"] = await session.call_tool("replace_in_file", {"path": "x", "diff": DIFF})

    with_session(repo, tmp_path / "server.err", scenario)
    assert seen["tools"] == ["apply_patch", "patch_receipt", "revert_patch", "land_lane"]
    call: types.CallToolResult = seen["call"]
    assert call.is_error
    assert text_of(call) == (
        "error: unknown tool 'replace_in_file'; the tools here are apply_patch, patch_receipt, "
        "revert_patch and land_lane\n"
    )


# ------------------------------------------------------------------ ToolCallAdapter


def replace_block(arguments: object, id: str = "toolu_R1") -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": "replace_in_file", "input": arguments}


def test_the_adapter_answers_replace_in_file_once(repo: Repo) -> None:
    adapter = ToolCallAdapter(repo.path, replace_name="replace_in_file")
    block = replace_block({"path": "src/util.py", "diff": DIFF})
    [first] = adapter.run([block])
    assert first == {
        "type": "tool_result",
        "tool_use_id": "toolu_R1",
        "content": "Success. Updated the following files:\nM src/util.py\n",
        "is_error": False,
    }
    again = ToolCallAdapter(repo.path, replace_name="replace_in_file").run([block])
    assert without_replay_notes(again) == [first]
    assert repo.commit_count() == 2
    assert repo.files()["src/util.py"] == b"VALUE = 2\n"


def test_the_adapter_refuses_bad_replace_in_file_calls_without_writing(repo: Repo) -> None:
    adapter = ToolCallAdapter(repo.path, replace_name="replace_in_file")
    before = repo.files()
    [bad_args, bad_path, missing] = adapter.run(
        [
            replace_block({"path": "src/util.py"}, "t1"),
            replace_block({"path": "a\nb", "diff": DIFF}, "t2"),
            replace_block({"path": "src/util.py", "diff": DIFF.replace("VALUE = 1", "NOPE")}, "t3"),
        ]
    )
    assert bad_args["is_error"] and bad_args["content"] == (
        "error: bad tool arguments: diff: Field required; call replace_in_file with "
        '{"path": "...", "diff": "<<<<<<< SEARCH ..."}\n'
    )
    assert bad_path["is_error"] and bad_path["content"].startswith(
        "error: the path must be one line"
    )
    assert missing["is_error"] and missing["content"].startswith(
        "error: src/util.py: block 1: the SEARCH lines are not in the file"
    )
    assert repo.commit_count() == 1
    assert repo.files() == before


def test_without_replace_name_the_call_is_another_tool(repo: Repo) -> None:
    [result] = ToolCallAdapter(repo.path).run([replace_block({"path": "x", "diff": DIFF})])
    assert result["is_error"]
    assert result["content"].startswith("error: unknown tool 'replace_in_file'")
    assert repo.commit_count() == 1
