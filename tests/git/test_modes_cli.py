"""File modes through the real CLI: the checkout and the index end equal to the commit.

Each patch is a real ``git diff`` made in a clone, applied to the repository by ``applyonce``, and
the result is judged by the real git (``status``, ``diff``, ``ls-files -s``) and by ``stat``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest

from tests.conftest import Repo, git, make_repo, run_cli

FILES = {"run.sh": "#!/bin/sh\necho run\n", "lib/tool.py": "print('tool')\n"}


def _repo(tmp_path: Path, *, exec_paths: tuple[str, ...] = (), filemode: bool = True) -> Repo:
    repo = make_repo(tmp_path / "repo")
    if not filemode:
        repo.git("config", "core.fileMode", "false")
    for path, text in FILES.items():
        full = repo.path / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(text)
        full.chmod(0o755 if path in exec_paths else 0o644)
    repo.git("add", "-A")
    for path in exec_paths:  # also when the work tree cannot tell (core.fileMode=false)
        repo.git("update-index", "--chmod=+x", path)
    repo.git("commit", "-q", "-m", "base")
    return repo


def _diff_made_in_a_clone(repo: Repo, tmp_path: Path, *commands: list[str]) -> str:
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(repo.path), str(work))
    for command in commands:
        subprocess.run(command, cwd=work, check=True)
    git(work, "add", "-A")
    return git(work, "diff", "--cached", "-M")


def _apply(repo: Repo, diff: str) -> dict:  # type: ignore[type-arg]
    result = run_cli("apply", "-", "--repo", str(repo.path), "--json", input=diff)
    assert result.returncode == 0, result.stderr
    return orjson.loads(result.stdout)  # type: ignore[no-any-return]


def _index_mode(repo: Repo, path: str) -> str:
    return repo.git("ls-files", "-s", "--", path).split()[0]


def _is_executable(path: Path) -> bool:
    return bool(os.stat(path).st_mode & 0o100)


def _assert_clean(repo: Repo) -> None:
    # First the plumbing, which does not refresh the index: its stat data must be right too.
    assert repo.git("diff-files") == ""
    assert repo.git("status", "--porcelain") == ""
    assert repo.git("diff") == ""
    assert repo.git("diff", "--cached") == ""


@pytest.mark.parametrize(
    ("exec_before", "chmod", "want"),
    [((), "+x", "100755"), (("run.sh",), "-x", "100644")],
    ids=["644-to-755", "755-to-644"],
)
def test_mode_only_change_leaves_checkout_and_index_equal_to_the_commit(
    tmp_path: Path, exec_before: tuple[str, ...], chmod: str, want: str
) -> None:
    repo = _repo(tmp_path, exec_paths=exec_before)
    diff = _diff_made_in_a_clone(repo, tmp_path, ["chmod", chmod, "run.sh"])
    assert "old mode" in diff and "@@" not in diff
    receipt = _apply(repo, diff)
    assert [(f["path"], f["mode"]) for f in receipt["files"]] == [("run.sh", want)]
    assert repo.git("ls-tree", "HEAD", "run.sh").split()[0] == want
    assert _index_mode(repo, "run.sh") == want
    assert _is_executable(repo.path / "run.sh") == (want == "100755")
    _assert_clean(repo)


@pytest.mark.parametrize(
    ("exec_before", "chmod", "want"),
    [((), "+x", "100755"), (("run.sh",), "-x", "100644")],
    ids=["644-to-755", "755-to-644"],
)
def test_mode_and_content_change(
    tmp_path: Path, exec_before: tuple[str, ...], chmod: str, want: str
) -> None:
    repo = _repo(tmp_path, exec_paths=exec_before)
    diff = _diff_made_in_a_clone(
        repo, tmp_path, ["chmod", chmod, "run.sh"], ["sh", "-c", "echo 'echo done' >> run.sh"]
    )
    assert "old mode" in diff and "@@" in diff
    _apply(repo, diff)
    assert (repo.path / "run.sh").read_text() == "#!/bin/sh\necho run\necho done\n"
    assert _index_mode(repo, "run.sh") == want
    assert _is_executable(repo.path / "run.sh") == (want == "100755")
    _assert_clean(repo)


def test_move_with_a_mode_change(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    diff = _diff_made_in_a_clone(
        repo,
        tmp_path,
        ["mkdir", "bin"],
        ["git", "mv", "lib/tool.py", "bin/tool"],
        ["chmod", "+x", "bin/tool"],
    )
    assert "rename from lib/tool.py" in diff and "new mode 100755" in diff
    receipt = _apply(repo, diff)
    assert [(f["path"], f["action"], f["mode"]) for f in receipt["files"]] == [
        ("bin/tool", "move", "100755")
    ]
    assert not (repo.path / "lib/tool.py").exists()
    assert _index_mode(repo, "bin/tool") == "100755"
    assert _is_executable(repo.path / "bin/tool")
    _assert_clean(repo)


@pytest.mark.parametrize(
    ("exec_before", "chmod", "want"),
    [((), "+x", "100755"), (("run.sh",), "-x", "100644")],
    ids=["644-to-755", "755-to-644"],
)
def test_core_filemode_false_still_gets_the_commits_mode_in_the_index(
    tmp_path: Path, exec_before: tuple[str, ...], chmod: str, want: str
) -> None:
    repo = _repo(tmp_path, exec_paths=exec_before, filemode=False)
    bits_before = os.stat(repo.path / "run.sh").st_mode
    diff = "".join(
        [
            "diff --git a/run.sh b/run.sh\n",
            f"old mode {'100755' if exec_before else '100644'}\n",
            f"new mode {want}\n",
        ]
    )
    _apply(repo, diff)
    assert repo.git("ls-tree", "HEAD", "run.sh").split()[0] == want
    assert _index_mode(repo, "run.sh") == want
    # git ignores the work tree's bit here: applyonce does not change it either.
    assert os.stat(repo.path / "run.sh").st_mode == bits_before
    _assert_clean(repo)


def test_core_filemode_false_mode_and_content_change(tmp_path: Path) -> None:
    repo = _repo(tmp_path, filemode=False)
    diff = _diff_made_in_a_clone(
        repo, tmp_path, ["chmod", "+x", "run.sh"], ["sh", "-c", "echo 'echo done' >> run.sh"]
    )
    _apply(repo, diff)
    assert (repo.path / "run.sh").read_text() == "#!/bin/sh\necho run\necho done\n"
    assert _index_mode(repo, "run.sh") == "100755"
    _assert_clean(repo)


def test_a_mode_the_user_changed_is_their_work(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo.path / "run.sh").chmod(0o755)  # not committed: git status shows it
    head = repo.head()
    patch = "*** Begin Patch\n*** Update File: run.sh\n@@\n-echo run\n+echo ran\n*** End Patch\n"
    result = run_cli("apply", "-", "--repo", str(repo.path), input=patch)
    assert result.returncode == 4, result.stderr
    assert "run.sh has uncommitted changes" in result.stderr
    assert repo.head() == head
    assert (repo.path / "run.sh").read_text() == FILES["run.sh"]
    assert _is_executable(repo.path / "run.sh")
