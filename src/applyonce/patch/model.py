"""The neutral patch model every input format parses into.

A patch is an ordered list of file operations. It says *what* should change, never how it was
spelled: two spellings of one change (CRLF patch text, a heredoc wrapper, padded markers) parse to
models with equal dumps (``model_dump()``; only where a hunk sat in the text differs, and that is
excluded), which is what makes the call identity stable (docs/design.md §3). That holds across
formats
where nothing but the spelling differs: a Codex ``Add File``, the ``git diff`` of that addition and
a text-editor ``create`` dump the same (so do deletions and pure renames), and so does a
SEARCH/REPLACE block with an empty SEARCH. An update in a unified diff carries its line numbers,
which a Codex update has not: where the context matches at several places they pick the place, so
they are part of the change; a SEARCH/REPLACE block is searched otherwise than a Codex hunk
(``Hunk.block``), so it is another change too.

Three kinds of fields:

* **the change** — dumped, part of the identity;
* **how to find or check it** (``Hunk.source_line``, ``EditCommand.index``,
  ``DeleteFile.expected``, ``refuse_existing``) — excluded from dumps: they check a precondition or
  word an error, and two spellings of one change may differ in them;
* **fields that only some formats use** (file modes, a missing final newline, a unified hunk's
  line numbers) — dumped only when
  set, so a patch that does not use them keeps the dump, and the identity, it had before they
  existed.
"""

from __future__ import annotations

import base64
import re
from enum import IntEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    model_serializer,
)

# Git file modes a patch may set on a regular file. ``None`` means "keep the file's mode" (new
# files: 100644).
FileMode = Literal["100644", "100755"]

# Unified diffs apply byte for byte, as ``git apply`` does, also to text that is not UTF-8: such
# bytes are carried in ``str`` as surrogate escapes (``errors="surrogateescape"``). JSON cannot
# hold those, so in a JSON dump (the call identity, the ledger) a text that has any is written as
# ``{"utf8b": <base64 of its bytes>}`` instead: a plain text is never an object, so the dump is
# still one-to-one, and a UTF-8 text dumps as before.
_SURROGATE = re.compile("[\udc80-\udcff]")


def has_raw_bytes(text: str) -> bool:
    """Does ``text`` carry bytes that are not UTF-8 (surrogate escapes)?"""
    return _SURROGATE.search(text) is not None


def raw_to_base64(text: str) -> str:
    """The base64 of ``text``'s bytes, surrogate escapes included."""
    return base64.b64encode(text.encode("utf-8", "surrogateescape")).decode("ascii")


def raw_from_base64(data: str) -> str:
    """The inverse of :func:`raw_to_base64`.

    Raises:
        ValueError: not base64 (nor a string: a record read back may hold anything).
    """
    if not isinstance(data, str):
        raise ValueError("base64 text must be a string")
    return base64.b64decode(data, validate=True).decode("utf-8", "surrogateescape")


def text_to_json(text: str) -> str | dict[str, str]:
    """``text`` as JSON can hold it (see above)."""
    return {"utf8b": raw_to_base64(text)} if has_raw_bytes(text) else text


def text_from_json(value: Any) -> Any:
    """The inverse of :func:`text_to_json` (anything else is left to validation)."""
    if isinstance(value, dict) and set(value) == {"utf8b"} and isinstance(value["utf8b"], str):
        return raw_from_base64(value["utf8b"])
    return value


