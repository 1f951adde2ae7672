"""Lanes and ``applyonce land``, in real processes (docs/design.md §12, "Lanes"): calls on a
lane land there exactly once, each lands on the target exactly once (restaged on a moved target),
a call that no longer applies blocks only its lane, and a crash at any point of landing is
finished by ``recover``."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import orjson
import pytest

from applyonce.faults import POINTS
from tests.conftest import Repo, run_cli

UTIL_2 = (
    "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"
)
UTIL_3 = (
    "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 3\n*** End Patch\n"
)
ADD_NOTES = "*** Begin Patch\n*** Add File: docs/notes.md\n+notes\n*** End Patch\n"
ADD_TODO = "*** Begin Patch\n*** Add File: docs/todo.md\n+todo\n*** End Patch\n"
APP_HI = (
    "*** Begin Patch\n*** Update File: src/app.py\n@@\n-    return 'hello ' + name\n"
    "+    return 'hi ' + name\n*** End Patch\n"
)
# The points a landing meets (no --dirty commit, no remote, not recover's own).
LAND_POINTS = [
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


def lane_apply(repo: Repo, patch: str, lane: str, *args: str) -> dict[str, object]:
    ran = run_cli(
        "apply", "-", "--repo", str(repo.path), "--lane", lane, "--json", *args, input=patch
    )
    assert ran.returncode == 0, ran.stderr
    receipt: dict[str, object] = orjson.loads(ran.stdout)
    return receipt


def land(
    repo: Repo, *args: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, object]]:
    ran = run_cli("land", "--repo", str(repo.path), "--json", *args, env=env)
    if ran.returncode < 0:
        return ran.returncode, {}
    assert ran.stderr == "" or ran.returncode, ran.stderr
    report: dict[str, object] = orjson.loads(ran.stdout)
    return ran.returncode, report


def landed_on_main(repo: Repo) -> list[str]:
    """The ``Lands-Call-Id`` of every commit on main, newest first."""
    out = repo.git("log", "--format=%(trailers:key=Lands-Call-Id,valueonly)", "main")
    return [line.strip() for line in out.splitlines() if line.strip()]


def test_a_lane_call_lands_there_once_and_on_the_target_once(repo: Repo) -> None:
    first = lane_apply(repo, UTIL_2, "a")
    assert first["ref"] == "refs/heads/agent/a"
    again = lane_apply(repo, UTIL_2, "a")
    assert again["replayed"] is True and again["commit"] == first["commit"]
    assert repo.git("rev-list", "--count", "main..agent/a").strip() == "1"
    # The lane starts at main's tip and main is untouched by the call.
    assert repo.git("show", "main:src/util.py") == "VALUE = 1\n"

    code, report = land(repo, "--lane", "a")
    assert code == 0, report
    landed = report["landed"]
    assert isinstance(landed, list) and len(landed) == 1
    assert landed[0]["call_id"] == first["call_id"]
    assert landed[0]["lane_commit"] == first["commit"]
    assert repo.git("show", "main:src/util.py") == "VALUE = 2\n"
    trailers = repo.git("log", "-1", "--format=%(trailers:only,unfold)", "main")
    assert f"Lands-Call-Id: {first['call_id']}" in trailers
    assert f"Lane-Commit: {first['commit']}" in trailers
    assert "Tool: land_patch" in trailers

    # Landing twice lands once.
    head = repo.git("rev-parse", "main").strip()
    code, report = land(repo, "--all")
    assert code == 0 and report["landed"] == [] and report["already"] == 1
    assert repo.git("rev-parse", "main").strip() == head
    assert landed_on_main(repo) == [first["call_id"]]
    # The checkout of main shows the landing; the landing is a call with a verified receipt.
    assert repo.git("status", "--porcelain") == ""
    shown = run_cli("show", landed[0]["landing_call_id"], "--repo", str(repo.path), "--json")
    assert orjson.loads(shown.stdout)["commit"] == head
    for ref in ("main", "agent/a"):
        audit = run_cli("audit", "--repo", str(repo.path), "--ref", ref)
        assert audit.returncode == 0, audit.stdout


def test_land_restages_on_a_target_that_moved(repo: Repo) -> None:
    lane_apply(repo, UTIL_2, "a")
    lane_apply(repo, ADD_NOTES, "a")
    # main moves after the lane was made: another file, and the same file's other lines.
    moved = run_cli("apply", "-", "--repo", str(repo.path), input=APP_HI)
    assert moved.returncode == 0, moved.stderr
    code, report = land(repo, "--lane", "a")
    assert code == 0, report
    assert len(report["landed"]) == 2  # type: ignore[arg-type]
    assert repo.git("show", "main:src/util.py") == "VALUE = 2\n"
    assert repo.git("show", "main:docs/notes.md") == "notes\n"
    assert "'hi '" in repo.git("show", "main:src/app.py")
    assert repo.git("rev-list", "--merges", "main") == ""
    assert repo.git("fsck", "--strict", "--no-dangling") == ""


def test_a_call_that_no_longer_applies_blocks_only_its_lane(repo: Repo) -> None:
    blocked = lane_apply(repo, UTIL_2, "a")
    waiting = lane_apply(repo, ADD_TODO, "a")
    other = lane_apply(repo, ADD_NOTES, "b")
    # main changes the line lane a's call changed.
    moved = run_cli("apply", "-", "--repo", str(repo.path), input=UTIL_3)
    assert moved.returncode == 0, moved.stderr
    head = repo.git("rev-parse", "main").strip()

    code, report = land(repo, "--all")
    assert code == 1
    assert [each["call_id"] for each in report["landed"]] == [other["call_id"]]  # type: ignore[union-attr]
    (stop,) = report["blocked"]  # type: ignore[misc]
    assert stop["lane"] == "refs/heads/agent/a"
    assert stop["call_id"] == blocked["call_id"]
    assert stop["kind"] == "hunk-mismatch"
    assert stop["waiting"] == 1
    assert "VALUE = 3" in stop["output"]  # the repair data: the target's lines
    # Nothing of lane a reached main: the later call waits behind the blocked one.
    assert repo.git("show", "main:src/util.py") == "VALUE = 3\n"
    assert waiting["call_id"] not in landed_on_main(repo)
    assert landed_on_main(repo) == [other["call_id"]]
    assert repo.git("rev-list", "--count", f"{head}..main").strip() == "1"

    # The text form: one line per lane, the repair data under it.
    text = run_cli("land", "--repo", str(repo.path), "--all")
    assert text.returncode == 1
    assert text.stdout.splitlines()[0].startswith(
        f"blocked: lane agent/a at call {blocked['call_id'][:12]}:"  # type: ignore[index]
    )
    assert "1 later call(s) of the lane wait" in text.stdout
    assert "Traceback" not in text.stdout + text.stderr


def test_land_reruns_the_lane_calls_checks_on_the_merged_tree(repo: Repo) -> None:
    lane_apply(repo, UTIL_2, "a", "--check", "test ! -e docs/notes.md")
    moved = run_cli("apply", "-", "--repo", str(repo.path), input=ADD_NOTES)
    assert moved.returncode == 0, moved.stderr
    head = repo.git("rev-parse", "main").strip()
    code, report = land(repo, "--lane", "a")
    assert code == 1
    (stop,) = report["blocked"]  # type: ignore[misc]
    assert stop["kind"] == "check-failed"
    assert "test ! -e docs/notes.md" in stop["message"]
    assert repo.git("rev-parse", "main").strip() == head


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "error: land needs one of --lane NAME or --all; "),
        (("--lane", "a", "--all"), "error: land needs one of --lane NAME or --all; "),
        (("--lane", "nosuch"), "error: there is no lane 'nosuch' (branch agent/nosuch); "),
        (("--all", "--onto", "nosuch"), "error: there is no branch 'nosuch' to land on; "),
    ],
)
def test_land_refuses_bad_arguments_writing_nothing(
    repo: Repo, args: tuple[str, ...], message: str
) -> None:
    lane_apply(repo, UTIL_2, "a")
    before = repo.git("for-each-ref")
    ran = run_cli("land", "--repo", str(repo.path), *args)
    assert ran.returncode == 2
    assert ran.stderr.startswith(message), ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1
    assert repo.git("for-each-ref") == before


def test_a_lane_from_a_branch_that_does_not_exist_is_refused(repo: Repo) -> None:
    ran = run_cli(
        "apply", "-", "--repo", str(repo.path), "--lane", "a", "--branch", "nosuch", input=UTIL_2
    )
    assert ran.returncode == 2
    assert ran.stderr == (
        "error: there is no branch 'nosuch' to start lane 'a' from; pass --branch BRANCH naming"
        " an existing branch\n"
    )
    assert "agent/a" not in repo.git("for-each-ref")


def test_lanes_of_a_repository_with_no_commit_yet_land_the_first_commit(tmp_path: Path) -> None:
    """HEAD's branch unborn: a lane starts empty (its first call a root commit), and landing it
    makes the branch, once; a lane from another branch that does not exist is still refused."""
    path = tmp_path / "new"
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    ran = run_cli("apply", "-", "--repo", str(path), "--lane", "a", input=ADD_NOTES)
    assert ran.returncode == 0, ran.stderr
    lane_commit = _git(path, "rev-parse", "agent/a")
    assert _git(path, "rev-list", "--count", "agent/a") == "1"
    refused = run_cli(
        "apply", "-", "--repo", str(path), "--lane", "b", "--branch", "dev", input=ADD_TODO
    )
    assert refused.returncode == 2 and "there is no branch 'dev'" in refused.stderr
    assert _git(path, "for-each-ref", "--format=%(refname)") == "refs/heads/agent/a"
    first = run_cli("land", "--repo", str(path), "--lane", "a")
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.endswith("land: 1 landed on main, 0 already there, 0 lane(s) blocked\n")
    again = run_cli("land", "--repo", str(path), "--lane", "a")
    assert again.stdout == "land: 0 landed on main, 1 already there, 0 lane(s) blocked\n"
    assert _git(path, "rev-list", "--count", "main") == "1"
    assert _git(path, "log", "-1", "--format=%(trailers:key=Lane-Commit,valueonly)", "main") == (
        lane_commit
    )
    assert (path / "docs" / "notes.md").read_text() == "notes\n"
    assert _git(path, "status", "--porcelain") == ""


def _git(path: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(path), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.sampled(every=6)  # .ci/run: one point in six, as the other crash suites
@pytest.mark.parametrize("point", LAND_POINTS)
def test_a_crash_at_any_point_of_landing_is_finished_by_recover(repo: Repo, point: str) -> None:
    call = lane_apply(repo, UTIL_2, "a")
    lane_apply(repo, ADD_NOTES, "b")
    base = repo.git("rev-parse", "main").strip()
    code, _ = land(repo, "--lane", "a", env={"APPLYONCE_FAULT": point})
    assert code == -signal.SIGKILL
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    code, report = land(repo, "--all")
    assert code == 0, report
    code, report = land(repo, "--all")
    assert code == 0 and report["landed"] == [] and report["already"] == 2
    # Each lane call on main exactly once, main fast-forward only, everything proven.
    assert sorted(landed_on_main(repo)) == sorted([call["call_id"], *_lane_calls(repo, "b")])
    assert repo.git("merge-base", "--is-ancestor", base, "main", check=False) == ""
    assert repo.git("rev-list", "--merges", "main") == ""
    assert repo.git("show", "main:src/util.py") == "VALUE = 2\n"
    assert repo.git("status", "--porcelain") == ""
    assert repo.git("fsck", "--strict", "--no-dangling") == ""
    leftovers = [
        p
        for p in repo.path.joinpath(".git").rglob("*")
        if (p.name.endswith(".lock") and "applyonce" not in p.parts)
        or p.name.startswith(".applyonce-tmp-")
    ]
    assert leftovers == []
    for ref in ("main", "agent/a", "agent/b"):
        audit = run_cli("audit", "--repo", str(repo.path), "--ref", ref)
        assert audit.returncode == 0, audit.stdout
    replay = run_cli("replay", "--repo", str(repo.path))
    assert replay.returncode == 0, replay.stdout


def _lane_calls(repo: Repo, lane: str) -> list[str]:
    out = repo.git("log", "--format=%(trailers:key=Call-Id,valueonly)", f"main..agent/{lane}")
    return [line.strip() for line in out.splitlines() if line.strip()]


def _main_moves(repo: Repo) -> int:
    return len(repo.git("reflog", "show", "refs/heads/main").splitlines())


def _three_lanes(repo: Repo) -> list[str]:
    """Four lane calls on three lanes (a: two, b and c: one); their Call-Ids in landing order."""
    return [
        str(lane_apply(repo, patch, lane)["call_id"])
        for patch, lane in ((UTIL_2, "a"), (ADD_NOTES, "a"), (ADD_TODO, "b"), (APP_HI, "c"))
    ]


def test_a_land_of_many_lanes_moves_the_target_once(repo: Repo) -> None:
    calls = _three_lanes(repo)
    head = repo.git("rev-parse", "main").strip()
    moves = _main_moves(repo)
    code, report = land(repo, "--all")
    assert code == 0, report
    landed = report["landed"]
    assert isinstance(landed, list)
    assert [each["call_id"] for each in landed] == calls
    # One compare-and-swap for the four: main moved once, by a chain of four commits, each its
    # own landing call (its Call-Id, its receipt), lane a's calls in their order.
    assert _main_moves(repo) == moves + 1
    assert "applyonce: 4 calls" in repo.git("reflog", "-1", "main")
    chain = repo.git("rev-list", "--reverse", f"{head}..main").split()
    assert chain == [each["commit"] for each in landed]
    assert landed_on_main(repo) == calls[::-1]
    ids = repo.git("log", "--format=%(trailers:key=Call-Id,valueonly)", f"{head}..main").split()
    assert sorted(ids) == sorted(each["landing_call_id"] for each in landed)
    for each in landed:
        shown = run_cli("show", each["landing_call_id"], "--repo", str(repo.path), "--json")
        assert orjson.loads(shown.stdout)["commit"] == each["commit"]
    assert repo.git("show", "main:src/util.py") == "VALUE = 2\n"
    assert repo.git("status", "--porcelain") == ""
    code, report = land(repo, "--all")
    assert code == 0 and report["landed"] == [] and report["already"] == 4
    assert _main_moves(repo) == moves + 1
    # A later call of one lane lands alone; the four before it are counted once.
    later = lane_apply(repo, UTIL_3.replace("VALUE = 1", "VALUE = 2"), "a")
    code, report = land(repo, "--all")
    assert code == 0 and report["already"] == 4, report
    assert [each["call_id"] for each in report["landed"]] == [later["call_id"]]  # type: ignore[union-attr]
    assert _main_moves(repo) == moves + 2


def test_a_blocked_lane_in_the_middle_of_a_group_drops_out_with_its_later_calls(
    repo: Repo,
) -> None:
    first = lane_apply(repo, ADD_NOTES, "a")
    blocked = lane_apply(repo, UTIL_2, "b")
    waiting = lane_apply(repo, ADD_TODO, "b")
    last = lane_apply(repo, APP_HI, "c")
    moved = run_cli("apply", "-", "--repo", str(repo.path), input=UTIL_3)
    assert moved.returncode == 0, moved.stderr
    head = repo.git("rev-parse", "main").strip()
    moves = _main_moves(repo)

    code, report = land(repo, "--all")
    assert code == 1
    assert [each["call_id"] for each in report["landed"]] == [  # type: ignore[union-attr]
        first["call_id"],
        last["call_id"],
    ]
    (stop,) = report["blocked"]  # type: ignore[misc]
    assert stop["lane"] == "refs/heads/agent/b"
    assert stop["call_id"] == blocked["call_id"]
    assert stop["kind"] == "hunk-mismatch"
    assert stop["waiting"] == 1
    assert "VALUE = 3" in stop["output"]
    # The other lanes' calls landed around it in one move; nothing of lane b reached main.
    assert _main_moves(repo) == moves + 1
    assert repo.git("rev-list", "--count", f"{head}..main").strip() == "2"
    assert landed_on_main(repo) == [last["call_id"], first["call_id"]]
    assert repo.git("show", "main:src/util.py") == "VALUE = 3\n"
    assert "docs/todo.md" not in repo.git("ls-tree", "-r", "--name-only", "main")

    # Lane b stays blocked while main is as it was; once main's line is back, both its calls
    # land, in order: the waiting one was not refused for ever.
    code, report = land(repo, "--all")
    assert code == 1 and report["landed"] == [] and report["already"] == 2
    back = (
        "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 3\n+VALUE = 1\n*** End Patch\n"
    )
    assert run_cli("apply", "-", "--repo", str(repo.path), input=back).returncode == 0
    code, report = land(repo, "--all")
    assert code == 0, report
    assert [each["call_id"] for each in report["landed"]] == [  # type: ignore[union-attr]
        blocked["call_id"],
        waiting["call_id"],
    ]
    assert repo.git("show", "main:src/util.py") == "VALUE = 2\n"
    assert repo.git("show", "main:docs/todo.md") == "todo\n"
    for ref in ("main", "agent/a", "agent/b", "agent/c"):
        audit = run_cli("audit", "--repo", str(repo.path), "--ref", ref)
        assert audit.returncode == 0, audit.stdout


@pytest.mark.sampled(every=6)  # .ci/run: one point in six, as the other crash suites
@pytest.mark.parametrize("point", LAND_POINTS)
def test_a_crash_at_any_point_of_a_group_landing_is_finished_by_recover(
    repo: Repo, point: str
) -> None:
    calls = _three_lanes(repo)
    base = repo.git("rev-parse", "main").strip()
    code, _ = land(repo, "--all", env={"APPLYONCE_FAULT": point})
    assert code == -signal.SIGKILL
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    code, report = land(repo, "--all")
    assert code == 0, report
    code, report = land(repo, "--all")
    assert code == 0 and report["landed"] == [] and report["already"] == 4
    # Each lane call on main exactly once, lane a's in order, main fast-forward only.
    on_main = landed_on_main(repo)
    assert sorted(on_main) == sorted(calls)
    assert on_main.index(calls[1]) < on_main.index(calls[0])
    assert repo.git("merge-base", "--is-ancestor", base, "main", check=False) == ""
    assert repo.git("rev-list", "--merges", "main") == ""
    assert repo.git("show", "main:src/util.py") == "VALUE = 2\n"
    assert repo.git("status", "--porcelain") == ""
    assert repo.git("fsck", "--strict", "--no-dangling") == ""
    for ref in ("main", "agent/a", "agent/b", "agent/c"):
        audit = run_cli("audit", "--repo", str(repo.path), "--ref", ref)
        assert audit.returncode == 0, audit.stdout


def test_a_lane_made_from_another_lane_lands_their_shared_call_once(repo: Repo) -> None:
    # Lane b starts at lane a's tip, so it holds lane a's call too: draining both lanes must
    # land that call once (its patch would apply twice: the hunk adds a line after one that
    # stays).
    extra = (
        "*** Begin Patch\n*** Update File: src/util.py\n@@\n VALUE = 1\n+EXTRA = 1\n*** End Patch\n"
    )
    shared = lane_apply(repo, extra, "a")
    own = lane_apply(repo, ADD_NOTES, "b", "--branch", "agent/a")
    code, report = land(repo, "--all")
    assert code == 0, report
    on_main = landed_on_main(repo)
    assert sorted(on_main) == sorted([shared["call_id"], own["call_id"]])
    assert repo.git("show", "main:src/util.py") == "VALUE = 1\nEXTRA = 1\n"
    assert repo.git("show", "main:docs/notes.md") == "notes\n"
    code, report = land(repo, "--all")
    assert code == 0 and report["landed"] == [], report
    # One lane alone lands nothing again either.
    code, report = land(repo, "--lane", "b")
    assert code == 0 and report["landed"] == [], report
    assert sorted(landed_on_main(repo)) == sorted(on_main)
    assert repo.git("status", "--porcelain") == ""
    assert run_cli("audit", "--repo", str(repo.path), "--ref", "main").returncode == 0
