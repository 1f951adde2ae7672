"""Apply text-editor commands to one file's bytes. Pure: bytes in, bytes out.

The commands (``model.EditCommand``) run in order, each on the result of the one before::

    create       the file, not there (or deleted by an earlier command), becomes exactly file_text;
                 a file that is there refuses it (never an overwrite by surprise)
    str_replace  old_str must occur exactly once in the file (as a substring: it may start or end
                 inside a line; overlapping occurrences count) and is replaced by new_str
    insert       insert_text goes in as whole lines after line insert_line; 0 is the top of the
                 file and the file's number of lines is its end
    delete       the file is removed (a later create may make it again)

Lines are counted as the hunk applier counts them: a final newline does not start another line,
so ``"a\\nb\\n"`` and ``"a\\nb"`` both have 2 lines and an empty file has none.

* **line endings** — inserted lines take the file's dominant line ending, and a file without a
  final newline keeps that state. In a file whose lines end with CRLF, an ``old_str`` written with
  plain ``\\n`` line ends (as models write them) matches the CRLF text, and ``new_str``'s line ends
  become CRLF too.
* **a UTF-8 byte order mark** is kept, and is invisible to ``old_str`` and line numbers.
* **binary or non-UTF-8 files are refused** by ``str_replace`` and ``insert``; ``create`` and
  ``delete`` never read the old content.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass

from applyonce.errors import ApplyOnceError
from applyonce.patch.match import BOM, decode_text
from applyonce.patch.model import (
    CreateCommand,
    DeleteCommand,
    EditCommand,
    InsertCommand,
    StrReplaceCommand,
)
from applyonce.patch.repair import ALREADY_HINT, text_not_found


class EditCommandError(ApplyOnceError):
    """A text-editor command does not fit the file it edits."""

    kind = "edit-command"
    default_hint = "re-read the file and send commands that match its current text"


def _label(command: EditCommand) -> str:
    where = f"commands[{command.index}] " if command.index is not None else ""
    return f"{where}({command.command})"


def apply_edit_commands(
    data: bytes | None, commands: Sequence[EditCommand], *, path: str
) -> bytes | None:
    """Run ``commands`` on ``data`` (None: the file is not there).

    Returns:
        The new bytes, or None when the commands leave no file.

    Raises:
        EditCommandError: a command does not fit (no such file, ``old_str`` found 0 or several
            times, ``insert_line`` out of range).
        BinaryFileError: the file to edit is not UTF-8 text.
    """
    raw = data  # decoded only when a command reads it
    # The file is held as text (for str_replace) or as lines (for insert), switching only when
    # the next command needs the other form: a run of inserts splits the file once and joins it
    # once, so it costs O(file + commands), not O(file) per command.
    text: str | None = None
    lines: _Lines | None = None
    for command in commands:
        if isinstance(command, CreateCommand):
            if raw is not None or text is not None or lines is not None:
                raise EditCommandError(
                    f"{path}: {_label(command)}: cannot create {path}: it already exists",
                    path=path,
                    command=command.index,
                    exists=True,
                    hint="change it with str_replace or insert instead, or delete it first",
                )
            raw, text, lines = None, command.file_text, None
            continue
        if isinstance(command, DeleteCommand):
            if raw is None and text is None and lines is None:
                raise EditCommandError(
                    f"{path}: {_label(command)}: cannot delete {path}: no such file",
                    path=path,
                    command=command.index,
                )
            raw, text, lines = None, None, None
            continue
        if raw is None and text is None and lines is None:
            raise EditCommandError(
                f"{path}: {_label(command)}: cannot edit {path}: no such file",
                path=path,
                command=command.index,
                hint="create the file first, or check the path",
            )
        if isinstance(command, StrReplaceCommand):
            if lines is not None:
                text, lines = lines.join(), None
            elif text is None:
                assert raw is not None
                text, raw = _Lines.of(raw, path).join(), None
            text = _str_replace(text, command, path)
            continue
        if lines is None:
            if text is not None:
                # As read back from the text, so a str_replace's new lines count as lines.
                lines, text = _Lines.of(text.encode("utf-8"), path), None
            else:
                assert raw is not None
                lines, raw = _Lines.of(raw, path), None
        lines.insert(command, path)
        if any(c in command.insert_text.replace("\r\n", "\n") for c in "\r\x00" + BOM):
            # Text that reads back otherwise than it was inserted (a lone CR ends a line, a NUL
            # makes the file binary, a BOM is set apart): read it back before the next command.
            text, lines = lines.join(), None
    if lines is not None:
        return lines.join().encode("utf-8")
    if text is None:
        return raw
    return text.encode("utf-8")


def _occurrences(text: str, needle: str) -> list[int]:
    found: list[int] = []
    at = text.find(needle)
    while at != -1:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def _str_replace(text: str, command: StrReplaceCommand, path: str) -> str:
    bom = BOM if text.startswith(BOM) else ""
    body = text[len(bom) :]
    old, new = command.old_str, command.new_str
    found = _occurrences(body, old)
    if not found and "\r\n" in body and "\n" in old and "\r" not in old:
        crlf_found = _occurrences(body, old.replace("\n", "\r\n"))
        if crlf_found:
            old, found = old.replace("\n", "\r\n"), crlf_found
            if "\r" not in new:
                new = new.replace("\n", "\r\n")
    if len(found) != 1:
        already, repair = text_not_found(body, old, new, path=path) if not found else ("", {})
        lines = [body.count("\n", 0, at) + 1 for at in found]
        where = f" (lines {', '.join(map(str, lines[:10]))}{', …' if len(lines) > 10 else ''})"
        raise EditCommandError(
            f"{path}: {_label(command)}: old_str occurs {len(found)} times"
            + (where if found else "")
            + "; it must occur exactly once"
            + already,
            path=path,
            command=command.index,
            count=len(found),
            lines=lines or None,
            hint=(
                ALREADY_HINT
                if already
                else "re-read the file and copy old_str from it exactly, whitespace included"
                if not found
                else "include more of the surrounding text in old_str so it matches one place"
            ),
            **repair,
        )
    at = found[0]
    return bom + body[:at] + new + body[at + len(old) :]


@dataclass
class _Lines:
    """A text file as lines; ``newline`` is its dominant line ending, which inserting lines
    (they take it) never changes."""

    bom: bool
    bodies: list[str]
    ends: list[str]
    newline: str

    @classmethod
    def of(cls, data: bytes, path: str) -> _Lines:
        split = decode_text(data, path=path)
        return cls(split.bom, split.bodies, split.ends, split.dominant_end())

    def join(self) -> str:
        return (BOM if self.bom else "") + "".join(map(operator.add, self.bodies, self.ends))

    def insert(self, command: InsertCommand, path: str) -> None:
        bodies, ends = self.bodies, self.ends
        count = len(bodies)
        if command.insert_line > count:
            raise EditCommandError(
                f"{path}: {_label(command)}: insert_line {command.insert_line} is out of range; "
                f"{path} has {count} lines (use 0 to {count})",
                path=path,
                command=command.index,
                insert_line=command.insert_line,
                line_count=count,
                hint="re-read the file and count its lines again",
            )
        newline = self.newline
        new_bodies = command.insert_text.replace("\r\n", "\n").split("\n")
        if command.insert_text.endswith(("\n", "\r\n")):
            new_bodies.pop()
        new_ends = [newline] * len(new_bodies)
        at = command.insert_line
        if at == count and count and not ends[-1]:
            # After a last line without an ending: it gets one, and the file still ends without.
            ends[-1] = newline
            new_ends[-1] = ""
        bodies[at:at] = new_bodies
        ends[at:at] = new_ends
