"""``applyonce recover`` never says "every call is settled" when one is not: a call another
process's claim still holds is named, with its owner, host, lease end and what to do, and a
checkout it could not update is said; both exit 4 (held by another process)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.conftest import Repo, run_cli
from tests.e2e.crash.claims import OTHER_HOST, apply, ledger_events, ledger_rows

pytestmark = pytest.mark.sampled(every=2, by="module")


def test_recover_names_a_call_held_under_another_hosts_live_lease(repo: Repo) -> None:
    killed = apply(repo, env={"APPLYONCE_FAULT": "after-stage", **OTHER_HOST})  # lease: 30 s
    assert killed.returncode == -9
    [row] = ledger_rows(repo)
    call_id, short = str(row["call_id"]), str(row["call_id"])[:12]
    before = ledger_events(repo, call_id)
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 4, recovered.stderr
    assert "every call is settled" not in recovered.stdout
    assert recovered.stdout == (
        "call          was        now        why\n"
        f"{short}  prepared   held       held by process {row['owner_pid']} on "
        f"{OTHER_HOST['APPLYONCE_HOST_ID']} until {row['lease_expires_at']}: wait for its lease "
        f"to end, or, if no process runs it, run 'applyonce resolve {short} --release'\n"
    )
    as_json = run_cli("recover", "--repo", str(repo.path), "--json")
    assert as_json.returncode == 4, as_json.stderr
    [outcome] = orjson.loads(as_json.stdout)["outcomes"]
    assert (outcome["call_id"], outcome["was"], outcome["now"]) == (call_id, "prepared", "held")
    assert ledger_events(repo, call_id) == before  # recover wrote nothing of a held call
    # Freed by hand, the same recover settles it: nothing was published, so rejected, retryable.
    assert run_cli("resolve", short, "--release", "--repo", str(repo.path)).returncode == 0
    settled = run_cli("recover", "--repo", str(repo.path))
    assert settled.returncode == 0, settled.stderr
    assert f"{short}  prepared   rejected" in settled.stdout


def test_recover_does_not_say_settled_when_the_checkout_was_not_updated(repo: Repo) -> None:
    killed = apply(repo, env={"APPLYONCE_FAULT": "after-ledger"})  # committed, checkout not synced
    assert killed.returncode == -9
    lock = repo.path / ".git" / "index.lock"
    # The user's git holds the index (the killed call's lock gone, removed by hand): the sync
    # must not take it.
    lock.unlink()
    lock.write_bytes(b"DIRC")
    try:
        recovered = run_cli("recover", "--repo", str(repo.path))
    finally:
        lock.unlink()
    assert recovered.returncode == 4, recovered.stderr
    assert "note: checkout not updated (" in recovered.stdout
    assert "every call is settled" not in recovered.stdout
    assert recovered.stdout.endswith(
        "not everything is settled: a checkout was not updated (see the notes above)\n"
    )
    again = run_cli("recover", "--repo", str(repo.path))
    assert again.returncode == 0, again.stderr
    assert again.stdout.endswith("committed  committed  checkout updated\n")
    assert repo.git("status", "--porcelain") == ""


def test_a_call_published_after_recovers_walk_is_settled_committed_not_rejected(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``recover`` walks each branch once, then takes its calls over: a call that another
    process published in between (and that died before settling it) is on the branch though
    the walk did not see it. Looked at again under the claim, it is settled committed, never
    "nothing took effect"."""
    killed = apply(repo, env={"APPLYONCE_FAULT": "after-commit-object"})
    assert killed.returncode == -9
    [row] = ledger_rows(repo)
    base = repo.git("rev-parse", "main").strip()
    from applyonce import Executor
    from applyonce.flow.recovery import recover as recover_module
    from applyonce.state.ledger import EventKind

    executor = Executor(repo.path)
    try:
        events = executor.ledger.events(str(row["call_id"]))
    finally:
        executor.close()
    [staged] = [str(e.data["commit"]) for e in events if e.kind == EventKind.COMMIT_OBJECT]

    walk = recover_module._history

    def walk_then_publish(*args: Any, **kwargs: Any) -> Any:
        found = walk(*args, **kwargs)
        # Another process publishes the call's staged commit now, after the walk.
        repo.git("update-ref", "refs/heads/main", staged, base)
        return found

    monkeypatch.setattr(recover_module, "_history", walk_then_publish)
    executor = Executor(repo.path)
    try:
        report = executor.recover()
    finally:
        executor.close()
    [outcome] = report.outcomes
    assert (outcome.now, outcome.why) == (
        "committed",
        f"commit {staged[:12]} is on refs/heads/main; bookkeeping finished; checkout updated",
    )
    [settled] = ledger_rows(repo)
    assert (settled["state"], settled["commit_id"]) == ("committed", staged)
    assert repo.git("rev-parse", "main").strip() == staged
    assert repo.git("status", "--porcelain") == ""
    again = run_cli("recover", "--repo", str(repo.path))
    assert again.stdout == "nothing to recover: every call is settled\n", again.stdout
