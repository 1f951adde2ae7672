"""Lanes in a fleet at small size: clones each calling on their own lane through a shared remote
(a real ``git daemon``), a queue in another clone landing them, SIGKILLed at the push and
finished by ``recover`` from yet another clone: each lane call on the server's ``main`` once;
and a landing killed at the remote's commit point settled from a clone that never fetched the
lane, with the lane call's patch from the shared ledger."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import UTIL_PATCH, Repo, Served, run_cli
from tests.e2e.support import apply_remote, assert_linear

ADD = "*** Begin Patch\n*** Add File: docs/{name}.md\n+{name}\n*** End Patch\n"


def lands_on_main(served: Served) -> list[str]:
    out = served.server_git("log", "--format=%(trailers:key=Lands-Call-Id,valueonly)", "main")
    return [line.strip() for line in out.splitlines() if line.strip()]


def land(path: Path, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return run_cli("land", "--repo", str(path), "--remote", "origin", *args, env=env)


def test_lanes_of_two_clones_land_once_through_the_remote_despite_a_killed_queue(
    served: Served, tmp_path: Path
) -> None:
    alice, bob = served.clone, served.another_clone(tmp_path / "bob")
    queue = served.another_clone(tmp_path / "queue")
    calls = []
    for clone, name in ((alice, "alice"), (bob, "bob")):
        for patch in (ADD.format(name=name), *([UTIL_PATCH] if name == "alice" else [])):
            done = apply_remote(clone, patch, "--lane", name, "--json")
            assert done.returncode == 0, done.stderr
            calls.append(done.stdout.split('"call_id": "', 1)[1][:64])
    lanes = served.server_git("for-each-ref", "--format=%(refname)", "refs/heads/agent/")
    assert lanes.split() == ["refs/heads/agent/alice", "refs/heads/agent/bob"]
    assert served.server_git("show", "main:src/util.py") == "VALUE = 1\n"

    # The queue dies after its first landing's objects reached the server, before the ref moved.
    killed = land(queue.path, "--all", env={"APPLYONCE_FAULT": "after-push-objects"})
    assert killed.returncode == -signal.SIGKILL
    recovered = run_cli("recover", "--repo", str(queue.path), "--remote", "origin")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    done = land(queue.path, "--all")
    assert done.returncode == 0, done.stdout + done.stderr
    # Landing again, from another clone that never saw these calls: nothing lands twice.
    again = land(bob.path, "--all")
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.startswith("land: 0 landed on main, 3 already there")

    assert sorted(lands_on_main(served)) == sorted(calls)
    assert served.server_git("show", "main:src/util.py") == "VALUE = 2\n"
    assert served.server_git("show", "main:docs/bob.md") == "bob\n"
    assert_linear(served)
    audit = run_cli("audit", "--repo", str(queue.path), "--remote", "origin")
    assert audit.returncode == 0, audit.stdout


@pytest.mark.parametrize("point", ["after-push-objects", "after-publish"])
def test_a_landing_killed_in_the_queue_is_settled_from_a_clone_that_never_fetched_the_lane(
    served: Served, tmp_path: Path, pg_url: str, point: str
) -> None:
    # Cloned before the lane exists, and never fetched since: it does not hold the lane commit,
    # only the shared ledger's record of the lane call's patch.
    observer = served.another_clone(tmp_path / "observer")
    queue = served.another_clone(tmp_path / "queue")
    ledger = ("--ledger", pg_url)
    done = apply_remote(served.clone, ADD.format(name="alice"), "--lane", "alice", *ledger)
    assert done.returncode == 0, done.stderr
    lane_commit = served.server_git("rev-parse", "agent/alice").strip()
    call = served.server_git("log", "-1", "--format=%(trailers:key=Call-Id,valueonly)", lane_commit)

    killed = land(queue.path, "--all", *ledger, env={"APPLYONCE_FAULT": point})
    assert killed.returncode == -signal.SIGKILL
    assert not holds(observer, lane_commit)
    recovered = run_cli("recover", "--repo", str(observer.path), "--remote", "origin", *ledger)
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert "  committed  " in recovered.stdout, recovered.stdout

    again = land(queue.path, "--all", *ledger)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.startswith("land: 0 landed on main, 1 already there"), again.stdout
    assert lands_on_main(served) == [call.strip()]
    assert served.server_git("show", "main:docs/alice.md") == "alice\n"
    audit = run_cli("audit", "--repo", str(queue.path), "--remote", "origin", *ledger)
    assert audit.returncode == 0, audit.stdout


def holds(clone: Repo, commit: str) -> bool:
    """Whether ``clone`` has the object ``commit``."""
    return (
        subprocess.run(
            ["git", "-C", str(clone.path), "cat-file", "-e", commit],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
