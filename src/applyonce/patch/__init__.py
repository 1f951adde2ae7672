"""The pure patch layer: formats, the neutral model, and the appliers. No disk, no Git.

Formats (``parse(text, format)``):

    codex      Codex ``apply_patch``: ``*** Begin Patch`` … ``*** End Patch``      (codex.py)
    unified    ``git diff`` / ``diff -u`` output                                 (unified.py)
    edit-json  text-editor commands (create, str_replace, insert, delete) as JSON (editjson.py)
    search-replace  SEARCH/REPLACE blocks (Aider, Cline, Roo)                 (searchreplace.py)

``auto`` detects the format from the text, in this order: a first line ``*** Begin Patch`` (with or
without a wrapper: a markdown fence, a heredoc, ``cd DIR &&``; ``wrappers.py``) is Codex; a
``<<<<<<< SEARCH`` line, or a ``------- SEARCH`` line in a text without a ``diff --git`` or
``@@ -N +N @@`` line, is SEARCH/REPLACE blocks (tried before unified diffs: a diff's lines are
prefixed, so it has no bare ``<<<<<<< SEARCH`` line, while a block may hold a ``@@ -`` line of a
file it edits); a line starting ``diff --git ``, a ``--- `` line followed by a ``+++ `` line, or a
line starting ``@@ -`` is a unified diff; text starting with ``[`` or ``{`` is edit-json. A text
in none of them is refused with what it looked like and what it lacks (``diagnose.py``; a usage
error). Every format parses into the same model (``model.py``), so an addition, a deletion or a
pure rename has one identity whichever format spelled it (an update in a unified diff also
carries its line numbers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, cast

from applyonce.patch.apply import apply_hunks
from applyonce.patch.codex import PatchSyntaxError, looks_like_codex, parse_codex, render_codex
from applyonce.patch.diagnose import UnrecognisedFormatError, unrecognised
from applyonce.patch.edit import EditCommandError, apply_edit_commands
from applyonce.patch.editjson import looks_like_edit_json, parse_edit_json
from applyonce.patch.limits import (
    LimitError,
    Limits,
    PatchTooLargeError,
    check_patch,
    check_patch_bytes,
    check_text_lines,
)
from applyonce.patch.match import BinaryFileError, HunkApplyError
from applyonce.patch.model import (
    AddFile,
    CopyFile,
    CreateCommand,
    DeleteCommand,
    DeleteFile,
    EditCommand,
    EditFile,
    Hunk,
    HunkLine,
    InsertCommand,
    MatchLevel,
    Patch,
    StrReplaceCommand,
    UpdateFile,
)
from applyonce.patch.searchreplace import looks_like_search_replace, parse_search_replace
from applyonce.patch.unified import (
    BinaryPatchError,
    UnsupportedModeError,
    looks_like_unified,
    parse_unified,
)

PatchFormat = Literal["auto", "codex", "unified", "edit-json", "search-replace"]
MAX_PATCH_BYTES = Limits().patch_bytes


# name -> (what it is called in messages, detector, parser, what the detector looks for)
_FORMATS: dict[str, tuple[str, Callable[[str], bool], Callable[[str], Patch], str]] = {
    "codex": (
        "codex apply_patch",
        looks_like_codex,
        parse_codex,
        "its first line must be '*** Begin Patch'",
    ),
    "search-replace": (
        "search/replace blocks",
        looks_like_search_replace,
        parse_search_replace,
        "it needs a '<<<<<<< SEARCH' line, a '=======' line and a '>>>>>>> REPLACE' line",
    ),
    "unified": (
        "unified diff",
        looks_like_unified,
        parse_unified,
        "it needs a 'diff --git a/PATH b/PATH' line, or '--- a/PATH' and '+++ b/PATH' lines",
    ),
    "edit-json": (
        "edit-json",
        looks_like_edit_json,
        parse_edit_json,
        "it must be a JSON list of text-editor commands",
    ),
}


def detect_format(text: str) -> str | None:
    """The format ``auto`` picks for ``text`` (see the module docstring), or None."""
    for name, (_label, looks_like, _parser, _shape) in _FORMATS.items():
        if looks_like(text):
            return name
    return None


def parse(text: str, format: PatchFormat = "auto", *, limits: Limits | None = None) -> Patch:
    """Parse patch text in ``format`` into the neutral :class:`Patch` model.

    Raises:
        PatchSyntaxError: the text is not a valid patch in that format.
        UnrecognisedFormatError: with ``auto``, the text is in no format (``diagnose.py``).
        BinaryPatchError, UnsupportedModeError: a unified diff with a change applyonce refuses.
        PatchTooLargeError: the text is over ``limits.patch_bytes`` (default 32 MiB).
        LimitError: more file operations than ``limits.files``, or a line over
            ``limits.line_bytes`` (``limits.py``).
    """
    limits = limits if limits is not None else Limits()
    check_patch_bytes(text, limits)
    if format == "auto":
        detected = detect_format(text)
        if detected is None:
            raise unrecognised(text)  # what it looked like, and what it lacks
        format = cast(PatchFormat, detected)
    elif format not in _FORMATS:
        raise PatchSyntaxError(
            f"unknown patch format {format!r}",
            hint="use auto, codex, unified, edit-json or search-replace",
        )
    else:
        label, looks_like, _parser, shape = _FORMATS[format]
        if not looks_like(text):
            raise PatchSyntaxError(
                f"the patch is not in the {label} format (tried: {label}); {shape}",
                hint="fix the patch, or use --format auto",
            )
    if format != "edit-json":
        # A line of a Codex patch or a diff is a line of a file, or a header: capped before it
        # is read. Edit-json holds its texts in JSON strings, one line for a whole file: their
        # lines are checked once parsed.
        check_text_lines(text, limits)
    patch = _FORMATS[format][2](text)
    check_patch(patch, limits)
    return patch


__all__ = [
    "AddFile",
    "BinaryFileError",
    "BinaryPatchError",
    "CopyFile",
    "CreateCommand",
    "DeleteCommand",
    "DeleteFile",
    "EditCommand",
    "EditCommandError",
    "EditFile",
    "Hunk",
    "HunkApplyError",
    "HunkLine",
    "InsertCommand",
    "LimitError",
    "Limits",
    "MatchLevel",
    "Patch",
    "PatchFormat",
    "PatchSyntaxError",
    "PatchTooLargeError",
    "StrReplaceCommand",
    "UnrecognisedFormatError",
    "UnsupportedModeError",
    "UpdateFile",
    "apply_edit_commands",
    "apply_hunks",
    "detect_format",
    "looks_like_codex",
    "looks_like_edit_json",
    "looks_like_search_replace",
    "looks_like_unified",
    "parse",
    "parse_codex",
    "parse_edit_json",
    "parse_search_replace",
    "parse_unified",
    "render_codex",
]
