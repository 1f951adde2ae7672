"""Lanes and the merge queue (``applyonce land``, ``Executor.land``; docs/design.md §12,
"Lanes").

An agent's lane is the branch ``agent/NAME``, made from the target's tip the first time
(:func:`open_lane`); its calls land there exactly once as any call does. :func:`land` moves the
calls of one lane, or of every lane, onto the target: each lane call not yet landed, oldest
first, becomes one landing call (``LandArgs``) run through the corridor of
:mod:`applyonce.flow.call.apply` — staged on the target's tip with the lane call's own patch, its
checks run again on the merged tree, published by compare-and-swap (restaged if the tip moves),
recorded, recovered by ``recover`` through its ``Call-Id`` like any call. A lane call that no
longer applies (or fails its checks) blocks its lane, and only its lane: the later calls of that
lane wait, the other lanes go on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from applyonce.core.checks import BUILTIN_CHECKS
from applyonce.core.identity import CallIdentity
from applyonce.core.land import (
    LAND_TOOL,
    LAND_TOOL_VERSION,
    LANE_PREFIX,
    LandArgs,
    LaneWaitingError,
    lane_branch,
)
from applyonce.errors import ApplyOnceError, UsageError
from applyonce.flow.call.apply import run_call
from applyonce.flow.call.config import with_config
from applyonce.flow.call.group import Member, Result, groupable, run_group
from applyonce.flow.context import Context
from applyonce.flow.options import CallOptions, CallOutcome
from applyonce.flow.record.leases import lease_length
from applyonce.flow.record.verify import stored_receipt
from applyonce.git.history import REMOTE_INCOMPLETE_HINT, require_complete
from applyonce.git.publisher import TipMovedError
from applyonce.state.ledger import CallRow

_HEADS = "refs/heads/"


@dataclass(frozen=True)
class Landed:
    """One lane call on the target: its landing call and commit there."""

    lane: str
    call_id: str
    lane_commit: str
    landing_call_id: str
    commit: str
    replayed: bool = False


@dataclass(frozen=True)
class Blocked:
    """A lane stopped at ``call_id``: why (``kind``, ``message``, ``hint``), the repair data the
    landing's receipt keeps (``output``), and how many later calls of the lane wait behind it."""

    lane: str
    call_id: str | None
    lane_commit: str
    landing_call_id: str | None
    kind: str
    message: str
    hint: str | None
    output: str
    waiting: int
    exit_code: int


@dataclass(frozen=True)
class LandReport:
    """What one ``land`` did: the target, the calls it landed now, the lanes it found blocked,
    and how many lane calls were already on the target."""

    target: str
    landed: list[Landed] = field(default_factory=list)
    blocked: list[Blocked] = field(default_factory=list)
    already: int = 0

    @property
    def exit_code(self) -> int:
        """0 every lane landed; else the highest of its blocked lanes' (1 rejected, 4 held or
        a conflict, 5 unknown)."""
        return max((b.exit_code for b in self.blocked), default=0)


def open_lane(ctx: Context, name: str, *, onto: str | None = None) -> str:
    """The branch of lane ``name`` (``agent/NAME``), made at the tip of ``onto`` (default: the
    branch HEAD points at) when it does not exist yet. Idempotent; safe to race.

    Raises:
        UsageError: a bad name, or ``onto`` does not exist.
    """
    ref = ctx.store.resolve_branch(lane_branch(name))
    if ctx.publisher.tip(ref) is not None:
        return ref
    target = ctx.store.resolve_branch(onto)
    tip = ctx.publisher.tip(target)
    if tip is None:
        if ctx.store.head_is(target):
            # HEAD's branch is unborn (no commit yet): the lane starts empty too, its first call
            # the root commit, as that call would be on the branch itself.
            return ref
        raise UsageError(
            f"there is no branch {target.removeprefix(_HEADS)!r} to start lane {name!r} from",
            hint="pass --branch BRANCH naming an existing branch",
        )
    # A history the lane's calls could not be judged on refuses them: the lane is not made
    # either (nothing written), as the call itself would be refused.
    hint = REMOTE_INCOMPLETE_HINT if ctx.remote is not None else None
    require_complete(ctx.store, ref, tip, hint=hint)
    with contextlib.suppress(TipMovedError):  # made meanwhile by another call of the lane
        ctx.publisher.publish(ref, None, tip, reason=f"applyonce: lane {name} from {target}")
    return ref


