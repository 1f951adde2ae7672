"""Parser for unified diffs: ``git diff`` output and plain ``---``/``+++`` patches (``diff -u``).

Grammar (one item per line; ``NL`` is the end of a line)::

    diff        := skipped* (file skipped*)+
    file        := git_file | plain_file
    git_file    := "diff --git " name " " name NL  extended*  [minus plus] (hunk* | binary)
    plain_file  := minus plus hunk+
    extended    := ("old mode " | "new mode " | "new file mode " | "deleted file mode ") mode NL
                 | ("rename from " | "rename to " | "copy from " | "copy to ") name NL
                 | ("similarity index " | "dissimilarity index ") digits "%" NL
                 | "index " hex ".." hex [" " mode] NL
    minus       := "--- " (name | "/dev/null") [TAB text] NL
    plus        := "+++ " (name | "/dev/null") [TAB text] NL
    hunk        := "@@ -" start ["," count] " +" start ["," count] " @@" [text] NL  hunk_line*
    hunk_line   := (" " | "-" | "+") text NL  |  NL  |  "\\" text NL
    name        := text without a leading '"'  |  '"' C-escaped bytes '"'
    binary      := "GIT binary patch" NL … | "Binary files " … " differ" NL

What each part means:

* ``@@`` ranges are **hints**: the hunk is positioned by its lines, searched outward from the hinted
  line the way ``git apply`` searches (``apply.py`` has the rules). The text after the closing
  ``@@`` (git's function name) is a label, not context, and is dropped.
* ``\\ No newline at end of file`` after a line says that line is the file's last and has no line
  ending, on the old side (after ``-``), the new side (after ``+``) or both (after a context line).
* ``--- /dev/null`` or ``new file mode`` adds a file (modes: ``100644``, ``100755``); a path that
  is already there refuses the patch, as ``git apply`` refuses it (``already-exists``: a diff
  that means to change a file shows its old lines); ``+++ /dev/null`` or ``deleted file mode``
  deletes one, and its ``-`` lines are a precondition: the file must still hold exactly them, as
  ``git apply`` checks; ``rename from``/``rename to`` moves one (with any hunks applied to it)
  and ``copy from``/``copy to`` writes a copy (the source is only read, so another section may
  change it), both onto a path that is not there; ``old mode``/``new mode`` changes the
  executable bit. ``similarity index`` and ``index`` lines are informative.
* **plain headers** (no ``diff --git``) read as ``git apply`` reads them: GNU ``diff -N`` marks
  a file that one side lacks by dating that side at the Unix epoch (``1970-01-01
  00:00:00.000000000 +0000``, in any zone), so an epoch-dated ``---`` side adds the file and an
  epoch-dated ``+++`` side deletes it (``diff -ruN old new``); the file's one name is the ``+++``
  side's, unless that is the ``---`` side's with something tacked on (``--- x``, ``+++
  x.orig``); and a file named on both sides (no ``/dev/null``) whose one hunk only adds lines is
  created where it is not there.
* The identity of a diff is its change, with its line numbers (they pick the place when the
  context is not unique); the labels and the deleted lines of a deletion are left out of it, so
  an add, a delete or a pure rename is one call in every format (``model.py``).
* **paths**: git's quoted names (``core.quotePath``: ``"a/caf\\303\\251 \\"x\\".txt"``) are
  unquoted, their octal escapes read as UTF-8. Prefixes are stripped as ``git apply`` strips them
  with its default ``-p1``: every name loses its first component (``a/``, ``b/``, git's mnemonic
  ``c/``/``i/``/``w/``/``o/``, ``diff -ru``'s ``old/``, ``new/``, and a ``git diff --no-prefix``
  name's own first directory), and a name that has none to lose refuses the patch, except that
  a diff whose first plain header names files without a ``/`` on both sides (``--- file.orig``,
  ``+++ file``, from ``diff -u``) is read with ``-p0``, for that file and the rest of the diff,
  as git guesses. So a ``git diff --no-prefix`` diff applies where ``git apply`` applies it,
  which is rarely. ``rename``/``copy`` lines are never prefixed. A TAB ends a name on
  ``---``/``+++`` lines (what follows is a timestamp, or git's marker for a name with spaces).

Leniencies, each one because agents or their tools really emit it:

* **surrounding text** — lines before the first file header (a commit message, ``git
  format-patch`` mail headers, ``Index:`` lines) and between files (the ``-- `` signature) are
  skipped, as ``git apply`` skips them.
* **CRLF patch text** — when *every* line of the patch, headers included, ends in ``\\r\\n``, the
  patch text was converted on its way (git never writes its headers so), and one ``\\r`` is taken
  off each line. What is left is read as ``git apply`` reads it: a ``\\r`` before a ``\\n`` is
  content, it belongs to the ``+``, ``-`` or context line, so new
  CRLF files, LF↔CRLF conversions and files of mixed endings come out byte for byte as git
  makes them. A hunk found only with whitespace ignored (a diff made for other line ends) gives
  its added lines the file's own ending.
* **bytes that are not UTF-8** — in file contents, are kept byte for byte (``surrogateescape``;
  ``model.py`` says how they are dumped); file *names* must still be UTF-8.
* **miscounted hunks** — a hunk is read by its header's counts; if its lines end before the counts
  are reached, or more hunk lines follow once they are, the counts are wrong (models miscount) and
  the hunk is every hunk line up to the next header, as ``git apply --recount`` reads it. (If the
  text itself ends before the counts are reached, the patch was cut off: that is refused.) Blank
  lines that end such a hunk, before the next header or the end, are padding.
* **blank context lines** — an empty line inside a hunk is an empty context line; blank lines
  between two hunks of a file are skipped.

Refused, each with a one-line error: binary patches, symbolic links and submodules (modes
``120000``/``160000``), malformed ``@@`` headers, a hunk before any file header, a new file whose
hunks keep or remove lines, a deleted file whose hunks keep or add lines, and a file section that
changes nothing.

The parser is pure: it never reads files and never decides whether a path is safe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from applyonce.errors import ApplyOnceError
from applyonce.patch.codex import PatchSyntaxError
from applyonce.patch.model import (
    AddFile,
    CopyFile,
    DeleteFile,
    FileMode,
    FileOp,
    Hunk,
    HunkLine,
    Patch,
    UpdateFile,
)

DEV_NULL = "/dev/null"
_GIT_HEADER = "diff --git "
_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(?P<label>.*)$")
_MODE = re.compile(r"^[0-7]{6}$")
# No file applyonce edits has more lines; larger numbers are garbage (and would not fit the
# 64-bit integers of the call's canonical JSON).
_MAX_LINE_NUMBER = 2**31 - 1
_REGULAR_MODES: dict[str, FileMode] = {"100644": "100644", "100755": "100755"}
_SPECIAL_MODES = {"120000": "a symbolic link", "160000": "a submodule"}
_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


class BinaryPatchError(ApplyOnceError):
    """The diff carries a binary change, which applyonce does not apply."""

    kind = "binary-patch"
    default_hint = "applyonce applies text changes only; leave binary files out of the patch"


class UnsupportedModeError(ApplyOnceError):
    """The diff creates or changes a symbolic link or a submodule."""

    kind = "unsupported-mode"
    default_hint = "leave that path out of the patch"


def looks_like_unified(text: str) -> bool:
    """True when ``text`` has a unified-diff file header or hunk header at the start of a line."""
    lines = _split(text)
    for i, line in enumerate(lines):
        if line.startswith((_GIT_HEADER, "@@ -")):
            return True
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            return True
    return False


def parse_unified(text: str) -> Patch:
    """Parse a unified diff into a :class:`Patch`.

    Raises:
        PatchSyntaxError: with the 1-based patch line number of the first problem.
        BinaryPatchError: a file's change is binary.
        UnsupportedModeError: a file is, or becomes, a symbolic link or a submodule.
    """
    operations = _Parser(_split(text)).parse()
    if not operations:
        raise PatchSyntaxError(
            "the unified diff has no file changes (no 'diff --git' or '---'/'+++' header)",
            hint="start each file with 'diff --git a/PATH b/PATH' or '--- a/PATH' and '+++ b/PATH'",
        )
    return Patch(operations=tuple(operations))


def _split(text: str) -> list[str]:
    """The patch's lines; when its text came with CRLF throughout, one "\\r" off each (module
    docstring)."""
    lines = text.split("\n")
    ended = lines[:-1]  # every piece but the last was ended by a "\n"
    if lines[-1] == "":
        lines.pop()
    if ended and all(line.endswith("\r") for line in ended):
        lines = [line.removesuffix("\r") for line in lines]
    return lines


# ---------------------------------------------------------------- names


def unquote_c_style(quoted: str, start: int = 0) -> tuple[str, int]:
    """Decode a git C-quoted name starting at ``quoted[start] == '"'``.

    Returns:
        The name and the number of characters the quoted form took.

    Raises:
        ValueError: unterminated, a bad escape, or bytes that are not UTF-8.
    """
    out = bytearray()
    i = start + 1
    while i < len(quoted):
        ch = quoted[i]
        if ch == '"':
            return out.decode("utf-8"), i + 1 - start
        if ch != "\\":
            out += ch.encode("utf-8")
            i += 1
            continue
        if i + 1 >= len(quoted):
            break
        esc = quoted[i + 1]
        if esc in _C_ESCAPES:
            out.append(_C_ESCAPES[esc])
            i += 2
        elif re.fullmatch(r"[0-3][0-7]{2}", quoted[i + 1 : i + 4]):
            out.append(int(quoted[i + 1 : i + 4], 8))
            i += 4
        else:
            raise ValueError(f"bad escape '\\{esc}'")
    raise ValueError("unterminated quoted name")


def _name_field(value: str) -> str:
    """A name on a ``---``/``+++``/``rename``/``copy`` line: quoted, or up to a TAB."""
    if value.startswith('"'):
        name, used = unquote_c_style(value)
        if value[used:].strip() and not value[used:].startswith("\t"):
            raise ValueError("text after a quoted name")
        return name
    return value.split("\t", 1)[0].rstrip(" ")


def _split_git_names(rest: str) -> tuple[str, str] | None:
    """The two names of a ``diff --git`` line, or None when spaces make them ambiguous."""
    if rest.startswith('"'):
        first, used = unquote_c_style(rest)
        if rest[used : used + 1] != " ":
            raise ValueError("no second name")
        second = rest[used + 1 :]
        return first, (unquote_c_style(second)[0] if second.startswith('"') else second)
    if rest.endswith('"'):
        # Each try reads up to the next unescaped quote, which is at most the next ' "': the
        # tries read the line about once (no copies of its tail).
        at = rest.find(' "')
        while at != -1:
            try:
                second, used = unquote_c_style(rest, at + 1)
            except ValueError:
                second, used = "", -1
            if used == len(rest) - at - 1:
                return rest[:at], second
            at = rest.find(' "', at + 1)
    spaces = [i for i, ch in enumerate(rest) if ch == " "]
    for at in _name_splits(rest, spaces):
        old, new = rest[:at], rest[at + 1 :]
        if old == new or _same_after_prefix(old, new):
            return old, new
    if len(spaces) == 1:
        return rest[: spaces[0]], rest[spaces[0] + 1 :]
    return None


def _name_splits(rest: str, spaces: list[int]) -> list[int]:
    """The spaces of ``rest`` (ascending) at which its two halves can be one name, with or
    without a prefix each: at most two, found in one pass (trying every space would copy the
    line once per space).

    ``old == new`` needs the middle space. ``old`` and ``new`` equal after their first ``/``
    need as many characters after the line's first ``/`` (``p``) up to the space ``at`` as after
    the first ``/`` past it (``q``): ``q + at == len(rest) + p``, and ``q + at`` grows with
    ``at``, so one space at most fits.
    """
    found: set[int] = set()
    if len(rest) % 2 == 1 and rest[len(rest) // 2] == " ":
        found.add(len(rest) // 2)
    p = rest.find("/")
    q = -1
    if p != -1:
        for at in spaces:
            if at <= p:
                continue
            if q <= at:
                q = rest.find("/", at + 1)
                if q == -1:
                    break
            if q + at >= len(rest) + p:
                if q + at == len(rest) + p:
                    found.add(at)
                break
    return sorted(found)


def _strip_components(name: str, count: int) -> str | None:
    """``name`` without its first ``count`` ``/``-separated components (git apply's ``-p``), or
    None when it has no more than that."""
    if count <= 0:
        return name
    parts = name.split("/", count)
    if len(parts) <= count or not parts[count]:
        return None
    return parts[count]


_EPOCH_TIME = re.compile(r"([0-2][0-9]):([0-5][0-9]):00(?:\.0+)? ([-+])([0-2][0-9]):?([0-5][0-9])")


def _is_epoch(value: str) -> bool:
    """Is the date after the last TAB of a ``---``/``+++`` line the Unix epoch, in any zone?
    GNU ``diff -N`` dates the side of a file that does not exist so (``1970-01-01
    00:00:00.000000000 +0000``); ``git apply`` reads that side as absent, as this does."""
    if "\t" not in value:
        return False
    stamp = value.rsplit("\t", 1)[1]
    if stamp.startswith("1969-12-31 "):
        epoch_hour = 24
    elif stamp.startswith("1970-01-01 "):
        epoch_hour = 0
    else:
        return False
    match = _EPOCH_TIME.fullmatch(stamp[len("1970-01-01 ") :])
    if match is None:
        return False
    hour, minute, sign, zone_hours, zone_minutes = match.groups()
    zone = int(zone_hours) * 60 + int(zone_minutes)
    if sign == "-":
        zone = -zone
    return int(hour) * 60 + int(minute) - zone == epoch_hour * 60


def _same_after_prefix(old: str, new: str) -> bool:
    """Are ``old`` and ``new`` one name after their first components (``a/x`` and ``b/x``)?"""
    old_rest = _strip_components(old, 1)
    return old_rest is not None and old_rest == _strip_components(new, 1)


# ---------------------------------------------------------------- the parser


@dataclass
class _Section:
    """What one file's headers said."""

    first_line: int
    git: bool = False  # a 'diff --git' section
    git_names: tuple[str, str] | None = None  # its line's names, when they can be told apart
    minus: str | None = None  # None: absent; DEV_NULL: /dev/null
    plus: str | None = None
    # GNU diff -N dates the side where the file is absent at the epoch (see _is_epoch).
    minus_epoch: bool = False
    plus_epoch: bool = False
    old_mode: str | None = None
    new_mode: str | None = None
    new_file_mode: str | None = None
    deleted_file_mode: str | None = None
    rename_from: str | None = None
    rename_to: str | None = None
    copy_from: str | None = None
    copy_to: str | None = None
    hunks: list[Hunk] = field(default_factory=list)


class _Parser:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.pos = 0
        # How many leading components names lose (git apply's -p): 1, unless the first plain
        # header whose names tell (see _learn_strip) says 0; then for the rest of the diff.
        self.strip = 1
        self.strip_known = False

    def error(self, message: str, line: int | None = None, **details: object) -> PatchSyntaxError:
        return PatchSyntaxError(message, line=line if line is not None else self.pos + 1, **details)

    def line(self, offset: int = 0) -> str | None:
        at = self.pos + offset
        return self.lines[at] if at < len(self.lines) else None

    def at_plain_header(self, at: int) -> bool:
        return (
            self.lines[at].startswith("--- ")
            and at + 1 < len(self.lines)
            and self.lines[at + 1].startswith("+++ ")
        )

    def at_file_header(self, at: int) -> bool:
        return self.lines[at].startswith(_GIT_HEADER) or self.at_plain_header(at)

    def parse(self) -> list[FileOp]:
        operations: list[FileOp] = []
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if line.startswith(_GIT_HEADER):
                operations.append(self.parse_git_file())
            elif self.at_plain_header(self.pos):
                operations.append(self.parse_plain_file())
            elif line.startswith("@@"):
                raise self.error(
                    "a unified diff hunk without '---'/'+++' headers before it: the file it "
                    "changes is not named",
                    hint="start each file with 'diff --git a/PATH b/PATH' or '--- a/PATH' and "
                    "'+++ b/PATH'",
                )
            elif line == "GIT binary patch" or _is_binary_line(line):
                raise BinaryPatchError(
                    f"patch line {self.pos + 1}: the diff has a binary change", line=self.pos + 1
                )
            else:
                self.pos += 1  # text around the diff (see the leniencies)
        return operations

    def _learn_strip(self, section: _Section) -> None:
        """git apply's guess for plain headers: names without a ``/`` on both sides (or one side
        and ``/dev/null``) are taken whole (-p0), for this file and the rest of the diff; any
        other pair leaves the default, -p1, and the next plain header is asked again."""
        if self.strip_known:
            return
        guesses = [
            -1 if name in (None, DEV_NULL) or "/" in name else 0
            for name in (section.minus, section.plus)
        ]
        first = guesses[0] if guesses[0] >= 0 else guesses[1]
        if first >= 0 and first == guesses[1]:
            self.strip, self.strip_known = first, True

    # --- headers --------------------------------------------------------------------------------

    def parse_git_file(self) -> FileOp:
        section = _Section(first_line=self.pos + 1, git=True)
        try:
            section.git_names = _split_git_names(self.lines[self.pos][len(_GIT_HEADER) :])
        except ValueError as exc:
            raise self.error(f"bad name in 'diff --git' line: {exc}") from None
        self.pos += 1
        while (line := self.line()) is not None and self._extended_header(section, line):
            self.pos += 1
        line = self.line()
        if line is not None and self.at_plain_header(self.pos):
            section.minus, section.plus = self._minus_plus()
        self._refuse_binary(section)
        self._hunks(section)
        return self._operation(section)

    def parse_plain_file(self) -> FileOp:
        section = _Section(first_line=self.pos + 1)
        section.minus_epoch = _is_epoch(self.lines[self.pos][4:])
        section.plus_epoch = _is_epoch(self.lines[self.pos + 1][4:])
        section.minus, section.plus = self._minus_plus()
        self._learn_strip(section)
        self._refuse_binary(section)
        self._hunks(section)
        if not section.hunks:
            raise self.error(
                "'---'/'+++' headers without a hunk",
                line=section.first_line,
                hint="follow the headers with '@@ -START,COUNT +START,COUNT @@' hunks",
            )
        return self._operation(section)

    def _extended_header(self, section: _Section, line: str) -> bool:
        simple = {
            "old mode ": "old_mode",
            "new mode ": "new_mode",
            "new file mode ": "new_file_mode",
            "deleted file mode ": "deleted_file_mode",
        }
        for prefix, attr in simple.items():
            if line.startswith(prefix):
                mode = line[len(prefix) :].strip()
                if not _MODE.match(mode):
                    raise self.error(f"bad file mode {mode!r} in {prefix.strip()!r}")
                setattr(section, attr, mode)
                return True
        named = {
            "rename from ": "rename_from",
            "rename to ": "rename_to",
            "copy from ": "copy_from",
            "copy to ": "copy_to",
        }
        for prefix, attr in named.items():
            if line.startswith(prefix):
                try:
                    setattr(section, attr, _name_field(line[len(prefix) :]))
                except ValueError as exc:
                    raise self.error(f"bad name in {prefix.strip()!r} line: {exc}") from None
                return True
        return line.startswith(("similarity index ", "dissimilarity index ", "index "))

    def _minus_plus(self) -> tuple[str, str]:
        names = []
        for offset in (0, 1):
            raw = self.lines[self.pos + offset][4:]
            try:
                names.append(_name_field(raw))
            except ValueError as exc:
                raise self.error(
                    f"bad file name {raw[:60]!r}: {exc}", line=self.pos + offset + 1
                ) from None
        self.pos += 2
        return names[0], names[1]

    def _refuse_binary(self, section: _Section) -> None:
        line = self.line()
        if line is not None and (line == "GIT binary patch" or _is_binary_line(line)):
            old_path, new_path = self._paths(section)
            path = new_path or old_path
            line_number = self.pos + 1
            raise BinaryPatchError(
                f"patch line {line_number}: {path} has a binary change", line=line_number, path=path
            )

    # --- hunks ----------------------------------------------------------------------------------

    def _hunks(self, section: _Section) -> None:
        while True:
            at = self.pos
            while section.hunks and at < len(self.lines) and self.lines[at] == "":
                at += 1  # blank lines between two hunks of a file
            if at >= len(self.lines) or not self.lines[at].startswith("@@"):
                return
            self.pos = at
            if section.hunks and (
                section.hunks[-1].old_no_final_newline or section.hunks[-1].new_no_final_newline
            ):
                raise self.error(
                    "a hunk follows '\\ No newline at end of file', which ends the file"
                )
            section.hunks.append(self.parse_hunk())

    def parse_hunk(self) -> Hunk:
        header_line = self.pos + 1
        header = self.lines[self.pos]
        match = _HUNK_HEADER.match(header)
        if match is None:
            raise self.error(
                f"malformed hunk header {header[:60]!r}",
                hint="write hunk headers as '@@ -START,COUNT +START,COUNT @@'",
            )
        numbers = [int(group) if group is not None else 1 for group in match.group(1, 3, 2, 4)]
        if max(numbers) > _MAX_LINE_NUMBER:
            raise self.error(
                f"hunk header {header[:60]!r} has a line number over {_MAX_LINE_NUMBER}",
                hint="write the hunk header with the file's real line numbers",
            )
        old_start, new_start, old_count, new_count = numbers
        self.pos += 1
        body: list[str] = []
        old_seen = new_seen = 0
        # Read by the counts, as git does: the only way to tell a removed "-- x" line from a header.
        while (old_seen < old_count or new_seen < new_count) and (line := self.line()) is not None:
            kind = _body_kind(line)
            if kind is None:
                break
            body.append(line)
            self.pos += 1
            if kind in " -":
                old_seen += 1
            if kind in " +":
                new_seen += 1
        while (line := self.line()) is not None and line.startswith("\\"):
            body.append(line)
            self.pos += 1
        short = (old_seen, new_seen) != (old_count, new_count)
        cut_off = old_seen <= old_count and new_seen <= new_count and short
        if cut_off and self.line() is None:
            # The text ends inside the hunk: an agent's output cut off at its length limit, most
            # likely. Applying what is there would land half a change as a success.
            raise self.error(
                f"the patch ends inside the hunk at line {header_line}: its header promises "
                f"{old_count} old and {new_count} new lines, the text has {old_seen} and "
                f"{new_seen}; the patch looks truncated",
                hint="send the whole diff",
            )
        if short or self._more_hunk_lines():
            body.extend(self._recount_rest())
            while body and body[-1] == "":
                body.pop()  # padding before the next header or the end
        return self._hunk(body, header_line, old_start, new_start)

    def _more_hunk_lines(self) -> bool:
        """After a counted hunk: do hunk lines (not a header, not the ``-- `` signature) follow?"""
        at = self.pos
        while at < len(self.lines) and self.lines[at] == "":
            at += 1
        if at >= len(self.lines) or self.at_file_header(at):
            return False
        line = self.lines[at]
        return line != "-- " and line[:1] in (" ", "-", "+", "\\")

    def _recount_rest(self) -> list[str]:
        rest: list[str] = []
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if self.at_file_header(self.pos) or _body_kind(line) is None:
                break
            rest.append(line)
            self.pos += 1
        return rest

    def _hunk(self, body: list[str], header_line: int, old_start: int, new_start: int) -> Hunk:
        lines: list[HunkLine] = []
        old_eof = new_eof = False
        for offset, text in enumerate(body, start=1):
            kind = _body_kind(text)
            assert kind is not None  # the body holds hunk lines only
            if kind == "\\":
                if not lines:
                    raise self.error(
                        "'\\ No newline at end of file' must follow a line",
                        line=header_line + offset,
                    )
                marked = lines[-1].kind
                old_eof = old_eof or marked in " -"
                new_eof = new_eof or marked in " +"
                continue
            if (old_eof and kind in " -") or (new_eof and kind in " +"):
                raise self.error(
                    "a line follows the file's last line ('\\ No newline at end of file')",
                    line=header_line + offset,
                )
            lines.append(HunkLine(kind=kind, text=text[1:]))
        if not any(line.kind != " " for line in lines):
            raise self.error(
                "a hunk has no '-' or '+' lines and changes nothing",
                line=header_line,
                hint="add '-'/'+' lines or drop the hunk",
            )
        return Hunk(
            lines=tuple(lines),
            old_no_final_newline=old_eof,
            new_no_final_newline=new_eof,
            source_line=header_line,
            old_start=old_start,
            new_start=new_start,
        )

    # --- the operation --------------------------------------------------------------------------

    def _paths(self, section: _Section) -> tuple[str | None, str | None]:
        """The old and new path (None: /dev/null or absent), as ``git apply`` names them (module
        docstring).

        Raises:
            PatchSyntaxError: the names do not have the components git apply would remove.
        """
        p = self.strip
        minus, plus = section.minus, section.plus
        if not section.git:
            if minus == DEV_NULL:
                return None, self._stripped(plus, p, section)
            if plus == DEV_NULL:
                return self._stripped(minus, p, section), None
            name = _one_name(minus, plus, p)
            if name is None:
                raise self._no_name(section, p)
            if section.minus_epoch:
                return None, name
            if section.plus_epoch:
                return name, None
            return name, name
        old_path = None if minus in (None, DEV_NULL) else _strip_components(minus, p)
        new_path = None if plus in (None, DEV_NULL) else _strip_components(plus, p)
        default = None
        if section.git_names is not None:
            both = [_strip_components(name, p) for name in section.git_names]
            default = both[0] if both[0] is not None and both[0] == both[1] else None
        # Names the extended headers give; a '---'/'+++' line must then say the same (git).
        old_named = default if section.deleted_file_mode is not None else None
        new_named = default if section.new_file_mode is not None else None
        # 'rename'/'copy' names carry no prefix: they lose one component less.
        if section.rename_from is not None or section.copy_from is not None:
            old_named = _strip_components(section.rename_from or section.copy_from or "", p - 1)
        if section.rename_to is not None or section.copy_to is not None:
            new_named = _strip_components(section.rename_to or section.copy_to or "", p - 1)
        for named, from_line, raw in ((old_named, old_path, minus), (new_named, new_path, plus)):
            if named is not None and raw not in (None, DEV_NULL) and from_line != named:
                raise self.error(
                    f"the headers name two files for one side: {named} and {from_line}"
                    if from_line is not None
                    else f"the headers name two files for one side: {named}, and {raw}, which "
                    f"has no leading component for git apply to remove (-p{p})",
                    line=section.first_line,
                    hint="send the diff as 'git diff' writes it, with 'a/' and 'b/' prefixes",
                )
        old_path = old_named or old_path
        new_path = new_named or new_path
        if old_path is None and new_path is None:
            if default is None:
                raise self._no_name(section, p)
            old_path = new_path = default
        return old_path, new_path

    def _stripped(self, name: str | None, p: int, section: _Section) -> str:
        stripped = None if name is None else _strip_components(name, p)
        if stripped is None:
            raise self._no_name(section, p)
        return stripped

    def _no_name(self, section: _Section, p: int) -> PatchSyntaxError:
        return self.error(
            "cannot tell the file's name: its headers' names have no leading component for "
            f"git apply to remove (-p{p}), as in 'a/PATH' and 'b/PATH'",
            line=section.first_line,
            hint="write the names as 'git diff' does: '--- a/PATH' and '+++ b/PATH'",
        )

    def _operation(self, section: _Section) -> FileOp:
        first = section.first_line
        old_path, new_path = self._paths(section)
        is_new = section.new_file_mode is not None or section.minus == DEV_NULL
        is_delete = section.deleted_file_mode is not None or section.plus == DEV_NULL
        if not section.git and not (is_new or is_delete):
            # GNU diff -N's epoch date on one side: the file is created or deleted (git apply).
            is_new = section.minus_epoch
            is_delete = not is_new and section.plus_epoch
        if is_new and is_delete:
            raise self.error("a file section both adds and deletes its file", line=first)
        if (old_path is None and not is_new) or (new_path is None and not is_delete):
            raise self.error(
                "cannot tell the file's name from its headers",
                line=first,
                hint="give the file '--- a/PATH' and '+++ b/PATH' lines",
            )
        for special in (section.old_mode, section.new_mode, section.new_file_mode):
            if special in _SPECIAL_MODES:
                path = new_path or old_path
                raise UnsupportedModeError(
                    f"patch line {first}: {path} is {_SPECIAL_MODES[special]} (mode {special}); "
                    "applyonce writes regular files only",
                    line=first,
                    path=path,
                )
        hunks = tuple(section.hunks)
        if is_new:
            assert new_path is not None
            return AddFile(
                path=new_path,
                content=self._new_content(hunks, first),
                mode=_mode_of(section.new_file_mode, first, default_is_none=True),
                refuse_existing=True,
            )
        if is_delete:
            assert old_path is not None
            if any(line.kind != "-" for hunk in hunks for line in hunk.lines):
                raise self.error(
                    f"the deleted file {old_path} has hunk lines that keep or add lines", line=first
                )
            return DeleteFile(path=old_path, expected=hunks, written_as=self._written_as(section))
        assert old_path is not None and new_path is not None
        mode: FileMode | None = None
        if section.new_mode is not None and section.new_mode != section.old_mode:
            mode = _mode_of(section.new_mode, first, default_is_none=False)
        if section.copy_from is not None or section.copy_to is not None:
            if section.copy_from is None or section.copy_to is None:
                raise self.error("'copy from' and 'copy to' come together", line=first)
            return CopyFile(path=old_path, copy_to=new_path, hunks=hunks, mode=mode)
        if section.rename_from is not None or section.rename_to is not None:
            if section.rename_from is None or section.rename_to is None:
                raise self.error("'rename from' and 'rename to' come together", line=first)
            return UpdateFile(
                path=old_path, move_to=new_path, hunks=hunks, mode=mode, refuse_existing=True
            )
        if old_path != new_path:
            raise self.error(
                f"the headers name two files ({old_path} and {new_path}) without 'rename from'/"
                "'rename to'",
                line=first,
            )
        if not hunks and mode is None:
            raise self.error(f"the diff for {old_path} changes nothing", line=first)
        return UpdateFile(
            path=old_path, hunks=hunks, mode=mode, written_as=self._written_as(section)
        )

    def _written_as(self, section: _Section) -> str | None:
        """The file's name with one component less removed: what the diff's author may have
        meant (see ``written_as`` in :mod:`applyonce.patch.model`): the old side's, or for plain
        headers the one name git takes for both sides (``src/x.py`` of ``--- src/x.py.orig``,
        ``+++ src/x.py``, which ``git apply`` reads as ``x.py``)."""
        if self.strip < 1 or section.minus in (None, DEV_NULL):
            return None
        if not section.git and section.plus not in (None, DEV_NULL):
            return _one_name(section.minus, section.plus, self.strip - 1)
        return _strip_components(section.minus, self.strip - 1)

    def _new_content(self, hunks: tuple[Hunk, ...], first: int) -> str:
        texts: list[str] = []
        for hunk in hunks:
            if any(line.kind != "+" for line in hunk.lines):
                raise self.error(
                    "a new file's hunks may only add lines", line=hunk.source_line or first
                )
            texts.extend(line.text for line in hunk.lines)
        if not texts:
            return ""
        no_newline = hunks[-1].new_no_final_newline
        return "\n".join(texts) + ("" if no_newline else "\n")


def _one_name(minus: str | None, plus: str | None, p: int) -> str | None:
    """The one name git takes for both sides of plain headers, ``p`` components removed: the new
    side's, unless it is only the old side's with something tacked on (``x`` and ``x.orig``:
    ``x``)."""
    old = _strip_components(minus, p) if minus is not None else None
    name = _strip_components(plus, p) if plus is not None else None
    if name is None or (old is not None and len(old) < len(name) and name.startswith(old)):
        name = old
    return name


def _mode_of(mode: str | None, line: int, *, default_is_none: bool) -> FileMode | None:
    if mode is None or (default_is_none and mode == "100644"):
        return None
    if mode not in _REGULAR_MODES:
        raise PatchSyntaxError(f"unsupported file mode {mode}", line=line)
    return _REGULAR_MODES[mode]


def _body_kind(line: str) -> Literal[" ", "-", "+", "\\"] | None:
    """The kind of a hunk body line: ``" "``, ``"-"``, ``"+"``, ``"\\\\"`` or None (not one)."""
    if line == "":
        return " "
    kinds: dict[str, Literal[" ", "-", "+", "\\"]] = {" ": " ", "-": "-", "+": "+", "\\": "\\"}
    return kinds.get(line[0])


def _is_binary_line(line: str) -> bool:
    return line.startswith(("Binary files ", "Files ")) and line.endswith(" differ")
