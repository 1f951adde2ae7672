"""``Executor``, ``PatchRunner`` and ``ToolCallAdapter`` as context managers: the block's end
closes the ledger; a closed one refuses every use with ``executor-closed`` and writes nothing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from applyonce import Executor, ExecutorClosedError
from applyonce.adapters.agents import PatchRunner, ToolCallAdapter
from applyonce.errors import EXIT_USAGE
from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo


def _open_ledgers(repo: Repo) -> list[str]:
    """The ledger files of ``repo`` this process holds open (its file descriptors, from /proc;
    another test's executor left open in the same worker is not this test's)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if Path(target).name.startswith("ledger.sqlite3") and target.startswith(f"{repo.path}/"):
            found.append(target)
    return found


def _tool_use(patch: str, id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": "apply_patch", "input": {"patch": patch}}


def test_the_with_block_closes_the_ledger(repo: Repo) -> None:
    with Executor(repo.path) as executor:
        receipt = executor.apply(PATCH, tool_call_id="call_1")
        assert _open_ledgers(repo)  # the ledger is open inside the block
    assert receipt.status == "committed"
    assert executor.closed
    assert _open_ledgers(repo) == []


def test_a_closed_executor_refuses_every_use_and_writes_nothing(repo: Repo) -> None:
    with Executor(repo.path) as executor:
        pass
    before = repo.commit_count()
    with pytest.raises(ExecutorClosedError) as raised:
        executor.apply(PATCH)
    error = raised.value
    assert error.kind == "executor-closed"
    assert error.exit_code == EXIT_USAGE
    assert error.one_line() == (
        "apply() on a closed executor; open a new one, or use it inside its with block"
    )
    for use in (executor.calls, executor.recover, lambda: executor.ledger):
        with pytest.raises(ExecutorClosedError):
            use()
    with pytest.raises(ExecutorClosedError, match="the executor is closed"), executor:
        pass
    executor.close()  # a second close does nothing
    assert repo.commit_count() == before
    assert not (repo.state_dir() / "receipts").exists() or not any(
        (repo.state_dir() / "receipts").iterdir()
    )
    assert _open_ledgers(repo) == []


def test_the_tool_call_adapter_closes_its_executor(repo: Repo) -> None:
    with ToolCallAdapter(repo.path) as adapter:
        [result] = adapter.run([_tool_use(PATCH, "toolu_1")])
        assert result["is_error"] is False
        assert _open_ledgers(repo)
    assert _open_ledgers(repo) == []
    before = repo.commit_count()
    with pytest.raises(ExecutorClosedError, match="the patch runner is closed"):
        adapter.run([_tool_use(PATCH.replace("hello", "hi"), "toolu_2")])
    assert repo.commit_count() == before
    assert _open_ledgers(repo) == []


def test_a_closed_patch_runner_raises_instead_of_telling_the_model(repo: Repo) -> None:
    with PatchRunner(repo.path) as runner:
        assert runner.run(PATCH).is_error is False
    for use in (lambda: runner.run(PATCH), lambda: runner.dry_run(PATCH), runner.executor):
        with pytest.raises(ExecutorClosedError):
            use()
    assert _open_ledgers(repo) == []
