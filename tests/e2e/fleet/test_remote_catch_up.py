"""A clone whose checked-out branch lags the remote's (other clones' calls landed there) catches up
before its next call, as ``git pull --ff-only`` would: its checkout then holds what the call is
staged on, so a clean file another clone changed is not taken for the user's edit. The user's
edits and commits are never moved over; a catch-up cut short by a crash is finished by
``recover``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import APP_PATCH, UTIL_PATCH, Repo, Served, run_cli, stored_text
from tests.e2e.support import apply_remote, assert_linear, server_calls

pytestmark = pytest.mark.sampled(every=2, by="module")

# Its tests that use ``served`` run over git daemon, then over smart HTTP (nginx, basic
# authentication): tests/e2e/fleet/conftest.py.
OVER_EACH_SERVER = True

# Both change src/util.py, in different lines: the second is staged on the first's commit.
UTIL_TOO = (
    "*** Begin Patch\n*** Update File: src/util.py\n@@\n VALUE = 2\n+OTHER = 3\n*** End Patch\n"
)


def test_a_lagging_clean_checkout_catches_up_and_the_call_lands(
    served: Served, tmp_path: Path
) -> None:
    other = served.another_clone(tmp_path / "other")
    first = apply_remote(served.clone, UTIL_PATCH, "--json")
    assert first.returncode == 0, first.stderr
    behind = other.head()
    # The other clone's branch and checkout still hold the file as it was: clean, not edited.
    assert (other.path / "src/util.py").read_text() == "VALUE = 1\n"
    second = apply_remote(other, UTIL_TOO, "--json")
    assert second.returncode == 0, second.stderr + second.stdout
    receipt = json.loads(second.stdout)
    assert receipt["base_commit"] == json.loads(first.stdout)["commit"]
    assert other.head() == receipt["commit"] != behind
    assert (other.path / "src/util.py").read_text() == "VALUE = 2\nOTHER = 3\n"
    assert other.git("status", "--porcelain") == ""
    assert len(server_calls(served)) == 2
    assert_linear(served)
    assert not (other.state_dir() / "catch-up.json").exists()


def test_the_users_edit_on_a_path_another_clone_changed_is_kept(
    served: Served, tmp_path: Path
) -> None:
    other = served.another_clone(tmp_path / "other")
    assert apply_remote(served.clone, UTIL_PATCH).returncode == 0
    behind = other.head()
    (other.path / "src/util.py").write_text("VALUE = 1  # mine\n")
    # A call on another path lands; the lagging branch stays (git pull --ff-only would refuse),
    # and the user's edit is as it was.
    done = apply_remote(other, APP_PATCH, "--json")
    assert done.returncode == 0, done.stderr
    assert (other.path / "src/util.py").read_text() == "VALUE = 1  # mine\n"
    assert other.head() == behind
    assert len(server_calls(served)) == 2


def test_a_catch_up_killed_before_its_files_are_synced_is_finished_by_recover(
    served: Served, tmp_path: Path
) -> None:
    other = served.another_clone(tmp_path / "other")
    assert apply_remote(served.clone, UTIL_PATCH).returncode == 0
    killed = apply_remote(other, APP_PATCH, env={"APPLYONCE_FAULT": "during-catch-up"})
    assert killed.returncode == -9
    # The branch moved to the remote's tip; its files are not synced yet: journaled.
    assert (other.state_dir() / "catch-up.json").exists()
    assert other.git("status", "--porcelain").split() == ["M", "src/util.py"]
    recovered = run_cli("recover", "--repo", str(other.path), "--remote", "origin")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert "catch-up cut short" in recovered.stdout
    assert (other.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert other.git("status", "--porcelain") == ""
    assert not (other.state_dir() / "catch-up.json").exists()
    # The call itself never ran (killed before staging): it runs now, once.
    again = apply_remote(other, APP_PATCH, "--json")
    assert again.returncode == 0, again.stderr
    assert len(server_calls(served)) == 2
    assert other.git("status", "--porcelain") == ""


def test_the_users_own_commit_keeps_the_branch_where_it_is(served: Served, tmp_path: Path) -> None:
    other: Repo = served.another_clone(tmp_path / "other")
    assert apply_remote(served.clone, UTIL_PATCH).returncode == 0
    (other.path / "notes.txt").write_text("mine\n")
    other.git("add", "notes.txt")
    other.git("commit", "-qm", "my own commit")
    mine = other.head()
    done = apply_remote(other, APP_PATCH, "--json")
    assert done.returncode == 0, done.stderr
    assert other.head() == mine  # never moved over the user's own commit
    assert other.git("cat-file", "-t", mine).strip() == "commit"


def test_dirty_commit_where_the_catch_up_was_skipped_never_reverts_another_clones_call(
    served: Served, tmp_path: Path
) -> None:
    """The user's edit on a path another clone's call changed keeps the branch where it is; a
    file that call changed and the user did not is still the branch's (older) version here, not
    an edit: --dirty commit leaves it out, and the call lands on the remote's tip."""
    other = served.another_clone(tmp_path / "other")
    both = (
        "*** Begin Patch\n*** Update File: src/util.py\n@@\n VALUE = 1\n+A = 1\n"
        "*** Update File: README.md\n@@\n-# demo\n+# Demo\n*** End Patch\n"
    )
    assert apply_remote(served.clone, both).returncode == 0
    behind = other.head()
    (other.path / "README.md").write_text("# demo, my notes\n")
    on_util = (
        "*** Begin Patch\n*** Update File: src/util.py\n@@\n VALUE = 1\n+B = 2\n*** End Patch\n"
    )
    done = apply_remote(other, on_util, "--dirty", "commit", "--json")
    assert done.returncode == 0, done.stderr
    receipt = json.loads(done.stdout)
    assert len(server_calls(served)) == 2
    assert "applyonce: uncommitted" not in served.server_git("log", "--format=%s", "main")
    assert served.server_git("show", "main:src/util.py") == "VALUE = 1\nB = 2\nA = 1\n"
    assert served.server_git("show", "main:README.md") == "# Demo\n"
    # The clone's branch and checkout stay behind (the user's edit is in the way), and it says so.
    assert other.head() == behind
    assert (other.path / "README.md").read_text() == "# demo, my notes\n"
    [note] = receipt["checkout_behind"]
    assert note["reason"] == (
        "main here has not followed origin's: the checkout holds changes of yours on files"
        " origin's changed; the command that follows keeps them, a conflict marked in the file"
        " and kept in the stash"
    )
    assert note["command"] == "git pull --ff-only --autostash origin main"
    assert_linear(served)


