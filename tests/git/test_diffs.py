"""The unified diff of a call (``applyonce.git.diffs``), held to ``git apply``: the diff of a
committed call, applied to the commit's parent, gives the commit's tree; a dry run's diff, built in
memory, is the same diff and writes nothing."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from applyonce import Executor
from applyonce.executor import CallOptions
from applyonce.git.diffs import Side, quote_path, unified_diff
from tests.conftest import Repo, make_repo

BASE = {
    "a.txt": "one\ntwo\nthree\n",
    "noeol.txt": "x\ny",
    "old name.txt": "move me\nline\n",
    "é.txt": "accent\n",
    "gone.txt": "bye\n",
}
# One change of each kind git's diff header knows: edit, no newline at the end, rename with an
# edit (quoted name), mode change only, deletion, empty new file, new executable file.
UNIFIED = """\
diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
diff --git a/noeol.txt b/noeol.txt
--- a/noeol.txt
+++ b/noeol.txt
@@ -1,2 +1,2 @@
 x
-y
\\ No newline at end of file
+y
diff --git "a/old name.txt" "b/new n\\303\\274.txt"
rename from old name.txt
rename to "new n\\303\\274.txt"
--- "a/old name.txt"
+++ "b/new n\\303\\274.txt"
@@ -1,2 +1,2 @@
 move me
