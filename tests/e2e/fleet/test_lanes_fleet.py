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

from applyonce.faults import POINTS
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


# The points a landing over a remote meets (not --dirty commit's, not recover's own).
REMOTE_LAND_POINTS = [
    p
    for p in POINTS
    if p
    not in ("after-reject-receipt-tmp", "after-snapshot", "during-catch-up", "after-roll-forward")
]


def _lanes_of_three(served: Served, tmp_path: Path) -> list[str]:
    """Four lane calls on three lanes through the remote (a: two, b and c: one), from two
    clones; their Call-Ids in landing order."""
    bob = served.another_clone(tmp_path / "bob")
    calls = []
    for clone, patch, name in (
        (served.clone, UTIL_PATCH, "a"),
        (served.clone, ADD.format(name="a2"), "a"),
        (bob, ADD.format(name="b"), "b"),
        (bob, ADD.format(name="c"), "c"),
    ):
        done = apply_remote(clone, patch, "--lane", name, "--json")
        assert done.returncode == 0, done.stderr
        calls.append(done.stdout.split('"call_id": "', 1)[1][:64])
    return calls


def _count_pushes(served: Served) -> Path:
    """A post-receive hook on the server appending each pushed update of ``main`` to a file."""
    log = served.server / "main-updates.log"
    hook = served.server / "hooks" / "post-receive"
    hook.write_text(f"#!/bin/sh\ngrep ' refs/heads/main$' >> '{log}' || true\n")
    hook.chmod(0o755)
    return log


def test_a_land_of_many_lanes_pushes_the_target_once(served: Served, tmp_path: Path) -> None:
    calls = _lanes_of_three(served, tmp_path)
    queue = served.another_clone(tmp_path / "queue")
    pushes = _count_pushes(served)
    base = served.server_git("rev-parse", "main").strip()
    trace = tmp_path / "trace"
    done = land(queue.path, "--all", "--json", env={"GIT_TRACE2_EVENT": str(trace)})
    assert done.returncode == 0, done.stdout + done.stderr
    # One fetch for every lane, one for main: not one a landing.
    fetches = [line for line in trace.read_text().splitlines() if '"hierarchy":"fetch"}' in line]
    assert len(fetches) == 2, "\n".join(fetches)
    # One push moved main for the four landings: a chain of four commits, each its own landing
    # call (its Call-Id, its receipt), lane a's calls in their order.
    assert pushes.read_text().splitlines() == [
        f"{base} {served.server_git('rev-parse', 'main').strip()} refs/heads/main"
    ]
    assert lands_on_main(served) == calls[::-1]
    assert served.server_git("rev-list", "--count", f"{base}..main").strip() == "4"
    assert served.server_git("for-each-ref", "refs/applyonce/pending/") == ""
    assert_linear(served)
    audit = run_cli("audit", "--repo", str(queue.path), "--remote", "origin")
    assert audit.returncode == 0, audit.stdout


@pytest.mark.sampled(every=6)  # .ci/run: one point in six, as the other crash suites
@pytest.mark.parametrize("point", REMOTE_LAND_POINTS)
def test_a_crash_at_any_point_of_a_group_landing_over_the_remote_is_finished_by_recover(
    served: Served, tmp_path: Path, point: str
) -> None:
    calls = _lanes_of_three(served, tmp_path)
    queue = served.another_clone(tmp_path / "queue")
    base = served.server_git("rev-parse", "main").strip()
    killed = land(queue.path, "--all", env={"APPLYONCE_FAULT": point})
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    recovered = run_cli("recover", "--repo", str(queue.path), "--remote", "origin")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    done = land(queue.path, "--all")
    assert done.returncode == 0, done.stdout + done.stderr
    # Again from a clone that never saw these landings: each is there once already.
    again = land(served.clone.path, "--all")
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.startswith("land: 0 landed on main, 4 already there"), again.stdout
    on_main = lands_on_main(served)
    assert sorted(on_main) == sorted(calls)
    assert on_main.index(calls[1]) < on_main.index(calls[0])
    assert served.server_git("merge-base", "--is-ancestor", base, "main") == ""
    assert served.server_git("for-each-ref", "refs/applyonce/pending/") == ""
    assert served.server_git("show", "main:src/util.py") == "VALUE = 2\n"
    assert_linear(served)
    # The landings' receipts are the queue's (the lane calls' are in the clones that made them).
    audit = run_cli("audit", "--repo", str(queue.path), "--remote", "origin")
    assert audit.returncode == 0, audit.stdout


