"""Apply hunks to a file's bytes. Pure: bytes in, bytes out.

The matching ladder (each hunk independently, the first level that finds the hunk wins)::

    EXACT    lines equal
    RSTRIP   trailing whitespace ignored
    STRIP    leading and trailing whitespace ignored
    UNICODE  as STRIP, with typographic punctuation (dashes, quotes, odd spaces) folded to ASCII

A Codex hunk is placed by everything the patch says, in this order:

* its ``@@ <anchor>`` lines: the search starts past the first line matching each, in turn (as Codex
  reads them), and of the places the hunk's lines match from there, those inside the block the
  anchor line opens (the lines after it up to the next non-blank line indented no deeper, one
  opening with a closing bracket excepted; nested anchors nest) are taken when there are some;
* the order of the hunks: each after the previous one, and leaving room for the ones after it (a
  pass from the last hunk back finds the latest place of each).

A hunk left with exactly one place is applied there; one left with two or more is refused
(``ambiguous-context``), naming the places and the nearest line before or after them that differs
between them (the context line that would decide). A context-only hunk and a ``*** End of File``
hunk (pinned to the last lines) are never refused for that. A hunk whose expected lines end in
blank lines that are not in the file is tried again without them. A hunk of ``+`` lines followed
by empty lines of the patch text is read both ways: the empty lines as a separator (a pure
addition) and as empty context lines (as Codex reads them); when both readings fit and put the
lines at different places it is refused, otherwise the one that fits is taken.

What this applier guarantees, beyond finding the hunk:

* **context lines are never rewritten** — whatever level matched, only ``-``/``+`` lines change; the
  file's own bytes (indentation, trailing spaces, line ends) are kept for every other line;
* **line endings are preserved per line**: ``\\r\\n``, ``\\n`` and a lone ``\\r`` each end a line
  and stay as they were; added lines take the file's dominant ending;
* **the final-newline state is kept** unless the patch changes the last line (then the new last line
  ends like the others);
* **a UTF-8 byte order mark** is kept and ignored for matching;
* **a pure addition with an anchor** is inserted right after the anchor line (not at the end of
  file); without an anchor it is appended at the end, as Codex does;
* **binary or non-UTF-8 files are refused**, never mangled.

Hunks with line numbers (unified diffs: ``Hunk.old_start``/``new_start`` are set) are positioned
the way ``git apply`` positions them; the numbers are hints and the lines decide:

* the file is read as git reads it: split at ``\\n`` only (a ``\\r`` is part of its line), bytes
  that are not UTF-8 kept, a BOM part of line 1 when the diff shows it or inserts before line 1;
  a hunk that matches only with whitespace ignored gives its added lines the file's ending;
* hunks apply in order, each to the result of the ones before; the search for a hunk starts at its
  new start line (where it sits in that result, if the file is what the diff was made from) and
  goes outward one line at a time (hint, +1, -1, +2, -2, …) to both ends of the file; the nearest
  match wins;
* a hunk whose old start is line 1 (or 0) must match at the start of the file, and a hunk without
  trailing context lines must match at the end — the rules of ``git apply``, which a diff made
  with context always satisfies at the file's boundaries;
* a hunk without any context line (``git diff -U0``) is placed by its line numbers, as ``git apply
  --unidiff-zero`` places it: an insertion goes right after its old start line, other hunks are
  searched from their hinted line without the start and end rules;
* a hunk may not match lines that an earlier hunk wrote (overlapping hunks are refused);
* a hunk with ``\\ No newline at end of file`` must match at the end of the file (``git apply``
  compares that last line as a byte prefix, and may match it mid-file and join it to the next
  line), and at the ``exact`` level the file's last line must end, or not, as the hunk says; the
  new last line ends as the hunk says;
* each ladder level searches the whole file before the next level is tried, so a fuzzy match
  never wins over an exact one further away.

``git apply`` wants exact context; here the ladder still applies (and the receipt records the
level), so a whitespace-only difference is not a rejection.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from applyonce.patch.match import (
    _NORMALISERS,
    BOM,
    GIT_BINARY_WINDOW,
    AmbiguousContextError,
    HunkApplyError,
    Scope,
    _AddedLine,
    _Text,
    _without_last_empty_old_line,
    ambiguity,
    anchor_scope,
    candidates,
    decode_text,
)
from applyonce.patch.model import Hunk, HunkLine, MatchLevel
from applyonce.patch.repair import hunk_not_found
from applyonce.patch.search import find_ids, intern_into
from applyonce.patch.searchreplace import apply_blocks


@dataclass(frozen=True)
class _Edit:
    start: int
    stop: int
    lines: tuple[HunkLine, ...]


def apply_hunks(data: bytes, hunks: Sequence[Hunk], *, path: str) -> tuple[bytes, list[MatchLevel]]:
    """Apply ``hunks`` to ``data`` (the file's bytes).

    Returns:
        The new bytes and the level each hunk matched at.

    Raises:
        BinaryFileError: the file is binary (or, for Codex hunks, not UTF-8 text).
        HunkApplyError: a hunk's context or anchor was not found.
        AmbiguousContextError: a Codex hunk matches at more than one place, or a SEARCH/REPLACE
            block's SEARCH lines do.
    """
    if any(hunk.block for hunk in hunks):
        # SEARCH/REPLACE blocks: each searched in the whole file (``searchreplace.py``).
        return apply_blocks(data, hunks, path=path)
    if hunks and all(hunk.old_start is not None and hunk.new_start is not None for hunk in hunks):
        # As git reads a file: split at "\n" only, a "\r" part of its line, the bytes kept. A BOM
        # is content too when the diff shows one (git's diff of such a file does, on line 1) or
        # inserts before line 1; a diff that does neither leaves it in place.
        bom_in_diff = any(
            line.text.startswith(BOM) for hunk in hunks for line in hunk.lines
        ) or any(hunk.old_start == 0 for hunk in hunks)
        # A NUL past git's binary window is text to git, and so here: kept byte for byte.
        text = decode_text(
            data,
            path=path,
            split_cr=False,
            lossless=True,
            bom_is_text=bom_in_diff,
            binary_window=GIT_BINARY_WINDOW,
        )
        return _apply_positioned(text, hunks, path=path)
    return _apply_searched(decode_text(data, path=path), hunks, path=path)


@dataclass
class _Placed:
    """A Codex hunk with old lines, as the search found it: every place it may be, ascending."""

    index: int
    lines: list[HunkLine]
    places: list[int]
    level: MatchLevel
    length: int  # old lines
    any_place: bool  # context-only or ``*** End of File``: never refused for several places
    anchors: tuple[str, ...] = ()  # the hunk's ``@@`` anchor lines (a refusal names them)


def _apply_searched(
    text: _Text, hunks: Sequence[Hunk], *, path: str
) -> tuple[bytes, list[MatchLevel]]:
    """Codex hunks, placed by everything the patch says (module docstring): each hunk's ``@@``
    anchors and the blocks they open, then the order of the hunks. The search reads the hunks in
    turn, each from the end of the previous one at its first place (as Codex reads them); then a
    pass from the last hunk back finds the latest place each may take with the hunks after it
    still in order; a hunk goes to the one place left between its neighbours, or is refused."""
    edits: list[_Edit | _Placed] = []
    cursor = 0
    n = len(text.bodies)
    for index, hunk in enumerate(hunks, start=1):
        scope = anchor_scope(text, hunk.anchors, cursor)
        if isinstance(scope, str):
            raise HunkApplyError(
                f"{path}: hunk {index}: anchor line {scope!r} not found",
                path=path,
                hunk=index,
                patch_line=hunk.source_line,
                expected=[scope],
            )
        cursor = scope.start
        where = f"{path}: hunk {index}"
        lines = list(hunk.lines)
        if not hunk.old_lines:
            # A pure addition: after its anchor, or else at the end of the file. At the end it
            # leaves the search position alone, so the hunks after it are still found.
            at = cursor if hunk.anchors and not hunk.end_of_file else n
            if hunk.separator_blanks:
                _check_separator_reading(text, hunk, scope, at, where=where)
            edits.append(_Edit(at, at, tuple(lines)))
            continue
        found = candidates(text, hunk.old_lines, scope, at_end=hunk.end_of_file)
        if found is None and (trimmed := _without_last_empty_old_line(lines)) is not None:
            lines = trimmed
            old = [line.text for line in lines if line.kind != "+"]
            if not old:
                # Nothing left to find: an addition, where the search is, or at the end when the
                # hunk says so (Codex puts it at the search position even then, at the top).
                at = n if hunk.end_of_file else cursor
                edits.append(_Edit(at, at, tuple(lines)))
                continue
            found = candidates(text, old, scope, at_end=hunk.end_of_file)
        if found is None:
            raise hunk_not_found(
                text.bodies,
                text.ids,
                hunk,
                cursor,
                path=path,
                index=index,
                message=f"{where}: expected lines not found"
                + (" at the end of the file" if hunk.end_of_file else "")
                + f" (first: {hunk.old_lines[0][:60]!r})",
            )
        places, level = found
        length = sum(1 for line in lines if line.kind != "+")
        any_place = hunk.end_of_file or all(line.kind == " " for line in lines)
        edits.append(_Placed(index, lines, places, level, length, any_place, tuple(hunk.anchors)))
        cursor = places[0] + length
    # The latest place of each hunk that leaves room for the latest places of those after it.
    # ``bound[i]``: where the hunk after hunk i may start at the latest.
    bound: dict[int, int] = {}
    limit = n
    for edit in reversed(edits):
        if isinstance(edit, _Placed):
            bound[edit.index] = limit
            fits = [p for p in edit.places if p + edit.length <= limit]
            limit = fits[-1] if fits else edit.places[0]
    placed: list[_Edit] = []
    levels: list[MatchLevel] = []
    earliest = 0
    for edit in edits:
        if isinstance(edit, _Edit):
            placed.append(edit)
            levels.append(MatchLevel.EXACT)
            continue
        places = [p for p in edit.places if p >= earliest and p + edit.length <= bound[edit.index]]
        places = places or edit.places[:1]
        if len(places) > 1 and not edit.any_place:
            raise ambiguity(
                text,
                places,
                edit.length,
                edit.level,
                where=f"{path}: hunk {edit.index}",
                anchors=edit.anchors,
            )
        pos = places[0]
        earliest = pos + edit.length
        placed.append(_Edit(pos, earliest, tuple(edit.lines)))
        levels.append(edit.level)
    # Only the changed lines are placed (context keeps the file's bytes anyway), each run where
    # it is in the file; the sort is stable, so two runs at one place keep the patch's order, as
    # Codex orders them: an addition appended at the end before a later hunk's last added line.
    runs = sorted((run for edit in placed for run in _runs(edit)), key=lambda run: run.start)
    return _render(text, runs), levels


class AmbiguousBlankLinesError(AmbiguousContextError):
    """Empty lines after a hunk's added lines read as a separator put the lines at one place, read
    as empty context lines (as Codex reads them) at another."""

    default_hint = (
        "start the empty lines with a space to mean empty context lines, or remove them (end the "
        "hunk with '*** End of File' to append at the end of the file)"
    )


def _check_separator_reading(text: _Text, hunk: Hunk, scope: Scope, at: int, *, where: str) -> None:
    """Refuse a pure addition followed by empty lines when, read as empty context lines, they are
    in the file and would put the added lines elsewhere than ``at``, where the separator reading
    puts them.

    Raises:
        AmbiguousBlankLinesError: the two readings disagree.
    """
    found = candidates(text, [""] * hunk.separator_blanks, scope, at_end=False)
    if found is None or found[0] == [at]:
        return
    places = found[0]
    shown = ", ".join(str(p + 1) for p in places[:5]) + (" …" if len(places) > 5 else "")
    plural = "s" if hunk.separator_blanks > 1 else ""
    said = "after the anchor line" if at < len(text.bodies) else "at the end of the file"
    raise AmbiguousBlankLinesError(
        f"{where}: the {hunk.separator_blanks} empty line{plural} after the added lines read as a "
        f"separator put them {said} (line {at + 1}), read as empty context lines before line "
        f"{shown}",
        candidates=[at + 1, *(p + 1 for p in places)],
        match_level=found[1].label,
    )


def _runs(edit: _Edit) -> list[_Edit]:
    """``edit`` cut into its runs of removed and added lines, each with its place in the file."""
    runs: list[_Edit] = []
    at = edit.start
    start = at
    run: list[HunkLine] = []
    for line in edit.lines:
        if line.kind == " ":
            if run:
                runs.append(_Edit(start, at, tuple(run)))
                run = []
            at += 1
            continue
        if not run:
            start = at
        run.append(line)
        if line.kind == "-":
            at += 1
    if run:
        runs.append(_Edit(start, at, tuple(run)))
    return runs


def _hunk_output(
    lines: Iterable[HunkLine], bodies: list[str], ends: list[str], start: int, added: _AddedLine
) -> tuple[list[str], list[str]]:
    """The lines a hunk placed at ``start`` leaves: context lines keep the file's own bytes (never
    the patch's), removed lines go, added lines are what ``added`` makes of their text."""
    out_bodies: list[str] = []
    out_ends: list[str] = []
    j = start
    for line in lines:
        if line.kind == " ":
            out_bodies.append(bodies[j])
            out_ends.append(ends[j])
            j += 1
        elif line.kind == "-":
            j += 1
        else:
            body, end = added(line.text)
            out_bodies.append(body)
            out_ends.append(end)
    return out_bodies, out_ends


def _close_inner_lines(ends: list[str], newline: str) -> None:
    """A line without an ending can only stay last; if the patch put lines after it, it gets one."""
    for i in range(len(ends) - 1):
        if not ends[i]:
            ends[i] = newline


def _render(text: _Text, edits: list[_Edit]) -> bytes:
    newline = text.dominant_end()

    def added(line: str) -> tuple[str, str]:
        return line, newline

    bodies: list[str] = []
    ends: list[str] = []
    src = 0
    for edit in edits:
        bodies.extend(text.bodies[src : edit.start])
        ends.extend(text.ends[src : edit.start])
        new_bodies, new_ends = _hunk_output(edit.lines, text.bodies, text.ends, edit.start, added)
        bodies.extend(new_bodies)
        ends.extend(new_ends)
        src = max(src, edit.stop)
    bodies.extend(text.bodies[src:])
    ends.extend(text.ends[src:])
    _close_inner_lines(ends, newline)
    return text.encode(bodies, ends)


# ---------------------------------------------------------------- hunks with line numbers


def _trailing_context(hunk: Hunk) -> int:
    """How many context lines come after the hunk's last change."""
    count = 0
    for line in reversed(hunk.lines):
        if line.kind != " ":
            break
        count += 1
    return count


def _search_rank(start: int, pos: int) -> int:
    """The place of ``start`` in the search from ``pos``: pos, pos+1, pos-1, pos+2, pos-2, …"""
    distance = start - pos
    return 2 * distance - 1 if distance > 0 else -2 * distance


# The first window's radius around a unified hunk's hinted line (doubled until a match fits).
FIRST_RADIUS = 1024


@dataclass
class _Image:
    """The file as earlier hunks left it; ``patched[i]``: line i was written by a hunk.

    ``_ids[level]``: the lines' keys at ``level`` as ids, and the key -> id table; made the first
    time a hunk is searched at that level and kept up to date by :meth:`replace`, so the lines are
    hashed once, not once per search window of every hunk (many hunks with stale line numbers
    would make that quadratic).
    """

    bodies: list[str]
    ends: list[str]
    patched: list[bool]
    _ids: dict[MatchLevel, tuple[list[int], dict[str, int]]] = field(default_factory=dict)

    def level_ids(self, level: MatchLevel) -> tuple[list[int], dict[str, int]]:
        """The lines' keys at ``level`` as ids, and the key -> id table (made once)."""
        if level not in self._ids:
            normalise = _NORMALISERS[level]
            keys = self.bodies if level is MatchLevel.EXACT else [normalise(b) for b in self.bodies]
            table: dict[str, int] = {}
            self._ids[level] = intern_into(table, keys), table
        return self._ids[level]

    def find(
        self,
        old: list[str],
        pos: int,
        level: MatchLevel,
        *,
        at_start: bool,
        at_end: bool,
        old_no_final_newline: bool,
    ) -> int | None:
        n, m = len(self.bodies), len(old)
        if at_start:
            pos = 0
        elif at_end:
            pos = n - m
        if not 0 <= pos <= n:
            pos = n  # as git clamps a start beyond the file (or before it, when m > n)
        normalise = _NORMALISERS[level]
        want = [normalise(line) for line in old]
        if not m:
            return self._find_empty(pos, at_start=at_start, at_end=at_end)
        if m > n:
            return None
        if at_start or at_end:
            # One place only: the start, or the end (both: the hunk is the whole file).
            start = 0 if at_start else n - m
            if at_start and at_end and m != n:
                return None
            if any(self.patched[start : start + m]):
                return None  # an earlier hunk wrote some of these lines
            if not self._fits(start, m, level, old_no_final_newline):
                return None
            keys = [normalise(b) for b in self.bodies[start : start + m]]
            return start if keys == want else None
        # The nearest match wins (the search order of ``_search_rank``): look in a window around
        # ``pos`` and double it until a match fits or the window holds the whole file. A match in
        # a window of radius d is nearer than any outside it, and the windows' sizes add up to
        # O(file + hunk): the search is linear, and short when the hint is near.
        ids, table = self.level_ids(level)
        pattern = [table.get(line, -1) for line in want]
        if -1 in pattern:
            return None  # a line the file does not have
        # Each window searches only the starts the smaller one before it did not hold.
        radius = max(2 * m, FIRST_RADIUS)
        done_lo, done_hi = pos, pos - 1  # the starts searched so far: none
        while True:
            lo = max(pos - radius, 0)
            hi = min(pos + radius, n - m)  # the last start in the window
            best: int | None = None
            for a, b in ((lo, min(done_lo - 1, hi)), (max(done_hi + 1, lo), hi)):
                if a > b:
                    continue
                for start in self._unpatched(find_ids(ids, pattern, a, stop=b + m), m, a, b):
                    if not self._fits(start, m, level, old_no_final_newline):
                        continue
                    if best is None or _search_rank(start, pos) < _search_rank(best, pos):
                        best = start
            if best is not None or (lo == 0 and hi == n - m):
                return best
            done_lo, done_hi = lo, hi
            radius *= 2

    def _unpatched(self, starts: list[int], m: int, a: int, b: int) -> list[int]:
        """The ``starts`` (all in ``a..b``) whose ``m`` lines no earlier hunk wrote: each checked
        alone when that costs less than a running count over the lines ``a..b + m``."""
        if len(starts) * m <= b - a + m:
            return [s for s in starts if True not in self.patched[s : s + m]]
        written = list(accumulate(self.patched[a : b + m], initial=0))
        return [s for s in starts if written[s - a + m] == written[s - a]]

    def _fits(self, start: int, m: int, level: MatchLevel, old_no_final_newline: bool) -> bool:
        """At the exact level, a match that reaches the end of the file must end as the hunk says
        (the file's last line has a line ending, or has not)."""
        if level is MatchLevel.EXACT and start + m == len(self.bodies):
            return (self.ends[-1] == "") == old_no_final_newline
        return True

    def _find_empty(self, pos: int, *, at_start: bool, at_end: bool) -> int | None:
        """Where a hunk without old lines goes: at ``pos``, or where the start and end rules
        pin it."""
        n = len(self.bodies)
        if at_start and at_end:
            return 0 if n == 0 else None
        if at_start:
            return 0
        if at_end:
            return n
        return pos

    def replace(self, start: int, hunk: Hunk, old_count: int, added: _AddedLine) -> None:
        n = len(self.bodies)
        stop = start + old_count
        bodies, ends = _hunk_output(hunk.lines, self.bodies, self.ends, start, added)
        if stop == n and bodies:
            # The hunk reaches the end of the file: its last line ends as the hunk says.
            ends[-1] = "" if hunk.new_no_final_newline else (ends[-1] or "\n")
        self.bodies[start:stop] = bodies
        self.ends[start:stop] = ends
        self.patched[start:stop] = [True] * len(bodies)
        for level, (ids, table) in self._ids.items():
            normalise = _NORMALISERS[level]
            ids[start:stop] = intern_into(table, [normalise(b) for b in bodies])


def _apply_positioned(
    text: _Text, hunks: Sequence[Hunk], *, path: str
) -> tuple[bytes, list[MatchLevel]]:
    image = _Image(list(text.bodies), list(text.ends), [False] * len(text.bodies))
    # ``text`` is split at "\n" only, a "\r" part of its line: a hunk that matched byte for byte
    # is written as the diff says. One that matched only with whitespace ignored was made for
    # other line ends: its added lines take the file's.
    cr = "\r" if text.crlf_dominant() else ""

    def verbatim(line: str) -> tuple[str, str]:
        return line, "\n"

    def like_the_file(line: str) -> tuple[str, str]:
        return line.rstrip("\r") + cr, "\n"

    levels: list[MatchLevel] = []
    for index, hunk in enumerate(hunks, start=1):
        assert hunk.old_start is not None and hunk.new_start is not None
        old = hunk.old_lines
        trailing = _trailing_context(hunk)
        has_context = any(line.kind == " " for line in hunk.lines)
        # The new start is where the hunk is in the file as the earlier hunks left it.
        pos = max(hunk.new_start - 1, 0)
        at_start = hunk.old_start == 0 or (hunk.old_start == 1 and has_context)
        at_end = (
            hunk.end_of_file
            or hunk.old_no_final_newline
            or hunk.new_no_final_newline
            or (has_context and trailing == 0)
        )
        found: tuple[int, MatchLevel] | None = None
        for level in MatchLevel:
            start = image.find(
                old,
                pos,
                level,
                at_start=at_start,
                at_end=at_end,
                old_no_final_newline=hunk.old_no_final_newline,
            )
            if start is not None:
                found = start, level
                break
        if found is None:
            where = " at the start of the file" if at_start else ""
            where = " at the end of the file" if at_end and not at_start else where
            first = old[0][:60] if old else ""
            raise hunk_not_found(
                image.bodies,
                image.level_ids,
                hunk,
                pos,
                path=path,
                index=index,
                message=f"{path}: hunk {index} (@@ -{hunk.old_start},{len(old)} @@): expected "
                f"lines not found{where} (first: {first!r})",
            )
        start, level = found
        fuzzy = level is not MatchLevel.EXACT
        image.replace(start, hunk, len(old), like_the_file if fuzzy else verbatim)
        levels.append(level)
    _close_inner_lines(image.ends, "\n")
    return text.encode(image.bodies, image.ends), levels
