"""The tool-call adapter: model tool calls in, tool results out, each patch exactly once.

The crash tests play seed 003's "Level 2" incident with apply_patch in place of create_ticket: the
harness process is really SIGKILLed after the effect (the commit) and before the result is
recorded; a new harness replays the same transcript, and a counting probe shows the patch did not
run again while the model still gets its result.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from applyonce.adapters.agents import (
    ToolCall,
    ToolCallAdapter,
    ToolCallShapeError,
    ToolOutput,
    tool_calls,
)
from applyonce.errors import ApplyOnceError
from applyonce.executor import Executor, PlanView
from applyonce.state.receipts import ReceiptStore
from applyonce.state.sqlite.ledger import SqliteLedger
from tests.conftest import Repo, stored_text, without_replay_notes

pytestmark = pytest.mark.sampled(every=2, by="module")

PATCH = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"
PATCH_2 = "*** Begin Patch\n*** Add File: docs/notes.md\n+# notes\n*** End Patch\n"
SUCCESS = "Success. Updated the following files:\nM src/util.py\n"


def anthropic_block(patch: str = PATCH, id: str = "toolu_01A") -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": "apply_patch", "input": {"patch": patch}}


def chat_call(patch: str = PATCH, id: str = "call_chat1") -> dict[str, Any]:
    arguments = json.dumps({"patch": patch})
    return {
        "id": id,
        "type": "function",
        "function": {"name": "apply_patch", "arguments": arguments},
    }


def chat_custom_call(patch: str = PATCH, id: str = "call_chat2") -> dict[str, Any]:
    return {"id": id, "type": "custom", "custom": {"name": "apply_patch", "input": patch}}


def responses_call(patch: str = PATCH, id: str = "call_resp1") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_1",
        "call_id": id,
        "name": "apply_patch",
        "arguments": json.dumps({"patch": patch}),
        "status": "completed",
    }


def responses_custom_call(patch: str = PATCH, id: str = "call_resp2") -> dict[str, Any]:
    return {
        "type": "custom_tool_call",
        "id": "ctc_1",
        "call_id": id,
        "name": "apply_patch",
        "input": patch,
    }


class CountingExecute:
    """Counts real executions: every call that is not a replay or a reconciliation goes through
    ``applyonce.flow.call.apply._run``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import applyonce.flow.call.apply as apply_module

        self.count = 0
        original = apply_module._run

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(apply_module, "_run", counted)


# --- one case per API shape ---------------------------------------------------------------------

SHAPES = [
    pytest.param(
        lambda: [{"type": "text", "text": "I'll edit it."}, anthropic_block()],
        {"type": "tool_result", "tool_use_id": "toolu_01A", "content": SUCCESS, "is_error": False},
        "toolu_01A",
        id="anthropic-tool_use",
    ),
    pytest.param(
        lambda: {"role": "assistant", "content": None, "tool_calls": [chat_call()]},
        {"role": "tool", "tool_call_id": "call_chat1", "content": SUCCESS},
        "call_chat1",
        id="chat-function",
    ),
    pytest.param(
        lambda: {"role": "assistant", "tool_calls": [chat_custom_call()]},
        {"role": "tool", "tool_call_id": "call_chat2", "content": SUCCESS},
        "call_chat2",
        id="chat-custom",
    ),
    pytest.param(
        lambda: [{"type": "reasoning", "id": "rs_1", "summary": []}, responses_call()],
        {"type": "function_call_output", "call_id": "call_resp1", "output": SUCCESS},
        "call_resp1",
        id="responses-function_call",
    ),
    pytest.param(
        lambda: {"id": "resp_1", "output": [responses_custom_call()]},
        {"type": "custom_tool_call_output", "call_id": "call_resp2", "output": SUCCESS},
        "call_resp2",
        id="responses-custom_tool_call",
    ),
]


