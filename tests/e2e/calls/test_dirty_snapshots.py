"""``--dirty commit`` plans a call on a snapshot of the user's uncommitted changes: a rejection
that snapshot caused is not returned for ever, an uncommitted symlink does not refuse the patch,
and an ignored file's contents are never committed."""

from __future__ import annotations

from tests.conftest import UTIL_PATCH, Repo, apply


def test_rejection_decided_on_a_dirty_snapshot_is_not_pinned_once_the_user_restores_the_file(
    repo: Repo,
) -> None:
    """With --dirty commit the call is planned on the snapshot of the user's uncommitted
    changes, not on the tip. A rejection that the user's changes caused (here: the file was
    deleted in the work tree) must not be returned for ever on that same tip: once the user
    restores the file, the repeat must run again and commit (the tip never moved, so the
    'moved tip' rule alone does not reopen it)."""
    (repo.path / "src/util.py").unlink()
    first = apply(repo, UTIL_PATCH, "--dirty", "commit")
    assert first.returncode == 1, first.stderr
    assert repo.commit_count() == 1  # nothing published
    repo.git("checkout", "--", "src/util.py")  # the user restores the file; the tip is the same
    again = apply(repo, UTIL_PATCH, "--dirty", "commit")
    assert again.returncode == 0, again.stderr
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert len(repo.call_ids()) == 1


def test_uncommitted_symlink_snapshotted_by_dirty_commit_does_not_refuse_the_patch_for_ever(
    repo: Repo,
) -> None:
    """A symbolic link the user left (uncommitted) where the patch updates a file is snapshotted
    by --dirty commit, and the call is then refused as 'unsafe-path', a kind stored for ever
    ('the patch itself was refused, whatever the branch holds'). But the refusal came from the
    user's work tree, not the patch: once the user restores the file (and even once the tip
    moves) the same call must be able to commit."""
    target = repo.path / "src/util.py"
    target.unlink()
    target.symlink_to("app.py")
    first = apply(repo, UTIL_PATCH, "--dirty", "commit")
    assert first.returncode == 1, first.stderr
    assert repo.commit_count() == 1
    target.unlink()
    repo.git("checkout", "--", "src/util.py")
    repo.git("commit", "-q", "--allow-empty", "-m", "the tip moves")
    again = apply(repo, UTIL_PATCH, "--dirty", "commit")
    assert again.returncode == 0, again.stderr
    assert target.read_text() == "VALUE = 2\n"


def test_dirty_commit_does_not_commit_the_contents_of_an_ignored_file(repo: Repo) -> None:
    """An untracked file that .gitignore ignores (a .env with secrets) is not something
    'git add' or 'git commit -- PATH' commits without --force. --dirty commit must not put its
    contents into a snapshot commit on the branch when a patch adds a file at that path:
    refuse (exit 4) or leave the user's bytes out of history."""
    (repo.path / ".gitignore").write_text(".env\n")
    repo.git("add", ".gitignore")
    repo.git("commit", "-q", "-m", "ignore .env")
    (repo.path / ".env").write_text("SECRET=hunter2\n")
    patch = "*** Begin Patch\n*** Add File: .env\n+SECRET=changeme\n*** End Patch\n"
    head = repo.head()
    refused = apply(repo, patch, "--dirty", "commit")
    assert refused.returncode == 4
    assert refused.stderr.startswith(
        "error: .env is an untracked file that git ignores in the checkout at "
    )
    assert "--dirty commit never commits an ignored file" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1
    history = repo.git("log", "--all", "-p")
    assert "hunter2" not in history
    # Nothing written: the branch, the user's file and the work tree are as they were.
    assert repo.head() == head
    assert (repo.path / ".env").read_text() == "SECRET=hunter2\n"
    assert repo.git("status", "--porcelain") == ""
