"""The real ``applyonce apply`` places a Codex hunk by its anchor's block and commits it, and
refuses, in one line and writing nothing, a hunk the patch leaves at two places and an addition
whose trailing empty line reads two ways."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Repo, apply, make_repo

A_PY = (
    "class A:\n    def m(self):\n        return 1\n\nclass B:\n    def m(self):\n        return 1\n"
)


def _repo(tmp_path: Path, files: dict[str, str]) -> Repo:
    return make_repo(tmp_path / "repo", files)


def _assert_refused_writing_nothing(repo: Repo, run, before: dict[str, bytes], head: str) -> str:  # type: ignore[no-untyped-def]
    assert run.returncode == 1, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), run.stderr
    assert repo.head() == head
    assert repo.commit_count() == 1
    assert repo.files() == before
    assert repo.git("status", "--porcelain") == ""
    return lines[0]


def test_the_anchors_block_decides_and_the_change_is_committed(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"a.py": A_PY})
    patch = (
        "*** Begin Patch\n*** Update File: a.py\n@@ class A:\n     def m(self):\n"
        "-        return 1\n+        return 2\n*** End Patch\n"
    )
    run = apply(repo, patch)
    assert run.returncode == 0, run.stderr
    assert repo.commit_count() == 2
    assert (repo.path / "a.py").read_text() == A_PY.replace("return 1", "return 2", 1)


def test_a_hunk_left_at_two_places_is_refused_naming_them(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"a.py": A_PY})
    before, head = repo.files(), repo.head()
    patch = (
        "*** Begin Patch\n*** Update File: a.py\n@@\n     def m(self):\n"
        "-        return 1\n+        return 2\n*** End Patch\n"
    )
    line = _assert_refused_writing_nothing(repo, apply(repo, patch), before, head)
    assert line.startswith("error: a.py: hunk 1: the expected lines match at 2 places (lines 2, 6)")
    assert "'class A:' (line 1) vs 'class B:' (line 5)" in line
    assert "add the line 'class A:' (line 1) as a context line before" in line


def test_an_addition_whose_empty_line_reads_two_ways_is_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"list.txt": "a\n\nb\n"})
    before, head = repo.files(), repo.head()
    patch = "*** Begin Patch\n*** Update File: list.txt\n@@\n+c\n\n*** End Patch\n"
    line = _assert_refused_writing_nothing(repo, apply(repo, patch), before, head)
    assert "read as a separator put them at the end of the file (line 4)" in line
    assert "start the empty lines with a space to mean empty context lines" in line
