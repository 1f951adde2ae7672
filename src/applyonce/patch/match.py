"""Finding a hunk's lines in a file: the text model and the matching ladder of
:mod:`applyonce.patch.apply` (pure).

A file is read into :class:`_Text` (its lines, their endings, a byte order mark kept aside) and
searched level by level (``EXACT``, ``RSTRIP``, ``STRIP``, ``UNICODE``); ``@@`` anchors move the
search start and narrow the places to the block the anchor line opens (:func:`anchor_scope`,
:func:`candidates`); a hunk left at several places is refused by :func:`ambiguity`. Which place
is taken is decided by :mod:`applyonce.patch.apply`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Literal

from applyonce.errors import ApplyOnceError
from applyonce.patch.model import HunkLine, MatchLevel
from applyonce.patch.search import find_indexed, positions

BOM = "\ufeff"
# git reads a file as binary when its first 8000 bytes hold a NUL (``buffer_is_binary``); a file
# with a NUL only further on is text to ``git diff`` and ``git apply``.
GIT_BINARY_WINDOW = 8000
_LINE = re.compile(r"([^\r\n]*)(\r\n|\n|\r|$)")

# Typographic characters that models and editors substitute for ASCII ones.
_UNICODE_FOLD = str.maketrans(
    {
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d", "-"),
        **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032\uff07", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\uff02", '"'),
        **dict.fromkeys(
            "\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
            "\u202f\u205f\u3000",
            " ",
        ),
        "\u2026": "...",
    }
)

_NORMALISERS: dict[MatchLevel, Callable[[str], str]] = {
    MatchLevel.EXACT: lambda s: s,
    MatchLevel.RSTRIP: str.rstrip,
    MatchLevel.STRIP: str.strip,
    MatchLevel.UNICODE: lambda s: s.translate(_UNICODE_FOLD).strip(),
}


class HunkApplyError(ApplyOnceError):
    """A hunk cannot be applied to the file's current content."""

    kind = "hunk-mismatch"
    default_hint = "re-read the file and send a patch whose context lines match it"


class BinaryFileError(ApplyOnceError):
    """The file to update is not UTF-8 text."""

    kind = "binary-file"
    default_hint = "applyonce only edits UTF-8 text; replace the file with Delete File + Add File"


class AmbiguousContextError(HunkApplyError):
    """A hunk's expected lines match at more than one place: applying it would be a guess."""

    kind = "ambiguous-context"
    default_hint = (
        "add an '@@ <line>' anchor naming a line just before the change (a def or class line), "
        "or more context lines, so the hunk matches at one place only"
    )


# An added line's text -> its body and line ending.
_AddedLine = Callable[[str], tuple[str, str]]


