"""``--idempotency-key``: the same key with the same args replays, with other args it is a
conflict, also after the ledger was lost."""

from __future__ import annotations

import shutil

from tests.conftest import NEW_FILE_PATCH as ADD
from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, apply


def test_idempotency_key_reused_with_other_args_is_a_conflict(repo: Repo) -> None:
    add = "*** Begin Patch\n*** Add File: notes.txt\n+note\n*** End Patch\n"
    other = "*** Begin Patch\n*** Add File: notes.txt\n+other\n*** End Patch\n"
    first = apply(repo, add, "--idempotency-key", "run7-step3")
    assert first.returncode == 0
    head = repo.head()
    again = apply(repo, add, "--idempotency-key", "run7-step3", "--attempt", "5")
    assert again.returncode == 0 and repo.head() == head  # same key, same args: replay
    clash = apply(repo, other, "--idempotency-key", "run7-step3")
    assert clash.returncode == 4
    assert clash.stderr.startswith("error: idempotency key 'run7-step3' was already used")
    assert clash.stderr.count("\n") == 1
    assert repo.head() == head
    assert "Idempotency-Key: run7-step3" in repo.git("log", "-1", "--format=%(trailers)")


def test_key_reused_after_lost_ledger_is_still_a_conflict(repo: Repo) -> None:
    assert apply(repo, ADD, "--idempotency-key", "K1").returncode == 0
    shutil.rmtree(repo.state_dir())
    head = repo.head()
    clash = apply(repo, PATCH, "--idempotency-key", "K1")
    assert clash.returncode == 4, clash.stderr
    assert "was already used" in clash.stderr
    assert repo.head() == head
