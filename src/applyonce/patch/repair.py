"""Repair data for lines that were not found (pure): what a model needs to send a better patch.

When a hunk's expected lines (or a ``str_replace``'s ``old_str``) are not in the file, the error
carries, beside every expected line:

* **the nearest region** of the file: the window of the file, as long as the expected lines, with
  the most lines equal to them at the same offset after whitespace normalisation (leading and
  trailing whitespace stripped, typographic punctuation folded, inner runs of whitespace made one
  space); ties go to the window nearest the place the search was asked to look (after the ``@@``
  anchor, at a unified hunk's line number); shown with a few lines around it, at most
  :data:`REGION_LINES` lines;
* **already applied?**: where the hunk's new lines (context and added lines) are in the file,
  when they are: the patch, or its hunk, has probably been applied already.

Both are linear in the file's size. The window is found by voting: each file line equal to an
expected line votes for the one window that would put them side by side; an expected line that
is blank, or repeated more than :data:`VOTE_LIMIT` times in the hunk, does not vote, so a file line
casts at most that many votes (a search comparing the hunk at every place would cost file x hunk).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from applyonce.patch.match import _NORMALISERS, _UNICODE_FOLD, HunkApplyError
from applyonce.patch.model import Hunk, MatchLevel
from applyonce.patch.search import find_ids

REGION_LINES = 20  # lines of the file shown at most
CONTEXT_AROUND = 2  # lines shown before and after the window
SHOWN_CHARS = 300  # a shown line longer than this is cut
VOTE_LIMIT = 4


def loose(line: str) -> str:
    """A line as the nearest-region search compares it: whitespace normalised (ASCII lines,
    the common case, skip the fold)."""
    return " ".join((line if line.isascii() else line.translate(_UNICODE_FOLD)).split())


def best_window(keys: Sequence[str], want: Sequence[str], near: int) -> tuple[int, int]:
    """The start of the window of ``keys`` (the file's lines, :func:`loose`) most like ``want``
    (the expected lines, alike), and how many of its lines are equal to them.

    A window may start before the file or reach past its end (the hunk has lines the file has
    not). Ties, and a file where no line votes, go to the window nearest ``near``.
    """
    n, m = len(keys), len(want)
    if m == 0 or n == 0:
        return max(min(near, n), 0), 0
    offsets: dict[str, list[int]] = {}
    for k, key in enumerate(want):
        if key:
            offsets.setdefault(key, []).append(k)
    voters = {key: ks for key, ks in offsets.items() if len(ks) <= VOTE_LIMIT}
    # votes[s + m - 1]: the votes of the window starting at s, for s in -(m - 1) .. n - 1.
    votes = [0] * (n + m - 1)
    get = voters.get
    for i, key in enumerate(keys):
        ks = get(key)
        if ks is not None:
            for k in ks:
                votes[i - k + m - 1] += 1
    most = max(votes)
    near = max(min(near, n - 1), 0)
    if most == 0:
        start = near
    else:
        start = min(
            (index - m + 1 for index, count in enumerate(votes) if count == most),
            key=lambda s: (abs(s - near), s < near),
        )
    equal = sum(1 for k in range(max(0, -start), min(m, n - start)) if keys[start + k] == want[k])
    return start, equal


def region(bodies: Sequence[str], start: int, length: int) -> tuple[int, list[str]]:
    """The lines shown for a window of ``length`` lines at ``start``: from a few lines before it,
    at most :data:`REGION_LINES` lines, each cut at :data:`SHOWN_CHARS`; and the index of the
    first one."""
    n = len(bodies)
    first = min(max(start - CONTEXT_AROUND, 0), n)
    stop = min(max(start + length + CONTEXT_AROUND, first + 1), n, first + REGION_LINES)
    return first, [_shown(line) for line in bodies[first:stop]]


def _shown(line: str) -> str:
    line = line.rstrip("\r")
    return line if len(line) <= SHOWN_CHARS else line[:SHOWN_CHARS] + "…"


def worth_finding(new: Sequence[str], *, has_added: bool) -> bool:
    """Whether finding a hunk's ``new`` lines in the file says it was applied: not when they have
    no line that is not blank, nor when the hunk adds nothing and leaves a single line."""
    return any(line.strip() for line in new) and (has_added or len(new) >= 2)


def repair_details(
    bodies: Sequence[str],
    expected: Sequence[str],
    near: int,
    *,
    new: Sequence[str] = (),
    already_at: int | None = None,
) -> dict[str, Any]:
    """The details an error stores for the text the model reads (``core.texts.repair_text``):
    ``region_start`` (1-based), ``region`` (the file's lines shown), ``region_equal`` (expected
    lines equal, whitespace normalised, in the nearest window); or, when the hunk's ``new``
    lines were found at ``already_at`` (0-based), ``already_applied_at`` (1-based) and the
    region there."""
    if already_at is not None:
        first, lines = region(bodies, already_at, len(new))
        return {
            "region_start": first + 1,
            "region": lines,
            "already_applied_at": already_at + 1,
        }
    start, equal = best_window([loose(b) for b in bodies], [loose(e) for e in expected], near)
    first, lines = region(bodies, start, len(expected))
    return {"region_start": first + 1, "region": lines, "region_equal": equal}


# A level's line ids and the key -> id table of a file (``_Text.ids``, ``_Image._level_ids``).
LevelIds = Callable[[MatchLevel], tuple[list[int], dict[str, int]]]

ALREADY_HINT = (
    "re-read the file: if the change is there, do not send it again; otherwise send a patch "
    "whose context lines match the file"
)


def find_at_levels(level_ids: LevelIds, lines: Sequence[str], near: int) -> int | None:
    """The first place of ``lines`` at or after ``near`` (else from the top), at the first level
    of the matching ladder that has one; None if none has. O(file + lines) per level."""
    for level in MatchLevel:
        ids, table = level_ids(level)
        normalise = _NORMALISERS[level]
        pattern = [table.get(normalise(line), -1) for line in lines]
        if -1 in pattern:
            continue  # a line the file does not have at this level
        near = min(max(near, 0), len(ids))
        found = find_ids(ids, pattern, near, limit=1) or find_ids(ids, pattern, 0, limit=1)
        if found:
            return found[0]
    return None


def hunk_not_found(
    bodies: Sequence[str],
    level_ids: LevelIds,
    hunk: Hunk,
    near: int,
    *,
    path: str,
    index: int,
    message: str,
) -> HunkApplyError:
    """The error of a hunk whose expected lines are not in the file (``bodies``, searched from
    ``near``): ``message`` (one line), every expected line, the nearest region, and whether the
    hunk's new lines are already there (then the message asks whether the patch was applied)."""
    old, new = hunk.old_lines, hunk.new_lines
    already = None
    if worth_finding(new, has_added=any(line.kind == "+" for line in hunk.lines)):
        already = find_at_levels(level_ids, new, near)
    hint = None
    if already is not None:
        message += (
            f"; its new lines are already at {path}:{already + 1} — was this patch applied already?"
        )
        hint = ALREADY_HINT
    return HunkApplyError(
        message,
        hint=hint,
        path=path,
        hunk=index,
        patch_line=hunk.source_line,
        expected=old,
        **repair_details(bodies, old, near, new=new, already_at=already),
    )


def text_not_found(body: str, old: str, new: str, *, path: str) -> tuple[str, dict[str, Any]]:
    """For a ``str_replace`` whose ``old_str`` is not in ``body`` (the file's text): what to add
    to its message (where ``new_str`` already is, if it is) and the details of the text the model
    reads (``expected``: ``old_str``'s lines; the nearest region; ``already_applied_at``)."""
    bodies = body.split("\n")
    expected = old.split("\n")
    if len(expected) > 1 and expected[-1] == "":
        expected.pop()
    at = body.find(new) if new.strip() else -1
    if at < 0 and "\r\n" in body and "\n" in new:
        at = body.find(new.replace("\n", "\r\n"))
    details: dict[str, Any] = {"expected": expected}
    if at < 0:
        return "", details | repair_details(bodies, expected, 0)
    line = body.count("\n", 0, at)
    new_lines = new.split("\n")
    details |= repair_details(bodies, expected, line, new=new_lines, already_at=line)
    where = f"; its new_str is already at {path}:{line + 1} — was this edit applied already?"
    return where, details
