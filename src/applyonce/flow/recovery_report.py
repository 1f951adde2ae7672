"""What ``applyonce recover`` did: one :class:`Outcome` per call it settled, the debris it
removed, and notes for the person reading it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


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

    @property
    def unknown(self) -> bool:
        """Whether a call was left for a person to resolve."""
        return any(o.now == "unknown" for o in self.outcomes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcomes": [asdict(o) for o in self.outcomes],
            "removed": self.removed,
            "notes": self.notes,
        }
