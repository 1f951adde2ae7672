"""The neutral patch model every input format parses into.

A patch is an ordered list of file operations. It says *what* should change, never how it was
spelled: two spellings of one change (CRLF patch text, a heredoc wrapper, padded markers) parse to
models with equal dumps (``model_dump()``; only where a hunk sat in the text differs, and that is
excluded), which is what makes the call identity stable (DESIGN §3).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class HunkLine(_Frozen):
    """One line of a hunk: ``" "`` keeps it, ``"-"`` removes it, ``"+"`` adds it."""

    kind: Literal[" ", "-", "+"]
    text: str


class Hunk(_Frozen):
    """A contiguous change inside one file.

    ``anchors`` are the ``@@ <context>`` lines before the hunk: each narrows the search to the text
    after the first line that matches it. ``end_of_file`` pins the hunk to the end of the file.
    """

    anchors: tuple[str, ...] = ()
    lines: tuple[HunkLine, ...] = ()
    end_of_file: bool = False
    # Where the hunk starts in the patch text, for error messages. Not part of the change, so it is
    # excluded from dumps and hence from the call identity.
    source_line: int | None = Field(default=None, exclude=True, repr=False)

    @property
    def old_lines(self) -> list[str]:
        """The lines the hunk expects to find (context and removed lines)."""
        return [line.text for line in self.lines if line.kind != "+"]

    @property
    def new_lines(self) -> list[str]:
        """The lines the hunk leaves behind (context and added lines)."""
        return [line.text for line in self.lines if line.kind != "-"]


class AddFile(_Frozen):
    """Create ``path`` with ``content`` (text; lines end with ``\\n``)."""

    op: Literal["add"] = "add"
    path: str
    content: str


class DeleteFile(_Frozen):
    """Remove the file ``path``."""

    op: Literal["delete"] = "delete"
    path: str


class UpdateFile(_Frozen):
    """Change ``path`` by ``hunks``, and rename it to ``move_to`` if given."""

    op: Literal["update"] = "update"
    path: str
    move_to: str | None = None
    hunks: tuple[Hunk, ...] = ()


FileOp = Annotated[AddFile | DeleteFile | UpdateFile, Field(discriminator="op")]


class Patch(_Frozen):
    """An ordered, multi-file patch."""

    operations: tuple[FileOp, ...]

    def touched_paths(self) -> list[str]:
        """Every path the patch reads or writes, in order, without repeats."""
        seen: dict[str, None] = {}
        for op in self.operations:
            seen[op.path] = None
            if isinstance(op, UpdateFile) and op.move_to is not None:
                seen[op.move_to] = None
        return list(seen)


class MatchLevel(IntEnum):
    """How loosely a hunk's expected lines had to be compared to be found (the matching ladder)."""

    EXACT = 0
    RSTRIP = 1  # trailing whitespace ignored
    STRIP = 2  # leading and trailing whitespace ignored
    UNICODE = 3  # and typographic punctuation folded to ASCII

    @property
    def label(self) -> str:
        return self.name.lower()
