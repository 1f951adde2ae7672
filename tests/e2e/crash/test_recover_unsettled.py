"""``applyonce recover`` never says "every call is settled" when one is not: a call another
process's claim still holds is named, with its owner, host, lease end and what to do, and a
checkout it could not update is said; both exit 4 (held by another process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import Repo, make_repo, run_cli
from tests.e2e.crash.claims import OTHER_HOST, apply, ledger_events, ledger_rows

ADD_NOTES = "*** Begin Patch\n*** Add File: docs/notes.md\n+notes\n*** End Patch\n"

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


def test_a_first_call_published_after_recovers_walk_of_an_unborn_branch_is_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on a branch with no commit yet when recover walks it (HEAD's unborn branch, or
    an empty lane): the call's root commit, published in between, is found under the claim."""
    repo = make_repo(tmp_path / "new")
    killed = run_cli(
        "apply", "-", "--repo", str(repo.path), "--json", input=ADD_NOTES,
        env={"APPLYONCE_FAULT": "after-commit-object"},
    )  # fmt: skip
    assert killed.returncode == -9
    [row] = ledger_rows(repo)
    from applyonce import Executor
    from applyonce.flow.recovery import recover as recover_module
    from applyonce.state.ledger import EventKind

    with Executor(repo.path) as executor:
        events = executor.ledger.events(str(row["call_id"]))
    [staged] = [str(e.data["commit"]) for e in events if e.kind == EventKind.COMMIT_OBJECT]
    walk = recover_module._history

    def walk_then_publish(*args: Any, **kwargs: Any) -> Any:
        found = walk(*args, **kwargs)
        repo.git("update-ref", "refs/heads/main", staged, "0" * 40)  # the root commit, now
        return found

    monkeypatch.setattr(recover_module, "_history", walk_then_publish)
    with Executor(repo.path) as executor:
        report = executor.recover()
    [outcome] = report.outcomes
    assert outcome.now == "committed", outcome.why
    assert outcome.why.startswith(f"commit {staged[:12]} is on refs/heads/main")
    [settled] = ledger_rows(repo)
    assert (settled["state"], settled["commit_id"]) == ("committed", staged)
    assert repo.git("rev-parse", "main").strip() == staged


def test_a_call_whose_branch_was_rewritten_after_recovers_walk_is_found_where_it_is_now(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The branch pushed with force between the walk and the take-over: the call's commit the
    walk found is gone from it, the same change on the new history carries its Call-Id. The
    call is settled on that commit, once (not two commits of one call, nor the one gone)."""
    killed = apply(repo, env={"APPLYONCE_FAULT": "after-publish"})
    assert killed.returncode == -9
    published = repo.git("rev-parse", "main").strip()
    base = repo.git("rev-parse", "main~1").strip()
    from applyonce import Executor
    from applyonce.flow.recovery import recover as recover_module

    walk = recover_module._history

    def walk_then_rewrite(*args: Any, **kwargs: Any) -> Any:
        found = walk(*args, **kwargs)
        other = repo.git("commit-tree", f"{base}^{{tree}}", "-p", base, "-m", "other").strip()
        message = repo.git("log", "-1", "--format=%B", published)
        tree = f"{published}^{{tree}}"
        again = repo.git("commit-tree", tree, "-p", other, "-m", message).strip()
        repo.git("update-ref", "refs/heads/main", again, published)
        return found

    monkeypatch.setattr(recover_module, "_history", walk_then_rewrite)
    with Executor(repo.path) as executor:
        report = executor.recover()
    rewritten = repo.git("rev-parse", "main").strip()
    [outcome] = report.outcomes
    assert outcome.now == "committed", outcome.why
    assert outcome.why.startswith(f"commit {rewritten[:12]} is on refs/heads/main")
    [settled] = ledger_rows(repo)
    assert (settled["state"], settled["commit_id"]) == ("committed", rewritten)
