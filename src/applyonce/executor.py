"""The exactly-once executor: one call, from patch text to one published commit (DESIGN §1).

    parse → identify → claim → prepared → stage → check → commit object → publish (CAS)
          → receipt → ledger → sync checkout

Git is the source of truth for *what* happened; receipts and the ledger record *why*. The only step
that makes a call take effect is ``publish``; everything before it can be thrown away, everything
after it is bookkeeping that ``recover`` can finish from Git.
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import hashlib
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from applyonce.checks import (
    CheckFailedError,
    builtin_checks,
    check_skip_names,
    failure_hint,
    run_command,
    scratch_checkout,
)
from applyonce.errors import ApplyOnceError, ConflictError, StateError, UsageError
from applyonce.faults import fault
from applyonce.gitstore import (
    GitStore,
    GitTree,
    SyncReport,
    TipMovedError,
    blob_id_of,
    trailers,
)
from applyonce.identity import (
    EMPTY_CONTRACT_SHA256,
    ApplyPatchArgs,
    CallIdentity,
    patch_source,
    source_text,
)
from applyonce.ledger import CallBusyError, CallRow, Claim, KeyReusedError, Ledger, Owner
from applyonce.patch import PatchFormat, parse
from applyonce.plan import TreePlan, check_parents, plan
from applyonce.receipts import (
    CheckRecord,
    FileRecord,
    Receipt,
    ReceiptError,
    ReceiptStore,
    parse_receipt,
)
from applyonce.trailers import build_message

if TYPE_CHECKING:
    from applyonce.audit import AuditReport
    from applyonce.recovery import RecoveryReport
    from applyonce.replay import ReplayReport

MAX_RESTAGES = 32
# Calls being applied in this process right now (any thread). One call runs at most once at a time
# per process, so a ledger claim this process holds for a call not in here was left by an apply
# that failed halfway, and may be taken over.
_RUNNING: set[str] = set()
_RUNNING_LOCK = threading.Lock()


@contextlib.contextmanager
def _running(call_id: str) -> Iterator[None]:
    with _RUNNING_LOCK:
        if call_id in _RUNNING:
            raise CallBusyError(
                f"call {call_id[:12]} is running in this process", call_id=call_id, pid=os.getpid()
            )
        _RUNNING.add(call_id)
    try:
        yield
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(call_id)


_TOOL_CALL_ID = re.compile(r"^[\x21-\x7e]{1,200}$")
Approver = Callable[["PlanView"], bool]


class ApprovalError(ApplyOnceError):
    kind = "approval"


class UnknownOutcomeError(StateError):
    kind = "unknown-outcome"
    default_hint = (
        "run 'applyonce recover' to record it, then 'applyonce show' it and 'applyonce resolve' it"
    )


class ResolvedAsRejectedError(ApplyOnceError):
    kind = "resolved"
    default_hint = "a person decided this call did not take effect; send a new attempt if needed"


class BaseMovedError(ConflictError):
    kind = "base-moved"
    default_hint = "re-read the files and send a patch for the branch's new state"


@dataclass(frozen=True)
class PlanView:
    """What a call would do: shown by ``--dry-run`` and to an approver."""

    call_id: str
    ref: str
    base_commit: str | None
    plan: TreePlan

    def lines(self) -> list[str]:
        out = []
        for change in self.plan.changes:
            levels = ",".join(level.label for level in change.match_levels)
            moved = f" (from {change.from_path})" if change.from_path else ""
            out.append(
                f"{change.action:<6} {change.path}{moved}"
                + (f"  [match: {levels}]" if levels else "")
            )
        return out


@dataclass
class CallOptions:
    """Everything about a call besides its patch text."""

    branch: str | None = None
    contract_sha256: str = EMPTY_CONTRACT_SHA256
    attempt: int = 1
    idempotency_key: str | None = None
    tool_call_id: str | None = None
    format: PatchFormat = "auto"
    checks: Sequence[str] = ()
    check_timeout: float = 300.0
    # Built-in checks not to run ("syntax", "markers"). Like ``checks``, not part of the call's
    # identity (DESIGN §3: a call is its patch); the receipt lists each one as skipped.
    skip_checks: Sequence[str] = ()
    protect: Sequence[str] = ()
    approve: Approver | None = None
    require_approval: bool = False
    sync_reports: list[SyncReport] = field(default_factory=list)
    # The patch as sent, recorded with the claim (set by apply).
    source: dict[str, str] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.skip_checks, str):
            self.skip_checks = (self.skip_checks,)
        self.skip_checks = check_skip_names(self.skip_checks)


def contract_digest(path: str | os.PathLike[str]) -> str:
    """``--contract FILE``: the sha256 of the file's bytes."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as exc:
        raise UsageError(f"cannot read contract {path}: {exc.strerror}") from None


