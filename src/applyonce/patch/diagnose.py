"""What a text that is in no format looked like, and what it lacks (``parse(text, "auto")``).

When ``auto`` recognises no format, the refusal says what the text resembles and what is
missing, in one line with a hint, so an agent can fix its patch rather than guess: a Codex patch
without its ``*** Begin Patch`` line or with prose before it, a SEARCH/REPLACE block without the
file-name line before it, diff lines or a hunk without file headers, merge-conflict markers, an
empty text, or prose. The refusal is a usage error (exit 2): nothing is read, nothing written.

Pure: text in, an error out.
"""

from __future__ import annotations

import re

from applyonce.errors import EXIT_USAGE
from applyonce.patch.codex import ADD, BEGIN, DELETE, END, UPDATE, PatchSyntaxError

TRIED = "codex apply_patch, unified diff, edit-json"
_FORMATS_HINT = (
    "send a Codex patch ('*** Begin Patch'), a unified diff ('diff --git') or a JSON list of "
    "text-editor commands"
)
_SEARCH = re.compile(r"^\s*<{5,9} SEARCH\s*$")
_CONFLICT = re.compile(r"^<{7} \S|^={7}$|^>{7} \S")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


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
    search = next((i for i, line in enumerate(lines) if _SEARCH.match(line)), None)
    if search is not None:
        name = _name_before(lines, search)
        if name is None:
            return (
                "it looks like a SEARCH/REPLACE block, but the file-name line before "
                "'<<<<<<< SEARCH' is missing",
                "put the file's path on the line before '<<<<<<< SEARCH', or send a Codex patch",
            )
        return (
            f"it looks like a SEARCH/REPLACE block for {name[:60]}, a format not read here",
            "send a Codex patch ('*** Begin Patch') or a unified diff for the file",
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


def _name_before(lines: list[str], at: int) -> str | None:
    """The file-name line right before a ``<<<<<<< SEARCH`` line (an opening fence between
    them skipped), or None."""
    i = at - 1
    if i >= 0 and _FENCE.match(lines[i]):
        i -= 1
    if i < 0:
        return None
    name = lines[i].strip().strip("`*").strip()
    if not name or " " in name or name.endswith(":") or not re.search(r"[./\w]", name):
        return None
    return name
