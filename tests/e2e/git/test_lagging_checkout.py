"""A checkout that lags its branch: the branch moved and the checkout did not follow (a sync left
for later because the user's ``git commit`` held ``index.lock``, ``git update-ref`` from this or
another work tree, a fetch into the branch). What the checkout shows is what its index records:
a file that still holds the branch's older version is not the user's edit. The call brings the
checkout up to the branch first, as ``git merge --ff-only`` would, and never commits such a file
back (with ``--dirty commit``, that would undo the commits in between); a change the user made on
the older version is refused, not committed."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import APP_PATCH, UTIL_PATCH, Repo, apply, make_repo, run_cli

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

# Staged on the branch's newer version of src/util.py (after UTIL_PATCH).
ON_NEW = (
    "*** Begin Patch\n*** Update File: src/util.py\n@@\n VALUE = 2\n+OTHER = 3\n*** End Patch\n"
)
# Staged on the older version, as an agent reading the lagging checkout would write it.
ON_OLD = (
    "*** Begin Patch\n*** Update File: src/util.py\n@@\n VALUE = 1\n+OTHER = 3\n*** End Patch\n"
)
SNAPSHOT = "applyonce: uncommitted changes before"


def subjects(repo: Repo) -> list[str]:
    return repo.git("log", "--format=%s").splitlines()


def hold_index_lock(repo: Repo) -> Path:
    """``index.lock`` created as git creates it (O_CREAT|O_EXCL), left as a killed git leaves it."""
    lock = repo.path / ".git" / "index.lock"
    os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    return lock


def paused_git_commit(repo: Repo, tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    """The user's ``git commit -a`` of their README.md edit, paused in its editor: git holds
    the index's lock all that time. Touching the returned path lets the editor finish."""
    ready, go = tmp_path / "editor-ready", tmp_path / "editor-go"
    (repo.path / "README.md").write_text("# demo, the user's words\n")
    wait = f"touch {ready}; while [ ! -e {go} ]; do sleep 0.05; done"
    editor = f"sh -c '{wait}; echo mine > \"$1\"' -"
    proc = subprocess.Popen(
        ["git", "-C", str(repo.path), "commit", "-qa"],
        env={**os.environ, "GIT_EDITOR": editor},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while not ready.exists():
        assert time.monotonic() < deadline, "git commit never reached its editor"
        time.sleep(0.05)
    assert (repo.path / ".git" / "index.lock").exists()
    return proc, go


@pytest.mark.parametrize("dirty", ["refuse", "commit"])
def test_a_sync_left_for_later_by_the_users_git_commit_is_caught_up_not_committed_back(
    repo: Repo, tmp_path: Path, dirty: str
) -> None:
    proc, go = paused_git_commit(repo, tmp_path)
    first = apply(repo, UTIL_PATCH, "--json")
    assert first.returncode == 0, first.stderr
    landed = repo.head()
    go.touch()
    proc.wait(timeout=30)  # its commit fails: HEAD moved under it (git's own compare-and-swap)
    assert not (repo.path / ".git" / "index.lock").exists()
    # The checkout shows the file as it was: git sees the call's change as staged the other way.
    assert (repo.path / "src/util.py").read_text() == "VALUE = 1\n"
    assert "M  src/util.py" in repo.git("status", "--porcelain").splitlines()

    second = apply(repo, ON_NEW, "--dirty", dirty)
    assert second.returncode == 0, second.stderr
    assert second.stdout == "Success. Updated the following files:\nM src/util.py\n"
    assert not any(s.startswith(SNAPSHOT) for s in subjects(repo))
    assert repo.git("rev-parse", "HEAD~1").strip() == landed
    assert repo.git("show", "HEAD:src/util.py") == "VALUE = 2\nOTHER = 3\n"
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\nOTHER = 3\n"
    # The user's README edit is theirs, as it was; nothing else differs from the branch.
    assert repo.git("status", "--porcelain") == " M README.md\n"


def test_a_stale_file_is_never_committed_back_while_the_users_git_holds_the_index(
    repo: Repo,
) -> None:
    lock = hold_index_lock(repo)
    assert apply(repo, UTIL_PATCH).returncode == 0
    landed = repo.head()
    # Still held: the checkout cannot be brought up. A patch written on what it shows applies
    # to the old file only: it is judged on the branch, where it does not apply.
    again = apply(repo, ON_OLD, "--dirty", "commit")
    assert again.returncode == 1, again.stderr
    assert "src/util.py: hunk 1: expected lines not found" in again.stderr
    assert repo.head() == landed
    assert repo.git("show", "HEAD:src/util.py") == "VALUE = 2\n"
    assert (repo.path / "src/util.py").read_text() == "VALUE = 1\n"
    assert lock.exists()


def _moved_by_update_ref(repo: Repo, tmp_path: Path) -> None:
    repo.git("update-ref", "refs/heads/main", _side_commit(repo, tmp_path))


def _moved_from_another_worktree(repo: Repo, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    repo.git("worktree", "add", "-q", str(linked), "-b", "side")
    (linked / "src/util.py").write_text("VALUE = 2\n")
    subprocess.run(["git", "-C", str(linked), "commit", "-qam", "elsewhere"], check=True)
    subprocess.run(["git", "-C", str(linked), "update-ref", "refs/heads/main", "HEAD"], check=True)


def _moved_by_a_fetch(repo: Repo, tmp_path: Path) -> None:
    other = tmp_path / "other"
    subprocess.run(["git", "clone", "-q", str(repo.path), str(other)], check=True)
    (other / "src/util.py").write_text("VALUE = 2\n")
    subprocess.run(["git", "-C", str(other), "commit", "-qam", "elsewhere"], check=True)
    repo.git("fetch", "-q", "--update-head-ok", str(other), "main:main")


def _side_commit(
    repo: Repo, tmp_path: Path, path: str = "src/util.py", text: str = "VALUE = 2\n"
) -> str:
    """A commit on main's tip that makes ``path`` ``text``, made without touching the
    checkout."""
    work = tmp_path / "side-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(work)}
    git = ["git", "-C", str(repo.path)]
    subprocess.run([*git, "read-tree", "HEAD"], env=env, check=True)
    blob = subprocess.run(
        [*git, "hash-object", "-w", "--stdin"],
        input=text,
        text=True,
        capture_output=True,
        check=True,
    ).stdout.strip()
    subprocess.run(
        [*git, "update-index", "--cacheinfo", f"100644,{blob},{path}"], env=env, check=True
    )
    tree = subprocess.run(
        [*git, "write-tree"], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    return subprocess.run(
        [*git, "commit-tree", tree, "-p", "HEAD", "-m", "elsewhere"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


MOVES = {
    "update-ref": _moved_by_update_ref,
    "another worktree": _moved_from_another_worktree,
    "fetch into the branch": _moved_by_a_fetch,
}


@pytest.mark.parametrize("move", sorted(MOVES))
def test_a_branch_moved_under_the_checkout_is_caught_up_before_the_call(
    repo: Repo, tmp_path: Path, move: str
) -> None:
    MOVES[move](repo, tmp_path)
    moved = repo.head()
    assert (repo.path / "src/util.py").read_text() == "VALUE = 1\n"
    assert repo.git("status", "--porcelain") == "M  src/util.py\n"
    done = apply(repo, ON_NEW, "--dirty", "commit")
    assert done.returncode == 0, done.stderr
    assert not any(s.startswith(SNAPSHOT) for s in subjects(repo))
    assert repo.git("rev-parse", "HEAD~1").strip() == moved
    assert repo.git("show", "HEAD:src/util.py") == "VALUE = 2\nOTHER = 3\n"
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\nOTHER = 3\n"
    assert repo.git("status", "--porcelain") == ""


def test_a_path_the_call_does_not_touch_is_caught_up_too(repo: Repo, tmp_path: Path) -> None:
    _moved_by_update_ref(repo, tmp_path)
    patch = "*** Begin Patch\n*** Add File: notes.txt\n+n\n*** End Patch\n"
    done = apply(repo, patch)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Success. Updated the following files:\nA notes.txt\n"
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert repo.git("status", "--porcelain") == ""


@pytest.mark.parametrize("dirty", ["refuse", "commit"])
def test_an_edit_made_on_the_older_version_is_refused_never_committed(
    repo: Repo, tmp_path: Path, dirty: str
) -> None:
    shown = repo.head()
    _moved_by_update_ref(repo, tmp_path)
    moved = repo.head()
    (repo.path / "src/util.py").write_text("VALUE = 1  # mine\n")
    index = (repo.path / ".git" / "index").read_bytes()
    refused = apply(repo, ON_NEW, "--dirty", dirty)
    assert refused.returncode == 4
    root = repo.path.resolve()
    assert refused.stderr == (
        f"error: src/util.py has uncommitted changes in the checkout at {root}, made on an"
        " older version of it than the branch has (the checkout has not caught up with the"
        " branch); bring the checkout up to the branch, keeping your changes ('git checkout"
        f" --detach && git reset --soft {shown[:12]} && git stash && git checkout main && git"
        " stash pop': a conflict leaves them marked in the file, and in the stash), then"
        " repeat the call\n"
    )
    assert repo.head() == moved
    assert (repo.path / "src/util.py").read_text() == "VALUE = 1  # mine\n"
    assert (repo.path / ".git" / "index").read_bytes() == index
    assert repo.git("status", "--porcelain") == "MM src/util.py\n"


def test_a_staged_change_on_a_path_the_branch_changed_since_is_refused(
    repo: Repo, tmp_path: Path
) -> None:
    """Staged, the user's version says nothing of what it was made on: where the branch
    changed the path since the checkout was brought up, it may undo that change."""
    _moved_by_update_ref(repo, tmp_path)
    moved = repo.head()
    (repo.path / "src/util.py").write_text("VALUE = 1  # mine\n")
    repo.git("add", "src/util.py")
    refused = apply(repo, ON_NEW, "--dirty", "commit")
    assert refused.returncode == 4
    assert "made on an older version of it than the branch has" in refused.stderr
    assert repo.head() == moved
    assert repo.git("status", "--porcelain") == "M  src/util.py\n"


def test_a_lagging_checkout_with_autocrlf_is_caught_up_in_its_own_line_endings(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "one\ntwo\n", "b.txt": "b\n"})
    repo.git("config", "core.autocrlf", "true")
    for name in ("a.txt", "b.txt"):
        (repo.path / name).unlink()
    repo.git("checkout", "--", ".")
    assert (repo.path / "a.txt").read_bytes() == b"one\r\ntwo\r\n"
    assert repo.git("status", "--porcelain") == ""
    # The branch moves without the checkout: a.txt's "two" becomes "2".
    assert (
        run_cli(
            "apply",
            "-",
            "--repo",
            str(repo.path),
            "--branch",
            "main",
            input=("*** Begin Patch\n*** Update File: a.txt\n@@\n-two\n+2\n*** End Patch\n"),
            env={"APPLYONCE_FAULT": "after-publish"},
        ).returncode
        == -9
    )
    base = repo.head()
    assert (repo.path / "a.txt").read_bytes() == b"one\r\ntwo\r\n"
    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n 2\n+three\n*** End Patch\n"
    done = apply(repo, patch, "--dirty", "commit")
    assert done.returncode == 0, done.stderr
    assert repo.git("rev-parse", "HEAD~1").strip() == base
    assert repo.git("show", "HEAD:a.txt") == "one\n2\nthree\n"
    assert (repo.path / "a.txt").read_bytes() == b"one\r\n2\r\nthree\r\n"
    assert (repo.path / "b.txt").read_bytes() == b"b\r\n"
    assert repo.git("status", "--porcelain") == ""


def test_clean_files_under_autocrlf_and_filemode_false_are_not_taken_for_edits(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "one\n", "run.sh": "echo hi\n"})
    repo.git("config", "core.autocrlf", "true")
    repo.git("config", "core.fileMode", "false")
    (repo.path / "a.txt").unlink()
    repo.git("checkout", "--", "a.txt")
    assert (repo.path / "a.txt").read_bytes() == b"one\r\n"
    (repo.path / "run.sh").chmod(0o755)  # git ignores the bit here
    assert repo.git("status", "--porcelain") == ""
    patch = (
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+1\n"
        "*** Update File: run.sh\n@@\n-echo hi\n+echo hello\n*** End Patch\n"
    )
    done = apply(repo, patch)
    assert done.returncode == 0, done.stderr
    assert (repo.path / "a.txt").read_bytes() == b"1\r\n"
    assert repo.git("show", "HEAD:a.txt") == "1\n"
    assert repo.git("ls-tree", "HEAD", "run.sh").split()[0] == "100644"
    assert repo.git("status", "--porcelain") == ""


def test_a_branch_moved_back_under_the_checkout_is_not_fast_forwarded_over_it(
    repo: Repo,
) -> None:
    """Only a fast-forward is caught up, as git merge --ff-only would: a checkout that shows a
    commit its branch moved away from keeps its files (git sees them as staged changes), which
    --dirty commit does not take for the user's; the call says the checkout is behind."""
    base = repo.head()
    assert apply(repo, UTIL_PATCH).returncode == 0
    repo.git("update-ref", "refs/heads/main", base)
    assert repo.git("status", "--porcelain") == "M  src/util.py\n"
    done = apply(repo, APP_PATCH, "--dirty", "commit")
    assert done.returncode == 0, done.stderr
    assert not any(s.startswith(SNAPSHOT) for s in subjects(repo))
    assert repo.git("rev-parse", "HEAD~1").strip() == base
    assert repo.git("show", "HEAD:src/util.py") == "VALUE = 1\n"
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert "does not show main's version of src/util.py" in done.stdout
    assert repo.git("status", "--porcelain") == "M  src/util.py\n"


def _second_worktree_of_main(repo: Repo, tmp_path: Path) -> Path:
    """main checked out a second time (``git worktree add -f``), and the user's commit there:
    the branch moves with that work tree only; the first still shows where it was."""
    second = tmp_path / "second"
    repo.git("worktree", "add", "-q", "-f", str(second), "main")
    (second / "src/util.py").write_text("VALUE = 2\n")
    subprocess.run(["git", "-C", str(second), "commit", "-qam", "the user's commit"], check=True)
    return second


@pytest.mark.parametrize("dirty", ["refuse", "commit"])
def test_a_commit_in_another_worktree_of_the_branch_is_not_taken_for_this_ones_edit(
    repo: Repo, tmp_path: Path, dirty: str
) -> None:
    """The reflog's "commit" entry moved the work tree where git commit ran, not this one: this
    one is caught up, and its older file is never committed back over the user's commit."""
    second = _second_worktree_of_main(repo, tmp_path)
    users = repo.head()
    assert repo.git("status", "--porcelain") == "M  src/util.py\n"
    done = apply(repo, ON_NEW, "--dirty", dirty)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Success. Updated the following files:\nM src/util.py\n"
    assert not any(s.startswith(SNAPSHOT) for s in subjects(repo))
    assert repo.git("rev-parse", "HEAD~1").strip() == users
    assert repo.git("show", "HEAD:src/util.py") == "VALUE = 2\nOTHER = 3\n"
    for worktree in (repo.path, second):
        assert (worktree / "src/util.py").read_text() == "VALUE = 2\nOTHER = 3\n"
    assert repo.git("status", "--porcelain") == ""
    assert (
        subprocess.run(
            ["git", "-C", str(second), "status", "--porcelain"], capture_output=True, text=True
        ).stdout
        == ""
    )


def test_an_edit_in_the_worktree_that_made_the_commit_is_judged_on_what_it_shows(
    repo: Repo, tmp_path: Path
) -> None:
    """Each work tree is judged by what it shows: the user's staged edit in the work tree that
    made the commit was made on the branch's version (not on an older one, as the other work
    tree's file is), and --dirty commit snapshots it; the other work tree is caught up."""
    second = _second_worktree_of_main(repo, tmp_path)
    users = repo.head()
    (second / "src/util.py").write_text("VALUE = 2\nMINE = 1\n")
    subprocess.run(["git", "-C", str(second), "add", "src/util.py"], check=True)
    done = apply(repo, ON_NEW, "--dirty", "commit")
    assert done.returncode == 0, done.stderr
    assert subjects(repo)[1].startswith(SNAPSHOT)
    assert repo.git("rev-parse", "HEAD~2").strip() == users
    assert repo.git("show", "HEAD~1:src/util.py") == "VALUE = 2\nMINE = 1\n"
    assert repo.git("show", "HEAD:src/util.py") == "VALUE = 2\nOTHER = 3\nMINE = 1\n"
    for worktree in (repo.path, second):
        assert (worktree / "src/util.py").read_text() == "VALUE = 2\nOTHER = 3\nMINE = 1\n"
    assert repo.git("status", "--porcelain") == ""


LINES = "".join(f"{n}\n" for n in range(1, 10))
ON_FIVE = "*** Begin Patch\n*** Update File: f.txt\n@@\n 4\n-5\n+FIVE\n 6\n*** End Patch\n"


def _catch_up_hint(stderr: str) -> str:
    """The commands the refusal of a change made on an older version gives."""
    found = re.search(r"keeping your changes \('(.+?)': a conflict", stderr)
    assert found is not None, stderr
    return found.group(1)


def _sh(repo: Repo, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", command], cwd=repo.path, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize("staged", [False, True])
def test_the_hint_for_an_edit_made_on_the_older_version_keeps_it_and_catches_up(
    tmp_path: Path, staged: bool
) -> None:
    """The refusal's commands bring the checkout up to the branch with the user's edit on top
    (staged or not): never 'git stash' alone (HEAD moved already: the stash would record the
    edit as undoing the branch's commit), never a command that discards it."""
    repo = make_repo(tmp_path / "r", {"f.txt": LINES, "g.txt": "g\n"})
    repo.git(
        "update-ref",
        "refs/heads/main",
        _side_commit(repo, tmp_path, "f.txt", LINES.replace("8\n", "EIGHT\n")),
    )
    moved = repo.head()
    (repo.path / "f.txt").write_text(LINES.replace("1\n", "ONE\n", 1))
    if staged:
        repo.git("add", "f.txt")
    refused = apply(repo, ON_FIVE, "--dirty", "commit")
    assert refused.returncode == 4, refused.stderr
    done = _sh(repo, _catch_up_hint(refused.stderr))
    assert done.returncode == 0, done.stderr
    assert repo.git("symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert repo.head() == moved
    assert (repo.path / "f.txt").read_text() == LINES.replace("1\n", "ONE\n", 1).replace(
        "8\n", "EIGHT\n"
    )
    assert repo.git("status", "--porcelain") == " M f.txt\n"
    assert repo.git("stash", "list") == ""
    # Now the edit is one on the branch's version: --dirty commit snapshots it, the call lands.
    again = apply(repo, ON_FIVE, "--dirty", "commit")
    assert again.returncode == 0, again.stderr
    assert repo.git("rev-parse", "HEAD~2").strip() == moved
    assert repo.git("show", "HEAD:f.txt") == "ONE\n2\n3\n4\nFIVE\n6\n7\nEIGHT\n9\n"
    assert repo.git("status", "--porcelain") == ""


def test_the_hint_for_an_edit_that_conflicts_with_the_branch_keeps_it_marked_and_stashed(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "r", {"f.txt": LINES})
    repo.git(
        "update-ref",
        "refs/heads/main",
        _side_commit(repo, tmp_path, "f.txt", LINES.replace("8\n", "EIGHT\n")),
    )
    moved = repo.head()
    (repo.path / "f.txt").write_text(LINES.replace("8\n", "mine\n"))
    refused = apply(repo, ON_FIVE)
    assert refused.returncode == 4, refused.stderr
    done = _sh(repo, _catch_up_hint(refused.stderr))
    assert done.returncode != 0
    assert repo.git("symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert repo.head() == moved
    text = (repo.path / "f.txt").read_text()
    assert "<<<<<<<" in text and "mine\n" in text and "EIGHT\n" in text
    assert len(repo.git("stash", "list").splitlines()) == 1
    assert "+mine" in repo.git("stash", "show", "-p")
