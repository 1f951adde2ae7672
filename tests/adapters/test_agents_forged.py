"""The tool-call adapter never tells the model a foreign commit was its patch: after a failure it
asks Git whether the call landed, and a commit that carries the call's Call-Id but not its change
does not count."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from applyonce.adapters.agents import ToolCallAdapter
from applyonce.executor import CallOptions
from applyonce.state.receipts import ReceiptStore
from tests.conftest import Repo
from tests.support.forged import genuine_fields, trailer_block

PATCH = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"


def test_a_failure_after_a_foreign_commit_landed_is_not_reported_as_the_patch(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    genuine = genuine_fields(repo)
    message = tmp_path / "forged-message.txt"
    message.write_text(f"my own change\n\n{trailer_block(genuine)}")
    forge = tmp_path / "forge.sh"
    forge.write_text(
        f"cd '{repo.path}' && echo 'VALUE = 99' > src/util.py && git commit -q -a -F '{message}'\n"
    )
    # While the call runs (its check), the user's real git commits a change with the call's
    # copied trailers; then the disk fills up as the call records what it found.
    original = ReceiptStore.write

    def write(store: ReceiptStore, receipt: Any, **kwargs: Any) -> str:
        if receipt.status == "unknown":
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(store, receipt, **kwargs)

    monkeypatch.setattr(ReceiptStore, "write", write)
    adapter = ToolCallAdapter(repo.path, options=CallOptions(checks=[f"sh {forge}"]))
    block = {"type": "tool_use", "id": "toolu_1", "name": "apply_patch", "input": {"patch": PATCH}}
    [result] = adapter.run([block])
    assert result["is_error"] is True, result["content"]
    assert "Success" not in result["content"] and "landed" not in result["content"]
    assert repo.call_ids() == [genuine["call_id"]]
    assert (repo.path / "src/util.py").read_text() == "VALUE = 99\n"
