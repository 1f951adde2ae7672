"""Lanes and landing (``applyonce land``): the arguments of a landing call, and the plan of a
lane commit's diff on the target. Pure.

An agent may work on its own lane branch, ``agent/NAME`` (:data:`LANE_PREFIX`); its calls land
there exactly once as any call does. Landing moves each of those calls onto the target branch
with one commit, itself a call run exactly once through the corridor (docs/design.md §12,
"Lanes"). Its identity comes from the lane call and the target, not from the change it
computes, so landing the same lane call twice is the same call::

    args = {"ref": <target ref>, "lands": <the lane call's call_id>, "lane": <lane ref>,
            "commit": <the lane call's commit>}
    call_id = the formula of docs/design.md §3 with tool "land_patch"

Its commit carries ``Lands-Call-Id`` (the lane call) and ``Lane-Commit`` (its commit on the lane)
beside its own ``Call-Id`` block.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from applyonce.core.identity import canonical, sha256_hex
from applyonce.core.plan import TreePlan
from applyonce.core.revert import (
    CommitChange,
    Merge,
    NothingToRevertError,
    RevertConflictError,
    VersionReader,
    plan_revert,
)
from applyonce.errors import ApplyOnceError, ConflictError

LAND_TOOL = "land_patch"
# The landing semantics (a change to them gives the same landing a new identity).
LAND_TOOL_VERSION = "applyonce-land/1"
LANDS_TRAILER = "Lands-Call-Id"
LANE_COMMIT_TRAILER = "Lane-Commit"
# A lane NAME is the branch agent/NAME.
LANE_PREFIX = "agent/"


class LandArgs(BaseModel):
    """The normalised arguments of one ``land_patch`` call: which lane call, from which lane,
    its commit there, and the target branch it lands on (``ref``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    ref: str
    lands: str
    lane: str
    commit: str

    def canonical(self) -> bytes:
        return canonical(self.model_dump(mode="json"))

    def sha256(self) -> str:
        return sha256_hex(self.canonical())


def lane_branch(name: str) -> str:
    """``NAME`` -> ``agent/NAME`` (a name that already starts with ``agent/`` stays)."""
    return name if name.startswith(LANE_PREFIX) else LANE_PREFIX + name


class LandConflictError(ConflictError):
    """The lane call's change no longer applies on the target (a three-way merge of its diff
    conflicts). A conflict with the target as it is now: retryable once the target changes."""

    kind = "land-conflict"
    default_retryable = True
    default_hint = (
        "the lane is blocked at this call: make the change on the target by hand, or revert "
        "what conflicts there, then run 'applyonce land' again"
    )


class AlreadyOnTargetError(ApplyOnceError):
    """Every file the lane call changed is already as it left it on the target."""

    kind = "nothing-to-land"
    default_retryable = True
    default_hint = "the target already has this change; nothing to land"


class LaneWaitingError(ConflictError):
    """The lane call was not landed: an earlier call of its lane, landed in the same group, did
    not land. Nothing of it was written; the next ``land`` runs it again."""

    kind = "lane-waiting"
    default_retryable = True
    default_hint = "an earlier call of the lane is blocked: land that one first"


def plan_pick(
    changes: Sequence[CommitChange],
    before: VersionReader,
    after: VersionReader,
    tip: VersionReader,
    merge: Merge,
) -> TreePlan:
    """The plan that makes ``changes`` (``before`` → ``after``) again on ``tip``: a cherry-pick,
    planned as the revert of the inverse change (``after`` → ``before``), path by path.

    Raises:
        LandConflictError: a path was changed on the target where the lane changed it.
        AlreadyOnTargetError: the target already has every path as ``after`` has it.
    """
    inverse = [_inverse(change) for change in changes]
    try:
        return plan_revert(inverse, before=after, after=before, tip=tip, merge=merge)
    except RevertConflictError as exc:
        paths = list(exc.details.get("paths", ()))
        raise LandConflictError(
            "the target changed what the lane call changed in " + ", ".join(paths), paths=paths
        ) from None
    except NothingToRevertError:
        raise AlreadyOnTargetError(
            "every file the lane call changed is already as it left it on the target"
        ) from None


def _inverse(change: CommitChange) -> CommitChange:
    letter = {"A": "D", "D": "A"}.get(change.status, change.status)
    if change.status == "R":
        return CommitChange("R", change.old_path, change.path)
    return CommitChange(letter, change.path, change.old_path)
