"""Recovery (DESIGN §6): finish every interrupted call by asking Git what happened.

For a call that is not terminal and whose owner is gone:

* a commit carrying its ``Call-Id`` on the branch after ``base_commit`` → ``committed``,
  ``reconciled: true``; receipt and ledger completed, checkout synced. The patch is never
  re-applied;
* its commit object exists (recorded by the ``commit-object`` event) but the branch was not moved,
  and the tip still equals ``base_commit`` → published now by compare-and-swap (roll forward);
* otherwise nothing took effect → ``rejected`` with ``retryable: true``: the same call may run
  again;
* contradictions (two commits with one Call-Id) → ``unknown``, for a person to ``resolve``.

Committed calls without a ``synced`` event get their checkout sync. Recovery also removes lock files
that no live process holds, temp files of killed writers, and broken scratch checkouts. It is
idempotent and safe to run concurrently with itself and with ``apply``: each call is taken over in
the ledger before it is touched.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pygit2

from applyonce.errors import ApplyOnceError
from applyonce.executor import touched_paths_of
from applyonce.fsutil import stale_temp_files
from applyonce.gitstore import TipMovedError, trailers
from applyonce.identity import CallIdentity
from applyonce.ledger import IN_FLIGHT, CallRow, Owner
from applyonce.receipts import Receipt, ReceiptError
from applyonce.trailers import identity_from_trailers

if TYPE_CHECKING:
    from applyonce.executor import Executor

LOCK_MIN_AGE_S = 2.0


class InterruptedCallError(ApplyOnceError):
    kind = "interrupted"
    default_retryable = True
    default_hint = "nothing was committed; repeat the call to run it again"


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


def _age_left(path: Path) -> float:
    """Seconds until ``path`` is old enough to be judged stale (0 if it already is, or is gone)."""
    try:
        return max(0.0, LOCK_MIN_AGE_S - (time.time() - path.stat().st_mtime))
    except FileNotFoundError:
        return 0.0


def _open_by_any_process(paths: set[Path]) -> set[Path]:
    """Which of ``paths`` some live process has open (Linux ``/proc``; elsewhere: all of them)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return set(paths)
    wanted = {str(p) for p in paths}
    held: set[Path] = set()
    for fd_dir in proc.glob("[0-9]*/fd"):
        with contextlib.suppress(OSError):
            for fd in fd_dir.iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target in wanted:
                        held.add(Path(target))
    return held


