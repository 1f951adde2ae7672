"""Every refusal of a hostile patch path: one-line error, exit 1, and nothing written anywhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Repo, run_cli, snapshot

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")


def _patch(path: str) -> str:
    return f"*** Begin Patch\n*** Add File: {path}\n+owned\n*** End Patch\n"


def _assert_refused(repo: Repo, patch: str, message: str, outside: Path | None = None) -> None:
    before = repo.files()
    head = repo.head()
    outside_before = snapshot(outside) if outside else None
    result = run_cli("apply", "-", "--repo", str(repo.path), input=patch)
    assert result.returncode == 1, result
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert repo.head() == head
    assert repo.files() == before
    assert not repo.state_dir().exists()  # refused before any state was created
    if outside is not None:
        assert snapshot(outside) == outside_before


def test_refuses_dotdot_escape(repo: Repo, tmp_path: Path) -> None:
    _assert_refused(repo, _patch("../escape.txt"), "contains '..'", outside=tmp_path)
    assert not (tmp_path / "escape.txt").exists()


def test_refuses_dotdot_inside_repo(repo: Repo) -> None:
    _assert_refused(repo, _patch("src/../README.md"), "contains '..'")


def test_refuses_absolute_path_outside_repo(repo: Repo, tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    _assert_refused(repo, _patch(str(target)), "is outside the repository", outside=tmp_path)
    assert not target.exists()


def test_refuses_absolute_path_that_only_shares_a_prefix(repo: Repo) -> None:
    sibling = str(repo.path) + "-evil/x.txt"
    _assert_refused(repo, _patch(sibling), "is outside the repository")


@pytest.mark.parametrize(
    "path", [".git/hooks/pre-commit", ".GIT/config", "sub/.Git/x", ".git./x", "git~1/config"]
)
def test_refuses_dot_git_in_any_case(repo: Repo, path: str) -> None:
    _assert_refused(repo, _patch(path), "is inside .git")
    assert not (repo.path / ".git/hooks/pre-commit").exists()


def test_refuses_nul_byte(repo: Repo) -> None:
    _assert_refused(repo, _patch("a\x00b.txt"), "NUL byte")


def test_refuses_control_character(repo: Repo) -> None:
    _assert_refused(repo, _patch("a\x1bb.txt"), "control character")


def test_refuses_overlong_component(repo: Repo) -> None:
    _assert_refused(repo, _patch("a" * 300 + ".txt"), "longer than 255 bytes")


def test_refuses_symlinked_parent_in_tree(repo: Repo, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, repo.path / "link")
    repo.git("add", "link")
    repo.git("commit", "-q", "-m", "add a symlink")
    _assert_refused(repo, _patch("link/planted.txt"), "parent link is a symlink", outside=outside)
    assert not (outside / "planted.txt").exists()


def test_refuses_update_through_symlink(repo: Repo, tmp_path: Path) -> None:
    os.symlink("README.md", repo.path / "readme-link")
    repo.git("add", "readme-link")
    repo.git("commit", "-q", "-m", "link")
    patch = "*** Begin Patch\n*** Update File: readme-link\n@@\n-README.md\n+x\n*** End Patch\n"
    before = repo.files()
    result = run_cli("apply", "-", "--repo", str(repo.path), input=patch)
    assert result.returncode == 1 and "it is a symlink" in result.stderr
    assert repo.files() == before


def test_refuses_move_into_dot_git(repo: Repo) -> None:
    patch = "*** Begin Patch\n*** Update File: README.md\n*** Move to: .git/config\n*** End Patch\n"
    _assert_refused(repo, patch, "is inside .git")


def test_refuses_oversized_patch(repo: Repo) -> None:
    big = (
        "*** Begin Patch\n*** Add File: big.txt\n"
        + ("+" + "x" * 1023 + "\n") * (33 * 1024)
        + "*** End Patch\n"
    )
    _assert_refused(repo, big, "larger than 32 MiB")


def test_refuses_a_path_deeper_than_the_tree_builder_goes(repo: Repo) -> None:
    """1,100 nested folders in a 2 KB patch crashed the recursive tree builder
    (exit 3, the call left prepared); the depth is capped with the other path rules."""
    _assert_refused(repo, _patch("a/" * 1100 + "f"), "folders deep")


def test_a_path_at_the_depth_cap_is_committed(repo: Repo) -> None:
    path = "d/" * 256 + "f"
    result = run_cli("apply", "-", "--repo", str(repo.path), input=_patch(path))
    assert result.returncode == 0, result
    assert path in repo.files()


def _with_submodule(repo: Repo) -> None:
    """A submodule at ``lib`` (a gitlink, not initialised: an empty directory, as a clone
    without --recurse-submodules leaves it)."""
    repo.git("update-index", "--add", "--cacheinfo", f"160000,{repo.head()},lib")
    repo.git("commit", "-q", "-m", "lib as a submodule")
    (repo.path / "lib").mkdir()


def test_refuses_a_path_in_a_submodule_saying_it_is_one(repo: Repo) -> None:
    # Said before: "parent lib is a file, not a directory".
    _with_submodule(repo)
    _assert_refused(
        repo,
        _patch("lib/src/x.py"),
        "error: lib/src/x.py: lib is a submodule; change it in its own repository (the one "
        "checked out at lib)\n",
    )


def test_rejects_a_change_to_a_submodule_itself_saying_where_to_make_it(repo: Repo) -> None:
    _with_submodule(repo)
    head, files = repo.head(), repo.files()
    patch = "*** Begin Patch\n*** Update File: lib\n@@\n-x\n+y\n*** End Patch\n"
    result = run_cli("apply", "-", "--repo", str(repo.path), input=patch)
    assert (result.returncode, result.stderr) == (
        1,
        "error: cannot update lib: it is a submodule; change it in its own repository (the "
        "one checked out at lib)\n",
    )
    assert (repo.head(), repo.files()) == (head, files)
