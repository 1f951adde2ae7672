"""A hypothesis state machine: applies, crashes at any fault point, recovers and outside commits,
in any order, against a model of what Git must end up holding. Every step is a real process."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import orjson
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from applyonce.faults import POINTS
from tests.conftest import make_repo, run_cli

CALLS = 3
# after-snapshot is reached only with --dirty commit (tests/e2e/calls/test_dirty_commit.py).
# after-push-objects and during-catch-up only with --remote (tests/e2e/fleet/test_remote_publish.py).
# after-roll-forward only in recover (tests/e2e/git/test_commits_beside_calls.py).
CRASH_POINTS = [
    p
    for p in POINTS
    if p
    not in (
        "after-reject-receipt-tmp",
        "after-snapshot",
        "after-push-objects",
        "during-catch-up",
        "after-roll-forward",
    )
]


def patch_for(i: int) -> str:
    return (
        f"*** Begin Patch\n*** Update File: f{i}.txt\n@@\n-before {i}\n+after {i}\n*** End Patch\n"
    )


class ApplyCrashRecover(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="applyonce-stateful-"))
        self.repo = make_repo(
            self.tmp / "repo", {f"f{i}.txt": f"before {i}\n" for i in range(CALLS)}
        )
        self.committed: set[int] = set()  # calls that must be on the branch
        self.publishable: set[int] = set()  # crashed once its commit object existed: may land
        self.outside = 0
        self.killed = False  # a call was killed since the last recover

    def apply(self, i: int, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
        return run_cli(
            "apply", "-", "--repo", str(self.repo.path), "--json", input=patch_for(i), env=env
        )

    @rule(i=st.integers(0, CALLS - 1))
    def apply_call(self, i: int) -> None:
        result = self.apply(i)
        assert result.returncode == 0, result.stderr
        assert orjson.loads(result.stdout)["status"] == "committed"
        self.committed.add(i)

    @rule(i=st.integers(0, CALLS - 1), point=st.sampled_from(CRASH_POINTS))
    def crash_call(self, i: int, point: str) -> None:
        result = self.apply(i, env={"APPLYONCE_FAULT": point})
        if result.returncode == 0:
            # Settled before reaching the fault point: replayed, or an earlier crash's commit was
            # found in Git or rolled forward. Only possible if it was already (about to be) done.
            assert i in self.committed or i in self.publishable, result
            self.committed.add(i)
            return
        assert result.returncode == -signal.SIGKILL
        self.killed = True
        if CRASH_POINTS.index(point) >= CRASH_POINTS.index("after-commit-object"):
            self.publishable.add(i)

    @rule()
    def recover(self) -> None:
        result = run_cli("recover", "--repo", str(self.repo.path))
        assert result.returncode == 0, result.stdout + result.stderr
        self.killed = False

    @rule()
    def outside_commit(self) -> None:
        self.outside += 1
        (self.repo.path / "outside.txt").write_text(f"{self.outside}\n")
        added = subprocess.run(
            ["git", "add", "outside.txt"], cwd=self.repo.path, capture_output=True, text=True
        )
        if added.returncode != 0:
            # A call killed after its branch moved holds the checkout's index.lock until recover
            # syncs it (a commit before then would record the old files over the call): git says
            # so, and recover frees it.
            assert self.killed and "index.lock" in added.stderr, added.stderr
            self.recover()
            self.repo.git("add", "outside.txt")
        self.repo.git("commit", "-q", "-m", "outside", "--", "outside.txt")

    @invariant()
    def no_call_lands_twice(self) -> None:
        ids = self.repo.call_ids()
        assert len(ids) == len(set(ids))
        assert len(ids) >= len(self.committed)

    def teardown(self) -> None:
        try:
            assert run_cli("recover", "--repo", str(self.repo.path)).returncode == 0
            for i in range(CALLS):
                result = self.apply(i)
                assert result.returncode == 0, result.stderr
            assert len(self.repo.call_ids()) == CALLS == len(set(self.repo.call_ids()))
            audit = run_cli("audit", "--repo", str(self.repo.path))
            assert audit.returncode == 0, audit.stdout
            for i in range(CALLS):
                assert (self.repo.path / f"f{i}.txt").read_text() == f"after {i}\n"
            assert self.repo.git("status", "--porcelain") == ""
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


ApplyCrashRecover.TestCase.settings = settings(
    max_examples=5,
    stateful_step_count=6,
    deadline=None,
    derandomize=True,
    # Each step is a real process: shrinking a failure could take many minutes in CI.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
TestApplyCrashRecover = ApplyCrashRecover.TestCase
