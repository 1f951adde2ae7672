"""``--remote NAME`` where this repository has what the remote lacks: a call's commit, or a whole
branch, made here and not pushed. Each refusal says so and names the push that mends it (never
"the branch was reset or rewritten", "there is no branch", or a dirty path that is not), writes
nothing, and once the push is done the call goes through.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Repo, Run, git, make_repo, run_cli, snapshot

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

PATCH = "*** Begin Patch\n*** Update File: f.txt\n@@\n 1\n-2\n+TWO\n*** End Patch\n"


@pytest.fixture
def clone(tmp_path: Path) -> Repo:
    """A clone of a bare ``origin`` whose ``main`` has one commit."""
    seed = make_repo(tmp_path / "seed", {"f.txt": "1\n2\n"})
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(seed.path), str(origin)], check=True)
    into = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", f"file://{origin}", str(into)], check=True)
    return Repo(into)


def state(repo: Repo) -> tuple[str, str, str, dict[str, bytes], dict[str, bytes]]:
    """What a refusal must leave as it was: the user's refs (not applyonce's private copy of the
    remote's branch), the remote's refs, the index and work tree, the record."""
    refs = repo.git(
        "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/remotes"
    )
    remote = repo.git("ls-remote", "origin")
    record = snapshot(repo.state_dir()) if repo.state_dir().exists() else {}
    return refs, remote, repo.git("status", "--porcelain"), repo.files(), record


def apply_to(repo: Repo, *args: str) -> Run:
    return run_cli("apply", "-", "--repo", str(repo.path), *args, input=PATCH)


def on_origin(repo: Repo, revision: str) -> str:
    url = repo.git("config", "remote.origin.url").strip()
    return git(Path(url.removeprefix("file://")), "show", revision)


def test_a_call_made_here_then_sent_to_the_remote_says_to_push_it(clone: Repo) -> None:
    """The call landed on this clone's main without --remote; the same call with --remote
    origin found its commit missing from origin's main and said the branch was reset or
    rewritten and to send a new attempt (which would apply the change a second time once
    main is pushed). It is on main, never reset: it was not pushed."""
    assert apply_to(clone).returncode == 0
    commit = clone.head()
    call_id = clone.call_ids()[0]
    before = state(clone)

    refused = apply_to(clone, "--remote", "origin")
    assert refused.returncode == 4, refused.stdout + refused.stderr
    assert refused.stderr == (
        f"error: call {call_id[:12]} was committed as {commit[:12]} on this repository's main, "
        "and remote origin's main does not have it (it was not pushed); push it "
        "('git push origin main'), then repeat the call\n"
    )
    assert state(clone) == before  # nothing written
    as_json = apply_to(clone, "--remote", "origin", "--json")
    assert json.loads(as_json.stdout)["error"]["kind"] == "not-pushed"

    audited = run_cli("audit", "--repo", str(clone.path), "--remote", "origin")
    assert audited.returncode == 1
    assert audited.stdout.splitlines()[0] == (
        f"unpushed     {call_id[:12]}  receipt's commit {commit[:12]} is on this repository's "
        "main, not on remote origin's (the call was made without --remote, and not pushed); "
        "push it ('git push origin main'), then audit again"
    )
    assert state(clone) == before

    # The hints, followed: the repeat returns the call's result, once; the audit is clean.
    clone.git("push", "-q", "origin", "main")
    again = apply_to(clone, "--remote", "origin")
    assert again.returncode == 0, again.stderr
    assert "replayed" in again.stderr
    assert clone.call_ids() == [call_id]
    clean = run_cli("audit", "--repo", str(clone.path), "--remote", "origin")
    assert clean.returncode == 0 and clean.stdout.endswith(": clean\n"), clean.stdout


BRANCH_MISSING = (
    "error: remote origin has no branch work, which has commits here; push it first "
    "('git push origin work'), then repeat the call\n"
)


@pytest.mark.parametrize(
    ("checked_out", "args"),
    [
        (False, ("--branch", "work")),
        (False, ("--branch", "work", "--dry-run")),
        (True, ()),
        (True, ("--dirty", "commit")),
        (True, ("--dry-run",)),
    ],
    ids=["branch-option", "branch-option-dry-run", "checked-out", "dirty-commit", "dry-run"],
)
def test_a_branch_the_remote_lacks_is_said_first(
    clone: Repo, checked_out: bool, args: tuple[str, ...]
) -> None:
    """``work`` exists here, not on origin. Before, --branch work was told "there is no branch
    'work'; create it with git branch NAME" (it exists), and with work checked out, that f.txt
    was untracked and to pass --dirty commit (it is tracked and clean); only --dirty commit got
    the truth. Now the truth comes first, whatever else is asked."""
    clone.git("branch", "work")
    if checked_out:
        clone.git("checkout", "-q", "work")
    before = state(clone)
    refused = apply_to(clone, "--remote", "origin", *args)
    assert (refused.returncode, refused.stdout, refused.stderr) == (4, "", BRANCH_MISSING)
    assert state(clone) == before  # nothing written

    clone.git("push", "-q", "origin", "work")
    landed = apply_to(clone, "--remote", "origin", *args)
    assert landed.returncode == 0, landed.stderr
    published = "TWO" in on_origin(clone, "work:f.txt")
    assert published is ("--dry-run" not in args)


def test_a_revert_on_a_branch_the_remote_lacks_is_said_first(clone: Repo) -> None:
    """A call made on ``work`` here (not pushed), reverted with --remote origin: origin has no
    branch work, and that is what is said, before whether the call's commit is on it."""
    clone.git("checkout", "-q", "-b", "work")
    applied = apply_to(clone, "--json")
    assert applied.returncode == 0, applied.stderr
    call_id = json.loads(applied.stdout)["call_id"]
    before = state(clone)
    refused = run_cli("revert", call_id, "--repo", str(clone.path), "--remote", "origin")
    assert (refused.returncode, refused.stderr) == (4, BRANCH_MISSING)
    assert state(clone) == before
    clone.git("push", "-q", "origin", "work")
    reverted = run_cli("revert", call_id, "--repo", str(clone.path), "--remote", "origin")
    assert reverted.returncode == 0, reverted.stderr
    assert "TWO" not in on_origin(clone, "work:f.txt")