@pytest.mark.parametrize(("message", "expected", "tool_call_id"), SHAPES)
def test_each_api_shape_gets_its_result_shape_and_runs_once(
    repo: Repo,
    monkeypatch: pytest.MonkeyPatch,
    message: Any,
    expected: dict[str, Any],
    tool_call_id: str,
) -> None:
    probe = CountingExecute(monkeypatch)
    adapter = ToolCallAdapter(repo.path)
    assert adapter.run(message()) == [expected]
    assert (
        repo.git("log", "-1", "--format=%(trailers:key=Tool-Call-Id,valueonly)").strip()
        == tool_call_id
    )
    # The harness replays the turn: the same result after a note that says it is a replay;
    # nothing runs, still one commit.
    again = ToolCallAdapter(repo.path).run(message())
    assert again != [expected] and without_replay_notes(again) == [expected]
    assert probe.count == 1
    assert len(repo.call_ids()) == 1 and repo.commit_count() == 2


def test_sdk_objects_are_read_through_model_dump(repo: Repo) -> None:
    class ToolUseBlock(BaseModel):  # the shape of anthropic.types.ToolUseBlock
        type: str = "tool_use"
        id: str
        name: str
        input: dict[str, Any]

    block = ToolUseBlock(id="toolu_sdk", name="apply_patch", input={"patch": PATCH})
    [result] = ToolCallAdapter(repo.path).run([block])
    assert result["tool_use_id"] == "toolu_sdk" and result["content"] == SUCCESS


def test_several_calls_in_one_turn_answer_in_order(repo: Repo) -> None:
    results = ToolCallAdapter(repo.path, fallback=lambda call: "sunny").run(
        [
            anthropic_block(PATCH, "toolu_1"),
            {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {}},
            anthropic_block(PATCH_2, "toolu_3"),
        ]
    )
    assert [r["tool_use_id"] for r in results] == ["toolu_1", "toolu_2", "toolu_3"]
    assert [r["content"] for r in results] == [
        SUCCESS,
        "sunny",
        "Success. Updated the following files:\nA docs/notes.md\n",
    ]
    assert len(repo.call_ids()) == 2


# --- what the model gets wrong ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (
            chat_call() | {"function": {"name": "apply_patch", "arguments": "{not json"}},
            "the tool arguments are not valid JSON",
        ),
        (
            {"type": "tool_use", "id": "toolu_x", "name": "apply_patch", "input": {"patch": 5}},
            "bad tool arguments: patch: Input should be a valid string",
        ),
        (
            {"type": "tool_use", "id": "toolu_x", "name": "apply_patch", "input": {"diff": PATCH}},
            "bad tool arguments: patch: Field required",
        ),
        # The parser's own words are pinned by its tests; here: an error result, one line.
        (responses_custom_call("this is not a patch"), ""),
    ],
    ids=["invalid-json", "wrong-type", "missing-field", "garbage-patch"],
)
def test_bad_tool_input_is_an_error_result_and_writes_nothing(
    repo: Repo, block: dict[str, Any], message: str
) -> None:
    [result] = ToolCallAdapter(repo.path).run([block])
    text = result.get("content", result.get("output"))
    assert text.startswith(f"error: {message}") and text.count("\n") == 1
    assert result.get("is_error", True) is True
    assert repo.commit_count() == 1 and not repo.state_dir().exists()


def test_a_rejected_patch_is_an_error_result_and_replays_as_stored(repo: Repo) -> None:
    stale = PATCH.replace("VALUE = 1", "VALUE = 7")
    adapter = ToolCallAdapter(repo.path)
    [first] = adapter.run([anthropic_block(stale)])
    assert first["is_error"] is True
    assert first["content"].startswith("error: src/util.py: hunk 1: expected lines not found")
    # One error line, then the repair data (every expected line, the nearest region, a hint).
    assert first["content"].split("\n")[1] == "expected lines (1), not found in src/util.py:"
    [again] = ToolCallAdapter(repo.path).run([anthropic_block(stale)])
    assert again["content"].startswith("replayed: this call (") and again["is_error"] is True
    assert without_replay_notes([again]) == [first]
    assert repo.commit_count() == 1


def test_a_tool_call_block_without_an_id_is_a_programming_error(repo: Repo) -> None:
    with pytest.raises(ToolCallShapeError, match="no 'id' string") as raised:
        ToolCallAdapter(repo.path).run([{"type": "tool_use", "name": "apply_patch", "input": {}}])
    assert isinstance(raised.value, ApplyOnceError)


def test_tool_calls_skips_blocks_that_are_not_calls() -> None:
    calls = tool_calls(
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": "hi"},
                anthropic_block(),
            ],
        }
    )
    assert [(c.api, c.id, c.name) for c in calls] == [("anthropic", "toolu_01A", "apply_patch")]


