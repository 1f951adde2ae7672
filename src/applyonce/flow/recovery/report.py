"""What ``applyonce recover`` did: one :class:`Outcome` per call it settled (or could not: ``now``
is ``held`` while another process's claim holds it), the debris it removed, and notes for the
person reading it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

HELD = "held"


@dataclass(frozen=True)
class Outcome:
    """One line of the recovery report."""

    call_id: str
    was: str
    now: str
    why: str


@dataclass
class RecoveryReport:
    outcomes: list[Outcome] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # A checkout that could not be updated (its reason is a note): not everything is settled.
    unsynced: bool = False

    @property
    def unknown(self) -> bool:
        """Whether a call was left for a person to resolve."""
        return any(o.now == "unknown" for o in self.outcomes)

    @property
    def held(self) -> bool:
        """Whether a call was left in flight because another process's claim holds it."""
        return any(o.now == HELD for o in self.outcomes)

    @property
    def left(self) -> bool:
        """Whether a call was left in flight (its history is not all here: a shallow clone)."""
        return any(o.now in ("claimed", "prepared") for o in self.outcomes)

    @property
    def settled(self) -> bool:
        """Whether every call is settled and every checkout updated."""
        return not (self.unknown or self.held or self.left or self.unsynced)

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcomes": [asdict(o) for o in self.outcomes],
            "removed": self.removed,
            "notes": self.notes,
        }