Text = Annotated[
    str, BeforeValidator(text_from_json), PlainSerializer(text_to_json, when_used="json")
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Fields left out of a dump while they hold their default (see the module docstring).
    _dumped_only_when_set: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _dump_without_unset_optional_fields(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        for name in self._dumped_only_when_set:
            if getattr(self, name) == type(self).model_fields[name].default:
                data.pop(name, None)
        return data


class HunkLine(_Frozen):
    """One line of a hunk: ``" "`` keeps it, ``"-"`` removes it, ``"+"`` adds it."""

    kind: Literal[" ", "-", "+"]
    text: Text


class Hunk(_Frozen):
    """A contiguous change inside one file.

    ``anchors`` are the ``@@ <context>`` lines before the hunk: each narrows the search to the text
    after the first line that matches it. ``end_of_file`` pins the hunk to the end of the file.

    ``old_no_final_newline`` / ``new_no_final_newline``: the hunk's last old / new line is the
    file's last line and has no line ending (unified diffs' ``\\ No newline at end of file``).

    ``old_start`` and ``new_start`` are a unified diff's line numbers (``@@ -old_start,…
    +new_start,… @@``). When set, the hunk is positioned the way ``git apply`` positions it (see
    ``apply.py``). Where the hunk's lines match at several places they decide which one is meant,
    so they are part of the change and of the call's identity (dumped when set): two diffs that
    differ only in their line numbers are two calls, and a Codex update (no line numbers) and the
    ``git diff`` of it are two calls too (adds, deletes and pure renames stay one).

    ``block``: a SEARCH/REPLACE block (``searchreplace.py``): its old lines are searched in the
    whole file as the blocks before it left it and must be found exactly once. That is another
    meaning than a Codex hunk's (searched after the hunk before it), so it is part of the change
    and of the identity (dumped when set): a block and the Codex hunk of the same lines are two
    calls.
    """

    _dumped_only_when_set = frozenset(
        {"old_no_final_newline", "new_no_final_newline", "old_start", "new_start", "block"}
    )

    anchors: tuple[str, ...] = ()
    lines: tuple[HunkLine, ...] = ()
    end_of_file: bool = False
    old_no_final_newline: bool = False
    new_no_final_newline: bool = False
    # Where the hunk starts in the patch text, for error messages. Not part of the change, so it is
    # excluded from dumps and hence from the call identity.
    source_line: int | None = Field(default=None, exclude=True, repr=False)
    # Codex hunks of ``+`` lines only: how many empty lines of the patch text followed them and were
    # read as a separator, not as empty context lines. The applier weighs both readings (see
    # ``apply.py``); the change is the same patch text either way, so this is not dumped.
    separator_blanks: int = Field(default=0, ge=0, exclude=True, repr=False)
    old_start: int | None = Field(default=None, ge=0, repr=False)
    new_start: int | None = Field(default=None, ge=0, repr=False)
    block: bool = Field(default=False, repr=False)

    @property
    def old_lines(self) -> list[str]:
        """The lines the hunk expects to find (context and removed lines)."""
        return [line.text for line in self.lines if line.kind != "+"]

    @property
    def new_lines(self) -> list[str]:
        """The lines the hunk leaves behind (context and added lines)."""
        return [line.text for line in self.lines if line.kind != "-"]


# ``written_as`` (unified diffs, excluded from dumps): the old name as the diff wrote it, one
# component less stripped, so that a refusal of a missing path can say what the name was read
# from (a ``--no-prefix`` diff loses its first directory, as in ``git apply``). Words only.
# ``refuse_existing``: a precondition (excluded from dumps, see above): the path an operation
# creates must not exist, as ``git apply`` requires of a diff's new file and of a rename's
# destination; every format's parser sets it (a Codex ``Add File`` or ``Move to``, a text-editor
# ``create``: never an overwrite by surprise). It can only refuse an operation, never change what
# it writes, so two spellings of one change stay one call.


class AddFile(_Frozen):
    """Create ``path`` with exactly ``content`` (an existing file is replaced, keeping its mode
    unless ``mode`` is given; with ``refuse_existing``, an existing path refuses the patch)."""

    _dumped_only_when_set = frozenset({"mode"})

    op: Literal["add"] = "add"
    path: str
    content: Text
    mode: FileMode | None = None
    refuse_existing: bool = Field(default=False, exclude=True, repr=False)


class DeleteFile(_Frozen):
    """Remove the file ``path``.

    ``expected`` (unified diffs: the ``-`` lines of a deletion) is a precondition: the file must
    still hold exactly those lines, as ``git apply`` checks. It can only refuse a deletion, never
    change what is deleted, so it is excluded from dumps: a Codex ``Delete File`` and the ``git
    diff`` of that deletion are one call.
    """

    op: Literal["delete"] = "delete"
    path: str
    expected: tuple[Hunk, ...] | None = Field(default=None, exclude=True, repr=False)
    written_as: str | None = Field(default=None, exclude=True, repr=False)


class UpdateFile(_Frozen):
    """Change ``path`` by ``hunks``, rename it to ``move_to`` and set its ``mode``, if given
    (``refuse_existing``: a ``move_to`` that exists refuses the patch; else it is replaced)."""

    _dumped_only_when_set = frozenset({"mode"})

    op: Literal["update"] = "update"
    path: str
    move_to: str | None = None
    hunks: tuple[Hunk, ...] = ()
    mode: FileMode | None = None
    refuse_existing: bool = Field(default=False, exclude=True, repr=False)
    written_as: str | None = Field(default=None, exclude=True, repr=False)


class CopyFile(_Frozen):
    """Write ``copy_to`` as a copy of ``path`` changed by ``hunks``; ``path`` itself is only read
    (so another operation of the same patch may change it: every operation reads the base).
    ``copy_to`` must not exist (only unified diffs copy, and ``git apply`` refuses that)."""

    _dumped_only_when_set = frozenset({"mode"})

    op: Literal["copy"] = "copy"
    path: str
    copy_to: str
    hunks: tuple[Hunk, ...] = ()
    mode: FileMode | None = None


class _EditCommand(_Frozen):
    # The command's position in the list it came from (0-based), for error messages only.
    index: int | None = Field(default=None, exclude=True, repr=False)


class CreateCommand(_EditCommand):
    """Make the file exactly ``file_text`` (replacing what was there)."""

    command: Literal["create"] = "create"
    file_text: str


class StrReplaceCommand(_EditCommand):
    """Replace the one occurrence of ``old_str`` (any substring, not only whole lines)."""

    command: Literal["str_replace"] = "str_replace"
    old_str: str = Field(min_length=1)
    new_str: str = ""


class InsertCommand(_EditCommand):
    """Insert ``insert_text`` as whole lines after line ``insert_line`` (0: at the top)."""

    command: Literal["insert"] = "insert"
    insert_line: int = Field(ge=0)
    insert_text: str = Field(min_length=1)


class DeleteCommand(_EditCommand):
    """Remove the file."""

    command: Literal["delete"] = "delete"


EditCommand = Annotated[
    CreateCommand | StrReplaceCommand | InsertCommand | DeleteCommand,
    Field(discriminator="command"),
]


class EditFile(_Frozen):
    """Text-editor commands on one file, applied in order, each to the previous one's result."""

    op: Literal["edit"] = "edit"
    path: str
    commands: tuple[EditCommand, ...] = Field(min_length=1)


FileOp = Annotated[
    AddFile | DeleteFile | UpdateFile | CopyFile | EditFile, Field(discriminator="op")
]


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
            elif isinstance(op, CopyFile):
                seen[op.copy_to] = None
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
