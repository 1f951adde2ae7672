"""Wrapped Codex patches through the real CLI: ``cd DIR &&`` is read from the repository root,
an absolute DIR inside the repository works, one outside it (or a relative one that climbs out)
is refused with one line and nothing written; a fenced patch in an agent's reply lands as the
bare patch would, as the same call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Repo, make_repo, run_cli

PATCH = "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 2\n*** End Patch\n"


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make_repo(tmp_path / "repo", {"src/a.py": "x = 1\n", "README.md": "# r\n"})


def apply(repo: Repo, text: str, *args: str):  # type: ignore[no-untyped-def]
    return run_cli("apply", "-", "--repo", str(repo.path), *args, input=text)


@pytest.mark.parametrize("where", ["src", "ABSOLUTE/src"])
def test_cd_into_the_repository_applies_under_that_directory(repo: Repo, where: str) -> None:
    where = where.replace("ABSOLUTE", str(repo.path))
    result = apply(repo, f"cd {where} && apply_patch <<'EOF'\n{PATCH}EOF\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Success. Updated the following files:\nM src/a.py\n"
    assert repo.files()["src/a.py"] == b"x = 2\n"


def test_a_cd_patch_is_the_same_call_as_the_patch_with_the_paths_from_the_root(
    repo: Repo,
) -> None:
    first = apply(repo, f"cd src && apply_patch <<'EOF'\n{PATCH}EOF\n", "--json")
    again = apply(
        repo, "Here it is:\n```diff\n" + PATCH.replace(" a.py", " src/a.py") + "```\n", "--json"
    )
    assert first.returncode == 0 and again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["call_id"] == json.loads(first.stdout)["call_id"]
    assert json.loads(again.stdout)["replayed"] is True
    assert len(repo.call_ids()) == 1


@pytest.mark.parametrize(
    ("where", "message"),
    [
        (
            "..",
            "error: patch line 1: the patch runs after 'cd ..', outside the repository; send "
            "the patch without 'cd DIR &&', its paths relative to the repository root\n",
        ),
        (
            "OUTSIDE",
            "error: absolute path 'OUTSIDE/a.py' is outside the repository; use a path "
            "relative to the repository root, inside it and outside .git\n",
        ),
    ],
)
def test_cd_out_of_the_repository_is_refused_and_writes_nothing(
    repo: Repo, tmp_path: Path, where: str, message: str
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    where = where.replace("OUTSIDE", str(outside))
    head, files = repo.head(), repo.files()
    result = apply(repo, f"cd {where} && apply_patch <<'EOF'\n{PATCH}EOF\n")
    assert result.returncode == 1, result
    assert result.stderr == message.replace("OUTSIDE", str(outside))
    assert repo.head() == head and repo.files() == files
    assert not (outside / "a.py").exists()
    assert repo.git("status", "--porcelain") == ""


def test_a_block_without_its_file_name_is_rejected_and_writes_nothing(repo: Repo) -> None:
    head, files = repo.head(), repo.files()
    result = apply(repo, "<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n")
    assert result.returncode == 1, result  # a malformed patch of the blocks format: rejected
    assert result.stderr == (
        "error: patch line 1: the block has no file name; put the file's path alone on the line"
        " before '<<<<<<< SEARCH'\n"
    )
    assert repo.head() == head and repo.files() == files
    assert not repo.state_dir().exists()
    assert repo.git("status", "--porcelain") == ""
