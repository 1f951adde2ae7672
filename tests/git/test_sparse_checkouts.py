"""A sparse checkout after a call is what ``git pull --ff-only`` would leave: each path the call
writes gets its skip-worktree bit from the sparse patterns (cone and non-cone, a linked work
tree's own), not from whether it had one. Each test makes the call in one clone and pulls it
into a twin clone with the same sparse set-up, then compares ``git ls-files -s -t``, ``git
status`` and the work trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Repo, apply, git, make_repo, run_cli

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

FILES = {
    "README.md": "# demo\n",
    "src/app.py": "def greet(name):\n    return 'hello ' + name\n",
    "src/util.py": "VALUE = 1\n",
    "docs/notes.md": "# notes\n\nfirst\n",
    "docs/old.md": "old\n",
    "docs/api/ref.md": "ref\n",
    "build.log": "log\n",
}

ADDS = """*** Begin Patch
*** Add File: tests/test_app.py
+from src.app import greet
*** Add File: src/new.py
+NEW = 1
*** Add File: top.txt
+top
*** Add File: docs/api/v2.md
+v2
*** Add File: trace.log
+trace
*** Update File: docs/notes.md
@@
 first
+second
*** End Patch
"""

MOVES = """*** Begin Patch
*** Update File: docs/old.md
*** Move to: src/old.md
*** Update File: src/util.py
*** Move to: docs/util.py
*** Delete File: docs/api/ref.md
*** Update File: src/app.py
@@ def greet(name):
-    return 'hello ' + name
+    return f'hello {name}!'
*** End Patch
"""


def _twins(tmp_path: Path, *sparse: str) -> tuple[Repo, Repo]:
    """The clone a call is made in and its twin, both sparse checkouts set with
    ``git sparse-checkout set SPARSE…``."""
    origin = make_repo(tmp_path / "origin", FILES)
    clones = []
    for name in ("clone", "twin"):
        git(tmp_path, "clone", "-q", str(origin.path), name)
        clone = Repo(tmp_path / name)
        clone.git("sparse-checkout", "set", *sparse)
        clones.append(clone)
    return clones[0], clones[1]


def _pull(twin: Repo, clone: Repo) -> None:
    twin.git("pull", "-q", "--ff-only", str(clone.path), "main")


def _shown(repo: Repo, *paths: str) -> tuple[str, str, dict[str, bytes]]:
    """What a checkout shows (of ``paths`` only, if given): its index entries with their
    tags, its status, its files."""
    files = repo.files()
    return (
        repo.git("ls-files", "-s", "-t", "--", *paths),
        repo.git("status", "--porcelain", "--untracked-files=all", "--", *paths),
        {path: data for path, data in files.items() if not paths or path in paths},
    )


@pytest.mark.parametrize(
    "sparse",
    [("--cone", "src"), ("--cone", "docs/api"), ("--no-cone", "/*", "!/docs/", "!*.log")],
    ids=["cone-src", "cone-deep", "non-cone"],
)
@pytest.mark.parametrize("patch", [ADDS, MOVES], ids=["adds", "moves"])
def test_a_call_leaves_a_sparse_checkout_as_git_pull_does(
    tmp_path: Path, sparse: tuple[str, ...], patch: str
) -> None:
    clone, twin = _twins(tmp_path, *sparse)
    done = apply(clone, patch)
    assert done.returncode == 0, done.stderr
    _pull(twin, clone)
    assert _shown(clone) == _shown(twin)


def test_a_file_the_call_adds_outside_the_cone_is_an_index_entry_only(tmp_path: Path) -> None:
    clone, _ = _twins(tmp_path, "--cone", "src")
    assert apply(clone, ADDS).returncode == 0
    tags = dict(line.split(" ", 1)[::-1] for line in clone.git("ls-files", "-t").splitlines())
    assert tags["tests/test_app.py"] == "S" and tags["docs/api/v2.md"] == "S"
    assert tags["src/new.py"] == "H" and tags["top.txt"] == "H"
    assert not (clone.path / "tests").exists() and not (clone.path / "docs").exists()
    assert clone.git("status", "--porcelain") == ""


def test_a_path_the_patterns_took_in_since_gets_its_file(tmp_path: Path) -> None:
    """The patterns now include docs/ (edited, not reapplied): git's merge writes the file of a
    path it updates there and drops its skip-worktree bit. (git's merge reapplies the patterns
    to the paths it does not update too; a sync brings the call's paths only.)"""
    clone, twin = _twins(tmp_path, "--cone", "src")
    for repo in (clone, twin):
        with (repo.path / ".git" / "info" / "sparse-checkout").open("a") as patterns:
            patterns.write("/docs/\n")
        assert repo.git("ls-files", "-t", "docs/notes.md") == "S docs/notes.md\n"
    done = apply(clone, ADDS)
    assert done.returncode == 0, done.stderr
    _pull(twin, clone)
    touched = ("tests/test_app.py", "src/new.py", "top.txt", "docs/api/v2.md", "docs/notes.md")
    assert _shown(clone, *touched) == _shown(twin, *touched)
    assert (clone.path / "docs/notes.md").read_text() == "# notes\n\nfirst\nsecond\n"


def test_a_checked_out_file_outside_the_patterns_goes_when_the_call_changes_it(
    tmp_path: Path,
) -> None:
    """A file outside the cone that is checked out (no skip-worktree bit, clean): git's merge
    gives the path the bit and removes the file."""
    clone, twin = _twins(tmp_path, "--cone", "src")
    for repo in (clone, twin):
        repo.git("update-index", "--no-skip-worktree", "docs/notes.md")
        repo.git("checkout", "--", "docs/notes.md")
        assert repo.git("ls-files", "-t", "docs/notes.md") == "H docs/notes.md\n"
    done = apply(clone, ADDS)
    assert done.returncode == 0, done.stderr
    _pull(twin, clone)
    assert _shown(clone) == _shown(twin)
    assert not (clone.path / "docs").exists()


def test_a_file_put_back_outside_the_cone_is_the_users_change(tmp_path: Path) -> None:
    """git clears the skip-worktree bit of a path whose file is present, as it reads the index
    (``git status`` shows it modified): a call on that path is refused as dirty, and nothing is
    written — even while the index on disk still has the bit (no git command has written it)."""
    clone, _ = _twins(tmp_path, "--cone", "src")
    (clone.path / "docs").mkdir()
    (clone.path / "docs/notes.md").write_text("# notes\n\nmine\n")
    index = clone.path / ".git" / "index"
    before = (index.read_bytes(), clone.files(), clone.head())
    refused = apply(clone, ADDS)
    assert refused.returncode == 4, refused.stderr
    assert refused.stderr.startswith(
        "error: docs/notes.md has uncommitted changes in the checkout at"
    )
    assert (index.read_bytes(), clone.files(), clone.head()) == before
    assert clone.git("status", "--porcelain") == " M docs/notes.md\n"
    # --dirty commit commits the user's file first, as for any checked-out path.
    landed = apply(clone, ADDS.replace("first\n+second", "mine\n+second"), "--dirty", "commit")
    assert landed.returncode == 0, landed.stderr
    assert clone.git("show", "HEAD~1:docs/notes.md") == "# notes\n\nmine\n"


def test_a_linked_work_tree_follows_its_own_sparse_patterns(tmp_path: Path) -> None:
    """A linked work tree's patterns are its own ($GIT_DIR/info/sparse-checkout of its git dir,
    core.sparseCheckout in its config.worktree): the main checkout is not sparse."""
    repo = make_repo(tmp_path / "repo", FILES)
    linked = Repo(tmp_path / "linked")
    repo.git("worktree", "add", "-q", str(linked.path), "-b", "work")
    linked.git("sparse-checkout", "set", "--no-cone", "/*", "!/docs/")
    done = run_cli("apply", "-", "--repo", str(repo.path), "--branch", "work", input=ADDS)
    assert done.returncode == 0, done.stderr
    tags = dict(line.split(" ", 1)[::-1] for line in linked.git("ls-files", "-t").splitlines())
    assert {p: tags[p] for p in ("docs/notes.md", "docs/api/v2.md", "tests/test_app.py")} == {
        "docs/notes.md": "S",
        "docs/api/v2.md": "S",
        "tests/test_app.py": "H",
    }
    assert not (linked.path / "docs").exists()
    assert linked.git("status", "--porcelain") == ""
    assert repo.git("sparse-checkout", "list", check=False) == ""
    assert repo.git("status", "--porcelain") == ""


def test_the_catch_up_of_a_lagging_sparse_clone_leaves_it_as_git_pull_does(
    tmp_path: Path,
) -> None:
    """With --remote: another clone's commit adds files inside and outside the cone; the call's
    catch-up brings this clone's branch and checkout to it, as 'git pull' brings the twin's."""
    origin = make_repo(tmp_path / "origin.git", bare=True)
    seed = make_repo(tmp_path / "seed", FILES)
    seed.git("push", "-q", str(origin.path), "main")
    clones = []
    for name in ("clone", "twin"):
        git(tmp_path, "clone", "-q", str(origin.path), name)
        clone = Repo(tmp_path / name)
        clone.git("sparse-checkout", "set", "--cone", "src")
        clones.append(clone)
    clone, twin = clones
    git(tmp_path, "clone", "-q", str(origin.path), "other")
    other = Repo(tmp_path / "other")
    (other.path / "docs/more.md").write_text("more\n")
    (other.path / "src/more.py").write_text("MORE = 1\n")
    other.git("add", "-A")
    other.git("commit", "-q", "-m", "more")
    other.git("push", "-q", "origin", "main")
    patch = "*** Begin Patch\n*** Add File: src/mine.py\n+MINE = 1\n*** End Patch\n"
    done = apply(clone, patch, "--remote", "origin")
    assert done.returncode == 0, done.stderr
    twin.git("pull", "-q", "--ff-only", "origin", "main")
    assert _shown(clone) == _shown(twin)
    assert clone.git("ls-files", "-t", "docs/more.md") == "S docs/more.md\n"
