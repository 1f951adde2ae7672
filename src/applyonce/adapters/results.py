"""The structured result of a tool call: what ``applyonce mcp`` returns as ``structuredContent``
beside the text, and declares as each tool's ``outputSchema`` (generated from these models).

The text a model reads is the receipt's ``output``, byte for byte (after a replay's note, which
says first that nothing ran now, and followed by a ``note:`` line for each checkout that does not
show the branch's tip after the call); the structured result says
the same thing in fields a harness can branch on: the call, its status, its commit, whether it was
a replay, its files, how each hunk matched, its diff (bounded), on failure the error's kind,
message and hint, and those checkouts (``checkout_behind``). :func:`patch_result` builds it from a
receipt, so every tool that ends in a receipt (``apply_patch``, ``patch_receipt``, an undo)
answers in the one shape.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from applyonce.core.hints import MCP, render_hint
from applyonce.core.receipt import Receipt
from applyonce.executor import CheckoutBehind, PlanView, ReplayNote
from applyonce.git.diffs import CallDiff

if TYPE_CHECKING:
    from applyonce.flow.call.land import LandReport

# A diff longer than this is cut at a line end and flagged: a tool result goes into a model's
# context. 'applyonce show CALL_ID --diff' prints the whole of it.
DIFF_CAP = 64 * 1024

ResultStatus = Literal["committed", "rejected", "dry-run", "unknown"]
_STATUS_OF_RECEIPT: dict[str, ResultStatus] = {"committed": "committed", "rejected": "rejected"}


def _lean(schema: dict[str, Any]) -> None:
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", populate_by_name=True, json_schema_extra=_lean
    )


class ResultError(_Model):
    """Why a call did not take effect (or could not be told to have)."""

    kind: str = Field(description="Machine-readable kind, e.g. hunk-mismatch, patch-syntax.")
    message: str = Field(description="What happened.")
    hint: str = Field(
        description="What to do about it (may be empty), naming tool arguments and server "
        "options, never command-line flags."
    )
    retryable: bool = Field(
        description="True when the same call may succeed if sent again unchanged (a busy "
        "branch, a dirty path the user may commit, an approver who was not there)."
    )


class ResultFile(_Model):
    """One file the call changes."""

    path: str
    action: Literal["add", "update", "delete", "move"]
    from_: str | None = Field(
        default=None, alias="from", description="The old path of a move (null otherwise)."
    )


class DiffStat(_Model):
    """The size of the call's diff (a binary file counts no lines)."""

    files_changed: int
    insertions: int
    deletions: int


class ResultBehind(_Model):
    """A checkout of the branch that does not show its tip after the call."""

    worktree: str | None = Field(description="The checkout's root (null: not known).")
    branch: str
    paths: list[str] = Field(
        description="The paths it does not show the branch's version of (empty: the whole "
        "checkout)."
    )
    reason: str = Field(description="Why.")
    command: str = Field(description="The command that brings it in line.")


class PatchResult(_Model):
    """The structured result of ``apply_patch`` (and of any tool whose call ends in a receipt)."""

    call_id: str | None = Field(
        description="The call's ID (64 hex digits); null when the arguments or the patch were "
        "refused before the call had one."
    )
    status: ResultStatus = Field(
        description="committed: the patch is one commit on the branch (now, or by an earlier "
        "identical call: see replayed). rejected: nothing changed; see error. dry-run: the plan "
        "and its diff, nothing written, no record. unknown: whether it landed cannot be told; "
        "run 'applyonce recover'."
    )
    commit: str | None = Field(description="The commit the call made (null unless committed).")
    replayed: bool = Field(
        description="True when this call had finished before and its stored result is returned: "
        "nothing ran now. Always false for patch_receipt and dry runs."
    )
    replay_note: str | None = Field(
        default=None,
        description="For a replay: what the text says first, that nothing ran now, what later "
        "commits did to the call's change (reverted, changed its files) and what to do (send it "
        "with the next attempt). Null when the call ran now.",
    )
    files: list[ResultFile] = Field(description="The files the call changes, in patch order.")
    match_levels: dict[str, list[str]] = Field(
        description="Per updated file, how each hunk matched: exact, rstrip, trim, unicode, ..."
    )
    diffstat: DiffStat | None = Field(description="The diff's size (null: no diff).")
    diff: str | None = Field(
        description=f"The unified diff in git's format (null: nothing committed), cut at a line "
        f"end after {DIFF_CAP} bytes (see diff_truncated)."
    )
    diff_truncated: bool = Field(description="True when diff was cut to its bound.")
    error: ResultError | None = Field(description="Why, when the call did not commit.")
    checkout_behind: list[ResultBehind] = Field(
        default_factory=list,
        description="The checkouts of the branch that do not show it after the call (a sync "
        "left for later, files holding the user's edits): what is read there is not what the "
        "branch holds until the command is run. Empty: they all do.",
    )

    def to_json_dict(self) -> dict[str, Any]:
        """The result as ``structuredContent`` (protocol field names: ``from``)."""
        return self.model_dump(mode="json", by_alias=True)


