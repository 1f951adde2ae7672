"""``applyonce recover`` never says "every call is settled" when one is not: a call another
process's claim still holds is named, with its owner, host, lease end and what to do, and a
checkout it could not update is said; both exit 4 (held by another process)."""

from __future__ import annotations

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
    repo: Repo,
) -> None:
    """``recover`` walks each branch once, then takes its calls over one by one: a call that
    another process published in between (and that died before settling it) is on the branch
    though the walk did not see it. Asked again under the claim, it is settled committed, never
    "nothing took effect"."""
    killed = apply(repo, env={"APPLYONCE_FAULT": "after-publish"})
    assert killed.returncode == -9
    published = repo.git("rev-parse", "main").strip()
    from applyonce import Executor
    from applyonce.flow.recovery.recover import reconcile

    executor = Executor(repo.path)
    try:
        ctx = executor.context
        [row] = [r for r in ctx.ledger.calls() if r.state == "prepared"]
        # The walk recover made before the publish: the branch held no commit of the call.
        outcome = reconcile(ctx, row, history={row.ref: {}})
    finally:
        executor.close()
    assert outcome is not None
    assert (outcome.now, outcome.why) == (
        "committed",
        f"commit {published[:12]} is on refs/heads/main; bookkeeping finished",
    )
    [settled] = ledger_rows(repo)
    assert (settled["state"], settled["commit_id"]) == ("committed", published)
    # What is left is the checkout's sync, which the next recover does.
    synced = run_cli("recover", "--repo", str(repo.path))
    assert synced.returncode == 0 and "  committed  committed  checkout updated" in synced.stdout
    assert repo.git("status", "--porcelain") == ""
    again = run_cli("recover", "--repo", str(repo.path))
    assert again.stdout == "nothing to recover: every call is settled\n", again.stdout
