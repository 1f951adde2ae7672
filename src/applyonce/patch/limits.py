"""The caps on one patch (pure): its bytes, its files, its longest line, and the bytes it writes.

Work is linear in the input, and the input is capped (docs/design.md §11). A cap hit is caused by
the
patch alone: it is refused like the other bad patches (exit 1) before anything is written. The
caps are configured in git config, where a patch cannot change them (``flow/call/limits.py`` reads
them)::

    applyonce.maxPatchBytes   the patch text                        (default 32 MiB)
    applyonce.maxFiles        the file operations of one patch      (default 10,000)
    applyonce.maxLineBytes    one line of the patch or of a file    (default 1 MiB)
                              it writes
    applyonce.maxWriteBytes   the bytes the patch's files would     (default 256 MiB)
                              hold, copies and moves included
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from applyonce.errors import ApplyOnceError
from applyonce.patch.model import (
    AddFile,
    CopyFile,
    CreateCommand,
    DeleteFile,
    EditFile,
    InsertCommand,
    Patch,
    StrReplaceCommand,
    UpdateFile,
)

KIB = 1024
MIB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """The caps on one patch, in bytes (``files``: file operations)."""

    patch_bytes: int = 32 * MIB
    files: int = 10_000
    line_bytes: int = 1 * MIB
    write_bytes: int = 256 * MIB


# For re-reading what already passed the caps (a recorded call): no cap.
UNCAPPED = Limits(patch_bytes=2**62, files=2**62, line_bytes=2**62, write_bytes=2**62)

# Each cap's git config key, by field.
CONFIG_KEYS = {
    "patch_bytes": "applyonce.maxPatchBytes",
    "files": "applyonce.maxFiles",
    "line_bytes": "applyonce.maxLineBytes",
    "write_bytes": "applyonce.maxWriteBytes",
}


class LimitError(ApplyOnceError):
    """The patch is over one of the caps of :class:`Limits`."""

    kind = "limit-exceeded"


class PatchTooLargeError(LimitError):
    kind = "patch-too-large"


def show_bytes(count: int) -> str:
    """``count`` bytes as people write it: ``32 MiB``, ``512 KiB``, ``1000 bytes``."""
    for unit, size in (("GiB", 1024 * MIB), ("MiB", MIB), ("KiB", KIB)):
        if count >= size and count % size == 0:
            return f"{count // size} {unit}"
    return f"{count:,} bytes"


def _raise_hint(field: str) -> str:
    return f"or raise the limit: git config {CONFIG_KEYS[field]} N"


def check_patch_bytes(text: str, limits: Limits) -> None:
    """Refuse patch text over ``limits.patch_bytes`` (cheaply: a character is 1 to 4 bytes)."""
    cap = limits.patch_bytes
    if len(text) > cap // 4 and len(text.encode("utf-8", "surrogateescape")) > cap:
        raise PatchTooLargeError(
            f"the patch is larger than {show_bytes(cap)}",
            hint=f"split the change into several smaller patches, {_raise_hint('patch_bytes')}",
        )


def _line_error(where: str, limits: Limits) -> LimitError:
    return LimitError(
        f"{where} is longer than {show_bytes(limits.line_bytes)}",
        hint=f"send long content in a file of shorter lines, {_raise_hint('line_bytes')}",
    )


def _too_long(line: str, cap: int) -> bool:
    return len(line) > cap // 4 and len(line.encode("utf-8", "surrogateescape")) > cap


def check_text_lines(text: str, limits: Limits) -> None:
    """Refuse patch text with a line over ``limits.line_bytes``, before it is parsed (the parsers
    are linear in the patch, but a line's names and fields are read a few times)."""
    cap = limits.line_bytes
    if len(text) <= cap // 4:
        return
    for number, line in enumerate(text.split("\n"), start=1):
        if _too_long(line, cap):
            raise _line_error(f"patch line {number}", limits)


def _written_texts(patch: Patch) -> Iterator[tuple[str, str]]:
    """(path, text) of every text the patch puts into a file."""
    for op in patch.operations:
        if isinstance(op, AddFile):
            yield op.path, op.content
        elif isinstance(op, UpdateFile | CopyFile):
            for hunk in op.hunks:
                yield from ((op.path, line.text) for line in hunk.lines)
        elif isinstance(op, EditFile):
            for command in op.commands:
                if isinstance(command, CreateCommand):
                    yield op.path, command.file_text
                elif isinstance(command, StrReplaceCommand):
                    yield op.path, command.new_str
                elif isinstance(command, InsertCommand):
                    yield op.path, command.insert_text


def check_patch(patch: Patch, limits: Limits) -> None:
    """Refuse a parsed patch with more file operations than ``limits.files``, or a line longer
    than ``limits.line_bytes`` in what it writes (an edit-json patch's texts are JSON strings:
    their lines are only seen here)."""
    if len(patch.operations) > limits.files:
        raise LimitError(
            f"the patch has {len(patch.operations):,} file operations, more than the limit of "
            f"{limits.files:,}",
            hint=f"split the change into several smaller patches, {_raise_hint('files')}",
        )
    cap = limits.line_bytes
    for path, text in _written_texts(patch):
        if len(text) > cap // 4 and any(_too_long(line, cap) for line in text.split("\n")):
            raise _line_error(f"a line the patch writes to {path}", limits)


def _encoded(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def write_bound(patch: Patch, size_of: Callable[[str], int]) -> int:
    """At least the bytes the files ``patch`` writes will hold (``size_of(path)``: the size of
    the base file at ``path``, 0 if none). An upper bound, from the sizes alone: an added line
    counts with a two-byte ending, an edit command's text twice (in a CRLF file its line ends
    double), and what a hunk or command removes is not taken off."""
    total = 0
    for op in patch.operations:
        if isinstance(op, DeleteFile):
            continue
        if isinstance(op, AddFile):
            total += _encoded(op.content)
            continue
        if isinstance(op, UpdateFile | CopyFile):
            total += size_of(op.path)  # a move or a copy writes the whole file again
            for hunk in op.hunks:
                total += sum(_encoded(line.text) + 2 for line in hunk.lines if line.kind == "+")
            if op.hunks:
                total += 2  # an ending given to a last line that had none
            continue
        assert isinstance(op, EditFile)
        size = size_of(op.path)
        for command in op.commands:
            if isinstance(command, CreateCommand):
                size = 2 * _encoded(command.file_text) + 2
            elif isinstance(command, StrReplaceCommand):
                size += 2 * _encoded(command.new_str) + 2
            elif isinstance(command, InsertCommand):
                size += 2 * _encoded(command.insert_text) + 4
            else:
                size = 0
        total += size
    return total


def write_error(count: int, limits: Limits, *, bound: bool) -> LimitError:
    """The refusal of a patch whose files would hold ``count`` bytes, over the cap (``bound``: up
    to ``count``; else at least ``count``, as far as the plan got)."""
    amount = f"{'up to' if bound else 'at least'} {show_bytes(count)}"
    return LimitError(
        f"the patch would write {amount}, more than the limit of {show_bytes(limits.write_bytes)}",
        hint=f"split the change into several smaller patches, {_raise_hint('write_bytes')}",
    )