# --- approval -----------------------------------------------------------------------------------


def test_approval_comes_after_the_idempotency_gate(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[str, list[str]]] = []

    def approve(call: ToolCall, view: PlanView) -> bool:
        asked.append((call.id, view.lines()))
        return True

    probe = CountingExecute(monkeypatch)
    adapter = ToolCallAdapter(repo.path, approve=approve)
    assert adapter.run([anthropic_block()])[0]["content"] == SUCCESS
    assert asked == [("toolu_01A", ["update src/util.py  [match: exact]"])]
    # Already done: the gate answers; nobody is asked whether to do it again.
    assert stored_text(adapter.run([anthropic_block()])[0]["content"]) == SUCCESS
    assert len(asked) == 1 and probe.count == 1


def test_a_denied_call_is_an_error_result_and_nothing_is_committed(repo: Repo) -> None:
    adapter = ToolCallAdapter(repo.path, approve=lambda call, view: False)
    [result] = adapter.run([chat_call()])
    assert result == {
        "role": "tool",
        "tool_call_id": "call_chat1",
        "content": "error: the patch was not approved; send a different patch as a new attempt\n",
    }
    assert repo.commit_count() == 1
    assert repo.files()["src/util.py"] == b"VALUE = 1\n"


# --- other tools --------------------------------------------------------------------------------


def test_other_tools_without_a_fallback_get_an_error_result(repo: Repo) -> None:
    [result] = ToolCallAdapter(repo.path).run([responses_call() | {"name": "send_email"}])
    assert result == {
        "type": "function_call_output",
        "call_id": "call_resp1",
        "output": "error: unknown tool 'send_email'; the tools here are: apply_patch, str_replace_based_edit_tool\n",
    }


def test_other_tools_go_to_the_fallback(repo: Repo) -> None:
    seen: list[ToolCall] = []

    def fallback(call: ToolCall) -> str | ToolOutput:
        seen.append(call)
        if call.name == "broken":
            raise RuntimeError("backend down")
        if call.name == "refuse":
            return ToolOutput("no such ticket", is_error=True)
        return json.dumps({"id": "T-1"})

    adapter = ToolCallAdapter(repo.path, fallback=fallback)
    blocks = [
        {"type": "tool_use", "id": "toolu_a", "name": "create_ticket", "input": {"title": "x"}},
        {"type": "tool_use", "id": "toolu_b", "name": "refuse", "input": {}},
        {"type": "tool_use", "id": "toolu_c", "name": "broken", "input": {}},
    ]
    assert adapter.run(blocks) == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_a",
            "content": '{"id": "T-1"}',
            "is_error": False,
        },
        {
            "type": "tool_result",
            "tool_use_id": "toolu_b",
            "content": "no such ticket",
            "is_error": True,
        },
        {
            "type": "tool_result",
            "tool_use_id": "toolu_c",
            "content": "error: broken failed: RuntimeError: backend down\n",
            "is_error": True,
        },
    ]
    assert seen[0].arguments == {"title": "x"} and seen[0].api == "anthropic"
    assert repo.commit_count() == 1


# --- bookkeeping failures after the commit ------------------------------------------------------


def fail_committed_receipt_writes(monkeypatch: pytest.MonkeyPatch, times: int | None) -> None:
    """The disk fills up just after the publish: writing a committed receipt fails."""
    original = ReceiptStore.write
    left = [times]

    def write(store: ReceiptStore, receipt: Any, **kwargs: Any) -> str:
        if receipt.status == "committed" and (left[0] is None or left[0] > 0):
            if left[0] is not None:
                left[0] -= 1
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(store, receipt, **kwargs)

    monkeypatch.setattr(ReceiptStore, "write", write)


