"""What a text that is in no format looked like, and what it lacks (``parse(text, "auto")``).

When ``auto`` recognises no format, the refusal says what the text resembles and what is missing, in
one line with a hint, so an agent can fix its patch rather than guess: a Codex patch without its
``*** Begin Patch`` line or with prose before it, diff lines or a hunk without file headers,
merge-conflict markers, an empty text, or prose (a SEARCH/REPLACE block without its file-name line
is the block parser's to say, ``searchreplace.py``). The refusal is a usage error (exit 2): nothing
is read, nothing written.

Pure: text in, an error out.
"""

from __future__ import annotations

import re

from applyonce.errors import EXIT_USAGE
from applyonce.patch.codex import ADD, BEGIN, DELETE, END, UPDATE, PatchSyntaxError

TRIED = "codex apply_patch, search/replace blocks, unified diff, edit-json"
_FORMATS_HINT = (
    "send a Codex patch ('*** Begin Patch'), SEARCH/REPLACE blocks (a file's path, then"
    " '<<<<<<< SEARCH'), a unified diff ('diff --git') or a JSON list of text-editor commands"
)
_CONFLICT = re.compile(r"^<{7} \S|^={7}$|^>{7} \S")


class UnrecognisedFormatError(PatchSyntaxError):
    """``auto`` found no patch format in the text (a usage error: the input is not a patch)."""

    kind = "patch-format"
    exit_code = EXIT_USAGE
    default_hint = _FORMATS_HINT


def unrecognised(text: str) -> UnrecognisedFormatError:
    """The refusal for ``text``, in which ``auto`` recognised no format."""
    looked, hint = _describe(text.replace("\r\n", "\n").split("\n"))
    return UnrecognisedFormatError(
        f"the patch format was not recognised (tried: {TRIED}): {looked}", hint=hint
    )


def _describe(lines: list[str]) -> tuple[str, str]:
    stripped = [line.strip() for line in lines]
    nonblank = [line for line in stripped if line]
    if not nonblank:
        return "the text is empty", "send the patch itself"
    if BEGIN in stripped:
        # Not the first line, or auto would have read it as a Codex patch.
        return (
            f"it looks like a Codex patch, but text comes before '{BEGIN}' ({nonblank[0][:40]!r})",
            f"send the patch alone, from '{BEGIN}' to '{END}' (or inside a ``` fence)",
        )
    if any(line.startswith((ADD, DELETE, UPDATE)) for line in stripped):
        return (
            f"it looks like a Codex patch, but its first line '{BEGIN}' is missing",
            f"start the patch with a line '{BEGIN}' and end it with '{END}'",
        )
    if any(_CONFLICT.match(line) for line in lines):
        return (
            "it looks like merge-conflict markers ('<<<<<<<', '=======', '>>>>>>>'), not a patch",
            "resolve the conflict in the file, then send the change as a patch",
        )
    if any(line.startswith("@@") for line in lines):
        return (
            "it looks like a Codex hunk ('@@'), but the '*** Begin Patch' and "
            "'*** Update File: PATH' lines before it are missing",
            f"send '{BEGIN}', '*** Update File: PATH', the hunk, then '{END}'",
        )
    if lines[0].startswith(("--- ", "+++ ")) or sum(
        line.startswith(("+", "-")) for line in nonblank
    ) * 2 > len(nonblank):
        return (
            "it looks like diff lines ('+'/'-') without the headers that name the file "
            "('--- a/PATH', '+++ b/PATH', '@@ -START,COUNT +START,COUNT @@')",
            "send the whole diff as 'git diff' writes it, or a Codex patch",
        )
    return f"it looks like prose or code, not a patch (it starts {nonblank[0][:40]!r})", (
        _FORMATS_HINT
    )
