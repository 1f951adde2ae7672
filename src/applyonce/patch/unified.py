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
* ``--- /dev/null`` or ``new file mode`` adds a file (modes: ``100644``, ``100755``), replacing
  one that is there, as Codex's ``Add File`` does (``git apply`` refuses instead);
  ``+++ /dev/null`` or ``deleted file mode`` deletes one, and its ``-`` lines are a precondition:
  the file must still hold exactly them, as ``git apply`` checks; ``rename from``/``rename to``
  moves one (with any hunks applied to it); ``copy from``/``copy to`` writes a copy (the source is
  only read, so another section may change it); ``old mode``/``new mode`` changes the executable
  bit. ``similarity index`` and ``index`` lines are informative.
* The identity of a diff is its change, with its line numbers (they pick the place when the
  context is not unique); the labels and the deleted lines of a deletion are left out of it, so
  an add, a delete or a pure rename is one call in every format (``model.py``).
* **paths**: git's quoted names (``core.quotePath``: ``"a/caf\\303\\251 \\"x\\".txt"``) are
  unquoted, their octal escapes read as UTF-8. The ``a/``/``b/`` prefixes are recognised per file
  from the pair of names: they are stripped when the two first components are a known pair (``a/``
  and ``b/``, or git's mnemonic ``c/ i/ w/ o/``) or differ while the rest is equal (``orig/x`` and
  ``new/x`` from ``diff -u``); otherwise the names are taken as written (``git diff --no-prefix``).
  ``rename``/``copy`` lines are never prefixed. A TAB ends a name on ``---``/``+++`` lines (what
  follows is a timestamp, or git's marker for a name with spaces).

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
# Prefix pairs git writes: a/ b/ by default, and diff.mnemonicPrefix's c/ i/ w/ o/.
_PREFIX_PAIRS = {("a", "b"), ("c", "w"), ("c", "i"), ("i", "w"), ("o", "w")}
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
        if old == new or (_prefixed(old, new) and old.split("/", 1)[1] == new.split("/", 1)[1]):
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


def _prefixed(old: str, new: str) -> bool:
    """Do ``old`` and ``new`` carry git's ``a/``/``b/`` style prefixes (module docstring)?"""
    if "/" not in old or "/" not in new:
        return False
    old_first, old_rest = old.split("/", 1)
    new_first, new_rest = new.split("/", 1)
    if not old_rest or not new_rest:
        return False
    return (old_first, new_first) in _PREFIX_PAIRS or (
        old_first != new_first and old_rest == new_rest
    )


def _strip(name: str) -> str:
    return name.split("/", 1)[1]


# ---------------------------------------------------------------- the parser


@dataclass
class _Section:
    """What one file's headers said."""

    first_line: int
    git_names: tuple[str, str] | None = None
    minus: str | None = None  # None: absent; DEV_NULL: /dev/null
    plus: str | None = None
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
        # For one-sided plain headers (``--- /dev/null``): whether this diff uses prefixes, as
        # learned from its two-sided headers.
        self.prefixed: bool | None = None

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
        self.prefixed = self._learn_prefix_style()
        operations: list[FileOp] = []
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if line.startswith(_GIT_HEADER):
                operations.append(self.parse_git_file())
            elif self.at_plain_header(self.pos):
                operations.append(self.parse_plain_file())
            elif line.startswith("@@"):
                raise self.error(
                    "a hunk comes before any file header",
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

    def _learn_prefix_style(self) -> bool | None:
        for at in range(len(self.lines) - 1):
            if self.at_plain_header(at):
                try:
                    old = _name_field(self.lines[at][4:])
                    new = _name_field(self.lines[at + 1][4:])
                except ValueError:
                    continue
                if DEV_NULL not in (old, new):
                    return _prefixed(old, new)
        return None

    # --- headers --------------------------------------------------------------------------------

    def parse_git_file(self) -> FileOp:
        section = _Section(first_line=self.pos + 1)
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
        section.minus, section.plus = self._minus_plus()
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
        """The old and new path (None: /dev/null or absent), prefixes removed."""
        old = section.minus
        new = section.plus
        pair = section.git_names
        if pair is not None:
            strip = _prefixed(*pair)
        elif old is not None and old != DEV_NULL and new is not None and new != DEV_NULL:
            strip = _prefixed(old, new)
        elif self.prefixed is not None:
            strip = self.prefixed
        elif old not in (None, DEV_NULL):
            # One-sided, and nothing in the diff to learn from: only the conventional prefix.
            strip = old is not None and old.startswith("a/")
        else:
            strip = new is not None and new.startswith("b/")

        def clean(name: str | None, fallback: str | None) -> str | None:
            if name == DEV_NULL:
                return None
            if name is None:
                name = fallback
                if name is None:
                    return None
            return _strip(name) if strip and "/" in name else name

        old_path = clean(old, pair[0] if pair else None)
        new_path = clean(new, pair[1] if pair else None)
        if section.rename_from is not None or section.copy_from is not None:
            old_path = section.rename_from or section.copy_from
        if section.rename_to is not None or section.copy_to is not None:
            new_path = section.rename_to or section.copy_to
        return old_path, new_path

    def _operation(self, section: _Section) -> FileOp:
        first = section.first_line
        old_path, new_path = self._paths(section)
        is_new = section.new_file_mode is not None or section.minus == DEV_NULL
        is_delete = section.deleted_file_mode is not None or section.plus == DEV_NULL
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
            )
        if is_delete:
            assert old_path is not None
            if any(line.kind != "-" for hunk in hunks for line in hunk.lines):
                raise self.error(
                    f"the deleted file {old_path} has hunk lines that keep or add lines", line=first
                )
            return DeleteFile(path=old_path, expected=hunks)
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
            return UpdateFile(path=old_path, move_to=new_path, hunks=hunks, mode=mode)
        if old_path != new_path:
            raise self.error(
                f"the headers name two files ({old_path} and {new_path}) without 'rename from'/"
                "'rename to'",
                line=first,
            )
        if not hunks and mode is None:
            raise self.error(f"the diff for {old_path} changes nothing", line=first)
        return UpdateFile(path=old_path, hunks=hunks, mode=mode)

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