def test_a_replayed_call_catches_a_clean_clone_up_as_a_new_call_would(
    served: Served, tmp_path: Path
) -> None:
    """The call landed from another clone, and the remote holds another of its commits: the
    replay here fast-forwards the clean checkout over both, as a new call's catch-up would,
    and says nothing false of commits or changes of the user's."""
    other = served.another_clone(tmp_path / "other")
    assert apply_remote(served.clone, UTIL_PATCH).returncode == 0
    assert apply_remote(served.clone, APP_PATCH).returncode == 0
    replayed = apply_remote(other, APP_PATCH)
    assert replayed.returncode == 0, replayed.stderr
    assert stored_text(replayed.stdout) == (
        "Success. Updated the following files:\nM src/app.py\nA tests/test_app.py\n"
    )
    assert other.head() == served.server_git("rev-parse", "main").strip()
    assert (other.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert other.git("status", "--porcelain") == ""
    assert len(server_calls(served)) == 2


def test_a_replay_in_a_clone_with_a_commit_of_its_own_says_so_with_a_pull_that_works(
    served: Served, tmp_path: Path
) -> None:
    other = served.another_clone(tmp_path / "other")
    assert apply_remote(served.clone, UTIL_PATCH).returncode == 0
    (other.path / "notes.txt").write_text("mine\n")
    other.git("add", "notes.txt")
    other.git("commit", "-qm", "my own commit")
    mine = other.head()
    replayed = apply_remote(other, UTIL_PATCH, "--json")
    assert replayed.returncode == 0, replayed.stderr
    assert other.head() == mine  # never moved over the user's own commit
    [note] = json.loads(replayed.stdout)["checkout_behind"]
    assert note["reason"] == (
        "main here has not followed origin's: it holds commits of yours that origin's has not;"
        " merge them"
    )
    assert note["command"] == "git pull --no-rebase --autostash origin main"
    pulled = subprocess.run(
        ["sh", "-c", note["command"]], cwd=other.path, capture_output=True, text=True
    )
    assert pulled.returncode == 0, pulled.stderr
    assert other.git("merge-base", "--is-ancestor", mine, "HEAD") == ""
    assert (other.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert (other.path / "notes.txt").read_text() == "mine\n"


LINES = "".join(f"{n}\n" for n in range(1, 10))


@pytest.mark.parametrize("staged", [False, True])
def test_an_edit_made_before_another_clones_call_is_refused_with_a_pull_that_keeps_it(
    served: Served, tmp_path: Path, staged: bool
) -> None:
    """The user's edit holds the branch here behind the remote's (another clone's call changed
    its file): the call is refused, and the command it gives brings the clone up to the
    remote's branch with the edit kept (never one that discards it)."""
    add = "*** Begin Patch\n*** Add File: f.txt\n" + "".join(f"+{n}\n" for n in range(1, 10))
    assert apply_remote(served.clone, add + "*** End Patch\n").returncode == 0
    other = served.another_clone(tmp_path / "other")
    eight = "*** Begin Patch\n*** Update File: f.txt\n@@\n 7\n-8\n+EIGHT\n 9\n*** End Patch\n"
    assert apply_remote(served.clone, eight).returncode == 0
    (other.path / "f.txt").write_text(LINES.replace("1\n", "ONE\n", 1))
    if staged:
        other.git("add", "f.txt")
    four = "*** Begin Patch\n*** Update File: f.txt\n@@\n 3\n-4\n+FOUR\n 5\n*** End Patch\n"
    refused = apply_remote(other, four, "--dirty", "commit")
    assert refused.returncode == 4
    root = other.path.resolve()
    assert refused.stderr == (
        f"error: f.txt has uncommitted changes in the checkout at {root}, made on an older"
        " version of it than the branch has (the checkout has not caught up with the branch);"
        " bring the checkout up to the branch, keeping your changes ('git pull --ff-only"
        " --autostash origin main': a conflict leaves them marked in the file, and in the"
        " stash), then repeat the call\n"
    )
    pulled = subprocess.run(
        ["git", "pull", "-q", "--ff-only", "--autostash", "origin", "main"],
        cwd=other.path,
        capture_output=True,
        text=True,
    )
    assert pulled.returncode == 0, pulled.stderr
    assert other.head() == served.server_git("rev-parse", "main").strip()
    assert (other.path / "f.txt").read_text() == LINES.replace("1\n", "ONE\n", 1).replace(
        "8\n", "EIGHT\n"
    )
    again = apply_remote(other, four, "--dirty", "commit")
    assert again.returncode == 0, again.stderr
    assert served.server_git("show", "main:f.txt") == ("ONE\n2\n3\nFOUR\n5\n6\n7\nEIGHT\n9\n")
    assert other.git("status", "--porcelain") == ""


def test_dirty_commit_with_a_remote_brings_the_checkout_to_the_call(served: Served) -> None:
    """With a remote, ``--dirty commit`` lands two commits (the snapshot of the user's edit, the
    call's): the branch here follows over both, so the checkout shows the call with nothing
    left modified, and the user's edit is in the work file as committed."""
    path = served.clone.path / "src/util.py"
    path.write_text(path.read_text() + "MINE = 1\n")
    done = apply_remote(served.clone, UTIL_PATCH, "--dirty", "commit")
    assert done.returncode == 0, done.stderr
    assert "note:" not in done.stdout
    assert served.clone.head() == served.server_git("rev-parse", "main").strip()
    assert served.clone.git("status", "--porcelain") == ""
    assert "MINE = 1\n" in path.read_text()
