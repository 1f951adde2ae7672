"""Merged packs and a multi-pack-index (``git maintenance``'s
incremental-repack, ``git repack --write-midx``, Scalar).

``merge_small_packs`` deletes the packs it merged; when a multi-pack-index names them, git is left
with an index of packs that are gone: ``git multi-pack-index verify`` fails and ``git fsck`` reports
"failed to load pack".
"""

from __future__ import annotations

import subprocess

from tests.conftest import Repo, apply


def _add(repo: Repo, i: int) -> None:
    patch = f"*** Begin Patch\n*** Add File: f{i}.txt\n+{i}\n*** End Patch\n"
    result = apply(repo, patch, "--tool-call-id", f"c{i}")
    assert result.returncode == 0, result.stderr


def test_packs_a_multi_pack_index_names_are_not_merged_away(repo: Repo) -> None:
    for i in range(5):
        _add(repo, i)
    repo.git("repack", "-d", "-q")  # at least one pack, whatever the calls wrote
    repo.git("multi-pack-index", "write")
    for i in range(5, 12):  # enough one-call packs for a tier to be merged
        _add(repo, i)
    verify = subprocess.run(
        ["git", "-C", str(repo.path), "multi-pack-index", "verify"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verify.returncode == 0, verify.stderr
    fsck = subprocess.run(
        ["git", "-C", str(repo.path), "fsck", "--strict"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert fsck.returncode == 0 and "failed to load pack" not in fsck.stderr, fsck.stderr
