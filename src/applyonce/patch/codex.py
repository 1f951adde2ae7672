"""Parser and renderer for the Codex ``apply_patch`` format.

Grammar (one item per line; ``NL`` is the end of a line)::

    patch       := "*** Begin Patch" NL  operation*  "*** End Patch" [NL]
    operation   := add | delete | update
    add         := "*** Add File: " path NL  ("+" text NL)*
    delete      := "*** Delete File: " path NL
    update      := "*** Update File: " path NL  ["*** Move to: " path NL]  hunk*
    hunk        := ("@@" [" " anchor] NL)*  hunk_line+  ["*** End of File" NL]
    hunk_line   := (" " | "-" | "+") text NL

Leniencies, each one because agents really emit it:

* **wrappers** — a markdown fence (```` ``` ```` with or without a language tag, prose before and
  after it), a heredoc (``apply_patch <<'EOF'`` … ``EOF``, or the bare ``<<'EOF'`` … ``EOF``; any
  delimiter, quoted or not, LF or CRLF), ``apply_patch "$(cat <<'EOF'`` … ``EOF`` ``)"``, and a
  ``cd DIR &&`` before the command (the paths are then read under DIR) are taken off, as models
  trained on shell tool calls and chat write them (``wrappers.py`` has the rules).
* **CRLF patch text** — ``\\r\\n`` line ends in the patch are read as ``\\n``; the files' own line
  endings are preserved by the applier, not taken from the patch.
* **padding around markers and headers** — ``  *** Update File: a.py``, ``*** End Patch `` and the
  like: a line whose stripped form is a marker is that marker. ``*** End Patch`` is only recognised
  as the last non-blank line, so a hunk can still contain a context line that looks like it.
* **first hunk without ``@@``** — hunk lines directly after an ``Update File`` header start a hunk.
* **several ``@@`` lines in a row** — nested context (class, then method), each narrowing the
  search.
  A unified-diff range in an ``@@`` line (``@@ -3,4 +3,5 @@ def f``) is dropped; the text after it
  is the anchor.
* **blank context lines** — an empty line inside a hunk is an empty context line (editors and
  models strip the single space), wherever it stands: also right before the next ``@@`` or file
  header, where it takes part in finding the hunk (if the hunk is not found, the applier retries
  it without its last line when that one is empty, as Codex does). Blank lines that end a hunk
  of only ``+`` lines may be a separator (the hunk is a pure addition) or context (as Codex reads
  them): the applier takes the hunk when both readings put the lines at one place, or only one
  fits, and refuses it when they disagree.
* **context-only hunks** — a hunk of context lines only is accepted (it must still match): with
  ``*** Move to:`` it is the rename idiom of Codex.
* **missing final newline** — the patch text need not end with a newline.

Never an overwrite by surprise (a deliberate difference from Codex, which replaces what is
there): an ``Add File`` onto a path that exists, and a ``Move to`` onto one, refuse the patch
(``already-exists``); a file that is there is changed by ``Update File``.

The parser is pure: it never reads files and never decides whether a path is safe (``paths.py``
does, once the repository root is known).
"""

from __future__ import annotations

import re
from typing import Any

from applyonce.errors import ApplyOnceError
from applyonce.patch.model import (
    AddFile,
    CopyFile,
    DeleteFile,
    EditFile,
    FileOp,
    Hunk,
    HunkLine,
    Patch,
    UpdateFile,
    has_raw_bytes,
)
from applyonce.patch.wrappers import Unwrapped, WrapperError, under, unwrap

BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File: "
DELETE = "*** Delete File: "
UPDATE = "*** Update File: "
MOVE = "*** Move to: "
EOF_MARKER = "*** End of File"
_HEADERS = (ADD, DELETE, UPDATE)


class PatchSyntaxError(ApplyOnceError):
    """The patch text does not follow the format's grammar."""

    kind = "patch-syntax"
    default_hint = "fix the patch text and send it again"

    def __init__(self, message: str, *, line: int | None = None, **details: Any) -> None:
        where = f"patch line {line}: " if line is not None else ""
        super().__init__(where + message, line=line, **details)


