"""SEARCH/REPLACE blocks cut from real commits: the generator the real-history replay sends.

:func:`to_search_replace` turns ``git diff -M P C`` into SEARCH/REPLACE text of the same change,
in the three spellings in turn (Aider's, fenced; Cline's; Roo's with ``:start_line:``), one file
after another. Each change of a file is one block: its old lines with ``CONTEXT`` lines around,
widened until they occur exactly once in the file as the blocks before it left it (where the
applier searches), and the new lines in the same frame. A new file is a block with an empty
SEARCH.

What blocks cannot say is named (:class:`~tests.peers.realworld.Inexpressible`) and the commit is
skipped for this format with the reason: deletions, renames, modes, symlinks, submodules, binary
or non-UTF-8 content, a lone ``\\r``, files of mixed line endings or whose ending changes, a
final newline added or removed (blocks keep a file's final-newline state), an edit of an empty
file, a block line that reads as a ``SEARCH``/``REPLACE`` marker, and a SEARCH line that reads as
the ``=======`` divider (an rst heading's underline; in the REPLACE part such a line is content). Independent of
applyonce's parser on purpose: the marker rule is written here from the formats' descriptions.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable

from tests.peers.realworld import (
    CONTEXT,
    Inexpressible,
    _blocks,
    _decode,
    _split,
    new_bytes,
    parse_git_diff,
)

NO_BLOCKS = "no SEARCH/REPLACE spelling: "
# What ends or opens a part of a block; the divider ends the SEARCH part only (after it, the
# parser looks for the REPLACE marker, so a divider line there is content).
_MARKER = re.compile(r"^(?:<{5,9} SEARCH>?|-{5,9} SEARCH|>{5,9} REPLACE|\+{5,9} REPLACE)\s*$")
_DIVIDER = re.compile(r"^={5,9}\s*$")
SPELLINGS = ("aider", "cline", "roo")


def _occurrences(bodies: list[str], want: list[str]) -> int:
    m = len(want)
    count = 0
    for i in range(len(bodies) - m + 1):
        if bodies[i] == want[0] and bodies[i : i + m] == want:
            count += 1
            if count == 2:
                break
    return count


def _one_ending(ends: list[str]) -> str | None:
    found = {end for end in ends if end}
    if len(found) > 1:
        raise Inexpressible("mixed line endings")
    return next(iter(found), None)


def _render(
    path: str, search: list[str], replace: list[str], spelling: str, line: int
) -> list[str]:
    for text in (*search, *replace):
        if _MARKER.match(text):
            raise Inexpressible("a line reads as a block marker")
    if any(_DIVIDER.match(text) for text in search):
        raise Inexpressible("a SEARCH line reads as the divider")
    if spelling == "cline":
        return [path, "------- SEARCH", *search, "=======", *replace, "+++++++ REPLACE"]
    if spelling == "roo":
        hint = [f":start_line:{line}", "-------"] if search else []
        return [path, "<<<<<<< SEARCH", *hint, *search, "=======", *replace, ">>>>>>> REPLACE"]
    return [path, "```", "<<<<<<< SEARCH", *search, "=======", *replace, ">>>>>>> REPLACE", "```"]


def to_search_replace(
    diff: bytes, old_blob: Callable[[str], bytes], *, first_spelling: int | None = None
) -> str:
    """SEARCH/REPLACE text of the change ``diff`` makes (``old_blob(path)``: a base file). The
    files take the spellings in turn from ``first_spelling`` (default: one the diff picks, so
    single-file commits spread over the three too).

    Raises:
        Inexpressible: the change has no SEARCH/REPLACE spelling (the reason).
    """
    out: list[str] = ["Blocks cut from a real commit:", ""]
    turn = zlib.crc32(diff) if first_spelling is None else first_spelling
    for fp in parse_git_diff(diff):
        for mode, reason in (("160000", "submodule"), ("120000", "symlink")):
            if mode in fp.modes:
                raise Inexpressible(reason)
        if fp.binary:
            raise Inexpressible("binary")
        if fp.new_path is None:
            raise Inexpressible("deletion")
        spelling = SPELLINGS[turn % len(SPELLINGS)]
        turn += 1
        if fp.old_path is None:
            if fp.new_mode not in (None, "100644"):
                raise Inexpressible("mode of a new file")
            text = _decode(new_bytes(b"", fp.hunks))
            if "\r" in text:
                raise Inexpressible("CRLF line endings")
            if text and not text.endswith("\n"):
                raise Inexpressible("no final newline")
            out += [*_render(fp.new_path, [], text.split("\n")[:-1], spelling, 0), ""]
            continue
        if fp.new_path != fp.old_path:
            raise Inexpressible("rename")
        if fp.old_mode != fp.new_mode:
            raise Inexpressible("mode change")
        if not fp.hunks:
            continue
        old_raw = old_blob(fp.old_path)
        old_bom, old_bodies, old_ends = _split(_decode(old_raw))
        new_bom, new_bodies, new_ends = _split(_decode(new_bytes(old_raw, fp.hunks)))
        if old_bom != new_bom:
            raise Inexpressible("byte order mark change")
        old_end, new_end = _one_ending(old_ends), _one_ending(new_ends)
        if old_end is not None and new_end is not None and old_end != new_end:
            raise Inexpressible("line endings")
        if (old_ends[-1:] == [""]) != (new_ends[-1:] == [""]):
            raise Inexpressible("final newline change")
        if not old_bodies:
            raise Inexpressible("edit of an empty file")
        current = list(old_bodies)
        shift = 0  # where the blocks before left an old line: old index + shift
        for a, b, new in _blocks(old_bodies, new_bodies, fp.hunks):
            lo, hi = a + shift, b + shift
            extra = CONTEXT
            while True:
                s, e = max(lo - extra, 0), min(hi + extra, len(current))
                search = current[s:e]
                if search and _occurrences(current, search) == 1:
                    break
                if s == 0 and e == len(current):
                    raise Inexpressible("no unique frame")  # cannot happen: the whole file
                extra = extra * 2 + 1
            replace = current[s:lo] + new + current[hi:e]
            out += [*_render(fp.old_path, search, replace, spelling, s + 1), ""]
            current[s:e] = replace
            shift += len(new) - (b - a)
        if current != new_bodies:
            raise Inexpressible("blocks do not rebuild the file")  # a generator bug, never seen
    if len(out) == 2:
        raise Inexpressible("nothing to change")
    return "\n".join(out) + "\n"
