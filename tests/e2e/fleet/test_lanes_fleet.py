"""Lanes in a fleet at small size: clones each calling on their own lane through a shared remote
(a real ``git daemon``), a queue in another clone landing them, SIGKILLed at the push and
finished by ``recover`` from yet another clone: each lane call on the server's ``main`` once."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.conftest import UTIL_PATCH, Served, run_cli
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
