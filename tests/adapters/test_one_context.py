"""A long-lived process (the tool-call adapter, ``applyonce mcp``) keeps one open context for all
its calls: one ledger connection and migration check per process, not per call. It still sees
what other processes do in between, and a state directory deleted in between is made anew."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from applyonce.adapters.agents import ToolCallAdapter
from applyonce.executor import Executor
from applyonce.state.sqlite.ledger import SqliteLedger
from tests.conftest import Repo, apply, stored_text

PATCH = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"


def add(name: str) -> str:
    return f"*** Begin Patch\n*** Add File: {name}\n+{name}\n*** End Patch\n"


def tool_use(patch: str, id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": "apply_patch", "input": {"patch": patch}}


@pytest.fixture
def ledger_opens(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The path of every ledger opened from now on (the real ledger opens; it is only counted)."""
    opened: list[Path] = []
    real_init = SqliteLedger.__init__

    def counted(self: SqliteLedger, path: Path, *args: Any, **kwargs: Any) -> None:
        opened.append(Path(path))
        real_init(self, path, *args, **kwargs)

    monkeypatch.setattr(SqliteLedger, "__init__", counted)
    return opened


def test_an_adapter_opens_the_ledger_once_for_all_its_calls(
    repo: Repo, ledger_opens: list[Path]
) -> None:
    adapter = ToolCallAdapter(repo.path)
    first, second = adapter.run([tool_use(PATCH, "toolu_1"), tool_use(add("notes.md"), "toolu_2")])
    [repeat] = adapter.run([tool_use(PATCH, "toolu_1")])
    [view] = adapter.run(
        [
            {
                "type": "tool_use",
                "id": "toolu_3",
                "name": "str_replace_based_edit_tool",
                "input": {"command": "view", "path": "notes.md"},
            }
        ]
    )
    assert [r["is_error"] for r in (first, second, repeat, view)] == [False] * 4, (first, second)
    assert stored_text(repeat["content"]) == first["content"]
    assert "notes.md" in view["content"]
    assert repo.commit_count() == 3
    assert ledger_opens == [repo.state_dir() / "ledger.sqlite3"]


def test_a_kept_context_sees_what_other_processes_did_in_between(
    repo: Repo, ledger_opens: list[Path]
) -> None:
    adapter = ToolCallAdapter(repo.path)
    [first] = adapter.run([tool_use(add("a.md"), "toolu_1")])
    assert first["is_error"] is False
    # Another process commits a call and records it in the same ledger.
    other = apply(repo, PATCH, "--tool-call-id", "call_cli")
    assert other.returncode == 0, other.stderr
    tip = repo.head()
    # Its call, sent again through the adapter: found in the ledger, replayed, nothing runs.
    [again] = adapter.run([tool_use(PATCH, "toolu_2")])
    assert again["is_error"] is False and stored_text(again["content"]) == other.stdout
    assert repo.head() == tip
    # A new call commits on top of the other process's commit: the ref is read anew.
    [last] = adapter.run([tool_use(add("b.md"), "toolu_3")])
    assert last["is_error"] is False, last
    assert repo.git("rev-parse", "HEAD~1").strip() == tip
    assert len(ledger_opens) == 1


def test_a_state_directory_deleted_between_calls_is_made_anew(
    repo: Repo, ledger_opens: list[Path]
) -> None:
    adapter = ToolCallAdapter(repo.path)
    [first] = adapter.run([tool_use(add("a.md"), "toolu_1")])
    assert first["is_error"] is False
    shutil.rmtree(repo.state_dir())
    [second] = adapter.run([tool_use(add("b.md"), "toolu_2")])
    assert second["is_error"] is False, second
    assert len(ledger_opens) == 2  # the kept one, then a new one on the new state directory
    # The second call is in the new ledger and has its receipt, as with a fresh process.
    executor = Executor(repo.path)
    try:
        [summary] = executor.calls()
        assert executor.show(summary.call_id).tool_call_id == "toolu_2"
    finally:
        executor.close()
    assert (repo.state_dir() / "receipts" / f"{summary.call_id}.json").is_file()


def _ledger_opens_of_server(repo: Repo, tmp_path: Path, calls: int) -> int:
    """How many times ``applyonce mcp`` opened the ledger file (openat, by strace) in a session of
    ``calls`` apply_patch calls and as many patch_receipt calls."""
    trace = tmp_path / f"trace-{calls}"
    params = StdioServerParameters(
        command="strace",
        args=[
            "-f",
            "-qq",
            "-e",
            "trace=openat",
            "-o",
            str(trace),
            sys.executable,
            "-m",
            "applyonce",
            "mcp",
            "--repo",
            str(repo.path),
        ],
        env=dict(os.environ),
    )

    async def main() -> None:
        with anyio.fail_after(60), (tmp_path / "server.err").open("w") as err:
            async with (
                stdio_client(params, errlog=err) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                for n in range(calls):
                    applied = await session.call_tool(
                        "apply_patch", {"patch": add(f"f{calls}-{n}.md"), "tool_call_id": f"c{n}"}
                    )
                    assert applied.is_error is False, applied
                    receipt = await session.call_tool("patch_receipt", {"call_id": f"c{n}"})
                    assert receipt.is_error is False, receipt

    anyio.run(main)
    ledger = str(repo.state_dir() / "ledger.sqlite3")
    return sum(f'"{ledger}"' in line for line in trace.read_text().splitlines())


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_the_mcp_server_opens_the_ledger_once_however_many_calls(
    repo: Repo, tmp_path: Path
) -> None:
    once = _ledger_opens_of_server(repo, tmp_path, 1)
    assert once > 0
    assert _ledger_opens_of_server(repo, tmp_path, 3) == once


def test_a_repository_deleted_between_calls_is_an_error_result(
    repo: Repo, ledger_opens: list[Path]
) -> None:
    adapter = ToolCallAdapter(repo.path)
    [first] = adapter.run([tool_use(add("a.md"), "toolu_1")])
    assert first["is_error"] is False
    shutil.rmtree(repo.path / ".git")
    # The kept executor is not used on a Git directory that is gone: the call is refused as a
    # new process would refuse it, and nothing is written.
    [second] = adapter.run([tool_use(add("b.md"), "toolu_2")])
    assert second["is_error"] is True
    assert second["content"].startswith("error: ") and "repository" in second["content"]
    assert not (repo.path / "b.md").exists() and not (repo.path / ".git").exists()
