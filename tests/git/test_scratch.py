"""The scratch checkout the checks run in starts clean for every call."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import NEW_FILE_PATCH as ADD
from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, apply


def test_scratch_checkout_drops_files_left_by_earlier_checks(repo: Repo) -> None:
    assert apply(repo, PATCH, "--check", "touch leftover.txt").returncode == 0
    result = apply(repo, ADD, "--check", "test ! -e leftover.txt")
    assert result.returncode == 0, result.stderr


def test_scratch_checkout_drops_ignored_build_output_of_earlier_checks(repo: Repo) -> None:
    # Call 1 adds a .gitignore for build/ and *.o, and its check leaves build output behind: an
    # ignored directory, an ignored file and an untracked file.
    ignore = "*** Begin Patch\n*** Add File: .gitignore\n+build/\n+*.o\n*** End Patch\n"
    make = "mkdir -p build/lib && echo x > build/lib/out.bin && echo x > main.o && echo x > stray"
    assert apply(repo, ignore, "--check", make).returncode == 0
    # Call 2's check sees exactly the staged tree: none of call 1's output.
    gone = "test ! -e build && test ! -e main.o && test ! -e stray && test -e .gitignore"
    result = apply(repo, PATCH, "--check", gone)
    assert result.returncode == 0, result.stdout + result.stderr
    # The ignored files were removed, not the tree: call 3 still finds what call 2 committed.
    result = apply(repo, ADD, "--check", "grep -q 'VALUE = 2' src/util.py && test ! -e build")
    assert result.returncode == 0, result.stdout + result.stderr


def test_scratch_update_leaves_unchanged_files_alone(repo: Repo, tmp_path: Path) -> None:
    # Cleaning removes only what is not in the tree: a file no call changed keeps its inode and
    # modification time from one call's checkout to the next (the update stays O(patch)).
    stamp = "stat -c '%i %Y' README.md >"
    assert apply(repo, PATCH, "--check", f"{stamp} {tmp_path}/first && sleep 1.1").returncode == 0
    assert apply(repo, ADD, "--check", f"{stamp} {tmp_path}/second").returncode == 0
    assert (tmp_path / "first").read_text() == (tmp_path / "second").read_text()
