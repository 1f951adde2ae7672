"""What a repository's applyonce records are, to compare before and after a command."""

from __future__ import annotations

from applyonce.executor import Executor
from tests.conftest import Repo, snapshot


def record_of(repo: Repo) -> tuple[dict[str, bytes], list[tuple[str, str, dict[str, object]]]]:
    """The receipts as bytes and the ledger's events: what a refusal must leave as it was."""
    executor = Executor(repo.path)
    try:
        events = [(e.call_id, e.kind, e.data) for e in executor.ledger.events()]
    finally:
        executor.close()
    return snapshot(repo.state_dir() / "receipts"), events