def lanes(ctx: Context) -> list[str]:
    """Every lane branch (``refs/heads/agent/*``): the remote's, with a remote as the commit
    point, else the repository's own."""
    from applyonce.git.remote import RemotePublisher

    if isinstance(ctx.publisher, RemotePublisher):
        return ctx.publisher.branches(_HEADS + LANE_PREFIX)
    return ctx.store.branches(_HEADS + LANE_PREFIX)


def land(
    ctx: Context,
    *,
    lane: str | None = None,
    onto: str | None = None,
    options: CallOptions | None = None,
) -> LandReport:
    """Land the calls of ``lane`` (None: of every lane) onto ``onto`` (None: the branch HEAD
    points at), each exactly once (module docstring).

    Raises:
        UsageError: no such lane or target; the lane is the target.
    """
    options = options or CallOptions()
    target = ctx.store.resolve_branch(onto)
    # HEAD's unborn branch is a target: its first landing is the root commit.
    if ctx.publisher.tip(target) is None and not ctx.store.head_is(target):
        raise UsageError(
            f"there is no branch {target.removeprefix(_HEADS)!r} to land on",
            hint="pass --onto BRANCH naming an existing branch",
        )
    if lane is not None:
        refs = [ctx.store.resolve_branch(lane_branch(lane))]
        if ctx.publisher.tip(refs[0]) is None:
            raise UsageError(
                f"there is no lane {lane!r} (branch {refs[0].removeprefix(_HEADS)})",
                hint="make a call with --lane NAME first",
            )
    else:
        refs = lanes(ctx)
    if target in refs:
        raise UsageError("a lane cannot land on itself", hint="pass --onto BRANCH")
    report = LandReport(target)
    already, alone = _land_group(ctx, refs, target, options, report)
    for ref in alone:
        already += _land_lane(ctx, ref, target, options, report)
    return replace(report, already=already)


def pending(ctx: Context, lane: str, target: str) -> list[tuple[str, str | None]]:
    """The lane's commits not on the target, oldest first, each with its ``Call-Id`` (None: a
    commit that is not a call's)."""
    tip = ctx.publisher.tip(lane)
    found = [
        (commit, trailers.get("Call-Id"))
        for commit, trailers in ctx.store.walk_trailers(
            tip, hide=ctx.publisher.tip(target), key="Call-Id"
        )
    ]
    return found[::-1]


def landing_identity(
    ctx: Context, lane: str, target: str, call_id: str, commit: str, attempt: int = 1
) -> tuple[LandArgs, CallIdentity]:
    """The args and identity of the call that lands lane call ``call_id`` (its ``commit`` on
    ``lane``) on ``target``. Not the contract: landing a call is the same act whoever asks."""
    args = LandArgs(ref=target, lands=call_id, lane=lane, commit=commit)
    ident = CallIdentity.compute(
        args.sha256(), attempt=attempt, tool=LAND_TOOL, tool_version=LAND_TOOL_VERSION
    )
    return args, ident


