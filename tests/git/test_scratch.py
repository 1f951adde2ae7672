"""The scratch checkout the checks run in starts clean for every call."""

from __future__ import annotations

from tests.conftest import NEW_FILE_PATCH as ADD
from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, apply


def test_scratch_checkout_drops_files_left_by_earlier_checks(repo: Repo) -> None:
    assert apply(repo, PATCH, "--check", "touch leftover.txt").returncode == 0
    result = apply(repo, ADD, "--check", "test ! -e leftover.txt")
    assert result.returncode == 0, result.stderr