class Recovery:
    def __init__(self, executor: Executor) -> None:
        self.ex = executor
        self.git = executor.git
        self.ledger = executor.ledger

    # --- the whole repository -----------------------------------------------------------------

    def recover(self) -> RecoveryReport:
        report = RecoveryReport()
        report.removed.extend(self.remove_stale_files())
        ledger_rows = {row.call_id: row for row in self.ledger.calls(states=IN_FLIGHT)}
        # Receipts without a ledger row: the ledger was lost, or moved aside because it broke.
        known = {row.call_id for row in self.ledger.calls()}
        for call_id in self.ex.receipts.call_ids():
            if call_id in known:
                continue
            with contextlib.suppress(ReceiptError):
                receipt = self.ex.receipts.load(call_id)
                if receipt is not None and receipt.status == "prepared":
                    row = self.ledger.adopt_receipt(receipt)
                    if row is not None:
                        ledger_rows[call_id] = row
                elif receipt is not None:
                    self._adopt_settled(receipt, report)
        history = self._history_index(ledger_rows.values(), report)
        for row in ledger_rows.values():
            outcome = self.reconcile(row, history=history)
            if outcome is not None:
                report.outcomes.append(outcome)
        self.repair_records(report)
        settled = {o.call_id: i for i, o in enumerate(report.outcomes)}
        receipts = []
        for row in self.ledger.unsynced_committed():
            try:
                receipts.append(self.ex.stored_receipt(row.call_id))
            except ReceiptError as exc:
                report.notes.append(f"{row.call_id[:12]}: not synced, {exc.one_line()}")
        if not receipts:
            return report
        try:
            sync_reports = self.ex.sync_many(receipts)
        except (ApplyOnceError, OSError) as exc:
            reason = exc.one_line() if isinstance(exc, ApplyOnceError) else str(exc)
            report.notes.append(f"checkout not updated ({reason}); run 'applyonce recover' again")
            return report
        written = {p for r in sync_reports for p in r.written}
        for receipt in receipts:
            if not touched_paths_of(receipt) & written:
                continue  # its files were already as the branch has them
            if receipt.call_id in settled:
                o = report.outcomes[settled[receipt.call_id]]
                report.outcomes[settled[receipt.call_id]] = Outcome(
                    o.call_id, o.was, o.now, o.why + "; checkout updated"
                )
            else:
                report.outcomes.append(
                    Outcome(receipt.call_id, "committed", "committed", "checkout updated")
                )
        left = sorted({p for r in sync_reports for p in r.left_alone})
        if left:
            report.notes.append(
                "left your uncommitted changes in " + ", ".join(left[:10]) + ": they were made "
                "on the file as it was before the call's commit, so committing them as they are "
                "would undo that commit there; merge them with the committed version first"
            )
        failed = [r.failed for r in sync_reports if r.failed]
        report.notes.extend(f"checkout not updated: {reason}" for reason in failed)
        return report

    def _adopt_settled(self, receipt: Receipt, report: RecoveryReport) -> None:
        """Give a settled call whose ledger row was lost its row back, from its receipt (a
        committed one only once it has verified against Git)."""
        if receipt.status == "committed":
            try:
                self.ex.verify_against_git(receipt)
            except ReceiptError:
                return  # repair_records rebuilds it from the commit
        data = self.ex.receipts.read_bytes(receipt.call_id) or b""
        self.ledger.ensure_row(
            receipt.identity,
            receipt.ref,
            reason="a receipt without a ledger row",
            state=receipt.status,
            execution_id=receipt.execution_id,
            base_commit=receipt.base_commit,
            commit_id=receipt.commit,
            exit_code=receipt.exit_code,
            retryable=int(receipt.retryable),
            receipt_sha256=hashlib.sha256(data).hexdigest(),
            synced=int(receipt.status != "committed"),
        )
        report.outcomes.append(
            Outcome(receipt.call_id, "-", receipt.status, "ledger row restored from its receipt")
        )

    def repair_records(self, report: RecoveryReport) -> None:
        """Rebuild, from their commits, the receipts of committed calls that are missing or do not
        verify, and the record of calls known only from their Call-Id trailer. Git is the truth;
        receipts are derived from it."""
        rows = {row.call_id: row for row in self.ledger.calls()}
        refs = {row.ref for row in rows.values()}
        with contextlib.suppress(ApplyOnceError):
            refs.add(self.git.resolve_branch(None))
        for ref in sorted(refs):
            tip = self.ex.refresh_trailer_index(ref)
            if tip is None:
                continue
            reachable = {str(commit.id) for commit in self.git.walk(tip)}
            for call_id, commits in self.ledger.indexed_calls(ref).items():
                row = rows.get(call_id)
                on_branch = [c for c in commits if c in reachable]
                problem = self._record_problem(call_id, row, on_branch)
                if problem is None:
                    continue
                if len(on_branch) > 1 and row is None:
                    self._record_duplicate(call_id, ref, on_branch, report)
                    continue
                if len(on_branch) != 1:
                    continue  # gone from the branch, or duplicated: audit reports it
                commit = self.git.repo[on_branch[0]]
                ident = identity_from_trailers(trailers(commit))  # type: ignore[arg-type]
                if row is not None:
                    with contextlib.suppress(ReceiptError):
                        ident = self._identity(row, None)
                if ident is None or ident.recompute() != call_id:
                    report.notes.append(
                        f"{call_id[:12]}: its trailers do not recompute; left alone"
                    )
                    continue
                self.ledger.ensure_row(ident, ref, reason=problem)
                execution_id = uuid.uuid4().hex
                self.ex.adopt_commit(ident, execution_id, ref, on_branch[0], None)
                self.ledger.record(call_id, execution_id, "repaired", extra={"reason": problem})
                report.outcomes.append(
                    Outcome(
                        call_id,
                        row.state if row else "-",
                        "committed",
                        f"{problem}; rebuilt it from commit {on_branch[0][:12]}",
                    )
                )

    def _record_duplicate(
        self, call_id: str, ref: str, commits: list[str], report: RecoveryReport
    ) -> None:
        """A call with no record and several commits: record it as unknown, for 'resolve'."""
        ident = identity_from_trailers(trailers(self.git.repo[commits[0]]))  # type: ignore[arg-type]
        if ident is None or ident.recompute() != call_id:
            return
        self.ledger.ensure_row(ident, ref, reason="several commits carry its Call-Id")
        row = self.ledger.get(call_id)
        assert row is not None
        self._mark_unknown(row, ident, None, uuid.uuid4().hex, commits)
        report.outcomes.append(
            Outcome(
                call_id,
                "-",
                "unknown",
                f"{len(commits)} commits carry this Call-Id; run 'applyonce resolve'",
            )
        )

    def _record_problem(
        self, call_id: str, row: CallRow | None, on_branch: list[str]
    ) -> str | None:
        """Why the record of a call seen on the branch needs rebuilding (None: it does not)."""
        if row is not None and row.state != "committed":
            return None  # in flight (reconciled above), rejected or unknown: not ours to rewrite
        try:
            receipt = self.ex.receipts.load(
                call_id, expected_sha256=row.receipt_sha256 if row else None
            )
        except ReceiptError:
            return "its receipt did not verify"
        if receipt is None:
            return "its receipt was missing" if row else "it had no record at all"
        if receipt.status == "committed" and receipt.commit not in on_branch:
            return "its commit was rewritten (amend, rebase)"
        return None

    def _history_index(
        self, rows: Iterable[CallRow], report: RecoveryReport
    ) -> dict[str, dict[str, list[str]]]:
        """One walk per ref, from the tip back to the oldest base of the calls being recovered:
        Call-Id → commits. Without a known base the whole branch is walked, and that is said."""
        by_ref: dict[str, list[str | None]] = {}
        for row in rows:
            by_ref.setdefault(row.ref, []).append(row.base_commit)
        index: dict[str, dict[str, list[str]]] = {}
        for ref, bases in by_ref.items():
            tip = self.git.tip(ref)
            remaining = {b for b in bases if b is not None}
            complete = None not in bases and all(self._base_on_branch(ref, b) for b in remaining)
            if not complete and tip is not None:
                report.notes.append(
                    f"{ref}: a call has no known base on the branch; searched its whole history"
                )
            found: dict[str, list[str]] = {}
            # Newest first; once every base has been passed, older commits cannot hold the calls.
            for commit in self.git.walk(tip):
                call = trailers(commit).get("Call-Id")
                if call:
                    found.setdefault(call, []).append(str(commit.id))
                if complete:
                    remaining.discard(str(commit.id))
                    if not remaining:
                        break
            index[ref] = found
        return index

    # --- one call -----------------------------------------------------------------------------

    def reconcile(
        self,
        row: CallRow,
        *,
        history: dict[str, dict[str, list[str]]] | None = None,
        already_claimed: str | None = None,
    ) -> Outcome | None:
        """Settle one in-flight call. Returns None if a live process still runs it."""
        execution_id = already_claimed or self.ledger.take_over(row.call_id, Owner.me())
        if execution_id is None:
            return None
        receipt: Receipt | None = None
        with contextlib.suppress(ReceiptError):
            receipt = self.ex.receipts.load(row.call_id)
        ident = self._identity(row, receipt)
        base = row.base_commit or (receipt.base_commit if receipt else None)
        if history is not None and row.ref in history:
            commits = history[row.ref].get(row.call_id, [])
        else:
            commits = self.git.commits_with_call_id(row.ref, row.call_id, since=base)
            if base is not None and not commits and not self._base_on_branch(row.ref, base):
                commits = self.git.commits_with_call_id(row.ref, row.call_id, since=None)
        if len(commits) > 1:
            self._mark_unknown(row, ident, receipt, execution_id, commits)
            return Outcome(
                row.call_id,
                row.state,
                "unknown",
                f"{len(commits)} commits carry this Call-Id; run 'applyonce resolve'",
            )
        if len(commits) == 1:
            self.ex.adopt_commit(ident, execution_id, row.ref, commits[0], receipt)
            return Outcome(
                row.call_id,
                row.state,
                "committed",
                f"commit {commits[0][:12]} is on {row.ref}; bookkeeping finished",
            )
        orphan = self._orphan_commit(row.call_id, base)
        if orphan is not None and base is not None and self.git.tip(row.ref) == base:
            try:
                self.git.publish(row.ref, base, orphan, reason=f"applyonce recover: {row.call_id}")
            except TipMovedError:
                pass
            else:
                self.ex.adopt_commit(ident, execution_id, row.ref, orphan, receipt)
                return Outcome(
                    row.call_id,
                    row.state,
                    "committed",
                    f"commit object {orphan[:12]} was staged; published it now",
                )
        error = InterruptedCallError(
            "the call was interrupted before its commit was published", call_id=row.call_id
        )
        self.ex.reject_interrupted(ident, execution_id, row, receipt, error)
        return Outcome(
            row.call_id,
            row.state,
            "rejected",
            "interrupted before the publish; nothing took effect (retryable)",
        )

    def _identity(self, row: CallRow, receipt: Receipt | None) -> CallIdentity:
        if receipt is not None:
            return receipt.identity
        claimed: dict[str, object] = next(
            (
                e["data"]
                for e in self.ledger.events(row.call_id)
                if e["kind"] in ("claimed", "adopted")
            ),
            {},
        )
        identity = claimed.get("identity")
        if identity:
            return CallIdentity.model_validate(identity)
        raise ReceiptError(
            f"call {row.call_id[:12]} has neither a receipt nor a recorded identity",
            call_id=row.call_id,
        )

    def _base_on_branch(self, ref: str, base: str) -> bool:
        tip = self.git.tip(ref)
        return tip is not None and self.git.has_object(base) and self.git.is_ancestor(base, tip)

    def _orphan_commit(self, call_id: str, base: str | None) -> str | None:
        """The newest commit object staged for ``call_id`` on ``base``, if it still exists."""
        for event in reversed(self.ledger.events(call_id)):
            if event["kind"] != "commit-object":
                continue
            commit = event["data"].get("commit")
            if event["data"].get("base") != base or not commit or not self.git.has_object(commit):
                return None
            obj = self.git.repo[commit]
            if trailers(obj).get("Call-Id") != call_id:  # type: ignore[arg-type]
                return None
            return str(commit)
        return None

    def _mark_unknown(
        self,
        row: CallRow,
        ident: CallIdentity,
        receipt: Receipt | None,
        execution_id: str,
        commits: list[str],
    ) -> None:
        unknown = Receipt.of_call(
            ident,
            status="unknown",
            execution_id=execution_id,
            ref=row.ref,
            created_at=receipt.created_at if receipt else None,
            tool_call_id=receipt.tool_call_id if receipt else None,
            base_commit=row.base_commit,
            error={
                "kind": "duplicate-call-id",
                "message": f"{len(commits)} commits carry this Call-Id",
                "commits": commits,
                "retryable": False,
            },
            exit_code=5,
            reconciled=True,
        ).with_output(f"error: call {row.call_id[:12]}'s outcome is unknown\n")
        sha = self.ex.receipts.write(unknown)
        self.ledger.record(
            row.call_id,
            execution_id,
            "unknown",
            state="unknown",
            receipt_sha256=sha,
            exit_code=5,
            extra={"commits": commits},
        )

    # --- debris -------------------------------------------------------------------------------

    def remove_stale_files(self) -> list[str]:
        """Temp files of dead writers, lock files nobody holds, broken scratch checkouts."""
        removed: list[str] = []
        for tmp in stale_temp_files(self.ex.receipts.dir):
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
                removed.append(str(tmp))
        removed.extend(self._remove_stale_locks())
        scratch = self.ex.state_dir / "scratch"
        if scratch.is_dir():
            for slot in scratch.iterdir():
                if not slot.is_dir():
                    continue
                try:
                    pygit2.Repository(str(slot))
                except (pygit2.GitError, KeyError):
                    if not self._slot_busy(scratch, slot.name):
                        shutil.rmtree(slot, ignore_errors=True)
                        removed.append(str(slot))
        return removed

    def _slot_busy(self, scratch: Path, name: str) -> bool:
        import fcntl

        lock_path = scratch / f"{name}.lock"
        if not lock_path.exists():
            return False
        fd = os.open(lock_path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def _remove_stale_locks(self) -> list[str]:
        common = self.git.common_dir
        candidates: set[Path] = set()
        for pattern in ("*.lock", "refs/**/*.lock", "worktrees/*/*.lock", "logs/**/*.lock"):
            candidates.update(p for p in common.glob(pattern) if p.is_file())
        scratch = self.ex.state_dir / "scratch"
        if scratch.is_dir():
            candidates.update(p for p in scratch.glob("*/.git/**/*.lock") if p.is_file())
        unheld = candidates - _open_by_any_process(candidates)
        if not unheld:
            return []
        # A lock nobody holds open is stale, but one only just made might belong to a writer we
        # cannot see (another PID namespace). Let the young ones age, then look again.
        youngest = max(_age_left(p) for p in unheld)
        if youngest > 0:
            time.sleep(youngest)
            unheld -= _open_by_any_process(unheld)
        removed = []
        for lock in sorted(unheld):
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
                removed.append(str(lock))
        return removed
