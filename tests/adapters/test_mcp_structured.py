"""Structured MCP results, through the official client over stdio: each tool declares an
``outputSchema``, and every result — success, replay, rejection, dry run, receipt, refusal —
carries ``structuredContent`` valid against it, beside its text, which stays byte for byte what it
was."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import mcp_types as types
from jsonschema import Draft202012Validator
from mcp import ClientSession

from applyonce.adapters.results import DIFF_CAP
from applyonce.executor import Executor
from tests.conftest import Repo, stored_text
from tests.support.mcp_session import PATCH, SUCCESS, text_of, with_session

STALE = PATCH.replace("VALUE = 1", "VALUE = 9")
RENAME = "*** Begin Patch\n*** Update File: README.md\n*** Move to: docs/README.md\n@@\n-# demo\n+# Demo\n*** End Patch\n"
BIG_LINES = 1500  # about 87 KiB of added lines: more than the diff's bound
BIG = (
    "*** Begin Patch\n*** Add File: big.txt\n"
    + "".join(
        f"+line {n:05d} of a file whose diff is longer than the bound\n" for n in range(BIG_LINES)
    )
    + "*** End Patch\n"
)


def state_of(repo: Repo) -> dict[str, Any]:
    """What a dry run must leave as it was: the branch, the index, the objects, the record."""
    git_dir = repo.path / ".git"
    objects = sorted(str(p.relative_to(git_dir)) for p in (git_dir / "objects").rglob("*"))
    index = hashlib.sha256((git_dir / "index").read_bytes()).hexdigest()
    calls = [c.call_id for c in Executor(repo.path, read_only=True).calls()]
    receipts = sorted(p.name for p in (repo.state_dir() / "receipts").glob("*"))
    return {
        "head": repo.head(),
        "index": index,
        "objects": objects,
        "calls": calls,
        "receipts": receipts,
        "status": repo.git("status", "--porcelain"),
    }


def test_every_result_is_structured_and_valid_against_its_tools_output_schema(
    repo: Repo, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    async def scenario(session: ClientSession) -> None:
        seen["tools"] = (await session.list_tools()).tools
        seen["before_dry_run"] = state_of(repo)
        seen["dry_run"] = await session.call_tool("apply_patch", {"patch": PATCH, "dry_run": True})
        seen["after_dry_run"] = state_of(repo)
        seen["first"] = await session.call_tool(
            "apply_patch", {"patch": PATCH, "tool_call_id": "c1"}
        )
        seen["again"] = await session.call_tool(
            "apply_patch", {"patch": PATCH, "tool_call_id": "c1"}
        )
        seen["stale"] = await session.call_tool("apply_patch", {"patch": STALE})
        seen["stale_dry_run"] = await session.call_tool(
            "apply_patch", {"patch": STALE, "dry_run": True}
        )
        seen["rename"] = await session.call_tool("apply_patch", {"patch": RENAME})
        seen["big"] = await session.call_tool("apply_patch", {"patch": BIG})
        seen["receipt"] = await session.call_tool("patch_receipt", {"call_id": "c1"})
        seen["no_receipt"] = await session.call_tool("patch_receipt", {"call_id": "c404"})
        seen["bad_args"] = await session.call_tool(
            "apply_patch", {"patch": PATCH, "dry_run": "yes"}
        )
        seen["unknown"] = await session.call_tool("rm_rf", {})

    with_session(repo, tmp_path / "server.err", scenario)

    tools = {tool.name: tool for tool in seen["tools"]}
    validators = {}
    for name in ("apply_patch", "patch_receipt"):
        schema = tools[name].output_schema
        assert schema is not None and schema["type"] == "object", name
        Draft202012Validator.check_schema(schema)  # a valid JSON Schema
        validators[name] = Draft202012Validator(schema)
    assert tools["apply_patch"].input_schema["properties"]["dry_run"]["type"] == "boolean"

    def structured(key: str, tool: str = "apply_patch") -> dict[str, Any]:
        result: types.CallToolResult = seen[key]
        data = result.structured_content
        assert isinstance(data, dict), key
        errors = [e.message for e in validators[tool].iter_errors(data)]
        assert errors == [], (key, errors)
        assert (data["error"] is not None) == (data["status"] in ("rejected", "unknown")), key
        return data

    # Success: the text is the Codex summary, byte for byte; the fields say the same and more.
    first = structured("first")
    assert seen["first"].is_error is False and text_of(seen["first"]) == SUCCESS
    util_commit = repo.git("rev-parse", "HEAD~2").strip()
    assert first["status"] == "committed" and first["replayed"] is False
    assert first["commit"] == util_commit and len(first["call_id"]) == 64
    assert first["files"] == [{"path": "src/util.py", "action": "update", "from": None}]
    assert first["match_levels"] == {"src/util.py": ["exact"]}
    assert first["diffstat"] == {"files_changed": 1, "insertions": 1, "deletions": 1}
    assert first["diff"] == repo.git("diff", f"{util_commit}~1", util_commit)
    assert first["diff_truncated"] is False and first["error"] is None

    # A replay: the same text and commit, and says it is one.
    again = structured("again")
    assert stored_text(text_of(seen["again"])) == SUCCESS and seen["again"].is_error is False
    assert again["replayed"] is True
    assert again["replay_note"].startswith("replayed: this call (")
    assert {**again, "replayed": False, "replay_note": None} == first

    # A rejection: a tool error whose fields carry the error's kind, message and hint.
    stale = structured("stale")
    assert seen["stale"].is_error is True
    assert text_of(seen["stale"]).startswith("error: src/util.py: hunk 1: expected lines not found")
    assert stale["status"] == "rejected" and stale["commit"] is None and stale["diff"] is None
    assert stale["error"]["kind"] == "hunk-mismatch"
    # The text's first line is the error's; the repair data (expected lines, nearest region)
    # follows on the lines after it.
    first_line = text_of(seen["stale"]).split("\n")[0]
    assert first_line == f"error: {stale['error']['message']}; {stale['error']['hint']}"
    assert stale["error"]["hint"]

    # A dry run: the plan and its diff, and nothing written (branch, index, objects, record).
    dry = structured("dry_run")
    assert seen["dry_run"].is_error is False
    assert seen["before_dry_run"] == seen["after_dry_run"]
    assert dry["status"] == "dry-run" and dry["commit"] is None and dry["replayed"] is False
    assert dry["call_id"] == first["call_id"]  # the call it would be
    assert dry["diff"] == first["diff"] and dry["diffstat"] == first["diffstat"]
    text = text_of(seen["dry_run"])
    assert text.startswith(f"dry run: call {first['call_id'][:12]} on refs/heads/main")
    assert first["diff"] in text and text.endswith("nothing was written\n")
    stale_dry = structured("stale_dry_run")
    assert seen["stale_dry_run"].is_error is True and stale_dry["status"] == "rejected"
    assert stale_dry["error"]["kind"] == "hunk-mismatch" and stale_dry["call_id"] is None

    # A move: its old path, and the diff's rename lines.
    rename = structured("rename")
    assert rename["files"] == [{"path": "docs/README.md", "action": "move", "from": "README.md"}]
    assert "rename from README.md\nrename to docs/README.md\n" in rename["diff"]

    # A diff over the bound is cut at a line end and flagged; the diffstat counts it all.
    big = structured("big")
    assert big["diff_truncated"] is True and big["diff"].endswith("\n")
    assert DIFF_CAP - 200 < len(big["diff"].encode()) <= DIFF_CAP
    assert big["diffstat"] == {"files_changed": 1, "insertions": BIG_LINES, "deletions": 0}

    # patch_receipt: the same shape, plus the receipt; its text is the receipt file, unchanged.
    receipt = structured("receipt", "patch_receipt")
    receipt_file = repo.state_dir() / "receipts" / f"{first['call_id']}.json"
    assert text_of(seen["receipt"]).encode() == receipt_file.read_bytes()
    assert receipt["receipt"] == json.loads(receipt_file.read_bytes())
    assert {k: v for k, v in receipt.items() if k != "receipt"} == first
    missing = structured("no_receipt", "patch_receipt")
    assert seen["no_receipt"].is_error is True and missing["receipt"] is None
    assert missing["status"] == "rejected" and missing["error"]["kind"] == "usage"

    # Refusals before any call: still structured.
    bad = structured("bad_args")
    assert seen["bad_args"].is_error is True and bad["error"]["kind"] == "usage"
    assert text_of(seen["bad_args"]).startswith("error: bad arguments for apply_patch: dry_run")
    unknown = structured("unknown")
    assert unknown["error"]["kind"] == "unknown-tool"
    assert "Traceback" not in (tmp_path / "server.err").read_text()
