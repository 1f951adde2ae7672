"""Unified diffs apply byte for byte, as ``git apply`` does: ``\\r`` is content, and so are bytes
that are not UTF-8. Each case is a real commit made with git; its ``git diff`` is applied by
``applyonce apply`` at the commit's parent, and the new commit's tree must be git's, to the byte.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from tests.conftest import Repo, make_repo, run_cli, stored_json, write_files

pytestmark = pytest.mark.sampled(every=2, by="module")

BASE: dict[str, bytes] = {
    "lf.txt": b"one\ntwo\nthree\n",
    "crlf.txt": b"one\r\ntwo\r\nthree\r\n",
    "mixed.txt": b"a\r\nb\r\nc\r\nd\ne\nf\r\n",
    "latin1.txt": "caf\xe9\nna\xefve\nend\n".encode("latin-1"),
    "bom.txt": b"\xef\xbb\xbfone\ntwo\n",
    "bin.dat": b"\x00\x01binary\x00",
}

CHANGES: dict[str, dict[str, bytes | None]] = {
    "new-crlf-file": {"new.txt": b"x\r\ny\r\n"},
    "lf-to-crlf": {"lf.txt": b"one\r\ntwo\r\nthree\r\n"},
    "crlf-to-lf": {"crlf.txt": b"one\ntwo\nthree\n"},
    "edit-a-crlf-file": {"crlf.txt": b"one\r\nTWO\r\nthree\r\n"},
    "add-to-the-lf-part-of-a-mixed-file": {"mixed.txt": b"a\r\nb\r\nc\r\nd\nd2\ne\nf\r\n"},
    "edit-both-parts-of-a-mixed-file": {"mixed.txt": b"A\r\nb\r\nc\r\nd\nE\nf\n"},
    "one-line-loses-its-cr": {"crlf.txt": b"one\r\ntwo\nthree\r\n"},
    "crlf-file-without-final-newline": {"crlf.txt": b"one\r\ntwo\r\nthree"},
    "edit-a-latin1-file": {"latin1.txt": "caf\xe9\nna\xefve!\nend\n".encode("latin-1")},
    "new-latin1-file": {"new.txt": "\xe0 bient\xf4t\n".encode("latin-1")},
    "delete-a-latin1-file": {"latin1.txt": None},
    "rename-and-edit-a-crlf-file": {"crlf.txt": None, "moved.txt": b"one\r\ntwo\r\n3\r\n"},
    "edit-the-first-line-of-a-bom-file": {"bom.txt": b"\xef\xbb\xbfONE\ntwo\n"},
    "add-a-bom": {"lf.txt": b"\xef\xbb\xbfone\ntwo\nthree\n"},
    "remove-a-bom": {"bom.txt": b"one\ntwo\n"},
    "rename-a-binary-file": {"bin.dat": None, "moved.dat": b"\x00\x01binary\x00"},
}


def _commit(repo: Repo, change: dict[str, bytes | None]) -> str:
    for path, data in change.items():
        if data is None:
            repo.git("rm", "-q", path)
        else:
            write_files(repo.path, {path: data})
            repo.git("add", path)
    repo.git("commit", "-qm", "change")
    return repo.head()


def _diff(repo: Repo, parent: str, commit: str) -> bytes:
    """``git diff -M``, as bytes: it carries "\\r" and latin-1 bytes that text mode would change."""
    return subprocess.run(
        ["git", "-C", str(repo.path), "diff", "-M", parent, commit], capture_output=True, check=True
    ).stdout


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_git_diff_applies_to_gits_tree_byte_for_byte(tmp_path: Path, name: str) -> None:
    repo = make_repo(tmp_path / "repo", BASE)
    parent = repo.head()
    commit = _commit(repo, CHANGES[name])
    raw = _diff(repo, parent, commit)
    repo.git("reset", "-q", "--hard", parent)

    result = run_cli("apply", "-", "--repo", str(repo.path), "--format", "unified", input=raw)

    assert result.returncode == 0, result.stderr
    assert (
        repo.git("rev-parse", "HEAD^{tree}").strip()
        == repo.git("rev-parse", f"{commit}^{{tree}}").strip()
    )
    assert repo.git("rev-parse", "HEAD~1").strip() == parent
    assert repo.git("status", "--porcelain") == ""


def test_a_crlf_copy_of_a_diff_keeps_the_files_endings(tmp_path: Path) -> None:
    # Every line of the patch ends in CRLF, headers too: converted in transport, not git's.
    repo = make_repo(tmp_path / "repo", BASE)
    diff = "--- a/crlf.txt\n+++ b/crlf.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
    result = run_cli(
        "apply", "-", "--repo", str(repo.path), input=diff.replace("\n", "\r\n").encode()
    )
    assert result.returncode == 0, result.stderr
    assert (repo.path / "crlf.txt").read_bytes() == b"one\r\nTWO\r\nthree\r\n"


def test_a_diff_that_changes_nothing_is_refused_never_an_empty_commit(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", BASE)
    head = repo.head()
    same = "--- a/lf.txt\n+++ b/lf.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+two\n three\n"
    result = run_cli("apply", "-", "--repo", str(repo.path), input=same.encode())
    assert result.returncode == 1
    assert result.stderr.startswith("error: the patch changes nothing")
    assert repo.head() == head


@pytest.mark.parametrize(
    "patch",
    [
        "*** Begin Patch\n*** Update File: latin1.txt\n@@\n-end\n+END\n*** End Patch\n",
        '[{"command": "str_replace", "path": "latin1.txt", "old_str": "end", "new_str": "END"}]',
    ],
    ids=["codex", "edit-json"],
)
def test_codex_and_edit_json_refuse_a_non_utf8_file_with_a_receipt(
    tmp_path: Path, patch: str
) -> None:
    repo = make_repo(tmp_path / "repo", BASE)
    head = repo.head()
    result = run_cli("apply", "-", "--repo", str(repo.path), "--json", input=patch.encode())
    assert result.returncode == 1, result
    receipt = orjson.loads(result.stdout)
    assert receipt["status"] == "rejected"
    assert receipt["error"]["kind"] == "binary-file"
    assert "not UTF-8" in receipt["error"]["message"]
    assert repo.head() == head
    assert (repo.path / "latin1.txt").read_bytes() == BASE["latin1.txt"]


def test_a_non_utf8_diff_replays_from_its_receipt_byte_identical(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", BASE)
    parent = repo.head()
    commit = _commit(repo, CHANGES["edit-a-latin1-file"])
    raw = _diff(repo, parent, commit)
    repo.git("reset", "-q", "--hard", parent)
    first = run_cli("apply", "-", "--repo", str(repo.path), "--json", input=raw)
    again = run_cli("apply", "-", "--repo", str(repo.path), "--json", input=raw)
    assert first.returncode == again.returncode == 0, first.stderr
    assert stored_json(first.stdout) == stored_json(again.stdout)
    assert len(repo.call_ids()) == 1
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0
