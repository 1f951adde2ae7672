"""``applyonce mcp`` driven by the official MCP client over stdio, as an agent would drive it."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession
from typer.testing import CliRunner

from applyonce.adapters.agents import PatchRunner
from applyonce.adapters.cli import app
from applyonce.adapters.mcp_server import PatchServer
from applyonce.executor import Executor
from tests.conftest import Repo, run_cli, stored_text, without_replay_notes
from tests.support.mcp_session import PATCH, SUCCESS, text_of, with_session

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

PATCH_2 = "*** Begin Patch\n*** Add File: docs/notes.md\n+# notes\n*** End Patch\n"


def test_agent_session_over_stdio(repo: Repo, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    async def scenario(session: ClientSession) -> None:
        listed = await session.list_tools()
        seen["tools"] = listed.tools
        first = await session.call_tool("apply_patch", {"patch": PATCH, "tool_call_id": "call_1"})
        again = await session.call_tool("apply_patch", {"patch": PATCH, "tool_call_id": "call_1"})
        seen["first"], seen["again"] = first, again
        seen["commits_after_repeat"] = repo.commit_count()
        seen["garbage"] = await session.call_tool("apply_patch", {"patch": "rm -rf /\n\x00\xff"})
        seen["wrong_type"] = await session.call_tool("apply_patch", {"patch": ["not", "text"]})
        seen["no_args"] = await session.call_tool("apply_patch", None)
        seen["huge"] = await session.call_tool("apply_patch", {"patch": "+" * (33 * 1024 * 1024)})
        seen["unknown"] = await session.call_tool("rm_rf", {})
        # Still serving after all of that.
        seen["after"] = await session.call_tool("apply_patch", {"patch": PATCH_2})
        seen["receipt"] = await session.call_tool("patch_receipt", {"call_id": "call_1"})
        seen["no_receipt"] = await session.call_tool("patch_receipt", {"call_id": "call_404"})

    with_session(repo, tmp_path / "server.err", scenario)

    tools = {tool.name: tool for tool in seen["tools"]}
    assert set(tools) == {"apply_patch", "patch_receipt", "revert_patch", "land_lane"}
    description = tools["apply_patch"].description or ""
    assert "*** Begin Patch" in description and "exactly once" in description
    assert tools["apply_patch"].input_schema["required"] == ["patch"]

    assert seen["first"].is_error is False and text_of(seen["first"]) == SUCCESS
    assert seen["again"].is_error is False
    assert stored_text(text_of(seen["again"])) == text_of(seen["first"])
    assert seen["commits_after_repeat"] == 2

    for key, reason in [
        ("garbage", "error: "),  # the parser's words are pinned by its own tests
        (
            "wrong_type",
            "error: bad arguments for apply_patch: patch: Input should be a valid string",
        ),
        ("no_args", "error: bad arguments for apply_patch: patch: Field required"),
        ("huge", "error: the patch is larger than 32 MiB"),
        ("unknown", "error: unknown tool 'rm_rf'"),
        ("no_receipt", "error: no call 'call_404' in this repository"),
    ]:
        assert seen[key].is_error is True, key
        text = text_of(seen[key])
        assert text.startswith(reason) and text.count("\n") == 1, (key, text)

    assert seen["after"].is_error is False
    assert text_of(seen["after"]) == "Success. Updated the following files:\nA docs/notes.md\n"
    assert len(repo.call_ids()) == 2 and repo.commit_count() == 3

    receipt = json.loads(text_of(seen["receipt"]))
    assert receipt["status"] == "committed" and receipt["tool_call_id"] == "call_1"
    assert receipt["commit"] == repo.git("rev-parse", "HEAD~1").strip()
    assert receipt["output"] == SUCCESS
    assert "Traceback" not in (tmp_path / "server.err").read_text()


def test_a_rejection_is_a_tool_error_and_a_repeat_returns_it_unchanged(
    repo: Repo, tmp_path: Path
) -> None:
    stale = PATCH.replace("VALUE = 1", "VALUE = 9")
    results: list[types.CallToolResult] = []

    async def scenario(session: ClientSession) -> None:
        results.append(await session.call_tool("apply_patch", {"patch": stale}))
        results.append(await session.call_tool("apply_patch", {"patch": stale}))

    with_session(repo, tmp_path / "server.err", scenario)
    first, again = results
    assert first.is_error and again.is_error
    assert text_of(first).startswith("error: src/util.py: hunk 1: expected lines not found")
    assert text_of(first).split("\n")[1] == "expected lines (1), not found in src/util.py:"
    assert stored_text(text_of(again)) == text_of(first)
    assert repo.commit_count() == 1


def test_server_options_reach_every_call(repo: Repo, tmp_path: Path) -> None:
    contract = tmp_path / "contract.md"
    contract.write_text("make VALUE 2\n")
    state = tmp_path / "state"
    results: list[types.CallToolResult] = []

    async def scenario(session: ClientSession) -> None:
        results.append(await session.call_tool("apply_patch", {"patch": PATCH}))

    with_session(
        repo,
        tmp_path / "server.err",
        scenario,
        "--contract",
        str(contract),
        "--attempt",
        "3",
        "--state-dir",
        str(state),
        "--check",
        "grep -q 'VALUE = 2' src/util.py",
        "--skip-check",
        "markers",
    )
    assert results[0].is_error is False
    [receipt_file] = (state / "receipts").glob("*.json")
    receipt = json.loads(receipt_file.read_text())
    assert receipt["attempt"] == 3
    assert receipt["contract_sha256"] == hashlib.sha256(b"make VALUE 2\n").hexdigest()
    assert [c["name"] for c in receipt["checks"]][-1] == "grep -q 'VALUE = 2' src/util.py"
    skipped = [
        c["output_tail"] for c in receipt["checks"] if c["name"] == "builtin:conflict-markers"
    ]
    assert skipped == ["skipped (--skip-check markers)"]
    assert repo.git("log", "-1", "--format=%(trailers:key=Attempt,valueonly)").strip() == "3"
    assert not repo.state_dir().exists()


def test_a_server_killed_after_the_commit_answers_the_repeat_from_git(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def call(session: ClientSession) -> None:
        results.append(
            await session.call_tool("apply_patch", {"patch": PATCH, "tool_call_id": "c1"})
        )

    results: list[types.CallToolResult] = []
    monkeypatch.setenv("APPLYONCE_FAULT", "after-publish")
    with pytest.raises(Exception) as raised:  # the SDK wraps it in task groups
        with_session(repo, tmp_path / "killed.err", call)
    assert "Connection closed" in repr(raised.value)
    assert results == [] and len(repo.call_ids()) == 1

    monkeypatch.delenv("APPLYONCE_FAULT")
    with_session(repo, tmp_path / "server.err", call)
    assert results[0].is_error is False
    assert without_replay_notes(text_of(results[0])) == SUCCESS
    assert len(repo.call_ids()) == 1
    events = Executor(repo.path).ledger.events(repo.call_ids()[0])
    assert [e.kind for e in events].count("staged") == 1  # staged once: never run again


def test_stdout_carries_only_protocol_even_after_junk(repo: Repo) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    proc = subprocess.run(
        [sys.executable, "-m", "applyonce", "mcp", "--repo", str(repo.path)],
        input=b'this is not json\n{"jsonrpc": "2.0", "id": \n'
        + json.dumps(initialize).encode()
        + b"\n",
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    frames = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert any(f.get("id") == 1 and "result" in f for f in frames)
    assert all(f.get("jsonrpc") == "2.0" for f in frames)


def test_a_bad_repository_fails_before_serving(tmp_path: Path) -> None:
    result = run_cli("mcp", "--repo", str(tmp_path / "nowhere"))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--contract-sha", "abc"], "error: contract digest 'abc' is not 64 lowercase hex digits"),
        (["--contract", "x", "--contract-sha", "0" * 64], "error: --contract and --contract-sha"),
        (["--check-timeout", "0"], "error: --check-timeout must be more than 0"),
        (["--skip-check", "lint"], "error: unknown --skip-check 'lint'"),
    ],
)
def test_bad_options_fail_before_serving(repo: Repo, args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["mcp", "--repo", str(repo.path), *args])
    assert result.exit_code == 2
    assert result.output.startswith(message)


def test_patch_receipt_finds_a_call_by_id_prefix_or_tool_call_id(repo: Repo) -> None:
    """The handlers in-process (no transport), with a server that did not make the call."""
    Executor(repo.path).apply(PATCH, tool_call_id="call_old")
    [call_id] = repo.call_ids()
    server = PatchServer(PatchRunner(repo.path))

    def receipt(key: Any) -> types.CallToolResult:
        params = types.CallToolRequestParams(name="patch_receipt", arguments={"call_id": key})
        return anyio.run(server.call_tool, None, params)  # type: ignore[arg-type]

    for key in (call_id, call_id[:8], "call_old", f"  {call_id[:12]}\n"):
        found = receipt(key)
        assert found.is_error is False, text_of(found)
        assert json.loads(text_of(found))["call_id"] == call_id
        assert (
            text_of(found).encode()
            == (repo.state_dir() / "receipts" / f"{call_id}.json").read_bytes()
        )
    for key, reason in [
        ("abc", "error: no call 'abc'"),
        (7, "error: bad arguments for patch_receipt"),
    ]:
        missing = receipt(key)
        assert missing.is_error is True and text_of(missing).startswith(reason)


def test_a_summary_becomes_the_commit_subject_and_a_bad_one_is_a_tool_error(
    repo: Repo, tmp_path: Path
) -> None:
    results: list[types.CallToolResult] = []

    async def scenario(session: ClientSession) -> None:
        results.append(
            await session.call_tool("apply_patch", {"patch": PATCH_2, "summary": "a\nb"})
        )
        results.append(
            await session.call_tool("apply_patch", {"patch": PATCH, "summary": "Raise VALUE"})
        )

    with_session(repo, tmp_path / "server.err", scenario)
    refused, applied = results
    assert refused.is_error and "summary" in text_of(refused)
    assert not applied.is_error, text_of(applied)
    assert repo.git("log", "-1", "--format=%s").strip() == "Raise VALUE"
    assert repo.commit_count() == 2  # the base and the summarised call; the refusal wrote nothing
