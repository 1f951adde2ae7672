"""A text in no format is refused with what it looked like and what it lacks (``diagnose.py``),
one line with a hint, a usage error; a Codex patch that is cut off, or has text after its end,
and a unified hunk without file headers say so."""

from __future__ import annotations

import pytest

from applyonce.errors import EXIT_USAGE
from applyonce.patch import PatchSyntaxError, UnrecognisedFormatError, parse

NOT_RECOGNISED = (
    "the patch format was not recognised (tried: codex apply_patch, search/replace blocks, unified"
    " diff, edit-json): "
)


@pytest.mark.parametrize(
    ("text", "looked", "hint"),
    [
        ("", "the text is empty", "send the patch itself"),
        (
            "please fix the bug\n",
            "it looks like prose or code, not a patch (it starts 'please fix the bug')",
            "send a Codex patch ('*** Begin Patch'), SEARCH/REPLACE blocks (a file's path, then"
            " '<<<<<<< SEARCH'), a unified diff ('diff --git') or a JSON list of text-editor"
            " commands",
        ),
        (
            "Sure, here you go:\n*** Begin Patch\n*** Delete File: a\n*** End Patch\n",
            "it looks like a Codex patch, but text comes before '*** Begin Patch' ('Sure, here "
            "you go:')",
            "send the patch alone, from '*** Begin Patch' to '*** End Patch' (or inside a ``` "
            "fence)",
        ),
        (
            "*** Update File: a.py\n@@\n-x\n+y\n*** End Patch\n",
            "it looks like a Codex patch, but its first line '*** Begin Patch' is missing",
            "start the patch with a line '*** Begin Patch' and end it with '*** End Patch'",
        ),
        (
            "<<<<<<< HEAD\nx = 1\n=======\nx = 2\n>>>>>>> topic\n",
            "it looks like merge-conflict markers ('<<<<<<<', '=======', '>>>>>>>'), not a patch",
            "resolve the conflict in the file, then send the change as a patch",
        ),
        (
            "@@ def f():\n-    return 1\n+    return 2\n",
            "it looks like a Codex hunk ('@@'), but the '*** Begin Patch' and "
            "'*** Update File: PATH' lines before it are missing",
            "send '*** Begin Patch', '*** Update File: PATH', the hunk, then '*** End Patch'",
        ),
        (
            " def f():\n-    return 1\n+    return 2\n",
            "it looks like diff lines ('+'/'-') without the headers that name the file "
            "('--- a/PATH', '+++ b/PATH', '@@ -START,COUNT +START,COUNT @@')",
            "send the whole diff as 'git diff' writes it, or a Codex patch",
        ),
    ],
    ids=[
        "empty",
        "prose",
        "prose-before-codex",
        "codex-without-begin",
        "conflict-markers",
        "codex-hunk-alone",
        "diff-lines-alone",
    ],
)
def test_an_unrecognised_text_says_what_it_looked_like(text: str, looked: str, hint: str) -> None:
    with pytest.raises(UnrecognisedFormatError) as info:
        parse(text)
    error = info.value
    assert error.message == NOT_RECOGNISED + looked
    assert error.hint == hint
    assert error.kind == "patch-format" and error.exit_code == EXIT_USAGE
    assert "\n" not in error.one_line()


@pytest.mark.parametrize(
    ("text", "message", "hint"),
    [
        (
            "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n",
            "patch line 5: the last line must be '*** End Patch', and the patch has none: it "
            "looks cut off",
            "send the whole patch, ending with a line '*** End Patch'",
        ),
        (
            "*** Begin Patch\n*** Delete File: a\n*** End Patch\n\nDone! Let me know.\n",
            "patch line 5: the last line must be '*** End Patch'; text follows it ('Done! Let me "
            "know.')",
            "send the patch alone, leaving out what comes after '*** End Patch'",
        ),
    ],
    ids=["cut-off", "text-after-end"],
)
def test_a_codex_patch_without_its_end_says_which(text: str, message: str, hint: str) -> None:
    with pytest.raises(PatchSyntaxError) as info:
        parse(text)
    assert (info.value.message, info.value.hint) == (message, hint)


def test_a_search_replace_block_without_its_file_name_says_so() -> None:
    """Blocks are a format of their own: one without the file-name line before it is the block
    parser's refusal, naming what is missing."""
    with pytest.raises(PatchSyntaxError) as info:
        parse("```\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```\n")
    assert "the block has no file name" in info.value.message
    assert info.value.hint == "put the file's path alone on the line before '<<<<<<< SEARCH'"