def _split_patch_lines(text: str) -> list[str]:
    text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _strip_heredoc(lines: list[str]) -> Unwrapped:
    """Take the wrappers agents put around a patch off (``wrappers.py``: a markdown fence, a
    heredoc, ``cd DIR &&``)."""
    try:
        return unwrap(lines)
    except WrapperError as exc:
        raise PatchSyntaxError(str(exc), line=exc.line, hint=exc.hint) from None


def looks_like_codex(text: str) -> bool:
    """True when ``text`` is (probably) a Codex patch, wrapped or not."""
    lines = _split_patch_lines(text)
    try:
        lines = _strip_heredoc(lines).lines
    except PatchSyntaxError:
        return True
    first = next((line for line in lines if line.strip()), "")
    return first.strip() == BEGIN


def parse_codex(text: str) -> Patch:
    """Parse Codex ``apply_patch`` text into a :class:`Patch`.

    Raises:
        PatchSyntaxError: with the 1-based patch line number of the first problem.
    """
    if has_raw_bytes(text):
        raise PatchSyntaxError(
            "the patch is not UTF-8 text", hint="send the Codex patch as UTF-8 text"
        )
    unwrapped = _strip_heredoc(_split_patch_lines(text))
    lines, offset = unwrapped.lines, unwrapped.offset
    nonblank = [i for i, line in enumerate(lines) if line.strip()]
    if not nonblank:
        raise PatchSyntaxError(
            "the patch is empty", hint="send a patch that starts with '*** Begin Patch'"
        )
    start, stop = nonblank[0], nonblank[-1]
    if lines[start].strip() != BEGIN:
        raise PatchSyntaxError(
            f"the first line must be {BEGIN!r}, found {lines[start].strip()[:60]!r}",
            line=start + offset + 1,
        )
    if lines[stop].strip() != END or stop == start:
        ended = [i for i in range(start + 1, stop) if lines[i].strip() == END]
        if ended:
            after = next(line.strip() for line in lines[ended[-1] + 1 :] if line.strip())
            raise PatchSyntaxError(
                f"the last line must be {END!r}; text follows it ({after[:40]!r})",
                line=stop + offset + 1,
                hint=f"send the patch alone, leaving out what comes after {END!r}",
            )
        raise PatchSyntaxError(
            f"the last line must be {END!r}, and the patch has none: it looks cut off",
            line=stop + offset + 1,
            hint=f"send the whole patch, ending with a line {END!r}",
        )
    parser = _Parser(lines[start + 1 : stop], first_line=start + offset + 2)
    operations = parser.parse()
    if not operations:
        raise PatchSyntaxError("the patch has no file operations", line=start + offset + 1)
    if unwrapped.cd is not None:
        operations = [_under(unwrapped.cd, op) for op in operations]
    return Patch(operations=tuple(operations))


def _under(cd: str, op: FileOp) -> FileOp:
    """``op`` with its paths read from the directory ``cd`` (``cd DIR && apply_patch``)."""
    update: dict[str, str] = {"path": under(cd, op.path)}
    if isinstance(op, UpdateFile) and op.move_to is not None:
        update["move_to"] = under(cd, op.move_to)
    return op.model_copy(update=update)