@dataclass
class _Text:
    """A file split into lines; ``ends[i]`` is line i's ending (``""`` only for a last line).

    ``errors`` is how the bytes were decoded (``strict``: UTF-8 only; ``surrogateescape``: any
    bytes, kept exactly), and so how the result is encoded back.
    """

    bom: bool
    bodies: list[str]
    ends: list[str]
    errors: str = "strict"
    _keys: dict[MatchLevel, list[str]] = field(default_factory=dict)
    _ids: dict[MatchLevel, tuple[list[int], dict[str, int]]] = field(default_factory=dict)
    _where: dict[MatchLevel, dict[int, list[int]]] = field(default_factory=dict)

    def keys(self, level: MatchLevel) -> list[str]:
        if level not in self._keys:
            normalise = _NORMALISERS[level]
            self._keys[level] = (
                self.bodies if level is MatchLevel.EXACT else [normalise(b) for b in self.bodies]
            )
        return self._keys[level]

    def ids(self, level: MatchLevel) -> tuple[list[int], dict[str, int]]:
        """The lines' keys at ``level`` as ids (equal keys, equal ids) and the key -> id table:
        made once per level, so each hunk's search costs O(file + hunk) id comparisons."""
        if level not in self._ids:
            table: dict[str, int] = {}
            ids = [table.setdefault(key, len(table)) for key in self.keys(level)]
            self._ids[level] = ids, table
        return self._ids[level]

    def where(self, level: MatchLevel) -> dict[int, list[int]]:
        """Each id's line numbers at ``level`` (made once per level)."""
        if level not in self._where:
            self._where[level] = positions(self.ids(level)[0])
        return self._where[level]

    def dominant_end(self) -> str:
        counts = Counter(self.ends)  # counted in C; the missing final newline set apart
        counts.pop("", None)
        if not counts:
            return "\n"
        best = max(counts.values())
        # Ties go to the ending seen first.
        return next(end for end in self.ends if end and counts[end] == best)

    def crlf_dominant(self) -> bool:
        """Split on ``\\n`` only: do most ended lines carry a ``\\r`` (a CRLF file)?"""
        if "\r" not in "".join(self.bodies):
            return False  # the usual file: one scan in C
        ended = [body for body, end in zip(self.bodies, self.ends, strict=True) if end]
        return sum(body.endswith("\r") for body in ended) * 2 > len(ended)

    def encode(self, bodies: Sequence[str], ends: Sequence[str]) -> bytes:
        # Chained in C: no string is made a line.
        out = "".join(chain.from_iterable(zip(bodies, ends, strict=True)))
        return ((BOM if self.bom else "") + out).encode("utf-8", self.errors)


def decode_text(
    data: bytes,
    *,
    path: str,
    split_cr: bool = True,
    lossless: bool = False,
    bom_is_text: bool = False,
    binary_window: int | None = None,
) -> _Text:
    """Split ``data`` into lines, refusing binary content.

    Args:
        split_cr: ``\\r\\n``, ``\\n`` and a lone ``\\r`` each end a line (the ending is kept
            apart from the line's text); when False only ``\\n`` does and a ``\\r`` before it
            is part of the line's text, as ``git apply`` reads a file.
        lossless: bytes that are not UTF-8 are kept (as surrogate escapes) instead of refused.
        bom_is_text: a byte order mark is part of the first line's text, not set apart.
        binary_window: only a NUL byte in the first ``binary_window`` bytes makes the file
            binary (git's test: :data:`GIT_BINARY_WINDOW`); one further on is text, kept as is.

    Raises:
        BinaryFileError: a NUL byte (in the window, if given), or (unless ``lossless``) bytes
            that are not UTF-8.
    """
    if b"\x00" in (data if binary_window is None else data[:binary_window]):
        raise BinaryFileError(f"{path} is a binary file (it contains NUL bytes)", path=path)
    errors = "surrogateescape" if lossless else "strict"
    try:
        text = data.decode("utf-8", errors)
    except UnicodeDecodeError as exc:
        raise BinaryFileError(
            f"{path} is not UTF-8 text (invalid byte at offset {exc.start})", path=path
        ) from None
    bom = text.startswith(BOM) and not bom_is_text
    if bom:
        text = text[1:]
    bodies: list[str] = []
    ends: list[str] = []
    if text and (not split_cr or "\r" not in text):
        # Only ``\n`` ends a line: one split in C, not a match object a line.
        bodies = text.split("\n")
        last = bodies.pop()
        ends = ["\n"] * len(bodies)
        if last:
            bodies.append(last)
            ends.append("")
    elif text:
        for match in _LINE.finditer(text):
            body, end = match.group(1), match.group(2)
            if not end and not body:
                break  # the empty match at the very end
            bodies.append(body)
            ends.append(end)
    return _Text(bom=bom, bodies=bodies, ends=ends, errors=errors)


