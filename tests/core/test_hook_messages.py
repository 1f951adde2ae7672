"""The commit message after the repository's message hooks edited it (core.hooks): git's cleanup,
and the call's trailer block last and intact whatever a hook did to it."""

from __future__ import annotations

import pytest

from applyonce.core.hooks import HookFailedError, cleanup, message_after_hooks
from applyonce.core.trailers import parse_trailers

CALL = "c" * 64
BLOCK = (
    f"Call-Id: {CALL}\nContract-Sha256: {'e' * 64}\nAttempt: 1\nTool: apply_patch\n"
    f"Tool-Version: applyonce-patch/2\nArgs-Sha256: {'a' * 64}\n"
)
BUILT = f"apply_patch: M a.py\n\nCo-authored-by: Ada <ada@example.com>\n{BLOCK}"


def after(edited: str) -> str:
    return message_after_hooks(BUILT, edited.encode(), call_id=CALL)


def test_a_reworded_subject_keeps_the_block_where_it_is() -> None:
    assert after("[OPS-1] " + BUILT) == "[OPS-1] " + BUILT


def test_cleanup_is_gits_whitespace_mode() -> None:
    assert cleanup("\n\nsubject  \n\n\n\nbody\t\n# kept\n\n") == "subject\n\nbody\n# kept\n"
    assert cleanup(" \n\n") == ""


def test_a_trailer_appended_after_the_block_goes_before_it_in_the_same_paragraph() -> None:
    # A hook that starts a paragraph of its own: the block joins it (as with git, the caller's
    # Co-authored-by is then a paragraph of the body).
    assert after(BUILT + "\nChange-Id: I1\n") == (
        f"apply_patch: M a.py\n\nCo-authored-by: Ada <ada@example.com>\n\nChange-Id: I1\n{BLOCK}"
    )
    assert after(BUILT + "Signed-off-by: B <b@x>\n") == (
        f"apply_patch: M a.py\n\nCo-authored-by: Ada <ada@example.com>\n"
        f"Signed-off-by: B <b@x>\n{BLOCK}"
    )


def test_a_dropped_block_is_appended_again_as_its_own_paragraph() -> None:
    assert after("reworded\n\nwith a body.\n") == f"reworded\n\nwith a body.\n\n{BLOCK}"
    assert after("reworded") == f"reworded\n\n{BLOCK}"


def test_a_hook_cannot_leave_a_call_id_of_its_own_in_the_trailers() -> None:
    forged = BUILT.replace(BLOCK, "") + "call-id: " + "f" * 64 + "\nTool: other\n"
    result = after(forged)
    trailers = parse_trailers(result.encode())
    assert trailers["Call-Id"] == CALL and trailers.all("Tool") == ["apply_patch"]
    assert result.endswith(BLOCK)


@pytest.mark.parametrize(
    ("edited", "words"),
    [
        ("", "left the commit message empty"),
        ("x\0y", "NUL byte"),
        (f"subject\n\n# ------------------------ >8 ------------------------\n{BLOCK}", "hides"),
    ],
)
def test_a_message_git_would_not_read_the_call_from_is_refused(edited: str, words: str) -> None:
    with pytest.raises(HookFailedError) as raised:
        after(edited)
    assert words in raised.value.message
    assert raised.value.exit_code == 1