class _Parser:
    def __init__(self, lines: list[str], first_line: int) -> None:
        self.lines = lines
        self.first_line = first_line
        self.pos = 0

    def error(self, message: str, **details: object) -> PatchSyntaxError:
        return PatchSyntaxError(message, line=self.first_line + self.pos, **details)

    def peek_marker(self) -> str | None:
        """The stripped line at ``pos`` if it is a file header or marker, else None."""
        stripped = self.lines[self.pos].strip()
        if stripped.startswith("*** ") and (
            stripped.startswith(_HEADERS) or stripped.startswith(MOVE) or stripped == EOF_MARKER
        ):
            return stripped
        return None

    def at_header(self) -> bool:
        stripped = self.lines[self.pos].strip()
        return stripped.startswith(_HEADERS)

    def parse(self) -> list[FileOp]:
        operations: list[FileOp] = []
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            stripped = line.strip()
            if not stripped:
                self.pos += 1
                continue
            if stripped + " " in _HEADERS:
                # "*** Add File:" with nothing after it: stripping removed the header's space.
                raise self.error(f"{stripped!r} needs a path")
            if stripped.startswith(ADD):
                operations.append(self.parse_add(_header_path(stripped, ADD)))
            elif stripped.startswith(DELETE):
                self.check_path(stripped, DELETE)
                operations.append(DeleteFile(path=_header_path(stripped, DELETE)))
                self.pos += 1
            elif stripped.startswith(UPDATE):
                operations.append(self.parse_update(_header_path(stripped, UPDATE)))
            else:
                raise self.error(
                    f"expected '*** Add File: ', '*** Delete File: ' or '*** Update File: ', "
                    f"found {stripped[:60]!r}"
                )
        return operations

    def check_path(self, stripped: str, header: str) -> None:
        if not _header_path(stripped, header):
            raise self.error(f"{header.strip()!r} needs a path")

    def parse_add(self, path: str) -> AddFile:
        self.check_path(self.lines[self.pos].strip(), ADD)
        self.pos += 1
        content: list[str] = []
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if line.startswith("+"):
                content.append(line[1:] + "\n")
                self.pos += 1
                continue
            if not line.strip() or self.at_header():
                break
            raise self.error(
                f"every line of an added file must start with '+', found {line[:60]!r}"
            )
        return AddFile(path=path, content="".join(content), refuse_existing=True)

    def parse_update(self, path: str) -> UpdateFile:
        self.check_path(self.lines[self.pos].strip(), UPDATE)
        header_line = self.first_line + self.pos
        self.pos += 1
        move_to: str | None = None
        if self.pos < len(self.lines) and (self.lines[self.pos].strip() + " ").startswith(MOVE):
            move_to = _header_path(self.lines[self.pos].strip(), MOVE)
            if not move_to:
                raise self.error("'*** Move to:' needs a path")
            self.pos += 1
        hunks: list[Hunk] = []
        while self.pos < len(self.lines) and not self.at_header():
            if not self.lines[self.pos].strip() and self._only_blanks_until_boundary():
                # Blank lines before a hunk header, after '*** End of File' or '*** Move to:', or
                # before the next operation are padding, not a hunk.
                self.pos += 1
                continue
            hunks.append(self.parse_hunk(allow_bare=not hunks))
        if not hunks and move_to is None:
            raise PatchSyntaxError(
                f"'*** Update File: {path}' has no hunks",
                line=header_line,
                hint="add at least one '@@' hunk with '-'/'+' lines, or remove the operation",
            )
        return UpdateFile(
            path=path, move_to=move_to, hunks=tuple(hunks), refuse_existing=move_to is not None
        )

    def parse_hunk(self, *, allow_bare: bool) -> Hunk:
        source_line = self.first_line + self.pos
        anchors: list[str] = []
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if not line.startswith("@@"):
                break
            anchor = _anchor_text(line)
            if anchor:
                anchors.append(anchor)
            self.pos += 1
        header_seen = self.pos > 0 and self.lines[self.pos - 1].startswith("@@")
        if not header_seen and not allow_bare:
            raise self.error(
                f"expected a hunk header '@@', found {self.lines[self.pos].strip()[:60]!r}"
            )
        body: list[HunkLine] = []
        blank_at: set[int] = set()  # body lines that were empty lines of the patch text
        end_of_file = False
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            marker = self.peek_marker()
            if marker == EOF_MARKER:
                end_of_file = True
                self.pos += 1
                break
            if marker is not None or line.startswith("@@"):
                break
            if line[:1] in (" ", "-", "+"):
                body.append(HunkLine(kind=line[0], text=line[1:]))
            elif not line.strip():
                # An empty line is an empty context line wherever it stands, as Codex reads it
                # (editors and models drop the single space), also right before the next header.
                blank_at.add(len(body))
                body.append(HunkLine(kind=" ", text=""))
            else:
                raise self.error(
                    f"hunk lines must start with ' ', '-' or '+', found {line[:60]!r}",
                    hint="prefix context lines with a space",
                )
            self.pos += 1
        separator_blanks = 0
        if not end_of_file:
            kept = _drop_separator_blanks(body, blank_at)
            separator_blanks, body = len(body) - len(kept), kept
        # The error points at the hunk's first line, not at whatever follows the hunk.
        if not body:
            raise PatchSyntaxError(
                "a hunk has no lines",
                line=source_line,
                hint="give the hunk '-'/'+' or context lines",
            )
        return Hunk(
            anchors=tuple(anchors),
            lines=tuple(body),
            end_of_file=end_of_file,
            source_line=source_line,
            separator_blanks=separator_blanks,
        )

    def _only_blanks_until_boundary(self) -> bool:
        for j in range(self.pos, len(self.lines)):
            stripped = self.lines[j].strip()
            if stripped:
                return stripped.startswith(_HEADERS) or self.lines[j].startswith("@@")
        return True