class Executor:
    """Exactly-once patches on one repository.

    Args:
        repo: a path inside the repository (a work tree or a bare repository).
        state_dir: where receipts and the ledger live; default ``<git common dir>/applyonce``.
        read_only: for inspection (log, show, audit, replay): where there is no state yet, read an
            empty record instead of creating one.
    """

    def __init__(
        self,
        repo: str | os.PathLike[str] = ".",
        *,
        state_dir: str | None = None,
        read_only: bool = False,
    ) -> None:
        self.git = GitStore(repo)
        self.state_dir = Path(state_dir) if state_dir else self.git.common_dir / "applyonce"
        existing = next(p for p in (self.state_dir, *self.state_dir.parents) if p.exists())
        if not existing.is_dir():
            raise UsageError(
                f"cannot use state directory {self.state_dir}: {existing} is not a directory",
                hint="pass --state-dir with a writable directory",
            )
        self.receipts = ReceiptStore(self.state_dir)
        self._ledger: Ledger | None = None
        # Inspection commands (log, show, audit, replay) create no state where there is none.
        self.read_only = read_only

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            path = self.state_dir / "ledger.sqlite3"
            if self.read_only and not path.exists():
                self._ledger = Ledger.empty(path)
                return self._ledger
            try:
                self._ledger = Ledger(path)
            except OSError as exc:
                raise UsageError(
                    f"cannot use state directory {self.state_dir}: {exc.strerror}",
                    hint="pass --state-dir with a writable directory",
                ) from None
        return self._ledger

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None

    # --- identity and planning (pure, nothing written) -----------------------------------------

    def identify(
        self, patch_text: str, options: CallOptions
    ) -> tuple[ApplyPatchArgs, CallIdentity]:
        """Parse ``patch_text`` and compute the call's normalised args and identity."""
        if options.tool_call_id is not None and not _TOOL_CALL_ID.match(options.tool_call_id):
            raise UsageError(
                "the tool call ID must be 1-200 printable ASCII characters without spaces"
            )
        patch = parse(patch_text, options.format)
        ref = self.git.resolve_branch(options.branch)
        if options.branch is not None and self.git.tip(ref) is None:
            head = self.git.repo.references.get("HEAD")
            if head is None or str(head.target) != ref:
                raise UsageError(
                    f"there is no branch {options.branch!r}",
                    hint="pass an existing --branch, or create it first with 'git branch NAME'",
                )
        root = str(self.git.workdir).rstrip("/") if self.git.workdir else None
        args = ApplyPatchArgs.from_patch(patch, ref=ref, repo_root=root)
        ident = CallIdentity.compute(
            args.sha256(),
            contract_sha256=options.contract_sha256,
            attempt=options.attempt,
            idempotency_key=options.idempotency_key,
        )
        return args, ident

    def dry_run(self, patch_text: str, options: CallOptions | None = None) -> PlanView:
        """What ``apply`` would do on the current tip. Writes nothing at all."""
        options = options or CallOptions()
        args, ident = self.identify(patch_text, options)
        base = self.git.tip(args.ref)
        return PlanView(ident.call_id, args.ref, base, plan(args.patch(), self.git.tree_at(base)))

    # --- the call -----------------------------------------------------------------------------

    def apply(
        self, patch_text: str, options: CallOptions | None = None, **option_fields: Any
    ) -> Receipt:
        """Apply ``patch_text`` exactly once; return the call's receipt.

        Options come as a :class:`CallOptions` or as its fields by keyword
        (``apply(text, tool_call_id="call_1", checks=["pytest -q"])``).

        A call that already finished returns its stored receipt and nothing runs. A rejection is a
        receipt too (``status == "rejected"``); only failures that leave no receipt raise.

        Raises:
            ApplyOnceError: bad input (nothing written), a conflict, or untrustworthy state.
        """
        options = options or CallOptions(**option_fields)
        if not options.check_timeout > 0:
            raise UsageError(f"--check-timeout must be more than 0, not {options.check_timeout:g}")
        args, ident = self.identify(patch_text, options)
        options.source = patch_source(patch_text, options.format)
        with _running(ident.call_id):
            return self._apply_identified(args, ident, options)

    def _apply_identified(
        self, args: ApplyPatchArgs, ident: CallIdentity, options: CallOptions
    ) -> Receipt:
        if self.receipts.read_bytes(ident.call_id) is None:
            # A new call's hostile paths are refused before any state exists (the tip's tree tells
            # symlinked parents). A known call is not re-judged: it replays what it was.
            tip_tree = self.git.tree_at(self.git.tip(args.ref))
            for path in args.patch().touched_paths():
                check_parents(tip_tree, path)
        claim = self.ledger.claim(
            ident, ref=args.ref, owner=Owner.me(), args=args, source=options.source
        )
        fault("after-claim")
        if claim.outcome == "replay":
            receipt = self.stored_receipt(ident.call_id)
            self._check_still_on_branch(receipt)
            if receipt.status == "committed" and claim.row is not None and not claim.row.synced:
                options.sync_reports.extend(self._sync_quietly(receipt))
            return receipt
        if claim.outcome == "unknown":
            raise UnknownOutcomeError(
                f"call {ident.call_id[:12]}'s outcome is unknown", call_id=ident.call_id
            )
        if claim.outcome == "takeover":
            # Its last process died mid-call: Git says whether it took effect; never run it twice.
            from applyonce.recovery import Recovery

            assert claim.row is not None
            outcome = Recovery(self).reconcile(claim.row, already_claimed=claim.execution_id)
            assert outcome is not None
            if outcome.now == "committed":
                receipt = self.stored_receipt(ident.call_id)
                options.sync_reports.extend(self._sync_quietly(receipt))
                return receipt
            if outcome.now == "unknown":
                raise UnknownOutcomeError(
                    f"call {ident.call_id[:12]}'s outcome is unknown ({outcome.why})",
                    call_id=ident.call_id,
                )
            claim = self.ledger.claim(ident, ref=args.ref, owner=Owner.me(), args=args)
        # Whatever the record says, Git has the last word before anything runs.
        found = self._find_published(claim, ident, args.ref)
        if found is not None:
            options.sync_reports.extend(self._sync_quietly(found))
            return found
        return self._execute(args, ident, claim.execution_id, options)

    def stored_receipt(self, call_id: str) -> Receipt:
        """The verified terminal receipt of ``call_id``."""
        row = self.ledger.get(call_id)
        receipt = self.receipts.load(call_id, expected_sha256=row.receipt_sha256 if row else None)
        if receipt is None:
            raise ReceiptError(f"receipt {call_id[:12]} is missing", call_id=call_id)
        if receipt.status == "committed":
            self.verify_against_git(receipt)
        return receipt

    def verify_against_git(self, receipt: Receipt) -> None:
        """A committed receipt must name a commit carrying its Call-Id, with its files' blobs."""
        short = receipt.call_id[:12]
        if receipt.commit is None or not self.git.has_object(receipt.commit):
            raise ReceiptError(f"receipt {short}: its commit is not in the repository")
        commit = self.git.repo[receipt.commit]
        if trailers(commit).get("Call-Id") != receipt.call_id:  # type: ignore[arg-type]
            raise ReceiptError(f"receipt {short}: commit {receipt.commit[:12]} has another Call-Id")
        tree = self.git.tree_at(receipt.commit)
        for record in receipt.files:
            if tree.blob_id(record.path) != record.blob:
                raise ReceiptError(
                    f"receipt {short}: {record.path} does not match commit {receipt.commit[:12]}",
                    path=record.path,
                )
            if record.blob is not None:
                data, _ = tree.read(record.path)
                if hashlib.sha256(data).hexdigest() != record.sha256:
                    raise ReceiptError(f"receipt {short}: {record.path} has a forged sha256")

    def _find_published(self, claim: Claim, ident: CallIdentity, ref: str) -> Receipt | None:
        """Before running, make sure this call has not already taken effect.

        A claim taken over from a dead process, a receipt that outlived a lost ledger, or a lost
        state directory: in each case Git is asked whether a commit carries this Call-Id.
        """
        receipt: Receipt | None = None
        data = self.receipts.read_bytes(ident.call_id)
        if data is not None:
            with contextlib.suppress(ReceiptError):
                receipt = parse_receipt(data, call_id=ident.call_id)
        if receipt is not None and receipt.status == "committed":
            self.verify_against_git(receipt)
            self._check_same_args(ident, receipt.commit)
            self._check_still_on_branch(receipt)
            assert data is not None
            self._record_terminal(receipt, "reconciled", sha=hashlib.sha256(data).hexdigest())
            return receipt
        commits = self._indexed_call_commits(ref, ident.call_id)
        if not commits:
            return None
        if len(commits) > 1:
            raise UnknownOutcomeError(
                f"{len(commits)} commits carry call {ident.call_id[:12]}", call_id=ident.call_id
            )
        self._check_same_args(ident, commits[0])
        return self.adopt_commit(ident, claim.execution_id, ref, commits[0], receipt)

    def refresh_trailer_index(self, ref: str) -> str | None:
        """Bring the ledger's Call-Id index of ``ref`` up to date incrementally (the commits since
        the last scanned tip; the whole branch once). Returns the tip."""
        tip = self.git.tip(ref)
        if tip is None:
            return None
        last = self.ledger.scanned_tip(ref)
        if last != tip:
            hide = last if last is not None and self.git.has_object(last) else None
            found = [
                (call, str(commit.id))
                for commit in self.git.walk(tip, hide=hide)
                if (call := trailers(commit).get("Call-Id"))
            ]
            self.ledger.index_trailers(ref, found, tip)
        return tip

    def _indexed_call_commits(self, ref: str, call_id: str) -> list[str]:
        """Commits on ``ref`` carrying ``call_id``, from the ledger's trailer index."""
        tip = self.refresh_trailer_index(ref)
        if tip is None:
            return []
        return [
            commit
            for commit in self.ledger.indexed_commits(ref, call_id)
            if self.git.has_object(commit) and self.git.is_ancestor(commit, tip)
        ]

    def _check_still_on_branch(self, receipt: Receipt) -> None:
        """A committed call whose commit the branch no longer has did not 'succeed' any more:
        saying so beats returning a success the repository contradicts."""
        tip = self.git.tip(receipt.ref)
        if receipt.commit is None or receipt.status != "committed":
            return
        if tip is None or not self.git.is_ancestor(receipt.commit, tip):
            raise UnknownOutcomeError(
                f"call {receipt.call_id[:12]} was committed as {receipt.commit[:12]}, which is "
                f"no longer on {receipt.ref} (the branch was reset or rewritten)",
                call_id=receipt.call_id,
                hint="if the change is still wanted, send it again as a new attempt (--attempt)",
            )

    def _check_same_args(self, ident: CallIdentity, commit_id: str | None) -> None:
        """A key-mode call found in Git must be the same change, or the key was reused."""
        if ident.idempotency_key is None or commit_id is None:
            return
        recorded = trailers(self.git.repo[commit_id]).get("Args-Sha256")  # type: ignore[arg-type]
        if recorded is not None and recorded != ident.args_sha256:
            raise KeyReusedError(
                f"idempotency key {ident.idempotency_key!r} was already used for commit "
                f"{commit_id[:12]} with other arguments",
                call_id=ident.call_id,
            )

    def adopt_commit(
        self,
        ident: CallIdentity,
        execution_id: str,
        ref: str,
        commit_id: str,
        prepared: Receipt | None,
        *,
        note: str | None = None,
    ) -> Receipt:
        """Finish the bookkeeping of a call whose commit is already on the branch."""
        commit = self.git.repo[commit_id]
        parent = str(commit.parent_ids[0]) if commit.parent_ids else None  # type: ignore[attr-defined]
        replanned = self._replan(ident, ref, parent, commit_id)
        if replanned is not None:
            files, levels = replanned
        else:
            files, levels = self._file_records_from_commit(parent, commit_id), {}
        receipt = Receipt.of_call(
            ident,
            status="committed",
            execution_id=execution_id,
            ref=ref,
            created_at=prepared.created_at if prepared else None,
            tool_call_id=trailers(commit).get("Tool-Call-Id"),  # type: ignore[arg-type]
            base_commit=parent,
            commit=commit_id,
            files=files,
            match_levels=levels,
            reconciled=True,
            note=note,
            exit_code=0,
        ).with_output(success_output(files))
        sha = self.receipts.write(receipt)
        self._record_terminal(receipt, "reconciled", sha=sha)
        return receipt

    def _replan(
        self, ident: CallIdentity, ref: str, parent: str | None, commit_id: str
    ) -> tuple[tuple[FileRecord, ...], dict[str, list[str]]] | None:
        """Re-derive the records the interrupted process would have written: plan the call's
        recorded args on the commit's parent, and accept the result only if every path's blob
        equals the commit's. Pure reads: nothing is staged again."""
        source = self.ledger.source_of(ident.call_id)
        data = self.ledger.args_of(ident.call_id)
        try:
            if source is not None:
                root = str(self.git.workdir).rstrip("/") if self.git.workdir else None
                patch = parse(source_text(source), source["format"])  # type: ignore[arg-type]
                args = ApplyPatchArgs.from_patch(patch, ref=ref, repo_root=root)
            elif data is not None:
                args = ApplyPatchArgs.model_validate(data)
            else:
                return None
            if args.sha256() != ident.args_sha256:
                return None
            tree_plan = plan(args.patch(), self.git.tree_at(parent))
        except (ApplyOnceError, ValueError, KeyError):
            return None
        tree = self.git.tree_at(commit_id)
        blobs: dict[str, str] = {}
        for change in tree_plan.changes:
            expected = None if change.content is None else blob_id_of(change.content)
            if tree.blob_id(change.path) != expected:
                return None
            if expected is not None:
                blobs[change.path] = expected
        if any(tree.blob_id(path) is not None for path in tree_plan.removed):
            return None
        return records_of_plan(tree_plan, blobs)

    def _file_records_from_commit(
        self, parent: str | None, commit_id: str
    ) -> tuple[FileRecord, ...]:
        tree = self.git.tree_at(commit_id)
        records: list[FileRecord] = []
        for delta in self.git.changes_in(parent, commit_id):
            status = delta.status_char()
            path = delta.new_file.path if status != "D" else delta.old_file.path
            action = {"A": "add", "D": "delete", "R": "move"}.get(status, "update")
            blob = tree.blob_id(path)
            data = tree.read(path)[0] if blob else None
            records.append(
                FileRecord(
                    path=path,
                    action=action,
                    **{"from": delta.old_file.path if status == "R" else None},
                    blob=blob,
                    sha256=hashlib.sha256(data).hexdigest() if data is not None else None,
                    mode=f"{delta.new_file.mode:o}" if blob else None,
                )
            )
        return tuple(records)

    def _execute(
        self,
        args: ApplyPatchArgs,
        ident: CallIdentity,
        execution_id: str,
        options: CallOptions,
    ) -> Receipt:
        ref = args.ref
        base = self.git.tip(ref)
        prepared = Receipt.of_call(
            ident,
            status="prepared",
            execution_id=execution_id,
            ref=ref,
            tool_call_id=options.tool_call_id,
            base_commit=base,
        )
        sha = self.receipts.write(prepared)
        self.ledger.record(
            ident.call_id,
            execution_id,
            "prepared",
            state="prepared",
            base_commit=base,
            receipt_sha256=sha,
        )
        fault("after-prepared")
        patch = args.patch()
        touched = patch.touched_paths()
        checks: list[CheckRecord] = []
        try:
            base_tree = self.git.tree_at(base)
            self.git.find_dirty_paths(ref, base_tree, touched)
            approved = False
            for attempt in range(MAX_RESTAGES):
                try:
                    tree_plan = plan(patch, base_tree)
                except ApplyOnceError as exc:
                    if attempt == 0:
                        raise
                    raise BaseMovedError(
                        f"{ref} moved and the patch no longer applies ({exc.message})",
                        cause=exc.to_dict(),
                    ) from None
                tree_id, blobs = self.git.write_tree(base_tree, tree_plan)
                self.ledger.record(
                    ident.call_id, execution_id, "staged", extra={"base": base, "tree": tree_id}
                )
                fault("after-stage")
                view = PlanView(ident.call_id, ref, base, tree_plan)
                if not approved:
                    self._approval_gate(view, ident, execution_id, options)
                    approved = True
                checks = self._run_checks(tree_plan, base_tree, tree_id, options)
                self.ledger.record(
                    ident.call_id,
                    execution_id,
                    "checked",
                    extra={"checks": [c.name for c in checks], "skipped": [*options.skip_checks]},
                )
                fault("after-check")
                message = build_message(tree_plan, ident, tool_call_id=options.tool_call_id)
                commit_id = self.git.create_commit(tree_id, base, message)
                self.ledger.record(
                    ident.call_id,
                    execution_id,
                    "commit-object",
                    extra={"commit": commit_id, "base": base},
                )
                fault("after-commit-object")
                try:
                    self.git.publish(ref, base, commit_id, reason=f"applyonce: {ident.call_id}")
                except TipMovedError as moved:
                    # Whoever moved the tip may have been this very call (another execution of
                    # it, wrongly judged dead): then it has landed, and must not land twice.
                    own = self.git.commits_with_call_id(ref, ident.call_id, since=base)
                    if own:
                        landed = self.adopt_commit(ident, execution_id, ref, own[0], prepared)
                        options.sync_reports.extend(self._sync_quietly(landed))
                        return landed
                    base = moved.actual
                    base_tree = self.git.tree_at(base)
                    continue
                break
            else:
                raise BaseMovedError(f"{ref} kept moving; gave up after {MAX_RESTAGES} restages")
        except ApplyOnceError as exc:
            return self._reject(prepared, exc, checks)
        fault("after-publish")
        files, levels = records_of_plan(tree_plan, blobs)
        committed = prepared.with_output(
            success_output(files),
            status="committed",
            base_commit=base,
            commit=commit_id,
            files=files,
            match_levels=levels,
            checks=tuple(checks),
            exit_code=0,
        )
        sha = self.receipts.write(committed, before_replace=lambda: fault("after-receipt-tmp"))
        fault("after-receipt")
        self._record_terminal(committed, "committed", sha=sha)
        fault("after-ledger")
        options.sync_reports.extend(self._sync_quietly(committed))
        fault("after-sync")
        return committed

    def _approval_gate(
        self, view: PlanView, ident: CallIdentity, execution_id: str, options: CallOptions
    ) -> None:
        protected = [
            c.path
            for c in view.plan.changes
            for p in ([c.path, c.from_path] if c.from_path else [c.path])
            if any(fnmatch.fnmatchcase(p, glob) for glob in options.protect)
        ]
        if not protected and not options.require_approval:
            return
        if options.approve is None:
            raise ApprovalError(
                f"the patch touches protected paths ({', '.join(protected[:3])}) "
                "and needs approval",
                retryable=True,
                hint="repeat the call with --confirm (or an approve callback)",
            )
        approved = bool(options.approve(view))
        self.ledger.record(
            ident.call_id,
            execution_id,
            "approved" if approved else "denied",
            extra={"protected": protected},
        )
        if not approved:
            raise ApprovalError(
                "the patch was not approved", hint="send a different patch as a new attempt"
            )

    def _run_checks(
        self, tree_plan: TreePlan, base_tree: GitTree, tree_id: str, options: CallOptions
    ) -> list[CheckRecord]:
        old: dict[str, bytes | None] = {}
        for change in tree_plan.changes:
            for path in filter(None, (change.path, change.from_path)):
                old[path] = base_tree.read(path)[0] if base_tree.kind(path) == "file" else None
        records = builtin_checks(tree_plan, old, skip=options.skip_checks)
        if options.checks and not any(r.exit_code for r in records):
            changed = [c.path for c in tree_plan.changes]
            objects = Path(self.git.repo.path).resolve() / "objects"
            if not objects.is_dir():
                objects = self.git.common_dir / "objects"
            with scratch_checkout(self.state_dir, objects) as scratch:
                scratch.checkout(tree_id)
                for command in options.checks:
                    record = run_command(
                        command, cwd=scratch.root, changed=changed, timeout=options.check_timeout
                    )
                    records.append(record)
                    if record.exit_code != 0:
                        break
        failed = [r for r in records if r.exit_code != 0]
        if failed:
            first = failed[0]
            detail = first.output_tail.strip().splitlines()[-1:] or [""]
            why = "timed out" if first.exit_code is None else f"exit {first.exit_code}"
            error = CheckFailedError(
                f"check {first.name!r} failed ({why}): {detail[0][:160]}",
                hint=failure_hint(first.name),
                check=first.name,
            )
            error.checks = records  # type: ignore[attr-defined]
            raise error
        return records

    # --- after a crash ------------------------------------------------------------------------

    def recover(self) -> RecoveryReport:
        """Settle every interrupted call by asking Git (see :mod:`applyonce.recovery`)."""
        from applyonce.recovery import Recovery

        return Recovery(self).recover()

    def audit(
        self,
        *,
        branch: str | None = None,
        since: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> AuditReport:
        """Check every trailer commit against its receipt (see :mod:`applyonce.audit`)."""
        from applyonce.audit import audit

        return audit(self, branch=branch, since=since, progress=progress)

    def replay(self) -> ReplayReport:
        """Re-derive every decision from the ledger and receipts alone (no Git)."""
        from applyonce.replay import replay

        return replay(self)

    def resolve(
        self, call_id: str, *, outcome: str, note: str, commit: str | None = None
    ) -> Receipt:
        """A person's decision on a call whose outcome is unknown, recorded with their note."""
        row = self.ledger.get(call_id)
        if row is None:
            raise UsageError(f"no call {call_id[:12]} in the ledger")
        if row.state != "unknown":
            raise UsageError(
                f"call {call_id[:12]} is {row.state}; "
                "resolve is for calls whose outcome is unknown",
                hint="run 'applyonce recover' for interrupted calls",
            )
        if not note.strip():
            raise UsageError("--note must say why", hint="pass --note TEXT")
        current = self.receipts.load(call_id, expected_sha256=row.receipt_sha256)
        if current is None:
            raise ReceiptError(f"receipt {call_id[:12]} is missing", call_id=call_id)
        ident = current.identity
        execution_id = uuid.uuid4().hex
        if outcome == "committed":
            candidates = self.git.commits_with_call_id(row.ref, call_id, since=None)
            if commit is not None:
                chosen = self.git.resolve_commit(commit)
                if chosen not in candidates:
                    raise UsageError(f"{commit} is not a commit of {row.ref} carrying this Call-Id")
            elif len(candidates) == 1:
                chosen = candidates[0]
            else:
                raise UsageError(
                    f"{len(candidates)} commits on {row.ref} carry this Call-Id",
                    hint="pass --commit with the one that counts",
                )
            receipt = self.adopt_commit(ident, execution_id, row.ref, chosen, current, note=note)
        elif outcome == "rejected":
            error = ResolvedAsRejectedError(f"resolved as rejected: {note}")
            receipt = self._reject(
                current.model_copy(update={"execution_id": execution_id, "note": note}), error, []
            )
        else:
            raise UsageError(f"--as must be committed or rejected, not {outcome!r}")
        self.ledger.record(call_id, execution_id, "resolved", extra={"as": outcome, "note": note})
        return receipt

    def reject_interrupted(
        self,
        ident: CallIdentity,
        execution_id: str,
        row: CallRow,
        prepared: Receipt | None,
        error: ApplyOnceError,
    ) -> Receipt:
        """Close a call that died before its publish: nothing took effect; it may run again."""
        base = prepared or Receipt.of_call(
            ident,
            status="prepared",
            execution_id=execution_id,
            ref=row.ref,
            base_commit=row.base_commit,
        )
        base = base.model_copy(update={"execution_id": execution_id, "reconciled": True})
        return self._reject(base, error, [])

    def _reject(self, prepared: Receipt, exc: ApplyOnceError, checks: list[CheckRecord]) -> Receipt:
        records = getattr(exc, "checks", checks)
        rejected = prepared.with_output(
            f"error: {exc.one_line()}\n",
            status="rejected",
            error=exc.to_dict(),
            checks=tuple(records),
            exit_code=exc.exit_code,
        )
        sha = self.receipts.write(
            rejected, before_replace=lambda: fault("after-reject-receipt-tmp")
        )
        self._record_terminal(rejected, "rejected", sha=sha)
        return rejected

    def _record_terminal(self, receipt: Receipt, kind: str, *, sha: str | None) -> None:
        changes: dict[str, Any] = {
            "state": receipt.status,
            "execution_id": receipt.execution_id,
            "exit_code": receipt.exit_code,
            "retryable": int(receipt.retryable),
            "commit_id": receipt.commit,
            "base_commit": receipt.base_commit,
        }
        if sha is not None:
            changes["receipt_sha256"] = sha
        self.ledger.record(receipt.call_id, receipt.execution_id, kind, **changes)

    # --- the user's checkout ------------------------------------------------------------------

    @contextlib.contextmanager
    def _sync_lock(self) -> Iterator[None]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.state_dir / "sync.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def sync_checkout(self, receipt: Receipt) -> list[SyncReport]:
        """Update the touched paths of every checkout of the branch; record a ``synced`` event."""
        return self.sync_many([receipt])

    def sync_many(self, receipts: Sequence[Receipt]) -> list[SyncReport]:
        """Sync the paths of several committed calls in one pass per branch (used by recover)."""
        reports: list[SyncReport] = []
        by_ref: dict[str, list[Receipt]] = {}
        for receipt in receipts:
            by_ref.setdefault(receipt.ref, []).append(receipt)
        with self._sync_lock():
            for ref, group in by_ref.items():
                paths: dict[str, None] = {}
                for receipt in group:
                    for record in receipt.files:
                        paths[record.path] = None
                        if record.from_:
                            paths[record.from_] = None
                bases = [r.base_commit for r in group] + self.ledger.unsynced_bases(ref)
                since = self._oldest_base(ref, bases)
                ref_reports = self.git.sync_checkouts(ref, since, list(paths))
                reports.extend(ref_reports)
                detail = {"reports": [r.__dict__ for r in ref_reports]}
                # A call whose paths hold user edits stays unsynced: recover reports it again.
                left = {p for report in ref_reports for p in report.left_alone}
                self.ledger.record_many(
                    [
                        (
                            r.call_id,
                            r.execution_id,
                            "synced",
                            {"synced": int(not touched_paths_of(r) & left)},
                            detail,
                        )
                        for r in group
                    ]
                )
        return reports

    def _sync_quietly(self, receipt: Receipt) -> list[SyncReport]:
        """Sync after a publish: the call has taken effect, so a sync failure is a warning (left
        for 'applyonce recover'), never a failure of the call."""
        try:
            return self.sync_checkout(receipt)
        except (ApplyOnceError, OSError) as exc:
            reason = exc.one_line() if isinstance(exc, ApplyOnceError) else str(exc)
            return [SyncReport(None, (), (), failed=reason)]

    def _oldest_base(self, ref: str, bases: Sequence[str | None]) -> str | None:
        """The oldest of ``bases`` on ``ref`` (one walk from the tip): the checkout may hold any
        version of a path from there on. None if a call started on an unborn branch."""
        if any(base is None for base in bases):
            return None
        remaining = set(bases)
        oldest: str | None = None
        for commit in self.git.walk(self.git.tip(ref)):
            commit_id = str(commit.id)
            if commit_id in remaining:
                oldest = commit_id
                remaining.discard(commit_id)
                if not remaining:
                    break
        return oldest if oldest is not None else (bases[0] if bases else None)


def touched_paths_of(receipt: Receipt) -> set[str]:
    return {f.path for f in receipt.files} | {f.from_ for f in receipt.files if f.from_}


def records_of_plan(
    tree_plan: TreePlan, blobs: dict[str, str]
) -> tuple[tuple[FileRecord, ...], dict[str, list[str]]]:
    """The receipt's ``files`` and ``match_levels`` for a plan whose blobs were written."""
    files = tuple(
        FileRecord(
            path=c.path,
            action=c.action,
            **{"from": c.from_path},
            blob=blobs.get(c.path),
            sha256=hashlib.sha256(c.content).hexdigest() if c.content is not None else None,
            mode=f"{c.mode:o}" if c.content is not None else None,
        )
        for c in tree_plan.changes
    )
    levels = {
        c.path: [level.label for level in c.match_levels]
        for c in tree_plan.changes
        if c.match_levels
    }
    return files, levels


def success_output(files: Sequence[FileRecord]) -> str:
    """The Codex-style summary an agent is given on success."""
    letters = {"add": "A", "update": "M", "move": "M", "delete": "D"}
    lines = [f"{letters[f.action]} {f.path}" for f in files]
    return "Success. Updated the following files:\n" + "".join(line + "\n" for line in lines)
