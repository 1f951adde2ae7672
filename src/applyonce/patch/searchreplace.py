"""SEARCH/REPLACE blocks (``--format search-replace``): the parser, and the applier of their hunks.

Three spellings of one idea, each as its tool describes it::

    Aider (edit block)           Cline (replace_in_file)      Roo (apply_diff)

    path/to/file.py              ------- SEARCH               <<<<<<< SEARCH
    ```python                    old lines                    :start_line:12
    <<<<<<< SEARCH               =======                      -------
    old lines                    new lines                    old lines
    =======                      +++++++ REPLACE              =======
    new lines                                                 new lines
    >>>>>>> REPLACE                                           >>>>>>> REPLACE
    ```

Grammar (one item per line; ``NL`` is the end of a line)::

    document   := (other_line | block)+
    block      := [name NL [fence NL]] search NL [hint] text* divider NL text* replace NL
    search     := ("<"{5,9} " SEARCH" [">"]) | ("-"{5,9} " SEARCH")
    divider    := "="{5,9}
    replace    := (">"{5,9} " REPLACE") | ("+"{5,9} " REPLACE")
    hint       := ":start_line:" digits NL [":end_line:" digits NL] ["-"{5,9} NL]
    fence      := "```" …

* **the file** — the line right before the ``SEARCH`` marker, or right before the ``` fence that
  opens the block, names the file, as Aider reads it (``#``, ``:``, backticks and ``*`` around it
  are dropped). A block without such a line edits the file of the block before it. Cline and Roo
  pass the path beside the diff (their tool's ``path`` argument): the adapters put it on the
  line before every ``SEARCH`` marker (:func:`blocks_for`), so no line of the diff can name
  another file.
* **text outside the blocks** — prose and the fences around a block are skipped, as Aider skips
  them; every marker line allows trailing whitespace.
* **an empty SEARCH** creates the file with the REPLACE text (Aider's convention); a path that is
  already there refuses the patch (``already-exists``): a block never overwrites a file by
  surprise, unlike Aider, which appends to it. It must be the path's only block.
* **``:start_line:N``** (Roo; and ``:end_line:N``) is read, but only as a hint: the SEARCH text
  must be found exactly once anyway, so the number decides nothing and is not part of the
  identity.
* **several blocks and several files in one call, all or nothing**: the blocks of one path, in the
  order written, become one :class:`UpdateFile` at the place of its first block.
* **CRLF patch text** is read as LF; the files keep their own line endings.

How a block applies (:func:`apply_blocks`): each block of a file applies to the file as the
blocks before it left it (as Aider and Cline apply them); its SEARCH lines must be found **exactly
once** in that whole text at the first level of the matching ladder (``match.py``) that finds
them at all. Found at several places: refused, naming them (``ambiguous-context``); not found:
refused with the nearest region of the file and whether the REPLACE lines are there already
(``hunk-mismatch``, the repair data of ``repair.py``). Lines that SEARCH and REPLACE both have, at
matching places (a line diff of the two), keep the file's own bytes; the other REPLACE lines take
the file's dominant line ending (a CRLF file stays CRLF); a file without a final newline keeps
that state, also when a block changes its last line; a byte order mark is kept; binary and
non-UTF-8 files are refused. Each line of the file is normalised and hashed once per ladder level
whatever the number of blocks; a SEARCH is found by a scan (in C) for the line of it the file has
fewest of.

**Identity.** A block is a :class:`Hunk` of ``-`` (SEARCH) and ``+`` (REPLACE) lines marked
``block`` (dumped, so part of the call's identity). A Codex update of the same lines is another
call: a Codex hunk is searched after the hunk before it and applies to the file as it was, a
block is searched in the whole file as the blocks before it left it, so the two can apply at
different places or one refuse where the other applies, and one receipt must never answer the
other. A file created by an empty SEARCH is an :class:`AddFile`: the same call as Codex's ``Add
File`` and the ``git diff`` of that file (an addition has one meaning in every format). Formats
that existed before keep their dumps, and so their Call-Ids: ``block`` is dumped only when set.

The parser is pure: it never reads files and never decides whether a path is safe.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from applyonce.patch.codex import PatchSyntaxError, _split_patch_lines
from applyonce.patch.editjson import _path_key
from applyonce.patch.match import _NORMALISERS, AmbiguousContextError, decode_text
from applyonce.patch.model import (
    AddFile,
    FileOp,
    Hunk,
    HunkLine,
    MatchLevel,
    Patch,
    UpdateFile,
    has_raw_bytes,
)
from applyonce.patch.repair import hunk_not_found
from applyonce.patch.search import intern_into

_SEARCH = re.compile(r"^(?:<{5,9} SEARCH>?|-{5,9} SEARCH)\s*$")
_DIVIDER = re.compile(r"^={5,9}\s*$")
_REPLACE = re.compile(r"^(?:>{5,9} REPLACE|\+{5,9} REPLACE)\s*$")
_START_LINE = re.compile(r"^:start_line:\s*(\d+)\s*$")
_END_LINE = re.compile(r"^:end_line:\s*(\d+)\s*$")
_SEPARATOR = re.compile(r"^-{5,9}\s*$")
_DIFF_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
_FENCE = "```"

AMBIGUOUS_HINT = (
    "copy more lines around the change into the SEARCH text, so it matches one place only"
)


def looks_like_search_replace(text: str) -> bool:
    """True when ``text`` has a ``<<<<<<< SEARCH`` line, or a ``------- SEARCH`` line and no line
    of a unified diff's headers (``diff --git``, ``@@ -N +N @@``): the parser then says what else
    a block lacks. A unified diff's lines start with ``' '``, ``-`` or ``+`` and a Codex patch's
    with ``+`` as well, so neither has a bare ``<<<<<<< SEARCH`` line; but the diff of a file
    whose line ``------- SEARCH`` is removed has a line ``-------- SEARCH``."""
    if "SEARCH" not in text:
        return False
    lines = _split_patch_lines(text)
    markers = [line for line in lines if _SEARCH.match(line)]
    if any(line.startswith("<") for line in markers):
        return True
    return bool(markers) and not any(
        line.startswith("diff --git ") or _DIFF_HUNK.match(line) for line in lines
    )


def blocks_for(path: str, diff: str) -> str:
    """The patch text of a tool call that gives the file apart from its blocks (Cline's
    ``replace_in_file``, Roo's ``apply_diff``): ``path`` on the line before every ``SEARCH``
    marker, so every block edits that file whatever else the diff's lines say.

    Raises:
        PatchSyntaxError: ``path`` is not one line.
    """
    if not path.strip() or "\n" in path or "\r" in path:
        raise PatchSyntaxError(
            "the path must be one line, not empty", hint="give the file's path relative to the root"
        )
    out: list[str] = []
    for line in _split_patch_lines(diff):
        if _SEARCH.match(line):
            out.append(path)
        out.append(line)
    return "\n".join(out) + "\n"


def parse_search_replace(text: str) -> Patch:
    """Parse SEARCH/REPLACE blocks into a :class:`Patch`.

    Raises:
        PatchSyntaxError: with the 1-based line number of the first problem.
    """
    if has_raw_bytes(text):
        raise PatchSyntaxError(
            "the patch is not UTF-8 text", hint="send the SEARCH/REPLACE blocks as UTF-8 text"
        )
    lines = _split_patch_lines(text)
    blocks: list[tuple[str, int, list[str], list[str]]] = []
    path: str | None = None
    pos = 0
    while pos < len(lines):
        if not _SEARCH.match(lines[pos]):
            if _DIVIDER.match(lines[pos]) or _REPLACE.match(lines[pos]):
                raise PatchSyntaxError(
                    f"{lines[pos].strip()!r} outside a block",
                    line=pos + 1,
                    hint="open each block with a '<<<<<<< SEARCH' line",
                )
            pos += 1
            continue
        named = _file_name(lines, pos)
        if named is not None:
            path = named
        if path is None:
            raise PatchSyntaxError(
                "the block has no file name",
                line=pos + 1,
                hint="put the file's path alone on the line before '<<<<<<< SEARCH'",
            )
        marker = pos
        pos = _skip_hint(lines, pos + 1)
        search: list[str] = []
        while pos < len(lines) and not _DIVIDER.match(lines[pos]):
            if _SEARCH.match(lines[pos]) or _REPLACE.match(lines[pos]):
                raise PatchSyntaxError(
                    f"expected '=======' before {lines[pos].strip()!r}",
                    line=pos + 1,
                    hint="separate the SEARCH lines from the REPLACE lines with '======='",
                )
            search.append(lines[pos])
            pos += 1
        if pos == len(lines):
            raise PatchSyntaxError(
                "the block has no '=======' line",
                line=marker + 1,
                hint="separate the SEARCH lines from the REPLACE lines with '======='",
            )
        pos += 1
        replace: list[str] = []
        while pos < len(lines) and not _REPLACE.match(lines[pos]):
            if _SEARCH.match(lines[pos]):
                break
            replace.append(lines[pos])
            pos += 1
        if pos == len(lines) or not _REPLACE.match(lines[pos]):
            raise PatchSyntaxError(
                "the block is not closed by a '>>>>>>> REPLACE' line",
                line=marker + 1,
                hint="end each block with a '>>>>>>> REPLACE' line",
            )
        pos += 1
        blocks.append((path, marker + 1, search, replace))
    if not blocks:
        raise PatchSyntaxError(
            "the patch has no SEARCH/REPLACE block",
            hint="send blocks of '<<<<<<< SEARCH', the old lines, '=======', the new lines, "
            "'>>>>>>> REPLACE'",
        )
    return Patch(operations=tuple(_operations(blocks)))


def _file_name(lines: Sequence[str], marker: int) -> str | None:
    """The file a block names: the line before its marker, or before the fence that opens it."""
    at = marker - 1
    if at >= 0 and lines[at].strip().startswith(_FENCE):
        at -= 1
    if at < 0:
        return None
    line = lines[at].strip()
    if not line or line.startswith(_FENCE) or _REPLACE.match(line):
        return None
    name = line.rstrip(":").strip().lstrip("#").strip().strip("`*").strip()
    return name or None


def _skip_hint(lines: Sequence[str], pos: int) -> int:
    """Past Roo's ``:start_line:N`` (``:end_line:N``) and the ``-------`` line after it."""
    if pos < len(lines) and _START_LINE.match(lines[pos]):
        pos += 1
        if pos < len(lines) and _END_LINE.match(lines[pos]):
            pos += 1
        if pos < len(lines) and _SEPARATOR.match(lines[pos]):
            pos += 1
    return pos


def _operations(blocks: list[tuple[str, int, list[str], list[str]]]) -> list[FileOp]:
    groups: dict[str, tuple[str, list[tuple[int, list[str], list[str]]]]] = {}
    for path, line, search, replace in blocks:
        groups.setdefault(_path_key(path), (path, []))[1].append((line, search, replace))
    operations: list[FileOp] = []
    for path, items in groups.values():
        creates = [line for line, search, _replace in items if not search]
        if creates and len(items) > 1:
            raise PatchSyntaxError(
                f"{path}: a block with an empty SEARCH creates the file; it must be the file's "
                "only block",
                line=creates[0],
                hint="write the whole new file in one block, or give the SEARCH lines",
            )
        if creates:
            replace = items[0][2]
            content = "".join(line + "\n" for line in replace)
            operations.append(AddFile(path=path, content=content, refuse_existing=True))
            continue
        hunks = tuple(
            Hunk(
                lines=tuple(HunkLine(kind="-", text=t) for t in search)
                + tuple(HunkLine(kind="+", text=t) for t in replace),
                block=True,
                source_line=line,
            )
            for line, search, replace in items
        )
        operations.append(UpdateFile(path=path, hunks=hunks))
    return operations


# ---------------------------------------------------------------- applying the blocks


@dataclass
class _Lines:
    """The file as the blocks before left it, with each ladder level's line ids (made the first
    time a block is searched at that level) and how often each id occurs, kept up to date as
    blocks replace lines: a line is normalised and hashed once, not once per block."""

    bodies: list[str]
    ends: list[str]
    _ids: dict[MatchLevel, tuple[list[int], dict[str, int], Counter[int]]] = field(
        default_factory=dict
    )

    def _index(self, level: MatchLevel) -> tuple[list[int], dict[str, int], Counter[int]]:
        if level not in self._ids:
            normalise = _NORMALISERS[level]
            table: dict[str, int] = {}
            ids = intern_into(table, [normalise(b) for b in self.bodies])
            self._ids[level] = ids, table, Counter(ids)
        return self._ids[level]

    def level_ids(self, level: MatchLevel) -> tuple[list[int], dict[str, int]]:
        """The lines' ids at ``level`` and the key -> id table (``repair.LevelIds``)."""
        ids, table, _counts = self._index(level)
        return ids, table

    def find(self, old: Sequence[str], level: MatchLevel, limit: int) -> list[int]:
        """The first ``limit`` places of ``old`` at ``level``, overlapping ones included. The
        file is scanned (in C, ``list.index``) for the SEARCH line it has fewest of, and the
        whole SEARCH compared at each of its places only."""
        ids, table, counts = self._index(level)
        normalise = _NORMALISERS[level]
        pattern = [table.get(normalise(line), -1) for line in old]
        if not pattern or -1 in pattern:
            return []
        k = min(range(len(pattern)), key=lambda i: counts[pattern[i]])
        anchor, m = pattern[k], len(pattern)
        found: list[int] = []
        at = k - 1
        while len(found) < limit:
            try:
                at = ids.index(anchor, at + 1)
            except ValueError:
                break
            start = at - k
            if ids[start : start + m] == pattern:
                found.append(start)
        return found

    def replace(self, start: int, stop: int, bodies: list[str], ends: list[str]) -> None:
        self.bodies[start:stop] = bodies
        self.ends[start:stop] = ends
        for level, (ids, table, counts) in self._ids.items():
            counts.subtract(ids[start:stop])
            normalise = _NORMALISERS[level]
            new = intern_into(table, [normalise(b) for b in bodies])
            counts.update(new)
            ids[start:stop] = new


def apply_blocks(
    data: bytes, hunks: Sequence[Hunk], *, path: str
) -> tuple[bytes, list[MatchLevel]]:
    """Apply SEARCH/REPLACE ``hunks`` (``Hunk.block``) to ``data``, each to the result of the
    ones before (module docstring).

    Returns:
        The new bytes and the level each block matched at.

    Raises:
        BinaryFileError: the file is binary or not UTF-8 text.
        AmbiguousContextError: a block's SEARCH lines are at several places.
        HunkApplyError: a block's SEARCH lines are not in the file.
    """
    text = decode_text(data, path=path)
    newline = text.dominant_end()
    lines = _Lines(list(text.bodies), list(text.ends))
    bodies, ends = lines.bodies, lines.ends
    levels: list[MatchLevel] = []
    for index, hunk in enumerate(hunks, start=1):
        old, new = hunk.old_lines, hunk.new_lines
        where = f"{path}: block {index}"
        found: list[int] = []
        level = MatchLevel.EXACT
        for level in MatchLevel:
            found = lines.find(old, level, limit=11)
            if found:
                break
        if not found:
            raise hunk_not_found(
                bodies,
                lines.level_ids,
                hunk,
                0,
                path=path,
                index=index,
                message=f"{where}: the SEARCH lines are not in the file"
                + (f" (first: {old[0][:60]!r})" if old else ""),
            )
        if len(found) > 1:
            shown = ", ".join(str(i + 1) for i in found[:10])
            more = " and more" if len(found) > 10 else ""
            raise AmbiguousContextError(
                f"{where}: the SEARCH lines match at {len(found)}{'+' if more else ''} places "
                f"(lines {shown}{more}; first SEARCH line: {old[0][:60]!r})",
                hint=AMBIGUOUS_HINT,
                path=path,
                hunk=index,
                patch_line=hunk.source_line,
                candidates=[i + 1 for i in found],
                match_level=level.label,
            )
        start = found[0]
        stop = start + len(old)
        out_bodies, out_ends = _replaced(bodies, ends, start, old, new, newline)
        if stop == len(bodies) and ends and ends[-1] == "":
            # The block reaches the last line, which has no line ending: nor has the new one.
            if out_ends:
                out_ends[-1] = ""
            elif start:
                ends[start - 1] = ""
        lines.replace(start, stop, out_bodies, out_ends)
        levels.append(level)
    return text.encode(bodies, ends), levels


def _replaced(
    bodies: Sequence[str],
    ends: Sequence[str],
    start: int,
    old: Sequence[str],
    new: Sequence[str],
    newline: str,
) -> tuple[list[str], list[str]]:
    """The lines that replace ``old`` (found at ``start``): a line that SEARCH and REPLACE both
    have, at matching places (a line diff of the two), keeps the file's bytes; the others are
    REPLACE's text with the file's dominant line ending."""
    out_bodies: list[str] = []
    out_ends: list[str] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out_bodies.extend(bodies[start + i1 : start + i2])
            out_ends.extend(ends[start + i1 : start + i2])
        else:
            out_bodies.extend(new[j1:j2])
            out_ends.extend([newline] * (j2 - j1))
    # A line without an ending can only stay last.
    for k in range(len(out_ends) - 1):
        if not out_ends[k]:
            out_ends[k] = newline
    return out_bodies, out_ends
