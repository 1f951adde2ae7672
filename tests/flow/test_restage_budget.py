"""A branch that keeps moving under a call: the call restages on each new tip, waiting a random,
growing moment between tries, at least MAX_RESTAGES times and on while RESTAGE_BUDGET_S lasts; a
call that gives up is a retryable rejection (its patch applies; the branch was busy), so its
repeat runs again. Each loss here is a real foreign commit, made by real ``git`` processes just
before the call's compare-and-swap: ``git commit-tree`` and ``git update-ref``, a writer that
takes no ``index.lock`` (a ``git commit`` cannot run there: the call holds that lock across its
publish)."""

from __future__ import annotations

from typing import Any

import pytest

from applyonce.executor import Executor
from applyonce.flow.call import apply as apply_flow
from tests.conftest import UTIL_PATCH, Repo


class Interfering:
    """The repository's publisher, with another writer's commit landing just before each of the
    first ``times`` publishes."""

    def __init__(self, inner: Any, repo: Repo, times: int) -> None:
        self.inner, self.repo, self.left = inner, repo, times
        self.lost = 0

    def publish(self, ref: str, expected: str | None, new: str, *, reason: str) -> None:
        if self.left > 0:
            self.left -= 1
            self.lost += 1
            tip = self.repo.head()
            other = self.repo.git("commit-tree", f"{tip}^{{tree}}", "-p", tip, "-m", "other")
            self.repo.git("update-ref", "refs/heads/main", other.strip(), tip)
        self.inner.publish(ref, expected, new, reason=reason)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_call_that_keeps_losing_is_a_retryable_rejection_and_its_repeat_runs(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(apply_flow, "MAX_RESTAGES", 3)
    monkeypatch.setattr(apply_flow, "RESTAGE_BUDGET_S", 0.0)
    executor = Executor(repo.path)
    real = executor.context.publisher
    executor.context.publisher = Interfering(real, repo, times=100)  # type: ignore[assignment]
    rejected = executor.apply(UTIL_PATCH)
    assert rejected.status == "rejected"
    assert rejected.error is not None and rejected.error["kind"] == "base-moved"
    assert rejected.error["retryable"] is True
    assert "gave up after 3 restages" in rejected.error["message"]
    assert "Call-Id" not in repo.git("log", "-1", "--format=%B")
    executor.context.publisher = real
    again = executor.apply(UTIL_PATCH)
    assert again.status == "committed"
    assert repo.call_ids() == [again.call_id]
    executor.close()


def test_restaging_goes_on_past_the_count_while_the_time_budget_lasts(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(apply_flow, "MAX_RESTAGES", 2)
    executor = Executor(repo.path)
    interfering = Interfering(executor.context.publisher, repo, times=6)
    executor.context.publisher = interfering  # type: ignore[assignment]
    receipt = executor.apply(UTIL_PATCH)
    assert receipt.status == "committed", receipt.error
    assert interfering.lost == 6
    assert repo.call_ids() == [receipt.call_id]
    executor.close()