class ReceiptResult(PatchResult):
    """``patch_receipt``'s result: the call as :class:`PatchResult` tells it, and its receipt."""

    receipt: dict[str, Any] | None = Field(
        description="The verified receipt as stored (fields in 'applyonce schema --for receipt'; "
        "null when there is none)."
    )


def dry_run_result(view: PlanView, diff: CallDiff) -> PatchResult:
    """What ``apply_patch`` with ``dry_run`` answers: the plan and its diff; nothing was written."""
    text, truncated = bounded_diff(diff)
    changes = view.plan.changes
    return PatchResult(
        call_id=view.call_id,
        status="dry-run",
        commit=None,
        replayed=False,
        files=[ResultFile(path=c.path, action=c.action, **{"from": c.from_path}) for c in changes],
        match_levels={c.path: [m.label for m in c.match_levels] for c in changes if c.match_levels},
        diffstat=DiffStat(
            files_changed=diff.files_changed, insertions=diff.insertions, deletions=diff.deletions
        ),
        diff=text,
        diff_truncated=truncated,
        error=None,
    )


class LandedCall(_Model):
    """One lane call that landed on the target now."""

    lane: str = Field(description="The lane's branch (refs/heads/agent/NAME).")
    call_id: str = Field(description="The lane call (its call ID on the lane).")
    lane_commit: str = Field(description="Its commit on the lane.")
    landing_call_id: str = Field(description="The call that landed it (tool land_patch).")
    commit: str = Field(description="The landing commit on the target.")
    replayed: bool


class BlockedLane(_Model):
    """A lane stopped at one call: why, and how many later calls of the lane wait behind it."""

    lane: str = Field(description="The lane's branch (refs/heads/agent/NAME).")
    call_id: str | None = Field(description="The lane call that blocks (null: not a call's).")
    lane_commit: str = Field(description="Its commit on the lane.")
    landing_call_id: str | None = Field(description="The landing call that was refused.")
    kind: str = Field(description="Why, machine-readable: land-conflict, check-failed, ...")
    message: str
    hint: str | None = Field(description="What to do, naming tool arguments and server options.")
    output: str = Field(description="The landing's output: the repair data of a conflict.")
    waiting: int = Field(description="How many later calls of the lane wait behind it.")
    exit_code: int = Field(description="As 'applyonce land' would exit for this lane.")