def _matches(
    text: _Text,
    pattern: Sequence[str],
    start: int,
    level: MatchLevel,
    *,
    at_end: bool,
    limit: int | None = None,
) -> list[int]:
    """Every index >= ``start`` where ``pattern`` matches at ``level``, ascending (at the end
    only, if ``at_end``; the first ``limit`` only, if given)."""
    n, m = len(text.bodies), len(pattern)
    if m == 0 or m > n:
        return []
    keys = text.keys(level)
    normalise = _NORMALISERS[level]
    want = [normalise(p) for p in pattern]
    if at_end:
        pos = n - m
        # ``pos >= start``: the end of the file may not reach back into an earlier hunk's lines.
        return [pos] if pos >= start and keys[pos:] == want else []
    # Linear whatever the lines repeat (``search.py``); a line the file does not have at this
    # level has no id, and then the hunk cannot match.
    ids, table = text.ids(level)
    wanted = [table.get(line, -1) for line in want]
    if -1 in wanted:
        return []
    return find_indexed(ids, wanted, text.where(level), start, limit)


def _find_anchor(text: _Text, anchor: str, start: int) -> tuple[int, MatchLevel] | None:
    """The first line >= ``start`` matching ``anchor``, at the first ladder level that has one."""
    for level in MatchLevel:
        found = _matches(text, [anchor], start, level, at_end=False, limit=1)
        if found:
            return found[0], level
    return None


_CLOSING = ")]}"


def block_end(bodies: Sequence[str], at: int) -> int:
    """The end (exclusive) of the block line ``at`` opens: the lines after it up to the first
    non-blank line indented no deeper than it (``class A:`` opens its body; a line followed by one
    at its own level opens nothing). A line that starts with a closing bracket does not end it:
    it closes the opener's own brackets (``) -> None:`` of a long ``def``, a ``}``)."""
    line = bodies[at]
    indent = len(line) - len(line.lstrip())
    for j in range(at + 1, len(bodies)):
        body = bodies[j]
        stripped = body.lstrip()
        if stripped and len(body) - len(stripped) <= indent and stripped[0] not in _CLOSING:
            return j
    return len(bodies)


@dataclass(frozen=True)
class Scope:
    """Where a hunk's ``@@`` anchors put it, searched from a start line.

    ``start``: the search start as Codex reads the anchors (past the first line matching each, in
    turn, from the previous hunk's end). ``block``: the block the last of those lines opens, inside
    the blocks of the ones before it (:func:`block_end`); a hunk that starts in it is where the
    patch means it. None without anchors, or when an anchor line opens no block.
    """

    start: int
    block: tuple[int, int] | None = None

    def holds(self, place: int) -> bool:
        return self.block is not None and self.block[0] <= place < self.block[1]


def anchor_scope(text: _Text, anchors: Sequence[str], start: int) -> Scope | str:
    """The :class:`Scope` of ``anchors`` from line ``start``; the first anchor not found, if one
    is not."""
    cursor = start
    block: tuple[int, int] | None = None
    hi = len(text.bodies)
    for anchor in anchors:
        found = _find_anchor(text, anchor, cursor)
        if found is None:
            return anchor
        at = found[0]
        # An anchor line outside the block of the one before it narrows nothing more.
        hi = min(block_end(text.bodies, at), hi) if at < hi else at + 1
        block = (at + 1, hi)
        cursor = at + 1
    return Scope(cursor, block if block is not None and block[0] < block[1] else None)


def candidates(
    text: _Text, old: Sequence[str], scope: Scope, *, at_end: bool
) -> tuple[list[int], MatchLevel] | None:
    """Every place ``old`` matches from the scope's start, ascending, at the first ladder level
    that matches at all: those in the anchors' block when some are there, else all of them."""
    for level in MatchLevel:
        found = _matches(text, old, scope.start, level, at_end=at_end)
        if found:
            inside = [place for place in found if scope.holds(place)]
            return (inside or found), level
    return None