# A post-receive hook on the server: at the first push of pending objects (a landing's, before
# its compare-and-swap), another client's commit moves main, once.
FOREIGN_PUSH = """#!/bin/sh
grep -q ' refs/applyonce/pending/' || exit 0
[ -e "$0.done" ] && exit 0
touch "$0.done"
export GIT_AUTHOR_NAME=other GIT_AUTHOR_EMAIL=other@localhost
export GIT_COMMITTER_NAME=other GIT_COMMITTER_EMAIL=other@localhost
export GIT_INDEX_FILE="$PWD/foreign-index"
blob=$(echo other | git hash-object -w --stdin)
git read-tree main
git update-index --add --cacheinfo "100644,$blob,other.txt"
commit=$(echo "another client's commit" | git commit-tree "$(git write-tree)" -p main)
rm -f "$GIT_INDEX_FILE"
git update-ref refs/heads/main "$commit"
"""


def test_a_group_landing_whose_target_moved_on_the_server_lands_on_the_new_tip_once(
    served: Served, tmp_path: Path
) -> None:
    """Another client pushes to main between the queue's fetch and its compare-and-swap: the
    push is refused, the group is restaged on the new tip, and each call lands once, the other
    client's commit kept under them."""
    calls = _lanes_of_three(served, tmp_path)
    queue = served.another_clone(tmp_path / "queue")
    base = served.server_git("rev-parse", "main").strip()
    hook = served.server / "hooks" / "post-receive"
    hook.write_text(FOREIGN_PUSH)
    hook.chmod(0o755)
    done = land(queue.path, "--all")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.endswith("land: 4 landed on main, 0 already there, 0 lane(s) blocked\n")
    assert hook.with_name("post-receive.done").exists()  # the foreign push happened
    foreign = served.server_git("log", "--format=%H", "--author=other", "main").split()
    assert len(foreign) == 1
    assert served.server_git("rev-parse", f"{foreign[0]}^").strip() == base
    assert sorted(lands_on_main(served)) == sorted(calls)
    assert served.server_git("rev-list", "--count", f"{foreign[0]}..main").strip() == "4"
    assert served.server_git("show", "main:other.txt") == "other\n"
    assert served.server_git("show", "main:src/util.py") == "VALUE = 2\n"
    assert served.server_git("for-each-ref", "refs/applyonce/pending/") == ""
    assert_linear(served)
    again = land(served.clone.path, "--all")
    assert again.stdout.startswith("land: 0 landed on main, 4 already there"), again.stdout
    audit = run_cli("audit", "--repo", str(queue.path), "--remote", "origin")
    assert audit.returncode == 0, audit.stdout


def test_a_group_landings_pending_push_is_left_to_the_clone_that_made_it(
    served: Served, tmp_path: Path
) -> None:
    calls = _lanes_of_three(served, tmp_path)
    queue = served.another_clone(tmp_path / "queue")
    killed = land(queue.path, "--all", env={"APPLYONCE_FAULT": "after-push-objects"})
    assert killed.returncode == -signal.SIGKILL
    pending = served.server_git("for-each-ref", "--format=%(refname)", "refs/applyonce/pending/")
    assert len(pending.split()) == 1, pending
    # A clone whose ledger does not know the landings leaves their chain's pending push alone:
    # its base is still the branch's tip, so it may yet be published, by the queue's recover.
    other = run_cli("recover", "--repo", str(served.clone.path), "--remote", "origin")
    assert other.returncode == 0, other.stdout + other.stderr
    assert "its call is not in this ledger" in other.stdout, other.stdout
    assert served.server_git("for-each-ref", "--format=%(refname)", "refs/applyonce/pending/") == (
        pending
    )
    recovered = run_cli("recover", "--repo", str(queue.path), "--remote", "origin")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert sorted(lands_on_main(served)) == sorted(calls), recovered.stdout
    assert served.server_git("for-each-ref", "refs/applyonce/pending/") == ""


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
