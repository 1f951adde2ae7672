"""Group commit (docs/design.md §1, "Groups"): calls handed together on one branch are each their
own commit, with their own Call-Id and receipt, chained, and the branch moves once; a call that
does not apply or whose check fails drops out with its own rejection, the others land; the same
call twice in one group lands once. Counted, never timed: the ref moves, packs written and
durable ledger transactions of a group."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from applyonce.executor import Executor
from applyonce.flow.call import group as group_flow
from applyonce.flow.call.group import Request, apply_many
from applyonce.flow.options import CallOptions, CallOutcome
from tests.conftest import Repo, make_repo
from tests.flow.test_restage_budget import Interfering


def _add(name: str, text: str = "x") -> str:
    return f"*** Begin Patch\n*** Add File: {name}\n+{text}\n*** End Patch\n"


def _requests(count: int, prefix: str = "g") -> list[Request]:
    return [
        Request(_add(f"{prefix}/f{i}.txt", str(i)), CallOptions(tool_call_id=f"{prefix}-{i}"))
        for i in range(count)
    ]


def _outcomes(results: list[CallOutcome | Exception]) -> list[CallOutcome]:
    assert all(isinstance(r, CallOutcome) for r in results), results
    return [r for r in results if isinstance(r, CallOutcome)]


def _ref_moves(repo: Repo) -> int:
    return len(repo.git("reflog", "show", "refs/heads/main").splitlines())


def _packs(repo: Repo) -> set[str]:
    return {p.name for p in (repo.path / ".git" / "objects" / "pack").glob("*.pack")}


class Counting:
    """The ledger, counting its durable ``record`` transactions."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.records = inner, []

    def record(self, *events: Any) -> None:
        self.records.append([str(e.kind) for e in events])
        self.inner.record(*events)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_group_is_one_chain_of_commits_each_with_its_call_id_and_the_branch_moves_once(
    repo: Repo,
) -> None:
    with Executor(repo.path) as executor:
        base, moves = repo.head(), _ref_moves(repo)
        ledger = Counting(executor.context.ledger)
        executor.context._ledger = ledger  # type: ignore[assignment]
        packs = _packs(repo)
        outcomes = _outcomes(apply_many(executor.context, _requests(5)))
    assert [o.receipt.status for o in outcomes] == ["committed"] * 5
    commits = [o.receipt.commit for o in outcomes]
    # Chained in the order handed: call k's commit is call k-1's child, the first is base's.
    parents = [repo.git("rev-parse", f"{c}^").strip() for c in commits]
    assert parents == [base, *commits[:-1]]
    assert [o.receipt.base_commit for o in outcomes] == [base, *commits[:-1]]
    assert repo.head() == commits[-1]
    assert repo.call_ids() == [o.receipt.call_id for o in reversed(outcomes)]
    # One ref move, one new pack (plus none merged away), for five calls.
    assert _ref_moves(repo) == moves + 1
    assert len(_packs(repo) - packs) == 1
    # The durable records: the five prepared events in one transaction, the five committed in
    # one; the staged/checked/commit-object progress in one deferred one.
    kinds = [sorted(set(r)) for r in ledger.records]
    assert ["prepared"] in kinds and ["committed"] in kinds
    assert ["checked", "commit-object", "staged"] in kinds
    assert max(len(r) for r in ledger.records) == 15
    durable = [r for r in ledger.records if set(r) & {"prepared", "committed", "rejected"}]
    assert [len(r) for r in durable] == [5, 5]
    # Each has its receipt, and the checkout shows every file.
    for i, outcome in enumerate(outcomes):
        assert (repo.state_dir() / "receipts" / f"{outcome.receipt.call_id}.json").is_file()
        assert (repo.path / "g" / f"f{i}.txt").read_text() == f"{i}\n"
    assert repo.git("status", "--porcelain") == ""
    repo.git("fsck", "--strict")


def test_a_call_that_does_not_apply_or_fails_its_check_drops_out_and_the_others_land(
    repo: Repo,
) -> None:
    requests = _requests(4)
    # Does not apply on the chain: the file another call of the group adds.
    requests[1] = Request(_add("g/f0.txt", "again"), CallOptions(tool_call_id="dup-path"))
    # Its check fails.
    requests[2] = Request(
        _add("g/checked.txt"), CallOptions(tool_call_id="fails", checks=["exit 3"])
    )
    with Executor(repo.path) as executor:
        base = repo.head()
        outcomes = _outcomes(apply_many(executor.context, requests))
        assert [o.receipt.status for o in outcomes] == [
            "committed",
            "rejected",
            "rejected",
            "committed",
        ]
        first, _, _, last = outcomes
        assert repo.git("rev-parse", f"{last.receipt.commit}^").strip() == first.receipt.commit
        assert repo.git("rev-parse", f"{first.receipt.commit}^").strip() == base
        assert repo.call_ids() == [last.receipt.call_id, first.receipt.call_id]
        # Each rejection says why, at the commit it was staged on (on the branch now).
        assert outcomes[1].receipt.error is not None
        assert outcomes[1].receipt.base_commit == first.receipt.commit
        assert outcomes[2].receipt.error is not None
        assert outcomes[2].receipt.error["kind"] == "check-failed"
        assert not (repo.path / "g" / "checked.txt").exists()
        # Rejected at a commit the branch has moved past since: its repeat is judged again.
        again = executor.call(
            _add("g/checked.txt"), CallOptions(tool_call_id="fails", checks=["exit 3"])
        )
        assert not again.replayed and again.receipt.status == "rejected"


