"""A call's objects as one pack: git reads it, small packs stay few, a rejection writes nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

from applyonce import Executor
from applyonce.git.packs import MERGE_AT, pack_ids, write_pack
from tests.conftest import Repo, make_repo


def _packs(repo: Repo) -> list[Path]:
    return sorted((repo.path / ".git" / "objects" / "pack").glob("*.idx"))


def _loose(repo: Repo) -> set[Path]:
    return set((repo.path / ".git" / "objects").glob("??/*"))


def test_git_reads_a_written_pack_and_verifies_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    blobs = {}
    for data in (b"one\n", b"two\n" * 1000, bytes(range(256)) * 70):  # sizes over 4 and 7 bits
        oid = subprocess.run(
            ["git", "-C", str(repo.path), "hash-object", "--stdin"],
            input=data, capture_output=True, check=True,
        ).stdout.decode().strip()
        blobs[oid] = data
    name = write_pack(repo.path / ".git" / "objects", [(o, 3, d) for o, d in blobs.items()])
    pack = repo.path / ".git" / "objects" / "pack" / f"{name}.pack"
    assert subprocess.run(["git", "verify-pack", str(pack)], check=False).returncode == 0
    assert sorted(pack_ids(pack.with_suffix(".idx"))) == sorted(blobs)
    for oid, data in blobs.items():
        shown = subprocess.run(
            ["git", "-C", str(repo.path), "cat-file", "blob", oid], capture_output=True, check=True
        )
        assert shown.stdout == data


def test_many_calls_leave_few_packs_and_a_sound_repository(repo: Repo) -> None:
    executor = Executor(repo.path)
    for i in range(2 * MERGE_AT + 3):
        patch = f"*** Begin Patch\n*** Add File: notes/n{i}.txt\n+note {i}\n*** End Patch\n"
        assert executor.apply(patch).status == "committed"
    executor.close()
    assert len(_packs(repo)) < 2 * MERGE_AT  # a tier holds fewer than MERGE_AT
    assert _loose(repo) == set() or all("applyonce" not in str(p) for p in _loose(repo))
    assert repo.git("fsck", "--strict", "--no-dangling") == ""
    assert len(repo.call_ids()) == 2 * MERGE_AT + 3
    assert repo.git("show", "HEAD:notes/n0.txt") == "note 0\n"


def test_a_rejected_call_writes_no_object(repo: Repo) -> None:
    loose, packs = _loose(repo), _packs(repo)
    # Staged (its blobs and trees made), then refused by the built-in syntax check.
    bad = "*** Begin Patch\n*** Add File: notes.txt\n+content that never lands\n" \
          "*** Add File: broken.py\n+def broken(:\n*** End Patch\n"
    receipt = Executor(repo.path).apply(bad)
    assert receipt.status == "rejected" and receipt.error["kind"] == "check-failed"
    assert _loose(repo) == loose and _packs(repo) == packs
