"""``--dirty commit``: the user's uncommitted changes on the touched paths are committed first, in
a snapshot commit (``Snapshot-For: <call>``, no ``Call-Id``), and the call lands on top of it; both
are published by the call's one compare-and-swap, so a crash never separates them."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import orjson
import pytest

from applyonce import Executor
from applyonce.adapters.agents import PatchRunner
from applyonce.executor import CallOptions
from tests.conftest import APP_PATCH as PATCH
from tests.conftest import Repo, apply, run_cli, stored_text, without_replay_notes

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

MINE = "def greet(name):\n    return 'hello ' + name\n\n# my own edit, not committed\n"
PATCHED = "def greet(name):\n    return f'hello {name}!'\n\n# my own edit, not committed\n"
ADDED = "from src.app import greet\nassert greet('x') == 'hello x!'\n"
SNAPSHOT_SUBJECT = "applyonce: uncommitted changes before "


def subjects(repo: Repo) -> list[str]:
    return repo.git("log", "--format=%s").splitlines()


def snapshot_for(repo: Repo, rev: str) -> str:
    return repo.git("log", "-1", "--format=%(trailers:key=Snapshot-For,valueonly)", rev).strip()


def assert_snapshot_then_call(repo: Repo, base: str, files: dict[str, str]) -> str:
    """HEAD is the call's commit, HEAD~1 the snapshot of ``files`` (the user's versions) on
    ``base``; git agrees the history is sound. Returns the call ID."""
    call_id = repo.call_ids()[0]
    assert repo.call_ids() == [call_id]  # the snapshot carries no Call-Id
    assert repo.git("rev-parse", "HEAD~2").strip() == base
    assert subjects(repo)[:2] == [
        "apply_patch: M src/app.py, A tests/test_app.py",
        SNAPSHOT_SUBJECT + call_id[:12],
    ]
    assert snapshot_for(repo, "HEAD~1") == call_id
    assert snapshot_for(repo, "HEAD") == ""
    for path, content in files.items():
        assert repo.git("show", f"HEAD~1:{path}") == content
    changed = repo.git("diff", "--name-only", base, "HEAD~1").split()
    assert changed == sorted(files)
    assert repo.git("fsck", "--strict", "--no-dangling") == ""
    executor = Executor(repo.path)
    try:
        report = executor.audit()
    finally:
        executor.close()
    assert report.clean and report.commits == 1, report.to_dict()
    return call_id


def test_modified_file_is_committed_first_and_untouched_edits_stay(repo: Repo) -> None:
    base = repo.head()
    (repo.path / "src/app.py").write_text(MINE)
    (repo.path / "README.md").write_text("# my notes, not touched by the patch\n")
    result = apply(repo, PATCH, "--dirty", "commit")
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout
        == "Success. Updated the following files:\nM src/app.py\nA tests/test_app.py\n"
    )
    assert_snapshot_then_call(repo, base, {"src/app.py": MINE})
    assert repo.git("show", "HEAD:src/app.py") == PATCHED
    # The checkout holds the call's content, the index matches; the untouched edit is as it was.
    assert (repo.path / "src/app.py").read_text() == PATCHED
    assert (repo.path / "tests/test_app.py").read_text() == ADDED
    assert (repo.path / "README.md").read_text() == "# my notes, not touched by the patch\n"
    assert repo.git("status", "--porcelain") == " M README.md\n"
    # The same call again replays: no second snapshot, nothing new.
    head = repo.head()
    again = apply(repo, PATCH, "--dirty", "commit")
    assert (again.returncode, stored_text(again.stdout)) == (0, result.stdout)
    assert repo.head() == head and repo.commit_count() == 3


def test_staged_change_is_committed_first(repo: Repo) -> None:
    base = repo.head()
    (repo.path / "src/app.py").write_text(MINE)
    repo.git("add", "src/app.py")
    result = apply(repo, PATCH, "--dirty", "commit", "--json")
    assert result.returncode == 0, result.stderr
    assert_snapshot_then_call(repo, base, {"src/app.py": MINE})
    receipt = orjson.loads(result.stdout)
    # Every committed receipt's base is its commit's parent: here the snapshot.
    assert receipt["base_commit"] == repo.git("rev-parse", "HEAD~1").strip()
    assert repo.git("status", "--porcelain") == ""


def test_untracked_file_where_the_patch_adds_is_refused_and_left_as_it_is(repo: Repo) -> None:
    """An untracked file may hold anything (a credential): only the user's own git add puts its
    bytes into the branch's history, never --dirty commit."""
    head = repo.head()
    (repo.path / "tests").mkdir()
    (repo.path / "tests/test_app.py").write_text("API_KEY = 'not for the remote'\n")
    secret = repo.git("hash-object", "tests/test_app.py").strip()
    result = apply(repo, PATCH, "--dirty", "commit")
    assert result.returncode == 4
    root = repo.path.resolve()
    assert result.stderr == (
        f"error: tests/test_app.py is an untracked file in the checkout at {root}; --dirty"
        " commit never commits an untracked file; move it aside (or 'git add tests/test_app.py'"
        " it yourself if it belongs in the branch), then repeat the call\n"
    )
    assert result.stdout == ""
    assert repo.head() == head and repo.commit_count() == 1
    assert (repo.path / "tests/test_app.py").read_text() == "API_KEY = 'not for the remote'\n"
    assert repo.git("status", "--porcelain") == "?? tests/\n"
    written = subprocess.run(["git", "-C", str(repo.path), "cat-file", "-e", secret], check=False)
    assert written.returncode != 0, "the untracked file's bytes were written as an object"