def test_the_same_call_twice_in_one_group_lands_once_and_the_second_replays(repo: Repo) -> None:
    requests = [*_requests(2), Request(_add("g/f0.txt", "0"), CallOptions(tool_call_id="g-0"))]
    with Executor(repo.path) as executor:
        outcomes = _outcomes(apply_many(executor.context, requests))
    assert outcomes[0].receipt.call_id == outcomes[2].receipt.call_id
    assert outcomes[2].replayed and not outcomes[0].replayed
    assert outcomes[2].receipt.commit == outcomes[0].receipt.commit
    assert repo.call_ids().count(outcomes[0].receipt.call_id) == 1


def test_a_bad_patch_in_a_group_is_its_own_error_and_writes_nothing_of_its_own(
    repo: Repo,
) -> None:
    requests = [*_requests(2), Request("not a patch", CallOptions())]
    with Executor(repo.path) as executor:
        results = apply_many(executor.context, requests)
    assert [isinstance(r, CallOutcome) for r in results] == [True, True, False]
    assert "patch" in str(results[2]).lower()
    assert len(repo.call_ids()) == 2


def test_a_group_that_loses_the_race_is_staged_again_on_the_new_tip(repo: Repo) -> None:
    with Executor(repo.path) as executor:
        real = executor.context.publisher
        interfering = Interfering(real, repo, times=1)
        executor.context.publisher = interfering  # type: ignore[assignment]
        outcomes = _outcomes(apply_many(executor.context, _requests(3)))
    assert interfering.lost == 1
    assert [o.receipt.status for o in outcomes] == ["committed"] * 3
    other = repo.git("rev-parse", f"{outcomes[0].receipt.commit}^").strip()
    assert repo.git("log", "-1", "--format=%s", other).strip() == "other"
    assert len(repo.call_ids()) == 3


def test_threads_sharing_one_executor_are_grouped_and_each_gets_its_own_outcome(
    repo: Repo,
) -> None:
    results: dict[int, CallOutcome] = {}
    moves = _ref_moves(repo)
    with Executor(repo.path, group_window=0.2) as executor:

        def call(i: int) -> None:
            results[i] = executor.call(_add(f"t/{i}.txt", str(i)), CallOptions())

        threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(results) == list(range(6))
    assert all(r.receipt.status == "committed" for r in results.values())
    assert len(set(r.receipt.commit for r in results.values())) == 6
    # Six calls, fewer moves of the branch: they queued behind the first, and went as a group.
    assert _ref_moves(repo) - moves < 6
    for i, outcome in results.items():
        assert Path(repo.path / "t" / f"{i}.txt").read_text() == f"{i}\n"
        assert outcome.receipt.files[0].path == f"t/{i}.txt"


def test_hooks_and_dirty_commit_are_not_grouped(repo: Repo, tmp_path: Path) -> None:
    with Executor(repo.path) as executor:
        ctx = executor.context
        assert group_flow.groupable(ctx, CallOptions())
        assert not group_flow.groupable(ctx, CallOptions(dirty="commit"))
        hook = repo.path / ".git" / "hooks" / "pre-commit"
        hook.write_text("#!/bin/sh\nexit 0\n")
        hook.chmod(0o755)
        assert not group_flow.groupable(ctx, CallOptions())
        assert group_flow.groupable(ctx, CallOptions(no_verify=True))
        moves = _ref_moves(repo)
        outcomes = _outcomes(apply_many(ctx, _requests(3)))
    # Each alone: its own ref move.
    assert [o.receipt.status for o in outcomes] == ["committed"] * 3
    assert _ref_moves(repo) == moves + 3


@pytest.mark.parametrize("count", [1])
def test_a_call_alone_runs_as_it_always_did(repo: Repo, count: int) -> None:
    with Executor(repo.path) as executor:
        outcomes = _outcomes(apply_many(executor.context, _requests(count)))
    assert outcomes[0].receipt.status == "committed"
    assert "applyonce: " + outcomes[0].receipt.call_id in repo.git("reflog", "-1")


def test_a_call_on_a_path_with_uncommitted_changes_drops_out_alone(repo: Repo) -> None:
    (repo.path / "README.md").write_text("# demo, edited by hand\n")
    edit = "*** Begin Patch\n*** Update File: README.md\n@@\n-# demo\n+# demo!\n*** End Patch\n"
    requests = _requests(3)
    requests[1] = Request(edit, CallOptions(tool_call_id="dirty"))
    with Executor(repo.path) as executor:
        outcomes = _outcomes(apply_many(executor.context, requests))
    assert [o.receipt.status for o in outcomes] == ["committed", "rejected", "committed"]
    error = outcomes[1].receipt.error
    assert error is not None and "README.md" in error["message"], error
    assert (repo.path / "README.md").read_text() == "# demo, edited by hand\n"
    assert len(repo.call_ids()) == 2


