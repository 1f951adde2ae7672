"""A group of calls killed at every fault point (a real SIGKILL, ``APPLYONCE_FAULT``), then
``applyonce recover``: every call of the group is finished or rolled back, each exactly once, and
the group repeated lands each call once (docs/design.md §7, "Groups").

The child process is the Python API: four threads calling one :class:`Executor` at once, queued
behind its first call's short group window, so the four go as one group: three that commit and
one whose check fails (it drops out).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import orjson
import pytest

from applyonce.faults import POINTS
from tests.conftest import Repo, run_cli

CHILD = textwrap.dedent(
    """
    import sys, threading, orjson
    from applyonce.executor import Executor
    from applyonce.flow.options import CallOptions
    def patch(name):
        return f"*** Begin Patch\\n*** Add File: {name}\\n+{name}\\n*** End Patch\\n"
    calls = [(patch(f"g/f{i}.txt"), CallOptions(tool_call_id=f"g-{i}")) for i in range(3)]
    calls.append((patch("g/checked.txt"), CallOptions(tool_call_id="g-check", checks=["exit 3"])))
    results = {}
    with Executor(sys.argv[1], group_window=0.5) as ex:
        def work(i):
            text, options = calls[i]
            outcome = ex.call(text, options)
            results[i] = [outcome.receipt.call_id, outcome.receipt.status, outcome.replayed]
        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(calls))]
        for t in threads: t.start()
        for t in threads: t.join()
    print(orjson.dumps([results[i] for i in range(len(calls))]).decode())
    """
)
# Reached by a group: every point but the --dirty commit, --remote and recover ones.
GROUP_POINTS = [
    p
    for p in POINTS
    if p not in ("after-snapshot", "after-push-objects", "during-catch-up", "after-roll-forward")
]


def _run(repo: Repo, point: str | None = None) -> subprocess.CompletedProcess[str]:
    env = None
    if point is not None:
        import os

        env = {**os.environ, "APPLYONCE_FAULT": point}
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(repo.path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def _states(repo: Repo) -> dict[str, str]:
    log = orjson.loads(run_cli("log", "--repo", str(repo.path), "--json").stdout)
    return {row["call_id"]: row["state"] for row in log}


@pytest.mark.sampled(every=6)  # .ci/run: one point in six, as the plain crash suite
@pytest.mark.parametrize("point", GROUP_POINTS)
def test_a_group_killed_at_each_fault_point_is_recovered_call_by_call_exactly_once(
    repo: Repo, point: str
) -> None:
    base = repo.head()
    moves = len(repo.git("reflog", "show", "refs/heads/main").splitlines())
    crashed = _run(repo, point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    # Settled: no call in flight, each call at most once on the branch, the branch a
    # fast-forward of the base.
    states = _states(repo)
    assert set(states.values()) <= {"committed", "rejected"}, states
    on_branch = repo.call_ids()
    assert len(on_branch) == len(set(on_branch))
    assert {c for c, s in states.items() if s == "committed"} == set(on_branch)
    assert repo.git("merge-base", "--is-ancestor", base, "HEAD", check=False) == ""
    assert "nothing to recover" in run_cli("recover", "--repo", str(repo.path)).stdout
    # The group again: each call lands once (a committed one replays), the failing check is
    # rejected, and nothing is left for recover.
    again = _run(repo)
    assert again.returncode == 0, again.stderr[-2000:]
    results = orjson.loads(again.stdout)
    assert [status for _, status, _ in results] == ["committed"] * 3 + ["rejected"]
    for call_id, _, replayed in results[:3]:
        assert repo.call_ids().count(call_id) == 1
        assert replayed == (call_id in on_branch)
    assert sorted(repo.call_ids()) == sorted(r[0] for r in results[:3])
    for i in range(3):
        assert (repo.path / "g" / f"f{i}.txt").read_text() == f"g/f{i}.txt\n"
    assert not (repo.path / "g" / "checked.txt").exists()
    assert repo.git("status", "--porcelain") == ""
    assert repo.git("fsck", "--strict", "--no-dangling") == ""
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0
    assert "nothing to recover" in run_cli("recover", "--repo", str(repo.path)).stdout
    # The group moved the branch once, or twice when the crash left some of it to repeat
    # (or to recover's roll forward).
    assert len(repo.git("reflog", "show", "refs/heads/main").splitlines()) - moves <= 3


def test_a_group_without_a_fault_moves_the_branch_once(repo: Repo) -> None:
    moves = len(repo.git("reflog", "show", "refs/heads/main").splitlines())
    done = _run(repo)
    assert done.returncode == 0, done.stderr[-2000:]
    results = orjson.loads(done.stdout)
    assert [status for _, status, _ in results] == ["committed"] * 3 + ["rejected"]
    assert len(repo.git("reflog", "show", "refs/heads/main").splitlines()) == moves + 1


ORDERED = textwrap.dedent(
    """
    import sys, threading, time
    from applyonce.executor import Executor
    from applyonce.flow.options import CallOptions
    def patch(name):
        return f"*** Begin Patch\\n*** Add File: {name}\\n+{name}\\n*** End Patch\\n"
    names = sys.argv[2:]
    with Executor(sys.argv[1], group_window=0.5) as ex:
        def work(name):
            ex.call(patch(name), CallOptions(tool_call_id=name.replace("/", "-")))
        threads = []
        for name in names:  # queued in this order: the chain's order
            threads.append(threading.Thread(target=work, args=(name,)))
            threads[-1].start()
            time.sleep(0.1)
        for t in threads: t.join()
    """
)


def _ordered(repo: Repo, names: list[str], point: str | None) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, **({"APPLYONCE_FAULT": point} if point else {})}
    return subprocess.run(
        [sys.executable, "-c", ORDERED, str(repo.path), *names],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_a_chain_rolled_forward_from_an_older_call_leaves_no_call_below_it_said_untaken(
    repo: Repo,
) -> None:
    # The group's last call is older than its first: a repeat of a call a crash interrupted
    # (its ledger row made then). recover settles calls oldest first, so it meets the last call
    # of the chain first, and rolls the chain forward up to it: the first call is then on the
    # branch, and must be found there, never settled as "nothing took effect".
    killed = _ordered(repo, ["g/old.txt"], "after-prepared")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    first = run_cli("recover", "--repo", str(repo.path))
    assert first.returncode == 0, first.stdout + first.stderr
    assert set(_states(repo).values()) == {"rejected"}
    crashed = _ordered(repo, ["g/new.txt", "g/old.txt"], "during-publish")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    states = _states(repo)
    on_branch = repo.call_ids()
    assert len(on_branch) == 2, on_branch  # the chain, rolled forward up to its last call
    assert {c for c, s in states.items() if s == "committed"} == set(on_branch), (
        states,
        recovered.stdout,
    )
    assert "nothing took effect" not in recovered.stdout
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0
    assert repo.git("status", "--porcelain") == ""