class LandResult(_Model):
    """The structured result of ``land_lane``: the LandReport (docs/design.md §12)."""

    target: str = Field(description="The branch the lanes land on (refs/heads/...).")
    landed: list[LandedCall] = Field(description="The lane calls landed now, in order.")
    blocked: list[BlockedLane] = Field(description="The lanes that stopped, each at one call.")
    already: int = Field(description="How many lane calls were on the target already.")
    exit_code: int = Field(
        description="0 every lane landed (or had nothing new); else the highest of the blocked "
        "lanes' (1 rejected, 4 held or the target kept moving, 5 unknown)."
    )
    error: ResultError | None = Field(
        default=None, description="Why nothing was landed (bad arguments, no such lane)."
    )

    def to_json_dict(self) -> dict[str, Any]:
        """The result as ``structuredContent``."""
        return self.model_dump(mode="json", by_alias=True)


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema a tool declares as its ``outputSchema`` (an object at the root)."""
    return model.model_json_schema(by_alias=True)


def bounded_diff(diff: CallDiff | None, cap: int = DIFF_CAP) -> tuple[str | None, bool]:
    """The diff as text for a result, cut at the last line end within ``cap`` bytes, and whether
    it was cut."""
    if diff is None:
        return None, False
    data = diff.text
    if len(data) <= cap:
        return diff.as_text(), False
    cut = data.rfind(b"\n", 0, cap) + 1
    return data[:cut].decode("utf-8", "replace"), True


def error_of(error: dict[str, Any] | None) -> ResultError | None:
    """The ``kind``/``message``/``hint``/``retryable`` of an error dict (a receipt's, or an
    exception's); the hint in the MCP server's terms."""
    if not error:
        return None
    return ResultError(
        kind=str(error.get("kind") or "error"),
        message=str(error.get("message") or ""),
        hint=render_hint(str(error.get("hint") or ""), MCP),
        retryable=bool(error.get("retryable")),
    )


def patch_result(
    receipt: Receipt | None,
    *,
    replayed: bool = False,
    diff: CallDiff | None = None,
    error: dict[str, Any] | None = None,
    commit: str | None = None,
    behind: Sequence[CheckoutBehind] = (),
    replay: ReplayNote | None = None,
) -> PatchResult:
    """The structured result of a call.

    Args:
        receipt: the call's receipt (None: the call was refused before it had one, or it landed
            and its record could not be written: then ``commit`` says where).
        replayed: the call had finished before; its stored result is returned.
        diff: the call's diff (see :meth:`applyonce.Executor.diff`).
        error: the error when there is no receipt to carry it (``ApplyOnceError.to_dict()``).
        commit: the commit of a call that landed without a receipt.
        behind: the checkouts that do not show the branch's tip after the call.
        replay: what a repeat found (its note, in the MCP server's terms, is ``replay_note``).
    """
    text, truncated = bounded_diff(diff)
    stat = (
        None
        if diff is None
        else DiffStat(
            files_changed=diff.files_changed, insertions=diff.insertions, deletions=diff.deletions
        )
    )
    if receipt is None:
        found = error_of(error)
        refused: ResultStatus = "committed" if commit else "rejected"
        if found is not None and found.kind == "unknown-outcome":
            refused = "unknown"
        return PatchResult(
            call_id=None,
            status=refused,
            commit=commit,
            replayed=False,
            files=[],
            match_levels={},
            diffstat=stat,
            diff=text,
            diff_truncated=truncated,
            error=None if commit else found,
        )
    # A receipt still 'prepared' (interrupted) or 'unknown' is an outcome nobody can tell yet.
    status = _STATUS_OF_RECEIPT.get(receipt.status, "unknown")
    return PatchResult(
        call_id=receipt.call_id,
        status=status,
        commit=receipt.commit if status == "committed" else None,
        replayed=replayed,
        replay_note="\n".join(replay.lines(MCP)) if replayed and replay is not None else None,
        files=[
            ResultFile(path=f.path, action=f.action, **{"from": f.from_}) for f in receipt.files
        ],
        match_levels={path: list(levels) for path, levels in receipt.match_levels.items()},
        diffstat=stat,
        diff=text,
        diff_truncated=truncated,
        error=error_of(receipt.error or error),
        checkout_behind=[ResultBehind(**note.to_dict()) for note in behind],
    )


def land_result(report: LandReport) -> LandResult:
    """``land_lane``'s structured result: the report, its hints in the MCP server's terms."""
    return LandResult(
        target=report.target,
        landed=[LandedCall(**dataclasses.asdict(done)) for done in report.landed],
        blocked=[
            BlockedLane(**{**dataclasses.asdict(stop), "hint": land_hint(stop.hint)})
            for stop in report.blocked
        ],
        already=report.already,
        exit_code=report.exit_code,
    )


def land_hint(hint: str | None) -> str | None:
    """A landing's hint in the MCP server's terms: its options as the server takes them, and
    landing again as the ``land_lane`` tool."""
    if hint is None:
        return None
    return render_hint(hint, MCP).replace("run 'applyonce land' again", "call land_lane again")


__all__ = [
    "DIFF_CAP",
    "BlockedLane",
    "DiffStat",
    "LandResult",
    "LandedCall",
    "PatchResult",
    "ReceiptResult",
    "ResultBehind",
    "ResultError",
    "ResultFile",
    "bounded_diff",
    "dry_run_result",
    "error_of",
    "land_hint",
    "land_result",
    "output_schema",
    "patch_result",
]