_UNIFIED_RANGE = re.compile(r"^-\d+(?:,\d+)? \+\d+(?:,\d+)? @@\s*(?P<rest>.*)$")


def _anchor_text(line: str) -> str:
    """The context of an ``@@`` line: what follows ``@@ ``, its own leading whitespace kept (an
    indented ``    def f`` names the method, not a top-level ``def f``) and its trailing
    whitespace dropped, as Codex reads it. A unified-diff range
    (``@@ -3,4 +3,5 @@ def f``) is dropped, since agents sometimes mix that spelling in and its
    numbers say nothing here."""
    anchor = line[3:] if line.startswith("@@ ") else line[2:]
    if not anchor.strip():
        return ""
    unified = _UNIFIED_RANGE.match(anchor.strip())
    return unified.group("rest").strip() if unified else anchor.rstrip()


def _drop_separator_blanks(body: list[HunkLine], blank_at: set[int]) -> list[HunkLine]:
    """Empty lines that end a hunk of only added lines may separate it from what follows (then
    the hunk is a pure addition) or be empty context lines (as Codex reads them: it inserts the
    lines before the first blank line from the search position). The body without them is
    returned; the applier weighs both readings and refuses the hunk when they disagree. A context
    line written as a single space is context, as everywhere."""
    end = len(body)
    while end and end - 1 in blank_at:
        end -= 1
    if 0 < end < len(body) and all(line.kind == "+" for line in body[:end]):
        return body[:end]
    return body


def _header_path(stripped: str, header: str) -> str:
    return stripped[len(header) :].strip()


def render_codex(patch: Patch) -> str:
    """Render ``patch`` as canonical Codex text (the inverse of :func:`parse_codex`).

    Raises:
        ValueError: the patch says something Codex cannot (a copy, a file mode, a missing final
            newline, text-editor commands, SEARCH/REPLACE blocks).
    """
    out = [BEGIN]
    for op in patch.operations:
        if isinstance(op, CopyFile | EditFile) or (
            isinstance(op, AddFile | UpdateFile) and op.mode is not None
        ):
            raise ValueError(f"{op.op} of {op.path} has no Codex spelling")
        if isinstance(op, UpdateFile) and any(
            h.old_no_final_newline or h.new_no_final_newline for h in op.hunks
        ):
            raise ValueError(f"a missing final newline in {op.path} has no Codex spelling")
        if isinstance(op, UpdateFile) and any(h.block for h in op.hunks):
            raise ValueError(f"a SEARCH/REPLACE block on {op.path} has no Codex spelling")
        if isinstance(op, AddFile):
            out.append(ADD + op.path)
            body = op.content[:-1] if op.content.endswith("\n") else op.content
            if op.content:
                out.extend("+" + line for line in body.split("\n"))
        elif isinstance(op, DeleteFile):
            out.append(DELETE + op.path)
        else:
            out.append(UPDATE + op.path)
            if op.move_to is not None:
                out.append(MOVE + op.move_to)
            for hunk in op.hunks:
                if hunk.anchors:
                    out.extend("@@ " + anchor for anchor in hunk.anchors)
                else:
                    out.append("@@")
                out.extend(line.kind + line.text for line in hunk.lines)
                if hunk.end_of_file:
                    out.append(EOF_MARKER)
    out.append(END)
    return "\n".join(out) + "\n"
