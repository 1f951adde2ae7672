"""GNU ``diff -u``/``diff -ruN`` output against the real GNU ``patch`` and ``git apply``.

Each diff is made by the real ``diff`` where it can be (``.orig`` backups, ``diff -ruN old new``
with its epoch-dated sides for created and deleted files) or written as the tools write it (a
``.rej``-style pair of bare names); GNU ``patch`` (with the ``-p`` the diff needs), ``git apply``
and ``applyonce apply`` each apply it to a fresh copy of one tree, and must leave the same files.
Where the two peers differ (a ``.orig`` diff of a file in a folder: ``patch -p0`` applies it,
``git apply`` strips the folder), applyonce reads it as ``git apply`` does and its refusal names
the reading and the fix.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import make_repo, run_cli, snapshot

pytestmark = pytest.mark.skipif(
    shutil.which("patch") is None or shutil.which("diff") is None,
    reason="GNU patch or diff is missing (apt-get install patch diffutils)",
)

BASE = {"a.py": "a\nb\n", "src/m.py": "x\ny\n", "del.py": "gone\n"}


def _diff(tmp_path: Path, *args: str, cwd: Path) -> str:
    done = subprocess.run(["diff", *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr  # 1: the files differ
    return done.stdout


def _orig(tmp_path: Path, path: str, new: str | None) -> str:
    """``diff -uN PATH.orig PATH`` in a copy of the tree where PATH became ``new``."""
    work = tmp_path / "made"
    shutil.rmtree(work, ignore_errors=True)
    for name, content in BASE.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(content)
    target = work / path
    if target.exists():
        target.rename(work / (path + ".orig"))
    if new is not None:
        target.write_text(new)
    return _diff(tmp_path, "-uN", path + ".orig", path, cwd=work)


def _recursive(tmp_path: Path) -> str:
    """``diff -ruN old new``: a.py changed, del.py deleted, src/new.py created."""
    for side, files in (
        ("old", BASE),
        ("new", {"a.py": "a\nB\n", "src/m.py": "x\ny\n", "src/new.py": "fresh\n"}),
    ):
        for name, content in files.items():
            (tmp_path / side / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / side / name).write_text(content)
    return _diff(tmp_path, "-ruN", "old", "new", cwd=tmp_path)


def _apply_all(tmp_path: Path, diff: str, strip: int) -> dict[str, tuple[int, dict[str, bytes]]]:
    results = {}
    for tool in ("patch", "git", "applyonce"):
        repo = make_repo(tmp_path / tool, BASE)
        if tool == "patch":
            command = ["patch", "-s", "-f", f"-p{strip}", "--no-backup-if-mismatch"]
            done = subprocess.run(
                command, cwd=repo.path, input=diff, text=True, check=False, capture_output=True
            )
            code = done.returncode
        elif tool == "git":
            done = subprocess.run(
                ["git", "apply"],
                cwd=repo.path,
                input=diff,
                text=True,
                check=False,
                capture_output=True,
            )
            code = done.returncode
        else:
            code = run_cli("apply", "-", "--repo", str(repo.path), input=diff).returncode
        results[tool] = (code, {k: v for k, v in snapshot(repo.path).items() if "rej" not in k})
    return results


@pytest.mark.parametrize(
    ("make", "strip", "expected"),
    [
        (lambda t: _orig(t, "a.py", "a\nB\n"), 0, {"a.py": b"a\nB\n"}),
        (lambda t: _orig(t, "new.py", "fresh\n"), 0, {"new.py": b"fresh\n"}),
        (lambda t: _orig(t, "del.py", None), 0, {"del.py": None}),
        (_recursive, 1, {"a.py": b"a\nB\n", "del.py": None, "src/new.py": b"fresh\n"}),
        (
            lambda t: "--- a.py\n+++ a.py\n@@ -1,2 +1,3 @@\n a\n-b\n+B\n+c\n",
            0,
            {"a.py": b"a\nB\nc\n"},
        ),
    ],
    ids=["orig-backup", "orig-epoch-creation", "orig-epoch-deletion", "diff-ruN", "rej-names"],
)
def test_applyonce_leaves_what_gnu_patch_and_git_apply_leave(
    tmp_path: Path,
    make,
    strip: int,
    expected: dict[str, bytes | None],  # type: ignore[no-untyped-def]
) -> None:
    results = _apply_all(tmp_path, make(tmp_path), strip)
    want = {k: v.encode() for k, v in BASE.items()}
    for path, content in expected.items():
        if content is None:
            del want[path]
        else:
            want[path] = content
    assert results["patch"] == (0, want)
    assert results["git"] == (0, want)
    assert results["applyonce"] == (0, want)


def test_an_orig_diff_in_a_folder_is_read_as_git_apply_reads_it_with_the_fix_named(
    tmp_path: Path,
) -> None:
    diff = _orig(tmp_path, "src/m.py", "x\nY\n")
    results = _apply_all(tmp_path, diff, 0)
    before = {k: v.encode() for k, v in BASE.items()}
    assert results["patch"] == (0, {**before, "src/m.py": b"x\nY\n"})  # patch -p0
    assert results["git"] == (1, before)  # git apply: -p1, so 'm.py'
    assert results["applyonce"] == (1, before)
    repo = make_repo(tmp_path / "again", BASE)
    refused = run_cli("apply", "-", "--repo", str(repo.path), input=diff)
    assert refused.stderr == (
        "error: cannot update m.py: no such file; the diff names src/m.py, which git apply reads "
        "as m.py (it removes the first component, as -p1); write '--- a/src/m.py' and "
        "'+++ b/src/m.py'\n"
    )
    assert repo.git("status", "--porcelain") == "" and repo.commit_count() == 1
