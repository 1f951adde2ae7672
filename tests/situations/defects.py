"""What the matrix finds wrong on the current code: each defect with its one-line reason, the
words of the broken promise it fails with (``signature``), and the cells it breaks.

A cell with known defects is ``xfail(strict=True, raises=AssertionError)``: it must fail, and
with one of its defects' signatures — a failure with other words is reported as a failure
(tests/situations/test_matrix.py turns it into :class:`UnexpectedFailure`), and a pass (the
fix landed) fails the run as XPASS(strict) until its cells leave the table.

Races with a git loop are not in the table: they are hit in some runs only, so a cell of a
``*-loop`` state whose failure matches one of :data:`RACES` is marked xfail when it happens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LOCAL = ("apply", "dirty-commit", "blocks", "revert", "crash", "audit", "audit-again")
REMOTE = ("remote-apply", "remote-dirty-commit", "remote-crash")


def row(state: str, *columns: str) -> tuple[str, ...]:
    return tuple(f"{state}-{column}" for column in columns)


@dataclass(frozen=True)
class Defect:
    reason: str
    signature: str  # a regex the cell's AssertionError matches
    cells: tuple[str, ...]


DEFECTS: tuple[Defect, ...] = ()

# (regex of the failure, why): none known now. Both that were — libgit2's loose write of the
# --dirty commit snapshot's blob under a concurrent prune-packed, and reads of packs git had just
# replaced (exit 3) — are fixed, so the loop cells run strict.
RACES: tuple[tuple[str, str], ...] = ()


def known(cell_id: str) -> list[Defect]:
    return [d for d in DEFECTS if cell_id in d.cells]


def race(failure: str) -> str | None:
    """The race a loop cell's failure shows, if it is one of the known ones."""
    return next((why for sign, why in RACES if re.search(sign, failure)), None)