def test_a_new_file_the_user_staged_where_the_patch_adds_is_not_overwritten(repo: Repo) -> None:
    """The snapshot would hold the user's file, and the patch's Add File would then replace it:
    an overwrite by surprise, refused as onto any file that exists; nothing is written."""
    base = repo.head()
    (repo.path / "tests").mkdir()
    (repo.path / "tests/test_app.py").write_text("mine\n")
    repo.git("add", "tests/test_app.py")
    result = apply(repo, PATCH, "--dirty", "commit")
    assert result.returncode == 1, result
    assert result.stderr.startswith("error: cannot add tests/test_app.py: it already exists; ")
    assert repo.head() == base
    assert (repo.path / "tests/test_app.py").read_text() == "mine\n"
    assert repo.git("status", "--porcelain") == "A  tests/test_app.py\n"


def test_refusal_names_dirty_commit_and_writes_nothing(repo: Repo) -> None:
    head = repo.head()
    (repo.path / "src/app.py").write_text(MINE)
    result = apply(repo, PATCH)
    assert result.returncode == 4
    root = repo.path.resolve()
    assert result.stderr == (
        f"error: src/app.py has uncommitted changes in the checkout at {root}; "
        "commit or stash them, or pass --dirty commit\n"
    )
    assert repo.head() == head
    assert (repo.path / "src/app.py").read_text() == MINE
    assert repo.git("status", "--porcelain") == " M src/app.py\n"
    # The refusal is retryable: the same call, repeated with --dirty commit, runs.
    again = apply(repo, PATCH, "--dirty", "commit")
    assert again.returncode == 0, again.stderr
    assert repo.commit_count() == 3


def test_partly_staged_path_is_refused_even_with_dirty_commit(repo: Repo) -> None:
    """Committing the work tree's version would drop the staged one: refused, nothing lost."""
    head = repo.head()
    (repo.path / "src/app.py").write_text(MINE)
    repo.git("add", "src/app.py")
    (repo.path / "src/app.py").write_text(MINE + "# and more\n")
    result = apply(repo, PATCH, "--dirty", "commit")
    assert result.returncode == 4
    assert "src/app.py has staged changes that differ from the work tree" in result.stderr
    assert repo.head() == head
    assert repo.git("status", "--porcelain") == "MM src/app.py\n"


