"""A call that deletes every file of the repository: its commit's tree is the empty tree.

git reads the empty tree (4b825dc…) without it being on disk; libgit2's on-disk checks do not,
so such a call was rejected as ``objects-missing`` (retryable, forever), in every format. It lands
now, in every format, with a commit git fsck finds sound, the checkout emptied; and it reverts.
"""

from __future__ import annotations

import orjson
import pytest

from tests.conftest import Repo, apply, run_cli

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

PATCHES = {
    "codex": "*** Begin Patch\n*** Delete File: src/app.py\n*** Delete File: src/util.py\n"
    "*** Delete File: README.md\n*** End Patch\n",
    "unified": (
        "diff --git a/README.md b/README.md\ndeleted file mode 100644\n--- a/README.md\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-# demo\n"
        "diff --git a/src/app.py b/src/app.py\ndeleted file mode 100644\n--- a/src/app.py\n+++ /dev/null\n"
        "@@ -1,2 +0,0 @@\n-def greet(name):\n-    return 'hello ' + name\n"
        "diff --git a/src/util.py b/src/util.py\ndeleted file mode 100644\n--- a/src/util.py\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-VALUE = 1\n"
    ),
    "edit-json": orjson.dumps(
        [{"command": "delete", "path": p} for p in ("README.md", "src/app.py", "src/util.py")]
    ).decode(),
}


def _assert_sound(repo: Repo) -> None:
    assert repo.git("fsck", "--strict", "--full", "--no-dangling") == ""


@pytest.mark.parametrize("fmt", sorted(PATCHES))
def test_deleting_every_file_lands_in_every_format(repo: Repo, fmt: str) -> None:
    base = repo.head()
    result = apply(repo, PATCHES[fmt], "--format", fmt, "--json")
    assert result.returncode == 0, result
    receipt = orjson.loads(result.stdout)
    assert receipt["status"] == "committed"
    assert repo.head() == receipt["commit"] and repo.git("rev-parse", "HEAD~1").strip() == base
    assert repo.git("rev-parse", "HEAD^{tree}").strip() == EMPTY_TREE
    assert repo.git("ls-tree", "-r", "HEAD") == ""
    _assert_sound(repo)
    # The checkout is synced: the files are gone, nothing is left to commit.
    assert repo.files() == {}
    assert repo.git("status", "--porcelain") == ""
    # A repeat replays; audit agrees.
    again = apply(repo, PATCHES[fmt], "--format", fmt, "--json")
    assert again.returncode == 0 and orjson.loads(again.stdout)["commit"] == receipt["commit"]
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0


def test_deleting_every_file_with_a_check_in_the_scratch_checkout(repo: Repo) -> None:
    result = apply(repo, PATCHES["codex"], "--check", "test -z \"$(ls -A | grep -v '^.git$')\"")
    assert result.returncode == 0, result
    assert repo.git("rev-parse", "HEAD^{tree}").strip() == EMPTY_TREE
    _assert_sound(repo)


def test_a_call_deleting_every_file_reverts(repo: Repo) -> None:
    before = repo.files()
    result = apply(repo, PATCHES["codex"], "--json")
    assert result.returncode == 0, result
    call_id = orjson.loads(result.stdout)["call_id"]
    reverted = run_cli("revert", call_id, "--repo", str(repo.path), "--json")
    assert reverted.returncode == 0, reverted
    assert repo.files() == before
    assert repo.git("status", "--porcelain") == ""
    assert repo.git("diff", "HEAD~2", "HEAD") == ""
    _assert_sound(repo)


def test_adding_files_on_the_empty_tree(repo: Repo) -> None:
    # From the empty tree back to files: the empty tree is the base here.
    assert apply(repo, PATCHES["codex"]).returncode == 0
    result = apply(repo, "*** Begin Patch\n*** Add File: again.txt\n+again\n*** End Patch\n")
    assert result.returncode == 0, result
    assert repo.files() == {"again.txt": b"again\n"}
    _assert_sound(repo)