def lane_landings(
    ctx: Context, lane: str, target: str
) -> list[tuple[str, str | None, tuple[LandArgs, CallIdentity] | None, CallRow | None]]:
    """The lane's pending commits (:func:`pending`), each with its landing's args and identity
    and the landing's ledger row (None: not a call's commit; no row). Two queries for the whole
    lane, whatever its length: every lane commit stays pending, since its landing is a commit of
    its own, so a long-lived lane's landed calls are met again at each ``land``."""
    commits = pending(ctx, lane, target)
    lane_rows = ctx.ledger.get_many(c for _, c in commits if c is not None)
    landings = [
        None
        if call_id is None
        else landing_identity(ctx, _made_on(lane_rows.get(call_id), lane), target, call_id, commit)
        for commit, call_id in commits
    ]
    rows = ctx.ledger.get_many(found[1].call_id for found in landings if found is not None)
    return [
        (commit, call_id, found, None if found is None else rows.get(found[1].call_id))
        for (commit, call_id), found in zip(commits, landings, strict=True)
    ]


def _made_on(row: CallRow | None, lane: str) -> str:
    """The lane a lane call was made on (``row``: its ledger row; its branch), else ``lane``: a
    lane made from another lane holds that lane's calls too, and each lands once, under one
    landing identity, whichever lane is drained."""
    if row is not None and row.ref != lane and row.ref.startswith(_HEADS + LANE_PREFIX):
        return row.ref
    return lane


def _land_lane(
    ctx: Context, lane: str, target: str, options: CallOptions, report: LandReport
) -> int:
    """Land ``lane``'s pending calls in order, until one is blocked; how many were on the
    target already."""
    commits = lane_landings(ctx, lane, target)
    already = 0
    for index, (commit, call_id, landing, row) in enumerate(commits):
        waiting = len(commits) - index - 1
        if call_id is None or landing is None:
            report.blocked.append(
                Blocked(
                    lane,
                    None,
                    commit,
                    None,
                    "not-a-call",
                    f"lane commit {commit[:12]} is not a call's (it has no Call-Id)",
                    "land only calls on a lane: move that commit off the lane, or make its change"
                    " with applyonce",
                    "",
                    waiting,
                    1,
                )
            )
            return already
        args, ident = landing
        if row is not None and row.state == "committed":
            already += 1
            continue
        result: Result
        try:
            result = run_call(
                ctx,
                args,
                ident,
                {"lands": call_id, "format": LAND_TOOL},
                _landing_options(ctx, call_id, options),
                lease_length(ctx, options.lease_seconds),
            )
        except ApplyOnceError as exc:
            result = exc
        verdict = _judge(report, lane, call_id, commit, ident.call_id, result, waiting)
        if verdict == "blocked":
            return already
        already += verdict == "already"
    return already


