"""Step 9 review: behaviours found by running the CLI on real repositories."""

from __future__ import annotations

from tests.conftest import UTIL_PATCH, Repo, apply, run_cli


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


def test_revert_dirty_path_hint_names_an_option_revert_accepts(repo: Repo) -> None:
    """revert refuses a dirty touched path (exit 4); its hint must not tell the user to pass
    '--dirty commit', which 'applyonce revert' refuses as a usage error (exit 2)."""
    done = apply(repo, UTIL_PATCH)
    assert done.returncode == 0, done.stderr
    call_id = repo.call_ids()[0]
    (repo.path / "src/util.py").write_text("VALUE = 2\nMINE = 1\n")
    refused = run_cli("revert", call_id, "--repo", str(repo.path))
    assert refused.returncode == 4, refused.stderr
    if "--dirty commit" in refused.stderr:
        tried = run_cli("revert", call_id, "--repo", str(repo.path), "--dirty", "commit")
        assert tried.returncode != 2, (refused.stderr, tried.stderr)


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


def test_squash_that_keeps_the_call_trailers_then_resolve_rewritten_leaves_audit_clean(
    repo: Repo,
) -> None:
    """'resolve --as rewritten' is for a call whose commit was reset *or squashed* away. A squash
    (git rebase -i 'squash' with the call's commit last) keeps the call's message, trailers
    included, in the squashed commit, beside the user's other change. After the person records
    the rewrite, audit must list the call as rewritten and exit 0, and recover must not turn the
    committed call into 'unknown' saying the patch never ran (it did: its change is there)."""
    assert apply(repo, UTIL_PATCH).returncode == 0
    call_id = repo.call_ids()[0]
    call_message = repo.git("log", "-1", "--format=%B")
    (repo.path / "notes.txt").write_text("mine\n")
    repo.git("add", "notes.txt")
    repo.git("commit", "-q", "-m", "user work")
    repo.git("reset", "-q", "--soft", "HEAD~2")
    repo.git("commit", "-q", "-m", f"user work\n\n{call_message}")  # the call's paragraph last
    assert repo.call_ids() == [call_id]
    resolved = run_cli(
        "resolve", call_id, "--as", "rewritten", "--note", "squashed", "--repo", str(repo.path)
    )
    assert resolved.returncode == 0, resolved.stderr
    audit = run_cli("audit", "--repo", str(repo.path))
    assert audit.returncode == 0, audit.stdout + audit.stderr
    run_cli("recover", "--repo", str(repo.path))
    log = run_cli("log", "--repo", str(repo.path))
    assert "unknown" not in log.stdout, log.stdout


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


def test_a_binary_file_on_the_branch_does_not_refuse_the_patch_for_ever(repo: Repo) -> None:
    """'binary-file' is stored for ever as 'the patch itself was refused, whatever the branch
    holds'. But here the patch is plain text: the *file on the branch* was binary. Once the tip
    moves and the file is text again, a repeat must judge the call again (as for
    hunk-mismatch), not return the stored rejection."""
    (repo.path / "src/util.py").write_bytes(b"VALUE = 1\n\0")
    repo.git("commit", "-q", "-am", "a NUL byte slipped in")
    first = apply(repo, UTIL_PATCH)
    assert first.returncode == 1, first.stderr
    (repo.path / "src/util.py").write_bytes(b"VALUE = 1\n")
    repo.git("commit", "-q", "-am", "fixed")
    again = apply(repo, UTIL_PATCH)
    assert again.returncode == 0, again.stderr
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"


def test_a_repeated_revert_says_it_was_replayed_as_apply_does(repo: Repo) -> None:
    """A repeat of 'apply' prints one 'replayed call …' line on stderr and '"replayed": true'
    with --json; a repeat of 'revert' (also an exactly-once call) says neither, so a caller
    cannot tell a revert that ran from one returned as stored."""
    assert apply(repo, UTIL_PATCH).returncode == 0
    call_id = repo.call_ids()[0]
    first = run_cli("revert", call_id, "--repo", str(repo.path), "--json")
    assert first.returncode == 0, first.stderr
    again = run_cli("revert", call_id, "--repo", str(repo.path), "--json")
    assert again.returncode == 0, again.stderr
    assert '"replayed": true' in again.stdout
    assert "replayed call" in again.stderr


def test_a_broken_git_config_is_a_one_line_usage_error_not_an_internal_error(repo: Repo) -> None:
    """A typo in .git/config (which applyonce now reads its options from) is the user's to fix,
    as git says ('fatal: bad config line …'); it is not an internal error (exit 3, a crash log,
    and a hint to run 'applyonce recover', which fails the same way)."""
    head = repo.head()
    config = repo.path / ".git" / "config"
    good = config.read_text()
    config.write_text(good + "[applyonce\n")
    for args in (("--dry-run",), ()):
        run = apply(repo, UTIL_PATCH, *args)
        assert run.returncode == 2, run.stderr
        assert run.stderr.startswith("error: cannot open the repository: ")
        assert "config" in run.stderr and "crash" not in run.stderr
        assert len(run.stderr.splitlines()) == 1
    config.write_text(good)  # git itself cannot read the repository until then
    assert repo.head() == head
    assert not repo.state_dir().exists()
