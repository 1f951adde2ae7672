"""Finding a run of lines in a file in linear time (pure): Knuth-Morris-Pratt over line ids.

Each line is compared once, by an integer: the lines are mapped to ids first (one dict lookup per
line, which hashes the line once), so a comparison costs O(1) whatever the lines' length. The
search is KMP: at most 2n + m id comparisons for a file of n lines and a hunk of m, whatever the
lines repeat — the naive search (compare the hunk at every place its first line occurs) costs
n * m on a file of repeated lines. Where the search waits for the pattern's first line, it jumps
ahead with ``list.index`` (C speed), so a hunk whose first line is rare costs little more than
that scan.

:func:`steps` counts the comparisons made (the scanned places included), so tests can hold the
work linear without timing it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Mapping, Sequence

_steps = 0
_interned = 0


def steps() -> int:
    """Comparisons made by every search in this process so far (for tests and benchmarks)."""
    return _steps


def interned() -> int:
    """Lines turned into ids by every search in this process so far (each is hashed once)."""
    return _interned


def intern_into(table: dict[str, int], lines: Sequence[str]) -> list[int]:
    """``lines`` as ids from ``table`` (equal lines, equal ids), adding the lines it lacks: one
    table kept for a file gives its lines and any hunk's lines comparable ids."""
    global _interned
    _interned += len(lines)
    return [table.setdefault(line, len(table)) for line in lines]


def _failure(pattern: Sequence[int]) -> list[int]:
    """KMP's failure function: ``fail[k]`` is the length of the longest proper border of
    ``pattern[: k + 1]``."""
    global _steps
    fail = [0] * len(pattern)
    k = 0
    count = 0
    for i in range(1, len(pattern)):
        c = pattern[i]
        while k and pattern[k] != c:
            k = fail[k - 1]
            count += 1
        count += 1
        if pattern[k] == c:
            k += 1
        fail[i] = k
    _steps += count
    return fail


def find_ids(
    ids: Sequence[int],
    pattern: Sequence[int],
    start: int = 0,
    limit: int | None = None,
    stop: int | None = None,
) -> list[int]:
    """Every index ``i >= start`` with ``ids[i : i + len(pattern)] == pattern`` that lies within
    ``ids[:stop]``, ascending (all of them, overlapping ones included, or the first ``limit``).
    O(stop - start + len(pattern))."""
    global _steps
    m = len(pattern)
    n = len(ids) if stop is None else min(stop, len(ids))
    if m == 0 or n - start < m or -1 in pattern:
        return []  # -1: a line the file does not have
    fail = _failure(pattern)
    found: list[int] = []
    first = pattern[0]
    count = 0
    i = start
    j = 0
    while i < n:
        if j == 0:
            # Waiting for the first line: jump to its next occurrence (the skipped places count).
            try:
                at = ids.index(first, i, n)
            except ValueError:
                count += n - i
                break
            count += at - i + 1
            i = at + 1
            j = 1
        else:
            c = ids[i]
            while j and pattern[j] != c:
                j = fail[j - 1]
                count += 1
            count += 1
            if pattern[j] == c:
                j += 1
            i += 1
        if j == m:
            found.append(i - m)
            if limit is not None and len(found) >= limit:
                break
            j = fail[m - 1]
    _steps += count
    return found


def find_indexed(
    ids: Sequence[int],
    pattern: Sequence[int],
    where: Mapping[int, Sequence[int]],
    start: int = 0,
    limit: int | None = None,
) -> list[int]:
    """As :func:`find_ids`, given ``where``: each id's places in ``ids``, ascending.

    The places of the pattern's rarest line are the only candidates; when comparing the pattern
    at each of them costs no more than the linear search would, that is done (a hunk with one
    rare line is found in O(hunk + log file)); otherwise the linear search runs.
    """
    global _steps
    m = len(pattern)
    if m == 0 or len(ids) - start < m or -1 in pattern:
        return []
    empty: Sequence[int] = ()
    k = min(range(m), key=lambda index: len(where.get(pattern[index], empty)))
    places = where.get(pattern[k], empty)
    first = bisect_left(places, start + k)
    if (len(places) - first) * m > len(ids) - start + m:
        return find_ids(ids, pattern, start, limit)
    found: list[int] = []
    want = list(pattern)
    count = m
    for place in places[first:]:
        at = place - k
        if at + m > len(ids):
            break
        count += m
        if ids[at : at + m] == want:
            found.append(at)
            if limit is not None and len(found) >= limit:
                break
    _steps += count
    return found


def positions(ids: Sequence[int]) -> dict[int, list[int]]:
    """Each id's places in ``ids``, ascending."""
    where: defaultdict[int, list[int]] = defaultdict(list)
    for at, line in enumerate(ids):
        where[line].append(at)
    return dict(where)