def _land_group(
    ctx: Context, refs: list[str], target: str, options: CallOptions, report: LandReport
) -> tuple[int, list[str]]:
    """Land the pending calls of ``refs`` as one group (docs/design.md §1, "Groups"): each lane's
    calls in order, chained on the target's tip, published by one compare-and-swap; a call
    that does not land drops out, and the later calls of its lane with it (``lane-waiting``, run
    again by the next ``land``). Returns how many were on the target already, and the lanes to
    land one call at a time instead: where group commit is not allowed (a remote, commit hooks),
    a lane with a commit that is not a call's, or a landing with a history of its own (a stored
    rejection to replay, or one in flight)."""
    already = 0
    alone: list[str] = []
    planned: list[tuple[str, list[tuple[str, str, Member]]]] = []
    skipped_of: dict[str, int] = {}
    members: list[Member] = []
    # The landings planned so far: a lane made from another lane holds that lane's calls too,
    # landed once, by whichever lane meets them first (the other's later calls wait on it).
    planned_ids: dict[str, Member] = {}
    for ref in refs:
        calls: list[tuple[str, str, Member]] = []
        skipped = 0
        previous: Member | None = None
        before = ""  # the lane call ``previous`` lands
        for commit, call_id, landing, row in lane_landings(ctx, ref, target):
            if call_id is None or landing is None:
                break
            args, ident = landing
            if ident.call_id in planned_ids:
                previous, before = planned_ids[ident.call_id], call_id
                continue
            if row is not None and row.state == "committed":
                skipped += 1
                continue
            if row is not None and not (row.state == "rejected" and row.retryable):
                break
            opts = _landing_options(ctx, call_id, options)
            if not groupable(ctx, opts):
                break
            member = Member(
                len(members) + len(calls),
                args,
                ident,
                {"lands": call_id, "format": LAND_TOOL},
                opts,
                lease_length(ctx, opts.lease_seconds),
                after=previous,
                waits=None if previous is None else _waiting(before),
            )
            calls.append((commit, call_id, member))
            previous, before = member, call_id
        else:
            if calls:
                planned.append((ref, calls))
                members.extend(m for _, _, m in calls)
                planned_ids.update((m.ident.call_id, m) for _, _, m in calls)
                skipped_of[ref] = skipped  # counted by _land_lane if the lane lands alone
            else:
                already += skipped
            continue
        alone.append(ref)
    if len(members) < 2:  # nothing to group: the one call lands alone, as any call
        return already, [*(ref for ref, _ in planned), *alone]
    already += sum(skipped_of.values())
    results = run_group(ctx, members)
    for ref, calls in planned:
        for index, (commit, call_id, member) in enumerate(calls):
            result = results[member.index]
            if isinstance(result, Exception) and not isinstance(result, ApplyOnceError):
                raise result
            waiting = len(calls) - index - 1
            verdict = _judge(report, ref, call_id, commit, member.ident.call_id, result, waiting)
            if verdict == "blocked":
                break
            already += verdict == "already"
    return already, alone


def _waiting(before: str) -> Callable[[], ApplyOnceError]:
    return lambda: LaneWaitingError(
        f"lane call {before[:12]} before it did not land, so it waits (nothing written)"
    )


def _judge(
    report: LandReport,
    lane: str,
    call_id: str,
    commit: str,
    landing_call_id: str,
    result: Result,
    waiting: int,
) -> str:
    """Put one landing's result in ``report``: ``landed``, ``already`` or ``blocked``."""
    if isinstance(result, ApplyOnceError):
        report.blocked.append(
            Blocked(
                lane,
                call_id,
                commit,
                landing_call_id,
                result.kind,
                result.message,
                result.hint,
                "",
                waiting,
                result.exit_code,
            )
        )
        return "blocked"
    assert isinstance(result, CallOutcome)
    receipt = result.receipt
    if receipt.status != "committed" or receipt.commit is None:
        error = receipt.error or {}
        report.blocked.append(
            Blocked(
                lane,
                call_id,
                commit,
                landing_call_id,
                str(error.get("kind", "rejected")),
                str(error.get("message", "the landing was rejected")),
                error.get("hint"),
                receipt.output,
                waiting,
                receipt.exit_code or 1,
            )
        )
        return "blocked"
    if result.replayed:
        return "already"
    report.landed.append(Landed(lane, call_id, commit, landing_call_id, receipt.commit))
    return "landed"


def _landing_options(ctx: Context, call_id: str, options: CallOptions) -> CallOptions:
    """The landing's options: the lane call's own ``--check`` commands and skipped built-in
    checks (as its receipt recorded them), unless given; the rest as given, then git config."""
    checks, skipped = options.checks, options.skip_checks
    if checks is None or skipped is None:
        try:
            receipt = stored_receipt(ctx, call_id)
        except ApplyOnceError:
            receipt = None
        if receipt is not None:
            builtin = {record: name for name, record in BUILTIN_CHECKS.items()}
            own = [c.name for c in receipt.checks if c.name not in builtin]
            if checks is None:
                checks = [name for name in own if not name.startswith("hook:")]
            if skipped is None:
                skipped = [
                    builtin[c.name]
                    for c in receipt.checks
                    if c.name in builtin and c.output_tail.startswith("skipped")
                ]
    return with_config(ctx, replace(options, branch=None, checks=checks, skip_checks=skipped))