def test_a_record_failure_after_the_commit_is_reported_as_landed_not_as_an_error(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_committed_receipt_writes(monkeypatch, times=None)
    adapter = ToolCallAdapter(repo.path)
    [result] = adapter.run([anthropic_block()])
    assert result["is_error"] is False
    text = result["content"]
    assert text.startswith(SUCCESS)
    assert f"the patch landed as commit {repo.head()[:12]} on main" in text
    assert "No space left on device" in text and "run 'applyonce recover'" in text
    assert len(repo.call_ids()) == 1

    # The disk has room again; the harness replays the turn in the same process. The call is
    # settled through Git and its stored result returned: it does not run a second time.
    monkeypatch.undo()
    probe = CountingExecute(monkeypatch)
    again = without_replay_notes(adapter.run([anthropic_block()]))
    assert again == [
        {"type": "tool_result", "tool_use_id": "toolu_01A", "content": SUCCESS, "is_error": False}
    ]
    assert probe.count == 0 and len(repo.call_ids()) == 1
    receipt = Executor(repo.path).stored_receipt(repo.call_ids()[0])
    assert receipt.status == "committed" and receipt.reconciled


def test_a_busy_ledger_after_the_commit_is_not_reported_as_a_conflict(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A ledger held by another process past the timeout raises a ConflictError, which before the
    # publish would mean "nothing ran". After the publish it must not be mistaken for that.
    original = SqliteLedger._append

    def append(ledger: SqliteLedger, db: Any, event: Any) -> None:
        if event.kind in ("committed", "reconciled"):
            raise sqlite3.OperationalError("database is locked")
        original(ledger, db, event)

    monkeypatch.setattr(SqliteLedger, "_append", append)
    adapter = ToolCallAdapter(repo.path)
    [result] = adapter.run([chat_call()])
    assert result["content"].startswith(SUCCESS)
    assert "the patch landed as commit" in result["content"] and "is busy" in result["content"]
    monkeypatch.undo()
    probe = CountingExecute(monkeypatch)
    assert stored_text(adapter.run([chat_call()])[0]["content"]) == SUCCESS
    assert probe.count == 0 and len(repo.call_ids()) == 1


def test_a_passing_record_failure_is_settled_at_once(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_committed_receipt_writes(monkeypatch, times=1)
    [result] = ToolCallAdapter(repo.path).run([anthropic_block()])
    assert result["content"] == SUCCESS and result["is_error"] is False
    receipt = Executor(repo.path).stored_receipt(repo.call_ids()[0])
    assert receipt.status == "committed" and receipt.output == SUCCESS


# --- seed 003, Level 2: the crash between the effect and its record ----------------------------

HARNESS = """
import json, sys
from applyonce.adapters.agents import ToolCallAdapter
results = ToolCallAdapter(sys.argv[1]).run(json.load(open(sys.argv[2])))
print(json.dumps(results))
"""


def run_harness(
    repo: Repo, transcript: Path, fault: str | None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if fault:
        env["APPLYONCE_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-c", HARNESS, str(repo.path), str(transcript)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "fault", ["after-commit-object", "after-publish", "after-receipt-tmp", "after-ledger"]
)
def test_a_harness_killed_after_the_effect_does_not_run_the_call_again(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    transcript = tmp_path / "turn.json"
    transcript.write_text(json.dumps([{"type": "text", "text": "Fixing it."}, anthropic_block()]))
    killed = run_harness(repo, transcript, fault)
    assert killed.returncode == -9, killed.stderr
    assert killed.stdout == ""  # the result never reached the conversation

    probe = CountingExecute(monkeypatch)
    replayed = ToolCallAdapter(repo.path).run(json.loads(transcript.read_text()))
    assert without_replay_notes(replayed) == [
        {"type": "tool_result", "tool_use_id": "toolu_01A", "content": SUCCESS, "is_error": False}
    ]
    assert probe.count == 0
    assert len(repo.call_ids()) == 1
    assert repo.files()["src/util.py"] == b"VALUE = 2\n"
    # And a further replay, in yet another harness, is byte-identical.
    finished = run_harness(repo, transcript, None)
    assert finished.returncode == 0 and json.loads(finished.stdout) == replayed


def test_a_harness_killed_before_the_effect_runs_the_call_once_on_replay(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    transcript = tmp_path / "turn.json"
    transcript.write_text(json.dumps([anthropic_block()]))
    assert run_harness(repo, transcript, "after-stage").returncode == -9
    assert repo.call_ids() == []

    probe = CountingExecute(monkeypatch)
    [result] = ToolCallAdapter(repo.path).run(json.loads(transcript.read_text()))
    assert result["content"] == SUCCESS and result["is_error"] is False
    assert probe.count == 1 and len(repo.call_ids()) == 1
