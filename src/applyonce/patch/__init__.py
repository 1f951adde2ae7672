"""The pure patch layer: formats, the neutral model, and the hunk applier. No disk, no Git."""

from __future__ import annotations

from typing import Literal

from applyonce.errors import ApplyOnceError
from applyonce.patch.apply import BinaryFileError, HunkApplyError, apply_hunks
from applyonce.patch.codex import PatchSyntaxError, looks_like_codex, parse_codex, render_codex
from applyonce.patch.model import AddFile, DeleteFile, Hunk, HunkLine, MatchLevel, Patch, UpdateFile

PatchFormat = Literal["auto", "codex", "unified", "edit-json"]
MAX_PATCH_BYTES = 32 * 1024 * 1024


class PatchTooLargeError(ApplyOnceError):
    kind = "patch-too-large"
    default_hint = "split the change into several smaller patches"


def parse(text: str, format: PatchFormat = "auto") -> Patch:
    """Parse patch text in ``format`` into the neutral :class:`Patch` model.

    Raises:
        PatchSyntaxError: the text is not a valid patch in that format.
        PatchTooLargeError: the text is over 32 MiB.
    """
    if len(text) > MAX_PATCH_BYTES:
        raise PatchTooLargeError(f"the patch is larger than {MAX_PATCH_BYTES // (1024 * 1024)} MiB")
    if format in ("auto", "codex"):
        if format == "auto" and not looks_like_codex(text):
            raise PatchSyntaxError(
                "the patch format was not recognised (tried: codex apply_patch)",
                hint="send a patch that starts with '*** Begin Patch'",
            )
        return parse_codex(text)
    raise PatchSyntaxError(
        f"patch format {format!r} is not supported yet", hint="use --format codex"
    )


__all__ = [
    "AddFile",
    "BinaryFileError",
    "DeleteFile",
    "Hunk",
    "HunkApplyError",
    "HunkLine",
    "MatchLevel",
    "Patch",
    "PatchFormat",
    "PatchSyntaxError",
    "UpdateFile",
    "apply_hunks",
    "parse",
    "parse_codex",
    "render_codex",
]
