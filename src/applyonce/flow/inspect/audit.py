"""Audit (docs/design.md §6): every trailer commit against its receipt, and every receipt against
Git.

Problems found, each named by call ID with what to do:

* ``forged``          a commit carries a call's Call-Id but not its change: the patch never ran;
* ``changed``         a commit rewrote a call's own commit (an amend, a rebase) with another
                      change to the call's files: the patch ran, but the branch does not hold its
                      change as it made it;
* ``user-rewrite``    a commit is the user's rewrite of a call's own commit (an amend, a rebase, a
                      cherry-pick after a reset) and carries its change, maybe beside other
                      changes: run ``applyonce recover`` to record it;
* ``identity``        a commit's trailers do not recompute to its Call-Id;
* ``duplicate``       two commits carry one Call-Id and its change, and no later commit undid
                      either (the change may be there twice): ``git revert`` the later one;
* ``no-receipt``      a commit carries a Call-Id but its receipt is missing;
* ``tampered``        a receipt does not verify (edited, unreadable, or disagrees with the ledger);
* ``mismatch``        a receipt's commit, files or digests differ from what the commit holds;
* ``unreachable``     a committed receipt's commit is no longer on the branch: record a
                      rewrite done on purpose with ``applyonce resolve CALL_ID --as rewritten``;
* ``unpushed``        with ``--remote``: a committed receipt's commit is on this repository's
                      branch and not on the remote's (made without ``--remote``, not pushed);
* ``pending``         a call is still prepared (interrupted): run ``applyonce recover``;
* ``unknown``         a call's outcome is unknown: run ``applyonce resolve``.

A committed call whose commit a person rewrote away on purpose and recorded so (``applyonce
resolve CALL_ID --as rewritten --note TEXT``) is not a problem: it is listed as ``rewritten``.
Nor is a commit carrying a call's change that a later commit undid (``git revert``, or by hand):
the call's change reverted and applied again (``git revert`` then ``git cherry-pick`` of the
call's commit) stands once, and is counted as ``undone``.

Incremental: a clean audit of a branch records a checkpoint (:mod:`applyonce.state.checkpoints`):
its tip, the count and digest of the commits up to it whose message names ``Call-Id``, and of the
ledger rows it checked. The next audit checks it before relying on it: the tip must still be on
the branch (a force-push, rebase or dropped commit below it fails this), Git's commits up to it
and the ledger's rows must give the same counts and digests; otherwise the whole history is
audited, and the report says why. What it then skips: a commit up to the tip that is a call's own
recorded commit, whose ledger row has not changed since and whose receipt's bytes still hash to
the digest that row names. Every other commit up to the tip (copies, rewrites, anything that is
not a call's recorded commit) is checked again, and every receipt is read and hashed: a receipt
edited since is found as ``tampered``. ``full=True`` ignores the checkpoint.

An audit needs the whole history it checks: in a shallow clone (or one with grafts) a call's
commit may lie below the boundary, where it looks unreachable, and the commit at the boundary
looks parentless. Rather than report those as problems (or "clean" without the commits it cannot
see), audit is refused with :class:`~applyonce.git.history.HistoryIncompleteError` and the
command that makes the clone complete, as a call is (``--remote`` deepens it from the remote).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field

from applyonce.core.identity import is_sha256_hex
from applyonce.core.land import LAND_TOOL, LANDS_TRAILER, LANE_COMMIT_TRAILER
from applyonce.core.message import identity_from_trailers
from applyonce.core.receipt import Receipt, ReceiptError, now
from applyonce.core.trailers import Trailers
from applyonce.flow.context import Context
from applyonce.flow.heap import without_cycle_collection
from applyonce.flow.record.adopt import carries_other_change, own_commit, paths_rewrite_adds
from applyonce.flow.record.settle import duplicate_hint, rewritten_note, unknown_hint
from applyonce.flow.record.verify import push_hint, unpushed, verify_against_git
from applyonce.git.history import REMOTE_INCOMPLETE_HINT, require_complete, undone_by
from applyonce.state.checkpoints import (
    Checkpoint,
    CheckpointError,
    digest,
    read_checkpoint,
    write_checkpoint,
)
from applyonce.state.ledger import CallRow, claimed_data

Progress = Callable[[int], None]
NONE = Trailers([])
REBUILD = "do not trust it; run 'applyonce recover' to rebuild it from the commit"


@dataclass(frozen=True)
class Problem:
    kind: str
    call_id: str
    message: str
    hint: str
    commit: str | None = None


@dataclass(frozen=True)
class Rewritten:
    """A committed call whose commit was rewritten away by hand, as a person recorded it."""

    call_id: str
    commit: str | None
    note: str


@dataclass(frozen=True)
class Incremental:
    """An audit that relied on a checkpoint: ``verified`` Call-Id commits up to ``since``,
    audited clean ``at``."""

    since: str
    verified: int
    at: str


@dataclass
class AuditReport:
    ref: str
    commits: int = 0
    receipts: int = 0
    incremental: Incremental | None = None
    full_why: str | None = None  # why a checkpoint was not used (None: none, or --full/--since)
    problems: list[Problem] = field(default_factory=list)
    copies: int = 0  # copies (cherry-picks) of calls that landed on another branch
    undone: int = 0  # commits carrying a call's change that a later commit undid (git revert)
    rewritten: list[Rewritten] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, object]:
        return {
            "ref": self.ref,
            "commits": self.commits,
            "receipts": self.receipts,
            "clean": self.clean,
            "problems": [asdict(p) for p in self.problems],
            **({"copies": self.copies} if self.copies else {}),
            **({"undone": self.undone} if self.undone else {}),
            **({"rewritten": [asdict(r) for r in self.rewritten]} if self.rewritten else {}),
            **({"incremental": asdict(self.incremental)} if self.incremental else {}),
            **({"full_why": self.full_why} if self.full_why else {}),
        }


class _Receipts:
    """Every receipt as audit reads it: loaded and verified once (against the ledger's digest),
    however many times the walk and the pass over the receipts directory ask for it."""

    def __init__(self, ctx: Context, rows: dict[str, CallRow]) -> None:
        self.ctx = ctx
        self.rows = rows
        self._loaded: dict[str, Receipt | ReceiptError | None] = {}

    def load(self, call_id: str) -> Receipt | None:
        """The verified receipt of ``call_id`` (None: there is none).

        Raises:
            ReceiptError: it does not verify (each time it is asked for).
        """
        if call_id not in self._loaded:
            row = self.rows.get(call_id)
            try:
                self._loaded[call_id] = self.ctx.receipts.load(
                    call_id, expected_sha256=row.receipt_sha256 if row else None
                )
            except ReceiptError as exc:
                self._loaded[call_id] = exc
        found = self._loaded[call_id]
        if isinstance(found, ReceiptError):
            raise found
        return found


@without_cycle_collection
def audit(
    ctx: Context,
    *,
    branch: str | None = None,
    since: str | None = None,
    full: bool = False,
    progress: Progress | None = None,
) -> AuditReport:
    """Check the trailer commits of ``branch`` (after ``since``; without it, after the branch's
    checkpoint if it holds, unless ``full``) and every receipt of the repo."""
    ref = ctx.store.resolve_branch(branch)
    report = AuditReport(ref=ref)
    tip = ctx.publisher.tip(ref)
    hide = ctx.store.resolve_commit(since) if since else None
    require_complete(
        ctx.store,
        ref,
        tip,
        hide=hide,
        hint=REMOTE_INCOMPLETE_HINT if ctx.remote is not None else None,
        unknown="its calls cannot all be checked",
    )
    started = now()
    ledger_rows = {row.call_id: row for row in ctx.ledger.calls()}
    receipts = _Receipts(ctx, ledger_rows)
    key = ref if ctx.remote is None else f"{ctx.remote}/{ref}"
    proven: dict[str, CallRow] = {}
    again: list[str] = []
    standing: set[str] = set()  # the calls' own commits up to the checkpoint
    # The commits naming Call-Id from the tip down (what a checkpoint at the tip records).
    named: list[str] = []
    if since is None and not full and tip is not None:
        found = _checkpoint(ctx, report, key, tip, ledger_rows)
        if found is not None:
            checkpoint, below = found
            hide = checkpoint.tip
            report.incremental = Incremental(checkpoint.tip, checkpoint.commits, checkpoint.at)
            proven = _proven(ledger_rows, checkpoint.at)
            own = {r.commit_id for r in proven.values() if r.state == "committed" and r.ref == ref}
            again = [c for c in below if c not in own]
            standing = {c for c in below if c in own}
            named = below
    # Call-Id -> the commits of the walk carrying it and the call's change, newest first.
    seen: dict[str, list[tuple[str, Trailers]]] = {}
    forged: set[str] = set()
    walk = itertools.chain(
        _walk(ctx, tip, hide, named),
        ((c, ctx.store.trailers_of(c, key="Call-Id")) for c in again),
    )
    for count, (commit_id, block) in enumerate(walk, start=1):
        if progress is not None and count % 500 == 0:
            progress(count)
        # Every Call-Id git shows for the commit (git log --format='%(trailers:key=Call-Id)').
        calls = block.all("Call-Id")
        if calls:
            report.commits += 1
        for call_id in calls:
            if _forged(ctx, report, ref, commit_id, call_id, receipts):
                forged.add(call_id)
            else:
                seen.setdefault(call_id, []).append((commit_id, block))
    for call_id, commits in seen.items():
        assert tip is not None  # a commit was walked
        _check_call(ctx, report, tip, call_id, commits, receipts)
    for call_id in ctx.receipts.call_ids():
        report.receipts += 1
        row = proven.get(call_id)
        if (
            row is not None
            and call_id not in seen
            and (row.ref != ref or row.state != "committed" or row.commit_id in standing)
            and _unchanged(ctx, row)
        ):
            # Checked clean at the checkpoint, and neither it nor its receipt changed since;
            # a committed call of this branch whose commit is not on it goes the whole way
            # (listed as rewritten, or reported).
            continue
        try:
            receipt = receipts.load(call_id)
        except ReceiptError as exc:
            if call_id not in seen:
                report.problems.append(Problem("tampered", call_id, exc.message, exc.hint))
            continue
        if receipt is None or receipt.ref != ref:
            continue
        if receipt.status == "prepared":
            report.problems.append(
                Problem(
                    "pending",
                    call_id,
                    "the call was interrupted and is not settled",
                    "run 'applyonce recover'",
                )
            )
        elif receipt.status == "unknown" and call_id not in forged:
            why = (receipt.error or {}).get("message")
            report.problems.append(
                Problem(
                    "unknown",
                    call_id,
                    "the call's outcome is unknown" + (f" ({why})" if why else ""),
                    _unknown_hint(ctx, tip, receipt),
                )
            )
        elif (
            receipt.status == "committed"
            and call_id not in seen
            and since is None
            and (receipt.commit is None or not ctx.publisher.is_on(ref, receipt.commit))
        ):
            note = rewritten_note(ctx.ledger, call_id, receipt.commit)
            if note is not None:
                report.rewritten.append(Rewritten(call_id, receipt.commit, note))
                continue
            report.problems.append(
                _unreachable(ctx, ref, call_id, receipt.commit, published_to=receipt.remote)
            )
    if since is None and report.clean and tip is not None:
        _record(ctx, key, tip, named, started, ledger_rows)
    return report


def _walk(
    ctx: Context, tip: str | None, hide: str | None, named: list[str]
) -> Iterator[tuple[str, Trailers]]:
    """The walk's commits with their Call-Id trailers, each naming Call-Id added to ``named``."""
    for commit_id, block in ctx.store.walk_naming(tip, "Call-Id", hide=hide):
        if block is None:
            yield commit_id, NONE
        else:
            named.append(commit_id)
            yield commit_id, block


def _row_line(row: CallRow) -> str:
    return f"{row.call_id} {row.ref} {row.state} {row.commit_id} {row.receipt_sha256}"


def _proven(rows: dict[str, CallRow], at: str) -> dict[str, CallRow]:
    """The ledger rows last changed before ``at`` (a checkpoint's audit started)."""
    return {c: r for c, r in rows.items() if r.updated_at < at}


def _on_branch(ctx: Context, commit: str, tip: str) -> bool:
    """``commit`` is on the branch whose tip is ``tip`` (False: missing, or not a commit)."""
    try:
        return ctx.store.has_object(commit) and ctx.store.is_ancestor(commit, tip)
    except Exception:  # pygit2's error for an object that is not a commit
        return False


def _checkpoint(
    ctx: Context, report: AuditReport, key: str, tip: str, rows: dict[str, CallRow]
) -> tuple[Checkpoint, list[str]] | None:
    """The branch's checkpoint and the commits up to it naming Call-Id (newest first), if it
    holds against Git and the ledger; else None, and why in ``report.full_why``."""
    try:
        checkpoint = read_checkpoint(ctx.state_dir, key)
    except CheckpointError as exc:
        report.full_why = f"the audit checkpoint is not usable ({exc.args[0]})"
        return None
    if checkpoint is None:
        return None
    short = checkpoint.tip[:12]
    if not _on_branch(ctx, checkpoint.tip, tip):
        report.full_why = (
            f"the audit checkpoint's tip {short} is no longer on {report.ref} (the history was "
            "rewritten below it: a force-push, a rebase, a dropped commit)"
        )
        return None
    below = list(ctx.store.commits_naming(checkpoint.tip, "Call-Id"))
    if digest(below) != (checkpoint.commits, checkpoint.digest):
        report.full_why = f"the audit checkpoint does not match Git's history up to {short}"
        return None
    lines = (_row_line(r) for r in _proven(rows, checkpoint.at).values())
    if digest(lines) != (checkpoint.rows, checkpoint.rows_digest):
        report.full_why = "the ledger rows the audit checkpoint checked have changed since"
        return None
    return checkpoint, below


def _unchanged(ctx: Context, row: CallRow) -> bool:
    """The call's receipt is still the bytes its ledger row names (not read twice: any other
    answer sends it through the whole check, which reports what is wrong)."""
    if row.receipt_sha256 is None or row.state in ("prepared", "unknown"):
        return False
    return ctx.receipts.sha256_of(row.call_id) == row.receipt_sha256


def _record(
    ctx: Context, key: str, tip: str, named: list[str], started: str, rows: dict[str, CallRow]
) -> None:
    """Record what this clean audit proved, as the branch's checkpoint (``named``: the commits
    naming Call-Id up to ``tip``). A checkpoint only spares work: where the state directory is
    missing or cannot be written, none is kept."""
    if not ctx.state_dir.is_dir():
        return
    commits, commits_sha = digest(named)
    count, rows_sha = digest(_row_line(r) for r in _proven(rows, started).values())
    checkpoint = Checkpoint(tip, commits, commits_sha, count, rows_sha, started)
    with contextlib.suppress(OSError):
        write_checkpoint(ctx.state_dir, key, checkpoint)


def _unknown_hint(ctx: Context, tip: str | None, receipt: Receipt) -> str:
    """What settles a call recorded unknown; for one several commits carry, the one of them
    no later commit undid, when exactly one of those on the branch stands."""
    error = receipt.error or {}
    commits = error.get("commits")
    if error.get("kind") == "duplicate-call-id" and isinstance(commits, list) and tip is not None:
        store = ctx.store
        standing = [
            str(c)
            for c in commits
            if store.has_object(str(c))
            and store.is_ancestor(str(c), tip)
            and undone_by(store, tip, str(c)) is None
        ]
        if len(standing) == 1:
            return duplicate_hint(receipt.call_id, commits, standing=standing[0])
    return unknown_hint(receipt.call_id, error)


def _unreachable(
    ctx: Context, ref: str, call_id: str, commit: str | None, *, published_to: str | None
) -> Problem:
    """The problem of a committed call whose commit ``ref`` does not have (``published_to``:
    the remote its receipt says it was published to)."""
    short = str(commit)[:12]
    if commit is not None and unpushed(ctx, ref, commit, published_to=published_to):
        branch = ref.removeprefix("refs/heads/")
        return Problem(
            "unpushed",
            call_id,
            f"receipt's commit {short} is on this repository's {branch}, not on remote "
            f"{ctx.remote}'s (the call was made without --remote, and not pushed)",
            push_hint(ctx, ref, "audit again"),
            commit,
        )
    return Problem(
        "unreachable",
        call_id,
        f"receipt's commit {short} is not on {ref} (the branch was reset or rewritten)",
        f"if that was done on purpose, record it with 'applyonce resolve {call_id[:12]} --as "
        "rewritten --note TEXT' (and send the change again as a new attempt if it is still "
        "wanted)",
        commit,
    )


def _forged(
    ctx: Context,
    report: AuditReport,
    ref: str,
    commit_id: str,
    call_id: str,
    receipts: _Receipts,
) -> bool:
    """Report ``commit_id`` if it carries ``call_id`` but not the call's change (True: it does
    not count as the call's commit, reported or, after 'resolve --as rewritten', accepted)."""
    try:
        receipt = receipts.load(call_id)
    except ReceiptError:
        return False  # reported as tampered
    if not carries_other_change(ctx, call_id, ref, commit_id, receipt):
        return False
    # A person recorded that the call's commit was rewritten by hand (a squash keeps its trailers
    # beside other changes): the receipt is listed as rewritten, and this is no problem.
    if (
        receipt is not None
        and receipt.status == "committed"
        and rewritten_note(ctx.ledger, call_id, receipt.commit) is not None
    ):
        return True
    own = own_commit(receipt, commit_id)
    if own is not None and not ctx.publisher.is_on(ref, own):
        report.problems.append(
            Problem(
                "changed",
                call_id,
                f"commit {commit_id[:12]} rewrote the call's commit {own[:12]} with another change "
                "to its files (changed by the user); the patch ran, but the branch does not hold "
                "its change as it made it",
                f"inspect it with 'git diff {own[:12]} {commit_id[:12]}', then run 'applyonce "
                "recover' to record the call as unknown, and 'applyonce resolve'",
                commit_id,
            )
        )
        return True
    if receipt is not None and receipt.status == "unknown":
        hint = (
            f"do not count the patch as applied: settle the call with 'applyonce resolve "
            f"{call_id[:12]} --as rejected --note TEXT' and send the change again as a new "
            "attempt if it is still wanted"
        )
    else:
        hint = "run 'applyonce recover' to record the call as unknown, then 'applyonce resolve'"
    report.problems.append(
        Problem(
            "forged",
            call_id,
            f"commit {commit_id[:12]} carries this Call-Id but not its change; the patch never ran",
            hint,
            commit_id,
        )
    )
    return True


def _check_call(
    ctx: Context,
    report: AuditReport,
    tip: str,
    call_id: str,
    commits: list[tuple[str, Trailers]],
    receipts: _Receipts,
) -> None:
    """Check the commits of the branch that carry ``call_id`` and its change (newest first)
    against each other and against the call's receipt."""
    try:
        loaded = receipts.load(call_id)
    except ReceiptError:
        loaded = None
    for commit_id, block in commits:
        if loaded is not None and _states_identity_of(block, loaded):
            continue  # the receipt's identity recomputed to its Call-Id when it was read
        ident = identity_from_trailers(block)
        if ident is None or ident.recompute() != call_id:
            report.problems.append(
                Problem(
                    "identity",
                    call_id,
                    f"commit {commit_id[:12]}: its trailers do not recompute to its Call-Id",
                    "the commit message was edited or forged; inspect it with git show",
                    commit_id,
                )
            )
    try:
        receipt = receipts.load(call_id)
    except ReceiptError as exc:
        report.problems.append(Problem("tampered", call_id, exc.message, REBUILD, commits[0][0]))
        return
    walked = dict(commits)
    ids = list(walked)
    own = receipt.commit if receipt is not None and receipt.status == "committed" else None
    below = (
        own is not None
        and own not in walked
        and ctx.store.has_object(own)
        and ctx.store.is_ancestor(own, tip)
    )
    if below:
        assert own is not None
        ids.append(own)  # on the branch, before --since: the oldest of them
    standing = _applied_more_than_once(ctx, report, tip, call_id, ids) if len(ids) > 1 else ids
    if below:
        return  # the call's own commit is on the branch, and not among those audited
    if receipt is None:
        hint = "run 'applyonce recover' to rebuild it from the commit"
        if len(ids) > 1:
            # Recover records such a call unknown, for a person to say which commit is its.
            one = standing[0] if len(standing) == 1 else None
            hint = "run 'applyonce recover' to record it; then " + duplicate_hint(
                call_id, ids, standing=one
            )
        report.problems.append(
            Problem("no-receipt", call_id, f"commit {ids[0][:12]} has no receipt", hint, ids[0])
        )
        return
    commit_id = own if own in walked else ids[0]
    assert commit_id is not None
    _check_against_receipt(ctx, report, commit_id, call_id, walked[commit_id], receipt)


def _states_identity_of(block: Trailers, receipt: Receipt) -> bool:
    """Whether the trailers state exactly the identity of ``receipt`` (a verified one)."""
    try:
        return (
            block["Call-Id"] == receipt.call_id
            and block["Contract-Sha256"] == receipt.contract_sha256
            and block.get("Attempt", "1") == str(receipt.attempt)
            and block["Tool"] == receipt.tool
            and block["Tool-Version"] == receipt.tool_version
            and block["Args-Sha256"] == receipt.args_sha256
            and block.get("Idempotency-Key") == receipt.idempotency_key
        )
    except KeyError:
        return False


def _applied_more_than_once(
    ctx: Context, report: AuditReport, tip: str, call_id: str, commits: list[str]
) -> list[str]:
    """Several commits of the branch carry one call's change (``commits``, newest first). One
    that a later commit undid (``git revert``) no longer counts: the call's change reverted
    and applied again (a revert, then a cherry-pick), or a second copy reverted, is on the
    branch once. Two or more that stand are a problem each but the oldest. Returns those
    that stand."""
    standing = [c for c in commits if undone_by(ctx.store, tip, c) is None]
    report.undone += len(commits) - len(standing)
    for later in standing[:-1]:
        report.problems.append(
            Problem(
                "duplicate",
                call_id,
                f"commits {standing[-1][:12]} and {later[:12]} both carry this Call-Id and its "
                "change, and no later commit undid either",
                f"if the change is there twice, undo the later one with 'git revert "
                f"{later[:12]}' (audit then counts it as undone)",
                later,
            )
        )
    return standing


def _check_against_receipt(
    ctx: Context,
    report: AuditReport,
    commit_id: str,
    call_id: str,
    block: Trailers,
    receipt: Receipt,
) -> None:
    """Check the commit that stands for ``call_id`` on the branch against its receipt."""
    if (
        receipt.status == "committed"
        and receipt.ref != report.ref
        and receipt.commit != commit_id
        and receipt.commit is not None
        and ctx.publisher.is_on(receipt.ref, receipt.commit)
    ):
        # A copy (cherry-pick) of a call that landed on its own branch, with the call's change
        # (a copy with another change is reported as forged): that branch's audit checks it.
        report.copies += 1
        return
    own = own_commit(receipt, commit_id)
    if own is not None:
        note = rewritten_note(ctx.ledger, call_id, own)
        if note is not None:
            # A person recorded the rewrite ('resolve --as rewritten'): it stands.
            report.rewritten.append(Rewritten(call_id, own, note))
            return
        added = paths_rewrite_adds(ctx, own, commit_id)
        report.problems.append(
            Problem(
                "user-rewrite",
                call_id,
                f"commit {commit_id[:12]} is the user's rewrite (amend, rebase) of the call's "
                f"commit {own[:12]} and carries its change"
                + (f", and also changes {', '.join(added)}" if added else ""),
                "run 'applyonce recover' to record it as the call's commit",
                commit_id,
            )
        )
        return
    if receipt.status == "unknown":
        return  # the pass over the receipts reports it, with what settles it
    if receipt.status != "committed" or receipt.commit != commit_id:
        report.problems.append(
            Problem(
                "mismatch",
                call_id,
                f"receipt says {receipt.status} {str(receipt.commit)[:12]}, "
                f"the branch has commit {commit_id[:12]}",
                "run 'applyonce recover'",
                commit_id,
            )
        )
        return
    try:
        verify_against_git(ctx, receipt, trailers=block)
    except ReceiptError as exc:
        report.problems.append(Problem("mismatch", call_id, exc.message, exc.hint, commit_id))
        return
    if receipt.tool == LAND_TOOL:
        _check_landing(ctx, report, commit_id, call_id)


def _check_landing(ctx: Context, report: AuditReport, commit_id: str, call_id: str) -> None:
    """A landing (docs/design.md §12, "Lanes") follows its lane call across the lanes: its
    trailers name the lane call and lane commit its recorded args name, and that lane call's
    receipt (where this ledger has it) says it made that commit on that lane."""
    trailers = ctx.store.trailers_of(commit_id)
    lands, lane_commit = trailers.get(LANDS_TRAILER), trailers.get(LANE_COMMIT_TRAILER)
    recorded = claimed_data(ctx.ledger, call_id, "args")
    try:
        lane = ctx.receipts.load(lands) if lands and is_sha256_hex(lands) else None
    except ReceiptError:
        lane = None  # the pass over the receipts reports a receipt that does not verify
    problem = None
    if isinstance(recorded, dict) and (
        recorded.get("lands") != lands or recorded.get("commit") != lane_commit
    ):
        problem = "its Lands-Call-Id or Lane-Commit is not the lane call it recorded"
    elif lands and lane is not None and (lane.status, lane.commit) != ("committed", lane_commit):
        problem = (
            f"the lane call {lands[:12]} it lands is {lane.status} "
            f"{str(lane.commit)[:12]}, not commit {str(lane_commit)[:12]}"
        )
    if problem is not None:
        report.problems.append(
            Problem(
                "landing-mismatch",
                call_id,
                f"landing commit {commit_id[:12]}: {problem}",
                "run 'applyonce audit --ref' on the lane, then 'applyonce recover'",
                commit_id,
            )
        )
