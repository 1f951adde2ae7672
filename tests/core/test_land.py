"""The pure part of landing (core/land.py): a landing's identity, and the plan of a lane commit's
diff on the target (a cherry-pick planned as the revert of the inverse change), over in-memory
trees."""

from __future__ import annotations

import hashlib

import pytest

from applyonce.core.land import (
    AlreadyOnTargetError,
    LandArgs,
    LandConflictError,
    lane_branch,
    plan_pick,
)
from applyonce.core.plan import MODE_FILE
from applyonce.core.revert import CommitChange, Version


class Tree:
    """A tree as ``plan_pick`` reads it: path -> bytes."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def version(self, path: str) -> Version:
        data = self.files.get(path)
        if data is None:
            return (None, None)
        return (hashlib.sha1(data).hexdigest(), MODE_FILE)

    def read(self, path: str) -> tuple[bytes, int]:
        return self.files[path], MODE_FILE


def no_merge(path: str, ancestor: str, ours: str, theirs: str) -> bytes | None:
    return None


def test_a_lane_commit_is_made_again_on_a_target_that_changed_other_files() -> None:
    before = Tree({"a.txt": b"1\n", "gone.txt": b"x\n", "old.txt": b"moved\n"})
    after = Tree({"a.txt": b"2\n", "new.txt": b"n\n", "renamed.txt": b"moved\n"})
    tip = Tree({"a.txt": b"1\n", "gone.txt": b"x\n", "old.txt": b"moved\n", "t.txt": b"t\n"})
    changes = [
        CommitChange("M", "a.txt", "a.txt"),
        CommitChange("A", "new.txt", "new.txt"),
        CommitChange("D", "gone.txt", "gone.txt"),
        CommitChange("R", "renamed.txt", "old.txt"),
    ]
    plan = plan_pick(changes, before, after, tip, no_merge)
    by_path = {c.path: c for c in plan.changes}
    assert by_path["a.txt"].content == b"2\n" and by_path["a.txt"].action == "update"
    assert by_path["new.txt"].content == b"n\n" and by_path["new.txt"].action == "add"
    assert by_path["gone.txt"].action == "delete"
    assert by_path["renamed.txt"].action == "move"
    assert by_path["renamed.txt"].from_path == "old.txt"
    assert set(plan.removed) == {"gone.txt", "old.txt"}


def test_a_path_the_target_changed_too_is_a_conflict_naming_it() -> None:
    before, after = Tree({"a.txt": b"1\n"}), Tree({"a.txt": b"2\n"})
    tip = Tree({"a.txt": b"3\n"})
    with pytest.raises(LandConflictError) as caught:
        plan_pick([CommitChange("M", "a.txt", "a.txt")], before, after, tip, no_merge)
    assert caught.value.details["paths"] == ["a.txt"]
    assert caught.value.retryable


def test_a_change_already_on_the_target_has_nothing_to_land() -> None:
    before, after = Tree({"a.txt": b"1\n"}), Tree({"a.txt": b"2\n"})
    with pytest.raises(AlreadyOnTargetError):
        plan_pick([CommitChange("M", "a.txt", "a.txt")], before, after, after, no_merge)


def test_a_landing_identity_names_the_lane_call_its_commit_and_both_branches() -> None:
    args = LandArgs(
        ref="refs/heads/main", lands="a" * 64, lane="refs/heads/agent/x", commit="b" * 40
    )
    assert args.canonical() == (
        b'{"commit":"' + b"b" * 40 + b'","lands":"' + b"a" * 64
        + b'","lane":"refs/heads/agent/x","ref":"refs/heads/main"}'
    )  # fmt: skip
    other = args.model_copy(update={"ref": "refs/heads/release"})
    assert other.sha256() != args.sha256()
    assert lane_branch("x") == "agent/x" and lane_branch("agent/x") == "agent/x"
