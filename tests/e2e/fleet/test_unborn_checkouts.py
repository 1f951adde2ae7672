"""A checkout that shows no commit of its branch while the branch has some — a clone made by
``git init`` + ``git remote add`` (its branch is unborn, the remote's is not), or a branch that
got its commits while its checkout had none — is refused with the command that checks the branch
out: a call's sync would write the call's files alone there, every other file of the branch a
staged deletion that the user's next ``git commit`` would commit. A detached HEAD is no checkout
of the branch: it is never written to."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import NEW_FILE_PATCH, UTIL_PATCH, Repo, Served, apply, make_repo, run_cli
from tests.e2e.support import apply_remote, server_calls


def fresh_repo(path: Path) -> Repo:
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    return Repo(path)


def work_files(repo: Repo) -> list[str]:
    return sorted(p.name for p in repo.path.iterdir() if p.name != ".git")


def test_an_unborn_clone_is_refused_until_it_has_the_remote_branch(
    served: Served, tmp_path: Path
) -> None:
    fresh = fresh_repo(tmp_path / "fresh")
    fresh.git("remote", "add", "origin", served.url)
    remote_tip = served.server_git("rev-parse", "main").strip()
    refused = apply_remote(fresh, NEW_FILE_PATCH)
    assert refused.returncode == 4, refused.stderr
    root = fresh.path.resolve()
    assert refused.stderr == (
        f"error: the checkout at {root} has no commit of main yet, but origin's main has: the"
        " call's files alone would be written there; check main out first ('git pull origin"
        " main' there), then repeat the call\n"
    )
    assert refused.stdout == ""
    assert served.server_git("rev-parse", "main").strip() == remote_tip
    assert server_calls(served) == []
    assert fresh.git("rev-parse", "--verify", "-q", "refs/heads/main", check=False) == ""
    assert work_files(fresh) == []
    assert fresh.git("status", "--porcelain") == ""
    # What it says to do; then the call lands, and the checkout holds the whole branch.
    fresh.git("pull", "-q", "origin", "main")
    done = apply_remote(fresh, NEW_FILE_PATCH)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Success. Updated the following files:\nA new.txt\n"
    assert work_files(fresh) == ["README.md", "new.txt", "src"]
    assert fresh.git("status", "--porcelain") == ""
    assert fresh.head() == served.server_git("rev-parse", "main").strip()


def test_a_checkout_whose_branch_got_commits_without_it_is_refused(tmp_path: Path) -> None:
    source = make_repo(tmp_path / "source", {"a.txt": "a\n", "src/b.py": "B = 1\n"})
    fresh = fresh_repo(tmp_path / "fresh")
    fresh.git("fetch", "-q", str(source.path), "main")
    fresh.git("update-ref", "refs/heads/main", "FETCH_HEAD")  # as another work tree would
    (fresh.path / "mine.txt").write_text("the user's\n")
    status = fresh.git("status", "--porcelain")
    assert status == "D  a.txt\nD  src/b.py\n?? mine.txt\n"
    head = fresh.head()
    refused = apply(fresh, NEW_FILE_PATCH)
    assert refused.returncode == 4, refused.stderr
    root = fresh.path.resolve()
    assert refused.stderr == (
        f"error: the checkout at {root} shows none of main's files (its index is empty: main"
        " got its commits while it had none), so git sees each of them as deleted; check them"
        " out first ('git read-tree -um HEAD' there: it stops before overwriting a file of"
        " yours), then repeat the call\n"
    )
    assert fresh.head() == head
    assert fresh.git("status", "--porcelain") == status
    assert work_files(fresh) == ["mine.txt"]
    fresh.git("read-tree", "-um", "HEAD")
    done = apply(fresh, NEW_FILE_PATCH)
    assert done.returncode == 0, done.stderr
    assert fresh.git("status", "--porcelain") == "?? mine.txt\n"
    assert (fresh.path / "new.txt").read_text() == "new\n"


def test_a_detached_head_is_not_a_checkout_of_the_branch(repo: Repo, tmp_path: Path) -> None:
    before = repo.head()
    repo.git("checkout", "-q", "--detach")
    linked = tmp_path / "linked"
    repo.git("worktree", "add", "-q", str(linked), "main")
    done = run_cli("apply", "-", "--repo", str(repo.path), "--branch", "main", input=UTIL_PATCH)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Success. Updated the following files:\nM src/util.py\n"
    # The detached checkout shows what it showed; the branch's own checkout follows it.
    assert repo.git("rev-parse", "HEAD").strip() == before
    assert (repo.path / "src/util.py").read_text() == "VALUE = 1\n"
    assert repo.git("status", "--porcelain") == ""
    assert (linked / "src/util.py").read_text() == "VALUE = 2\n"
    assert (
        subprocess.run(
            ["git", "-C", str(linked), "status", "--porcelain"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        == ""
    )