def ambiguity(
    text: _Text,
    places: Sequence[int],
    length: int,
    level: MatchLevel,
    *,
    where: str,
    anchors: Sequence[str] = (),
) -> AmbiguousContextError:
    """The refusal of a hunk whose ``length`` expected lines are at several ``places``: it names
    them, and the nearest line before or after them that differs between them (the context line
    that would decide). A hunk that has ``@@`` anchors is not told to add one: its hint asks for
    more context lines, or an anchor naming a line nearer the change."""
    shown = ", ".join(str(i + 1) for i in places[:10])
    more = f" and {len(places) - 10} more" if len(places) > 10 else ""
    message = f"{where}: the expected lines match at {len(places)} places (lines {shown}{more})"
    hint = AmbiguousContextError.default_hint if not anchors else _anchored_hint(anchors)
    decider = _deciding_offset(text.keys(level), places, length)
    if decider is not None:
        side, offset = decider
        told = []
        for place in places[:3]:
            at = place + offset
            inside = 0 <= at < len(text.bodies)
            edge = "the start of the file" if side == "before" else "the end of the file"
            told.append(f"{text.bodies[at][:60]!r} (line {at + 1})" if inside else edge)
        message += f"; the nearest line {side} them that differs: {' vs '.join(told)}"
        first = places[0] + offset
        if 0 <= first < len(text.bodies):
            hint = (
                f"add the line {text.bodies[first][:60]!r} (line {first + 1}) as a context line "
                f"{side} the hunk's lines to mean the place at line {places[0] + 1}, or "
                + (
                    "an '@@ <line>' anchor naming the def or class the change is in"
                    if not anchors
                    else "a more specific '@@ <line>' anchor than "
                    + " ".join(repr(a[:60]) for a in anchors)
                    + ", one line that occurs once, nearer the change"
                )
            )
    return AmbiguousContextError(
        message,
        hint=hint,
        candidates=[i + 1 for i in places],
        match_level=level.label,
    )


def _anchored_hint(anchors: Sequence[str]) -> str:
    """The hint of a hunk whose ``@@`` anchors did not single out one place."""
    named = " ".join(repr(a[:60]) for a in anchors)
    return (
        f"the hunk's '@@' anchor {named} leaves it at more than one place: add more context "
        "lines before or after the change, or a more specific anchor (a line that occurs once, "
        "nearer the change)"
    )


# How far from the places the line that tells them apart is looked for.
_DECIDER_REACH = 200


def _deciding_offset(
    keys: Sequence[str], places: Sequence[int], length: int
) -> tuple[str, int] | None:
    """The nearest offset (from the places' first line) of a line before them or after them that is
    not the same at every place (one past the file's edge counts as different) and that the first
    place has (so it can be written as context), and its side; None when there is none within
    reach."""
    n = len(keys)
    for k in range(1, _DECIDER_REACH + 1):
        for side, offset in (("before", -k), ("after", length - 1 + k)):
            if not 0 <= places[0] + offset < n:
                continue
            seen = {keys[p + offset] if 0 <= p + offset < n else None for p in places}
            if len(seen) > 1:
                return side, offset
    return None


def _without_last_empty_old_line(lines: Sequence[HunkLine]) -> list[HunkLine] | None:
    """The hunk without its last old line, when that line is empty, and without its last new line
    when that one is empty too: how Codex retries a hunk whose expected lines end in a blank line
    the file does not have there. None when the last old line is not empty."""
    old_at = [k for k, line in enumerate(lines) if line.kind != "+"]
    if not old_at or lines[old_at[-1]].text != "":
        return None
    new_at = [k for k, line in enumerate(lines) if line.kind != "-"]
    last_old = old_at[-1]
    last_new = new_at[-1] if new_at and lines[new_at[-1]].text == "" else None
    out = list(lines)
    for k in sorted({last_old} | ({last_new} if last_new is not None else set()), reverse=True):
        line = out[k]
        on_old = line.kind != "+" and k != last_old
        on_new = line.kind != "-" and k != last_new
        if on_old or on_new:
            kind: Literal[" ", "-", "+"] = " " if on_old and on_new else "-" if on_old else "+"
            out[k] = HunkLine(kind=kind, text=line.text)
        else:
            del out[k]
    return out
