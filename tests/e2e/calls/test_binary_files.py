"""A binary file already on the branch does not make every later patch refused."""

from __future__ import annotations

from tests.conftest import UTIL_PATCH, Repo, apply


def test_a_binary_file_on_the_branch_does_not_refuse_the_patch_for_ever(repo: Repo) -> None:
    """'binary-file' is stored for ever as 'the patch itself was refused, whatever the branch
    holds'. But here the patch is plain text: the *file on the branch* was binary. Once the tip
    moves and the file is text again, a repeat must judge the call again (as for
    hunk-mismatch), not return the stored rejection."""
    (repo.path / "src/util.py").write_bytes(b"VALUE = 1\n\0")
    repo.git("commit", "-q", "-am", "a NUL byte slipped in")
    first = apply(repo, UTIL_PATCH)
    assert first.returncode == 1, first.stderr
    (repo.path / "src/util.py").write_bytes(b"VALUE = 1\n")
    repo.git("commit", "-q", "-am", "fixed")
    again = apply(repo, UTIL_PATCH)
    assert again.returncode == 0, again.stderr
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