def test_dry_run_with_dirty_commit_writes_nothing(repo: Repo) -> None:
    (repo.path / "src/app.py").write_text(MINE)
    git_dir = repo.path / ".git"
    before = {p: p.stat().st_mtime_ns for p in git_dir.rglob("*")}
    result = apply(repo, PATCH, "--dirty", "commit", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == [
        "  commit src/app.py  [your uncommitted changes, first]",
        "  update src/app.py  [match: exact]",
        "  add    tests/test_app.py",
        "nothing was written",
    ]
    assert {p: p.stat().st_mtime_ns for p in git_dir.rglob("*")} == before
    assert (repo.path / "src/app.py").read_text() == MINE
    listed = apply(repo, PATCH, "--dirty", "commit", "--dry-run", "--json")
    assert orjson.loads(listed.stdout)["snapshot"] == ["src/app.py"]
    assert "snapshot" not in orjson.loads(apply(repo, PATCH, "--dry-run", "--json").stdout)
    assert {p: p.stat().st_mtime_ns for p in git_dir.rglob("*")} == before


def test_bad_dirty_value_is_a_usage_error(repo: Repo) -> None:
    result = apply(repo, PATCH, "--dirty", "maybe")
    assert result.returncode == 2
    assert result.stderr == "error: unknown --dirty 'maybe'; use refuse or commit\n"
    assert not repo.state_dir().exists()


@pytest.mark.parametrize(
    "point", ["after-snapshot", "after-commit-object", "after-publish", "during-sync"]
)
def test_crash_then_recover_then_repeat_gives_one_snapshot_and_one_call(
    repo: Repo, point: str
) -> None:
    base = repo.head()
    (repo.path / "src/app.py").write_text(MINE)
    crashed = apply(repo, PATCH, "--dirty", "commit", env={"APPLYONCE_FAULT": point})
    assert crashed.returncode == -signal.SIGKILL
    if point in ("after-snapshot", "after-commit-object"):
        assert repo.head() == base  # neither commit is on the branch before the publish
        assert (repo.path / "src/app.py").read_text() == MINE
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    again = apply(repo, PATCH, "--dirty", "commit")
    assert again.returncode == 0, again.stderr
    assert without_replay_notes(again.stdout) == (
        "Success. Updated the following files:\nM src/app.py\nA tests/test_app.py\n"
    )
    assert_snapshot_then_call(repo, base, {"src/app.py": MINE})
    assert repo.commit_count() == 3
    assert (repo.path / "src/app.py").read_text() == PATCHED
    assert repo.git("status", "--porcelain") == ""
    leftovers = [p for p in Path(repo.path, ".git").rglob("*.lock") if "applyonce" not in p.parts]
    assert leftovers == []


def test_tip_moving_during_the_call_makes_the_snapshot_again_on_the_new_tip(
    repo: Repo, tmp_path: Path
) -> None:
    """Another writer commits while the call is checked: the call is restaged, and so is the
    snapshot, on the new tip (the other commit did not touch the user's path)."""
    (repo.path / "src/app.py").write_text(MINE)
    marker = tmp_path / "moved"
    outside = (
        f"test -e {marker} || (touch {marker} &&"
        f" git -C {repo.path} commit -q --allow-empty -m outside)"
    )
    result = apply(repo, PATCH, "--dirty", "commit", "--check", outside)
    assert result.returncode == 0, result.stderr
    assert subjects(repo)[1:] == [SNAPSHOT_SUBJECT + repo.call_ids()[0][:12], "outside", "base"]
    assert repo.git("show", "HEAD~1:src/app.py") == MINE
    assert repo.git("status", "--porcelain") == ""


def test_the_adapter_and_mcp_template_option_commits_first(repo: Repo) -> None:
    """``applyonce mcp --dirty commit`` sets this server-wide: the runner's options template."""
    base = repo.head()
    (repo.path / "src/app.py").write_text(MINE)
    output = PatchRunner(repo.path, options=CallOptions(dirty="commit")).run(PATCH)
    assert not output.is_error, output.text
    assert_snapshot_then_call(repo, base, {"src/app.py": MINE})
