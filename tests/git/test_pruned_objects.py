"""Objects a concurrent ``git gc --prune=now`` would remove before the publish are in the call's
kept packs, or written again from memory, or the call is rejected as retryable: never a branch
pointing at missing objects.

A call's blobs and tree are written before its checks run and stay unreachable until the publish,
so a check that prunes is the real race, run by real git processes.
"""

from __future__ import annotations

import subprocess

import orjson
import pytest

from tests.conftest import APP_PATCH, NEW_FILE_PATCH, UTIL_PATCH, Repo, apply, run_cli


def _assert_clean(repo: Repo) -> None:
    fsck = subprocess.run(
        ["git", "-C", str(repo.path), "fsck", "--strict", "--no-dangling"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert fsck.returncode == 0 and fsck.stdout + fsck.stderr == "", fsck


@pytest.mark.parametrize("prune", ["gc -q --prune=now", "prune --expire=now"])
def test_objects_pruned_during_the_check_are_written_again(repo: Repo, prune: str) -> None:
    result = apply(repo, APP_PATCH, "--check", f"git -C {repo.path} {prune}")
    assert result.returncode == 0, result
    _assert_clean(repo)
    assert repo.git("show", "HEAD:tests/test_app.py").startswith("from src.app import greet")
    assert repo.commit_count() == 2


def test_a_scratch_checkout_whose_last_tree_was_pruned_is_checked_out_afresh(repo: Repo) -> None:
    # A rejected call leaves its tree in the scratch checkout's HEAD, and only there: a prune
    # removes it. The next call's check must still run.
    assert apply(repo, NEW_FILE_PATCH, "--check", "false").returncode == 1
    repo.git("gc", "-q", "--prune=now")
    result = apply(repo, UTIL_PATCH, "--check", "grep -q 'VALUE = 2' src/util.py")
    assert result.returncode == 0, result
    _assert_clean(repo)


def test_an_unreachable_object_a_call_reuses_is_kept_in_its_pack(repo: Repo) -> None:
    # The new file's blob is already in the repository, loose and unreachable (someone ran
    # 'git hash-object -w'): the call reuses it, and still writes it into its own kept pack.
    blob = (
        subprocess.run(
            ["git", "-C", str(repo.path), "hash-object", "-w", "--stdin"],
            input=b"new\n",
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    killed = apply(repo, NEW_FILE_PATCH, env={"APPLYONCE_FAULT": "after-commit-object"})
    assert killed.returncode == -9
    repo.git("prune", "--expire=now")  # the loose copy goes; the kept pack stays
    assert not (repo.path / ".git" / "objects" / blob[:2] / blob[2:]).exists()
    recovered = run_cli("recover", "--repo", str(repo.path), "--json")
    assert recovered.returncode == 0, recovered
    [outcome] = orjson.loads(recovered.stdout)["outcomes"]
    assert outcome["now"] == "committed"
    assert repo.git("rev-parse", "HEAD:new.txt").strip() == blob
    _assert_clean(repo)


def test_recover_never_publishes_a_commit_whose_objects_were_removed(repo: Repo) -> None:
    head = repo.head()
    # With a check, the staged blobs and trees reach the disk (one pack) before the commit
    # (another pack).
    killed = apply(
        repo, NEW_FILE_PATCH, "--check", "true", env={"APPLYONCE_FAULT": "after-commit-object"}
    )
    assert killed.returncode == -9
    pack_dir = repo.path / ".git" / "objects" / "pack"
    staged = [
        idx
        for idx in pack_dir.glob("*.idx")
        if idx.with_suffix(".keep").exists()
        and "commit" not in repo.git("verify-pack", "-v", str(idx))
    ]
    assert len(staged) == 1
    for suffix in (".idx", ".pack", ".keep"):  # removed by hand: no git housekeeping does
        staged[0].with_suffix(suffix).unlink()
    recovered = run_cli("recover", "--repo", str(repo.path), "--json")
    assert recovered.returncode == 0, recovered
    assert repo.head() == head  # not rolled forward onto a broken commit
    [outcome] = orjson.loads(recovered.stdout)["outcomes"]
    assert outcome["now"] == "rejected" and "retryable" in outcome["why"]
    _assert_clean(repo)
    again = apply(repo, NEW_FILE_PATCH)  # retryable: it runs again, and lands once
    assert again.returncode == 0, again
    assert repo.commit_count() == 2 and len(repo.call_ids()) == 1
    _assert_clean(repo)