-line
+LINE
diff --git "a/\\303\\251.txt" "b/\\303\\251.txt"
old mode 100644
new mode 100755
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/empty.txt b/empty.txt
new file mode 100644
index 0000000..e69de29
diff --git a/new.txt b/new.txt
new file mode 100755
--- /dev/null
+++ b/new.txt
@@ -0,0 +1 @@
+fresh
"""


def git_apply_gives(repo: Repo, diff: bytes, commit: str, tmp_path: Path) -> None:
    """``git apply`` of ``diff`` on ``commit``'s parent, in a separate work tree, gives exactly
    ``commit``'s tree."""
    where = tmp_path / "applied"
    repo.git("worktree", "add", "-q", "--detach", str(where), f"{commit}~1")
    done = subprocess.run(
        ["git", "-C", str(where), "apply", "--index", "-"],
        input=diff,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    tree = subprocess.run(
        ["git", "-C", str(where), "write-tree"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert tree == repo.git("rev-parse", f"{commit}^{{tree}}").strip()


def test_a_committed_calls_diff_applies_to_its_parent_and_equals_its_dry_run(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", BASE)
    executor = Executor(repo.path)
    options = CallOptions(format="unified")
    view = executor.dry_run(UNIFIED, options)
    planned = executor.plan_diff(view)
    objects_before = sorted(p.name for p in (repo.path / ".git" / "objects").rglob("*"))

    # The dry run's diff wrote nothing: no object, no ledger, no receipt.
    assert sorted(p.name for p in (repo.path / ".git" / "objects").rglob("*")) == objects_before
    assert not (repo.state_dir() / "receipts").exists() or not list(
        (repo.state_dir() / "receipts").iterdir()
    )

    receipt = executor.apply(UNIFIED, options)
    assert receipt.status == "committed"
    diff = executor.diff(receipt)
    assert diff is not None and diff == planned
    text = diff.text.decode()
    for line in [
        'diff --git a/old name.txt "b/new n\\303\\274.txt"',
        "rename from old name.txt",
        'rename to "new n\\303\\274.txt"',
        '--- a/old name.txt\t\n+++ "b/new n\\303\\274.txt"\t\n',  # git's tabs after spaces
        'diff --git "a/\\303\\251.txt" "b/\\303\\251.txt"\nold mode 100644\nnew mode 100755\n',
        "diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\nindex b023018..0000000\n",
        "diff --git a/empty.txt b/empty.txt\nnew file mode 100644\nindex 0000000..e69de29\n",
        "new file mode 100755\nindex 0000000..92d5444\n--- /dev/null\n+++ b/new.txt\n",
        "-y\n\\ No newline at end of file\n+y\n",
    ]:
        assert line in text, line
    assert (diff.files_changed, diff.insertions, diff.deletions) == (7, 4, 4)
    git_apply_gives(repo, diff.text, receipt.commit or "", tmp_path)
    # File by file, it is what 'git diff' writes (git sorts by path and scores a rename's
    # similarity; a move is named by the patch, so applyonce writes no score).
    ours = sections(text)
    theirs = sections(
        re.sub(r"similarity index \d+%\n", "", repo.git("diff", "-M", "HEAD~1", "HEAD"))
    )
    assert ours == theirs


def sections(diff: str) -> dict[str, str]:
    """A diff's per-file sections, keyed by their 'diff --git' line."""
    parts = re.split(r"(?m)^(?=diff --git )", diff)
    return {part.split("\n", 1)[0]: part for part in parts if part}


def test_a_binary_file_is_gits_binary_line_with_full_ids_and_applies(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", {"img.bin": b"\x00\x01bin\n", "t.txt": "t\n"})
    executor = Executor(repo.path)
    receipt = executor.apply("*** Begin Patch\n*** Delete File: img.bin\n*** End Patch\n")
    diff = executor.diff(receipt)
    assert diff is not None
    blob = repo.git("rev-parse", "HEAD~1:img.bin").strip()
    assert diff.text.decode() == (
        "diff --git a/img.bin b/img.bin\ndeleted file mode 100644\n"
        f"index {blob}..{'0' * 40}\nBinary files a/img.bin and /dev/null differ\n"
    )
    assert diff.files[0].binary
    git_apply_gives(repo, diff.text, receipt.commit or "", tmp_path)


def test_a_call_that_did_not_commit_has_no_diff(repo: Repo) -> None:
    executor = Executor(repo.path)
    stale = (
        "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 9\n+VALUE = 2\n*** End Patch\n"
    )
    assert executor.diff(executor.apply(stale)) is None


def test_paths_are_quoted_as_git_quotes_them(tmp_path: Path) -> None:
    names = ["plain.txt", "with space", 'q"uote', "back\\slash", "é", "tab\there", "del\x7f"]
    root = tmp_path / "q"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for name in names:
        (root / name).write_bytes(b"x\n")
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    listed = (
        subprocess.run(
            ["git", "-C", str(root), "ls-files"],
            capture_output=True,
            check=True,
            env={**os.environ, "LC_ALL": "C"},
        )
        .stdout.decode()
        .splitlines()
    )
    assert sorted(listed) == sorted(quote_path(name) for name in names)


LINES = st.lists(st.sampled_from(["a", "b", "c", "", "  d", "e\r"]), max_size=8)


@settings(max_examples=25)
@given(old=LINES, new=LINES, old_eol=st.booleans(), new_eol=st.booleans(), mode=st.booleans())
def test_any_text_change_round_trips_through_git_apply(
    tmp_path_factory: pytest.TempPathFactory,
    old: list[str],
    new: list[str],
    old_eol: bool,
    new_eol: bool,
    mode: bool,
) -> None:
    before = "\n".join(old).encode() + (b"\n" if old and old_eol else b"")
    after = "\n".join(new).encode() + (b"\n" if new and new_eol else b"")
    new_mode = 0o100755 if mode else 0o100644
    diff = unified_diff([(Side("f.txt", before, 0o100644), Side("f.txt", after, new_mode))])
    if before == after and not mode:
        assert diff.text == b"" and diff.files == ()
        return
    root = tmp_path_factory.mktemp("apply")  # not a repository: 'git apply' works on files
    (root / "f.txt").write_bytes(before)
    done = subprocess.run(
        ["git", "apply", "-"], input=diff.text, cwd=root, capture_output=True, check=False
    )
    assert done.returncode == 0, (diff.text, done.stderr)
    assert (root / "f.txt").read_bytes() == after
    assert bool((root / "f.txt").stat().st_mode & 0o100) == mode
