"""Unified diffs made by the real tools, applied by the real ``applyonce apply``, the real ``git
apply`` and GNU ``patch -p1``: where git applies, applyonce writes the same tree; where git
refuses, applyonce refuses (exit 1, one line) and writes nothing.

The diffs come from ``git diff`` (with and without ``--no-prefix``), ``diff -ruN old new`` and
``diff -u file.orig file``, run on real files; nothing is written by hand.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Repo, git, make_repo, run_cli, snapshot, write_files

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or shutil.which("diff") is None or shutil.which("patch") is None,
    reason="needs git, GNU diff and GNU patch",
)

Files = Mapping[str, str]


def git_diff(before: Files, after: Files, *options: str) -> Callable[[Path], bytes]:
    """The diff ``git diff --cached OPTIONS`` writes from ``before`` to ``after``."""

    def make(work: Path) -> bytes:
        repo = make_repo(work / "made-by-git", before)
        for path in before:
            (repo.path / path).unlink()
        write_files(repo.path, after)
        repo.git("add", "-A")
        return subprocess.run(
            ["git", "-C", str(repo.path), "diff", "--cached", *options],
            capture_output=True,
            check=True,
        ).stdout

    return make


def gnu_diff(
    before: Files, after: Files, old: str = "old", new: str = "new"
) -> Callable[[Path], bytes]:
    """``diff -ruN OLD NEW`` of two directories holding ``before`` and ``after``."""

    def make(work: Path) -> bytes:
        write_files(work / old, before)
        write_files(work / new, after)
        (work / new).mkdir(exist_ok=True)
        result = subprocess.run(
            ["diff", "-ruN", old, new], cwd=work, capture_output=True, check=False
        )
        assert result.returncode == 1, result.stderr  # 1: the trees differ
        return result.stdout

    return make


def diff_u_orig(name: str, before: str, after: str) -> Callable[[Path], bytes]:
    """``diff -u NAME.orig NAME``, as one saves a copy before editing."""

    def make(work: Path) -> bytes:
        write_files(work, {f"{name}.orig": before, name: after})
        result = subprocess.run(
            ["diff", "-u", f"{name}.orig", name], cwd=work, capture_output=True, check=False
        )
        assert result.returncode == 1, result.stderr
        return result.stdout

    return make


@dataclass
class Case:
    name: str
    base: Files  # the repository the diff is applied to
    diff: Callable[[Path], bytes]
    gnu_patch: bool = True  # compare with 'patch -p1' too
    refusal: str | None = None  # text applyonce's one-line error must hold, when git refuses


# A text file with a NUL byte past git's binary window (its first 8000 bytes): git diffs it as
# text, and git apply patches it byte for byte.
NUL_LATE = "".join(f"line {i}\n" for i in range(1200)) + "a\x00b\ntail\n"
NUL_LATE_AFTER = NUL_LATE.replace("line 5\n", "LINE 5\n").replace("tail\n", "TAIL\n")

EDITED = {"src/app.py": "def f():\n    return 1\n", "README.md": "# r\n", "old.txt": "bye\n"}
EDITED_AFTER = {"src/app.py": "def f():\n    return 2\n", "README.md": "# r\n", "new.txt": "hi\n"}

CASES = [
    Case("git-diff", EDITED, git_diff(EDITED, EDITED_AFTER)),
    Case(
        "git-diff-mnemonic-prefix",
        EDITED,
        git_diff(EDITED, EDITED_AFTER, "--src-prefix=c/", "--dst-prefix=w/"),
    ),
    Case(
        "diff-ruN-deletes-creates-and-edits",
        EDITED,
        gnu_diff(EDITED, EDITED_AFTER),
    ),
    Case(
        "diff-ruN-epoch-deletion-of-the-only-file",
        {"gone.txt": "a\nb\n", "keep.txt": "k\n"},
        gnu_diff({"gone.txt": "a\nb\n"}, {}),
    ),
    Case(
        "diff-u-of-an-orig-copy",
        {"conf.ini": "one\ntwo\n"},
        diff_u_orig("conf.ini", "one\ntwo\n", "one\nTWO\n"),
        gnu_patch=False,  # patch -p1 cannot strip a component from 'conf.ini'
    ),
    Case(
        # git apply takes the first directory off a --no-prefix name (-p1): it changes
        # notes.md, not docs/notes.md, and so does applyonce.
        "git-diff-no-prefix-loses-its-first-directory",
        {"docs/notes.md": "n\n", "notes.md": "n\n"},
        git_diff({"docs/notes.md": "n\n"}, {"docs/notes.md": "N\n"}, "--no-prefix"),
    ),
    Case(
        # Without a notes.md at the top, git apply refuses; the refusal says how git read the
        # name and how to write it.
        "git-diff-no-prefix-refused-with-the-name-it-was-read-from",
        {"docs/notes.md": "n\n"},
        git_diff({"docs/notes.md": "n\n"}, {"docs/notes.md": "N\n"}, "--no-prefix"),
        refusal=(
            "cannot update notes.md: no such file; the diff names docs/notes.md, which git apply"
            " reads as notes.md (it removes the first component, as -p1); write"
            " '--- a/docs/notes.md' and '+++ b/docs/notes.md'"
        ),
    ),
    Case(
        "git-diff-no-prefix-top-level-file",
        {"notes.md": "n\n"},
        git_diff({"notes.md": "n\n"}, {"notes.md": "N\n"}, "--no-prefix"),
        refusal="cannot tell the file's name",
    ),
    Case(
        "git-diff-new-file-over-an-existing-file",
        {"notes.txt": "keep me\n"},
        git_diff({}, {"notes.txt": "a new notes file\n"}),
        refusal="cannot add notes.txt: it already exists; update the file instead",
    ),
    Case(
        "git-diff-rename-onto-an-existing-file",
        {"old.txt": "body\n" * 5, "new.txt": "someone else's\n"},
        git_diff({"old.txt": "body\n" * 5}, {"new.txt": "body\n" * 5}, "-M"),
        gnu_patch=False,  # GNU patch renames over the file
        refusal="cannot rename old.txt to new.txt: it already exists",
    ),
    Case(
        "git-diff-copy-onto-an-existing-file",
        {"t.cfg": "k = 1\nj = 2\nl = 3\nm = 4\n", "p.cfg": "mine\n"},
        git_diff(
            {"t.cfg": "k = 1\nj = 2\nl = 3\nm = 4\n"},
            {"t.cfg": "k = 1\nj = 2\nl = 3\nm = 4\n", "p.cfg": "k = 9\nj = 2\nl = 3\nm = 4\n"},
            "-C",
            "-C",
        ),
        gnu_patch=False,  # GNU patch copies over the file
        refusal="cannot copy t.cfg to p.cfg: it already exists",
    ),
    Case(
        "git-diff-of-a-text-file-with-a-nul-past-the-binary-window",
        {"log.txt": NUL_LATE},
        git_diff({"log.txt": NUL_LATE}, {"log.txt": NUL_LATE_AFTER}),
    ),
    Case(
        "diff-ruN-creation-over-an-existing-file",
        {"born.txt": "already here\n"},
        gnu_diff({}, {"born.txt": "born\n"}),
        refusal="cannot add born.txt: it already exists",
    ),
]


def applied_by(
    tool: list[str], repo: Repo, patch_file: Path, work: Path
) -> dict[str, bytes] | None:
    """The tree ``tool`` leaves in a copy of ``repo``, or None when it refuses."""
    copy = work / f"by-{tool[0]}"
    shutil.copytree(repo.path, copy, symlinks=True)
    result = subprocess.run([*tool, str(patch_file)], cwd=copy, capture_output=True, check=False)
    return snapshot(copy) if result.returncode == 0 else None


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_applyonce_applies_a_real_diff_as_git_apply_does(case: Case, tmp_path: Path) -> None:
    patch = case.diff(tmp_path / "diff")
    patch_file = tmp_path / "patch.diff"
    patch_file.write_bytes(patch)
    repo = make_repo(tmp_path / "repo", case.base)
    by_git = applied_by(["git", "apply"], repo, patch_file, tmp_path)
    head, before = repo.head(), repo.files()

    run = run_cli("apply", "-", "--repo", str(repo.path), "--format", "unified", input=patch)

    if case.refusal is None:
        assert by_git is not None, f"git apply refused {case.name}"
        assert run.returncode == 0, run.stdout + run.stderr
        assert repo.files() == by_git
        assert repo.git("status", "--porcelain") == ""
        if case.gnu_patch:
            assert (
                applied_by(
                    ["patch", "-s", "-p1", "-i"],
                    repo_at(repo, head, tmp_path),
                    patch_file,
                    tmp_path,
                )
                == by_git
            )
    else:
        assert by_git is None, f"git apply applied {case.name}"
        assert run.returncode == 1, run.stdout + run.stderr
        [line] = run.stderr.splitlines()
        assert line.startswith("error: ") and case.refusal in line, line
        assert repo.head() == head
        assert repo.files() == before
        assert repo.git("status", "--porcelain") == ""


def repo_at(repo: Repo, commit: str, tmp_path: Path) -> Repo:
    """A clone of ``repo`` at ``commit``: the base the diff is for."""
    clone = tmp_path / "base-clone"
    git(tmp_path, "clone", "-q", str(repo.path), str(clone))
    git(clone, "checkout", "-q", commit)
    return Repo(clone)
