"""Never an overwrite by surprise: an operation that creates a path refuses a path that exists.

A Codex ``Add File`` or ``Move to`` onto an existing path (the real Codex replaces it), and an
edit-json ``create`` of an existing file (Anthropic's reference text editor refuses it), are
refused with one line (``already-exists``) and a hint to update the file instead; nothing is
written. A file deleted earlier in the same edit-json document may be created again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Repo, make_repo, run_cli


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make_repo(tmp_path / "repo", {"a.txt": "old\n", "b.txt": "bee\n"})


def _refused(repo: Repo, patch: str, *args: str) -> str:
    head, files = repo.head(), repo.files()
    result = run_cli("apply", "-", "--repo", str(repo.path), *args, input=patch)
    assert result.returncode == 1, result
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert repo.head() == head and repo.files() == files
    assert repo.git("status", "--porcelain") == ""
    return result.stderr


def test_a_codex_add_file_onto_an_existing_file_is_refused(repo: Repo) -> None:
    err = _refused(repo, "*** Begin Patch\n*** Add File: a.txt\n+new\n*** End Patch\n")
    assert err == (
        "error: cannot add a.txt: it already exists; update the file instead: Codex "
        "'*** Update File: PATH' with hunks, a diff with '--- a/PATH' and '+++ b/PATH', or blocks"
        " whose SEARCH holds the lines to change\n"
    )


def test_a_codex_add_file_with_the_files_own_content_is_refused_too(repo: Repo) -> None:
    err = _refused(repo, "*** Begin Patch\n*** Add File: a.txt\n+old\n*** End Patch\n")
    assert err.startswith("error: cannot add a.txt: it already exists; update the file")


def test_a_codex_move_onto_an_existing_file_is_refused(repo: Repo) -> None:
    patch = (
        "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-old\n+new\n"
        "*** End Patch\n"
    )
    err = _refused(repo, patch)
    assert err == (
        "error: cannot rename a.txt to b.txt: it already exists; move it to a path that is not "
        "there, or delete b.txt in a call of its own first\n"
    )


def test_an_edit_json_create_of_an_existing_file_is_refused(repo: Repo) -> None:
    doc = json.dumps([{"command": "create", "path": "a.txt", "file_text": "new\n"}])
    err = _refused(repo, doc, "--format", "edit-json")
    assert err.startswith("error: cannot add a.txt: it already exists; update the file instead")


def test_an_edit_json_create_after_edits_of_an_existing_file_is_refused(repo: Repo) -> None:
    doc = json.dumps(
        [
            {"command": "str_replace", "path": "a.txt", "old_str": "old", "new_str": "mid"},
            {"command": "create", "path": "a.txt", "file_text": "new\n"},
        ]
    )
    err = _refused(repo, doc, "--format", "edit-json")
    assert err == (
        "error: a.txt: commands[1] (create): cannot create a.txt: it already exists; change it "
        "with str_replace or insert instead, or delete it first\n"
    )


def test_an_edit_json_create_after_a_delete_replaces_the_file(repo: Repo) -> None:
    doc = json.dumps(
        [
            {"command": "delete", "path": "a.txt"},
            {"command": "create", "path": "a.txt", "file_text": "new\n"},
        ]
    )
    result = run_cli("apply", "-", "--repo", str(repo.path), "--format", "edit-json", input=doc)
    assert result.returncode == 0, result.stderr
    assert repo.files()["a.txt"] == b"new\n"


def test_a_codex_add_file_and_move_onto_new_paths_still_apply(repo: Repo) -> None:
    patch = (
        "*** Begin Patch\n*** Add File: c.txt\n+sea\n*** Update File: a.txt\n"
        "*** Move to: d/a.txt\n@@\n-old\n+new\n*** End Patch\n"
    )
    result = run_cli("apply", "-", "--repo", str(repo.path), input=patch)
    assert result.returncode == 0, result.stderr
    assert repo.files() == {"b.txt": b"bee\n", "c.txt": b"sea\n", "d/a.txt": b"new\n"}