def test_a_call_published_to_the_remote_then_rewound_there_is_never_said_unpushed(
    clone: Repo,
) -> None:
    """The call landed on origin's main (--remote); then origin's main was reset past it (a
    force push). Its commit is still on this clone's main, which followed: "it was not pushed"
    would be false, and its 'git push' would undo the remote's rewind."""
    base = clone.head()
    assert apply_to(clone, "--remote", "origin").returncode == 0
    call_id = clone.call_ids()[0]
    commit = on_origin(clone, "main").split()[1]
    assert clone.head() == commit  # this clone's main followed
    origin = Path(clone.git("config", "remote.origin.url").strip().removeprefix("file://"))
    git(origin, "update-ref", "refs/heads/main", base)
    before = state(clone)

    again = apply_to(clone, "--remote", "origin")
    assert again.returncode == 5, again.stdout + again.stderr
    assert again.stderr.startswith(
        f"error: call {call_id[:12]} was committed as {commit[:12]}, which is no longer on "
        "refs/heads/main (the branch was reset or rewritten); "
    )
    assert "not pushed" not in again.stderr and "git push" not in again.stderr
    assert state(clone) == before
    audited = run_cli("audit", "--repo", str(clone.path), "--remote", "origin")
    assert audited.returncode == 1
    assert audited.stdout.splitlines()[0].startswith(
        f"unreachable  {call_id[:12]}  receipt's commit {commit[:12]} is not on refs/heads/main"
        " (the branch was reset or rewritten)"
    )
    assert state(clone) == before


def test_a_call_killed_on_its_way_to_the_remote_is_not_rolled_forward_onto_the_own_branch(
    clone: Repo,
) -> None:
    """Killed after pushing its commit's objects to origin: a plain 'recover' (no --remote)
    published that commit on this repository's own main and said so, while origin's main (the
    call's commit point, where another clone may land the call) never got it."""
    crashed = run_cli(
        "apply",
        "-",
        "--repo",
        str(clone.path),
        "--remote",
        "origin",
        input=PATCH,
        env={"APPLYONCE_FAULT": "after-push-objects"},
    )
    assert crashed.returncode == -9, crashed.stderr
    local, remote = clone.head(), clone.git("ls-remote", "origin", "refs/heads/main").split()[0]
    assert local == remote
    staged = clone.git("ls-remote", "origin", "refs/applyonce/pending/*").split()[0]
    clone.git("fetch", "-q", "origin", staged)
    call_id = clone.git("log", "-1", "--format=%(trailers:key=Call-Id,valueonly)", staged).strip()

    plain = run_cli("recover", "--repo", str(clone.path))
    assert clone.head() == local  # the own main did not move
    line = next(x for x in plain.stdout.splitlines() if x.startswith(call_id[:12]))
    assert "published" not in line
    assert "run 'applyonce recover --remote origin'" in line
    assert plain.returncode == 4  # not settled: run it again with the remote

    settled = run_cli("recover", "--repo", str(clone.path), "--remote", "origin")
    assert settled.returncode == 0, settled.stdout + settled.stderr
    assert "published it now" in settled.stdout
    landed = clone.git("ls-remote", "origin", "refs/heads/main").split()[0]
    assert landed != remote and clone.head() == landed
