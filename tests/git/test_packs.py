"""A call's objects as one pack: git reads it, small packs stay few, a rejection writes nothing;
only applyonce's own packs are merged, by copying their bytes, whatever packs git made."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
from pathlib import Path

import pygit2

from applyonce import Executor
from applyonce.git.packs import MERGE_AT, merge_small_packs, pack_ids, write_pack
from tests.conftest import Repo, make_repo


def _packs(repo: Repo) -> list[Path]:
    return sorted((repo.path / ".git" / "objects" / "pack").glob("*.idx"))


def _loose(repo: Repo) -> set[Path]:
    return set((repo.path / ".git" / "objects").glob("??/*"))


def test_git_reads_a_written_pack_and_verifies_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    blobs = {}
    for data in (b"one\n", b"two\n" * 1000, bytes(range(256)) * 70):  # sizes over 4 and 7 bits
        oid = (
            subprocess.run(
                ["git", "-C", str(repo.path), "hash-object", "--stdin"],
                input=data,
                capture_output=True,
                check=True,
            )
            .stdout.decode()
            .strip()
        )
        blobs[oid] = data
    written = write_pack(repo.path / ".git" / "objects", [(o, 3, d) for o, d in blobs.items()])
    assert written is not None and written.keep is None
    name = written.name
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
    bad = (
        "*** Begin Patch\n*** Add File: notes.txt\n+content that never lands\n"
        "*** Add File: broken.py\n+def broken(:\n*** End Patch\n"
    )
    receipt = Executor(repo.path).apply(bad)
    assert receipt.status == "rejected" and receipt.error["kind"] == "check-failed"
    assert _loose(repo) == loose and _packs(repo) == packs


# --- merging touches applyonce's own packs only, and stays cheap -----------------------------

ONE_LINE = "*** Begin Patch\n*** Add File: one.txt\n+one line\n*** End Patch\n"


def _pack_files(repo: Repo) -> dict[str, str]:
    """Every file of the pack directory and the SHA-256 of its bytes."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((repo.path / ".git" / "objects" / "pack").iterdir())
        if p.suffix in (".pack", ".idx")
    }


def _repo_with_git_packs(root: Path, packs: int, versions: int, lines: int) -> Repo:
    """A repository whose objects are all in ``packs`` packs made by ``git repack -d``, each of
    ``versions`` commits of a large text file that changes a little each time (deltified by git:
    small on disk, many times larger inflated)."""
    repo = make_repo(root)
    store = pygit2.Repository(str(root))
    sig = pygit2.Signature("Test Author", "author@example.invalid", 1_700_000_000, 0)
    rnd = random.Random(7)
    text = [f"{rnd.getrandbits(128):032x} {rnd.random()}\n" for _ in range(lines)]
    parents: list[pygit2.Oid] = []
    for p in range(packs):
        for v in range(versions):
            for _ in range(20):
                text[rnd.randrange(lines)] = f"{rnd.getrandbits(128):032x} changed\n"
            tree = (
                store.TreeBuilder(store[parents[0]].peel(pygit2.Tree))
                if parents
                else store.TreeBuilder()
            )
            tree.insert(
                f"big{p % 2}.txt",
                store.create_blob("".join(text).encode()),
                pygit2.GIT_FILEMODE_BLOB,
            )
            parents = [
                store.create_commit(
                    "refs/heads/main", sig, sig, f"p{p} v{v}", tree.write(), parents
                )
            ]
        repo.git("repack", "-d", "-q")
    repo.git("reset", "-q", "--hard")
    return repo


_PEAK_RSS = """
import resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], input=sys.stdin.buffer.read(), capture_output=True)
sys.stderr.buffer.write(proc.stderr)
print(proc.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _apply_measured(repo: Repo, patch: str) -> tuple[int, int]:
    """Apply ``patch`` with the CLI in its own process: its exit code and peak RSS in bytes."""
    measured = subprocess.run(
        [
            sys.executable,
            "-c",
            _PEAK_RSS,
            sys.executable,
            "-m",
            "applyonce",
            "apply",
            "-",
            "--repo",
            str(repo.path),
        ],
        input=patch.encode(),
        capture_output=True,
        check=True,
        env=os.environ.copy(),
    )
    code, peak_kib = measured.stdout.split()
    return int(code), int(peak_kib) * 1024


def test_a_one_line_call_leaves_gits_packs_untouched_and_stays_small(tmp_path: Path) -> None:
    # 8 packs of one size tier, 2 MiB on disk, 60 MiB inflated: main merged them (and held every
    # object in memory to do it).
    repo = _repo_with_git_packs(tmp_path / "repo", packs=8, versions=25, lines=6000)
    before = _pack_files(repo)
    assert len(before) == 16
    code, peak = _apply_measured(repo, ONE_LINE)
    assert code == 0
    assert peak < 100 << 20, f"peak RSS {peak >> 20} MiB"
    after = _pack_files(repo)
    assert {name: after.get(name) for name in before} == before  # same names, same bytes
    assert repo.git("fsck", "--strict", "--no-dangling") == ""
    assert repo.git("show", "HEAD:one.txt") == "one line\n"


def test_small_git_packs_are_never_merged_with_applyonces(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    for i in range(MERGE_AT):  # small packs of git's own, as many fetches leave
        (repo.path / f"g{i}.txt").write_text(f"{i}\n")
        repo.git("add", "-A")
        repo.git("commit", "-q", "-m", f"g{i}")
        repo.git("repack", "-d", "-q")
    gits = _pack_files(repo)
    executor = Executor(repo.path)
    for i in range(2 * MERGE_AT):
        patch = f"*** Begin Patch\n*** Add File: notes/n{i}.txt\n+note {i}\n*** End Patch\n"
        assert executor.apply(patch).status == "committed"
    executor.close()
    after = _pack_files(repo)
    assert {name: after.get(name) for name in gits} == gits
    ours = set(after) - set(gits)
    assert 0 < len(ours) < 2 * MERGE_AT  # applyonce's own were merged, by tiers
    assert repo.git("fsck", "--strict", "--no-dangling") == ""
    for pack in ours:
        if pack.endswith(".idx"):
            verified = repo.git("verify-pack", "-v", str(repo.path / ".git/objects/pack" / pack))
            assert (
                "chain length" not in verified
            )  # whole objects: nothing was inflated or deltified


def test_a_merge_copies_entries_without_holding_objects(tmp_path: Path) -> None:
    # Merged packs are byte copies of the entries: the merged pack's entries are the very bytes
    # of the packs it replaced (same CRCs), each object once.
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    objects_dir = repo.path / ".git" / "objects"
    registry = tmp_path / "registry"
    blobs = []
    for i in range(MERGE_AT):
        data = f"blob {i}\n".encode() * 50
        oid = (
            subprocess.run(
                ["git", "-C", str(repo.path), "hash-object", "--stdin"],
                input=data,
                capture_output=True,
                check=True,
            )
            .stdout.decode()
            .strip()
        )
        blobs.append(oid)
        # The first object in every pack too: a merge stores it once.
        write_pack(
            objects_dir, [(oid, 3, data), (blobs[0], 3, b"blob 0\n" * 50)], registry=registry
        )
    assert merge_small_packs(objects_dir, registry) == MERGE_AT
    [merged] = [p for p in (objects_dir / "pack").glob("*.idx")]
    assert sorted(pack_ids(merged)) == sorted(blobs)
    assert subprocess.run(["git", "verify-pack", str(merged)], check=False).returncode == 0
    assert sorted(p.name for p in registry.iterdir() if p.name.startswith("pack-")) == [merged.stem]