class FirstLandsElsewhere:
    """The repository's publisher, where the chain's first commit lands just before the group's
    publish (as if another execution of that call, wrongly judged dead, had published it)."""

    def __init__(self, inner: Any, repo: Repo) -> None:
        self.inner, self.repo, self.done = inner, repo, False

    def publish(self, ref: str, expected: str | None, new: str, *, reason: str) -> None:
        if not self.done:
            self.done = True
            first = new  # (in memory until a publish writes it: read through the store)
            while self.inner.store.parent_of(first) != expected:
                first = self.inner.store.parent_of(first)
            self.inner.publish(ref, expected, first, reason="another execution")
        self.inner.publish(ref, expected, new, reason=reason)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_call_of_the_group_landed_meanwhile_is_adopted_never_published_twice(
    repo: Repo,
) -> None:
    requests = _requests(3)
    with Executor(repo.path) as executor:
        real = executor.context.publisher
        executor.context.publisher = FirstLandsElsewhere(real, repo)  # type: ignore[assignment]
        outcomes = _outcomes(apply_many(executor.context, requests))
        executor.context.publisher = real
        assert [o.receipt.status for o in outcomes] == ["committed"] * 3
        ids = [o.receipt.call_id for o in outcomes]
        assert sorted(repo.call_ids()) == sorted(ids)  # each once
        first = outcomes[0].receipt.commit
        assert repo.git("rev-parse", f"{outcomes[1].receipt.commit}^").strip() == first
        # Its claim let go with the group: the same call again replays, in this process too.
        again = executor.call(requests[0].patch_text, requests[0].options)
        assert again.replayed and again.receipt.commit == first


@pytest.mark.parametrize("window", [-1.0, float("nan")])
def test_a_negative_group_window_is_refused_before_anything_is_opened(
    repo: Repo, window: float
) -> None:
    from applyonce.errors import UsageError

    with pytest.raises(UsageError) as raised:
        Executor(repo.path, group_window=window)
    assert raised.value.one_line().startswith("group_window must be 0 or more seconds, not ")
    assert "; pass Executor(..., group_window=0.0)" in raised.value.one_line()
    assert raised.value.exit_code == 2
    assert not repo.state_dir().exists()


def _conflicting_group() -> list[Request]:
    # The second adds the file the first adds: it never applies on the chain, wherever the
    # branch is.
    return [
        Request(_add("g/same.txt", "first"), CallOptions(tool_call_id="first")),
        Request(_add("g/same.txt", "second"), CallOptions(tool_call_id="second")),
        Request(_add("g/other.txt"), CallOptions(tool_call_id="other")),
    ]


def test_a_call_that_never_applied_on_the_chain_is_not_said_to_fail_because_the_branch_moved(
    repo: Repo, tmp_path: Path
) -> None:
    control = make_repo(tmp_path / "control", {"README.md": "# demo\n"})
    with Executor(control.path) as executor:
        alone = _outcomes(apply_many(executor.context, _conflicting_group()))
    expected = alone[1].receipt.error
    assert expected is not None and expected["kind"] != "base-moved"
    with Executor(repo.path) as executor:
        real = executor.context.publisher
        interfering = Interfering(real, repo, times=1)
        executor.context.publisher = interfering  # type: ignore[assignment]
        outcomes = _outcomes(apply_many(executor.context, _conflicting_group()))
    assert interfering.lost == 1
    assert [o.receipt.status for o in outcomes] == ["committed", "rejected", "committed"]
    error = outcomes[1].receipt.error
    assert error is not None
    # The truth: the group's first call added the file; the other writer's commit had nothing
    # to do with it.
    assert error["kind"] == expected["kind"], error
    assert error["message"] == expected["message"], error
    assert outcomes[1].receipt.exit_code == alone[1].receipt.exit_code
    assert (repo.path / "g" / "same.txt").read_text() == "first\n"


def test_a_group_that_keeps_losing_is_rejected_at_the_tip_it_gave_up_on(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(group_flow, "MAX_RESTAGES", 3)
    monkeypatch.setattr(group_flow, "RESTAGE_BUDGET_S", 0.0)
    with Executor(repo.path) as executor:
        real = executor.context.publisher
        executor.context.publisher = Interfering(real, repo, times=100)  # type: ignore[assignment]
        outcomes = _outcomes(apply_many(executor.context, _requests(3)))
        executor.context.publisher = real
        tip = repo.head()
        assert [o.receipt.status for o in outcomes] == ["rejected"] * 3
        for outcome in outcomes:
            error = outcome.receipt.error
            assert error is not None and error["kind"] == "base-moved", error
            assert error["retryable"] is True
            # Rejected at the branch's tip, never at a commit of the group's own that no branch
            # holds.
            assert outcome.receipt.base_commit == tip
        assert repo.call_ids() == []
        again = _outcomes(apply_many(executor.context, _requests(3)))
    assert [o.receipt.status for o in again] == ["committed"] * 3
    assert len(repo.call_ids()) == 3
