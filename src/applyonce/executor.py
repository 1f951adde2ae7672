"""The public facade: :class:`Executor`, exactly-once patches on one repository.

Each method is a line or two over a use case of :mod:`applyonce.flow`; the wiring of the seams
(ledger, publisher, receipts) is :func:`applyonce.flow.context.open_context`'s.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from applyonce.core.configkeys import PREFIX, UnknownConfigKeyWarning, unknown_key_warnings
from applyonce.core.identity import ApplyPatchArgs, CallIdentity
from applyonce.core.receipt import Receipt
from applyonce.errors import ApplyOnceError, UsageError
from applyonce.flow.call import apply as apply_flow
from applyonce.flow.call.approval import ApprovalError
from applyonce.flow.call.group import Request, apply_many
from applyonce.flow.context import LEDGER_FILE, Context, Fleet, open_context
from applyonce.flow.inspect import calls as calls_flow
from applyonce.flow.inspect.calls import CallSummary
from applyonce.flow.options import (
    Approver,
    CallOptions,
    CallOutcome,
    CheckoutBehind,
    PlanView,
    contract_digest,
)
from applyonce.flow.record.adopt import with_the_change
from applyonce.flow.record.verify import UnknownOutcomeError, stored_receipt
from applyonce.flow.recovery import recover as recovery
from applyonce.flow.recovery import resolve as resolve_flow
from applyonce.flow.recovery.report import RecoveryReport
from applyonce.flow.recovery.resolve import Released
from applyonce.flow.repeat import ReplayNote
from applyonce.git.diffs import CallDiff
from applyonce.git.store import FALLBACK_EMAIL, FALLBACK_NAME
from applyonce.state.ledger import Ledger

if TYPE_CHECKING:
    from applyonce.flow.call.land import LandReport

    # Imported where used: a call (``applyonce apply``) needs none of them.
    from applyonce.flow.inspect.audit import AuditReport
    from applyonce.flow.inspect.replay import ReplayReport
    from applyonce.flow.inspect.view import FileView, FolderView


class ExecutorClosedError(UsageError):
    """An :class:`Executor` (or an adapter holding one) was used after :meth:`Executor.close`
    (or after its ``with`` block ended): a harness's mistake, nothing was read or written."""

    kind = "executor-closed"
    default_hint = "open a new one, or use it inside its with block"


class Executor:
    """Exactly-once patches on one repository.

    A context manager: ``with Executor(repo) as executor:`` closes its ledger at the end of the
    block, as :meth:`close` does. A closed executor raises :class:`ExecutorClosedError` (kind
    ``executor-closed``, exit 2) from every method.

    Threads share an executor safely: its methods wait for each other (its ledger connection and
    its repository are used by one thread at a time), except :meth:`call` and :meth:`apply`: calls
    that arrive while another runs are queued, and the next of their threads to find the executor
    free runs them all at once, those on one branch published as a group (each its own commit,
    chained, the branch moved once; docs/design.md §1, "Groups"). Each thread gets its own call's
    outcome or error. A call alone runs as it always did.

    Args:
        repo: a path inside the repository (a work tree or a bare repository).
        state_dir: where receipts and the ledger live; default ``<git common dir>/applyonce``.
        read_only: for inspection (log, show, audit, replay): where there is no state yet, read an
            empty record instead of creating one.
        ledger: a ``postgresql://`` URL: the ledger a fleet of clones shares (``local``: this
            repository's own file); default git config ``applyonce.ledger``, else local.
        remote: the name of the remote whose branch is the commit point (``.``: this repository's
            own branch); default git config ``applyonce.remote``, else the own branch.
        group_window: how long (seconds) a call that finds the executor free waits for others
            to join its group before it runs; default 0: a group is only what queued while the
            calls before it ran.

    Attributes:
        config_warnings: a line for each ``applyonce.*`` git config key applyonce does not read,
            naming the nearest known key; each is also issued as an
            :class:`~applyonce.core.configkeys.UnknownConfigKeyWarning` (one line on the CLI's
            stderr).
    """

    def __init__(
        self,
        repo: str | os.PathLike[str] = ".",
        *,
        state_dir: str | None = None,
        read_only: bool = False,
        ledger: str | None = None,
        remote: str | None = None,
        group_window: float = 0.0,
    ) -> None:
        if not group_window >= 0:  # (NaN too)
            raise UsageError(
                f"group_window must be 0 or more seconds, not {group_window!r}",
                hint="pass Executor(..., group_window=0.0) (the default) or a few milliseconds",
            )
        self.context: Context = open_context(
            repo, state_dir=state_dir, read_only=read_only, fleet=Fleet(ledger, remote)
        )
        self.lock = threading.RLock()
        self.group_window = group_window
        self._queue = _CallQueue()
        self.closed = False
        # Unknown applyonce.* keys in the git config (a typo is otherwise ignored without a
        # word): each a line here and a warning (one line on the CLI's stderr).
        self.config_warnings: list[str] = unknown_key_warnings(
            self.context.store.config_names(PREFIX)
        )
        for line in self.config_warnings:
            warnings.warn(line, UnknownConfigKeyWarning, stacklevel=2)

    def __enter__(self) -> Executor:
        if self.closed:
            raise ExecutorClosedError("the executor is closed")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def ledger(self) -> Ledger:
        if self.closed:
            raise ExecutorClosedError("the executor is closed")
        return self.context.ledger

    def close(self) -> None:
        """Close the ledger and the Call-Id index; a second close does nothing."""
        if not self.closed:
            self.closed = True
            self.context.close()

    def identify(
        self, patch_text: str, options: CallOptions | None = None
    ) -> tuple[ApplyPatchArgs, CallIdentity]:
        """Parse ``patch_text`` and compute the call's normalised args and identity."""
        return apply_flow.identify(self.context, patch_text, options or CallOptions())

    def dry_run(self, patch_text: str, options: CallOptions | None = None) -> PlanView:
        """What ``apply`` would do on the current tip. Writes nothing at all."""
        return apply_flow.dry_run(self.context, patch_text, options or CallOptions())

    def call(self, patch_text: str, options: CallOptions | None = None) -> CallOutcome:
        """Apply ``patch_text`` exactly once: its receipt, the checkout sync's reports, and
        whether the call had already finished (see :func:`applyonce.flow.call.apply.apply`).

        From several threads at once, the calls that queue meanwhile run together, those on one
        branch as a group (see :mod:`applyonce.flow.call.group`)."""
        return self._queue.run(self, Request(patch_text, options or CallOptions()))

    def apply(
        self, patch_text: str, options: CallOptions | None = None, **option_fields: Any
    ) -> Receipt:
        """Apply ``patch_text`` exactly once; return the call's receipt.

        Options come as a :class:`CallOptions` or as its fields by keyword
        (``apply(text, tool_call_id="call_1", checks=["pytest -q"])``). A call that already
        finished returns its stored receipt and nothing runs; a rejection is a receipt too.

        Raises:
            ApplyOnceError: bad input (nothing written), a conflict, or untrustworthy state.
        """
        if self.closed:
            raise ExecutorClosedError("apply() on a closed executor")
        return self.call(patch_text, options or CallOptions(**option_fields)).receipt

    def revert(self, call_id: str, options: CallOptions | None = None) -> CallOutcome:
        """Revert the commit of the committed call ``call_id`` exactly once, as one commit
        (see :func:`applyonce.flow.call.revert.revert`)."""
        from applyonce.flow.call import revert as revert_flow

        return revert_flow.revert(self.context, call_id, options or CallOptions())

    def dry_run_revert(self, call_id: str, options: CallOptions | None = None) -> PlanView:
        """What ``revert`` would do on the current tip. Writes nothing at all."""
        from applyonce.flow.call import revert as revert_flow

        return revert_flow.dry_run_revert(self.context, call_id, options or CallOptions())

    def open_lane(self, name: str, *, onto: str | None = None) -> str:
        """The branch of lane ``name`` (``agent/NAME``), made at the tip of ``onto`` (default:
        the branch HEAD points at) if it does not exist: pass it as ``CallOptions(branch=…)``
        (see :func:`applyonce.flow.call.land.open_lane`)."""
        from applyonce.flow.call import land as land_flow

        return land_flow.open_lane(self.context, name, onto=onto).removeprefix("refs/heads/")

    def land(
        self,
        lane: str | None = None,
        *,
        onto: str | None = None,
        options: CallOptions | None = None,
    ) -> LandReport:
        """Land the calls of lane ``lane`` (None: every lane) onto ``onto`` (None: the branch
        HEAD points at), each exactly once, as one commit each (see
        :func:`applyonce.flow.call.land.land`)."""
        from applyonce.flow.call import land as land_flow

        return land_flow.land(self.context, lane=lane, onto=onto, options=options)

    def recover(
        self,
        *,
        progress: Callable[[int, int], None] | None = None,
        lease_seconds: float | None = None,
    ) -> RecoveryReport:
        """Settle every interrupted call by asking Git (see :mod:`applyonce.flow.recovery.recover`);
        ``progress(done, total)`` is told before each call. ``lease_seconds``: how long the
        claims it takes over hold unless renewed (None: git config, else 30 s)."""
        return recovery.recover(self.context, progress=progress, lease_seconds=lease_seconds)

    def audit(
        self,
        *,
        branch: str | None = None,
        since: str | None = None,
        full: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> AuditReport:
        """Check every trailer commit against its receipt (see
        :mod:`applyonce.flow.inspect.audit`): what is new since the branch's audit checkpoint,
        once it is verified; the whole history with ``full``."""
        from applyonce.flow.inspect import audit as audit_flow

        return audit_flow.audit(
            self.context, branch=branch, since=since, full=full, progress=progress
        )

    def replay(self) -> ReplayReport:
        """Re-derive every decision from the ledger and receipts alone (no Git)."""
        from applyonce.flow.inspect import replay as replay_flow

        return replay_flow.replay(self.context)

    def resolve(
        self, call_id: str, *, outcome: str, note: str, commit: str | None = None
    ) -> Receipt:
        """A person's decision on a call whose outcome is unknown, recorded with their note."""
        return resolve_flow.resolve(
            self.context, call_id, outcome=outcome, note=note, commit=commit
        )

    def release(self, prefix: str, *, note: str = "") -> Released:
        """Free by hand the claim on an in-flight call whose owner is gone where this host cannot
        see (see :func:`applyonce.flow.recovery.resolve.release`)."""
        return resolve_flow.release(self.context, prefix, note=note)

    def find_call(self, prefix: str) -> str:
        """The full ID of the one call whose ID starts with ``prefix`` (6+ characters)."""
        return calls_flow.find_call_id(self.context, prefix)

    def show(self, call_id: str) -> Receipt:
        """The verified receipt of ``call_id``."""
        return calls_flow.show(self.context, call_id)

    def checkout_behind(self, receipt: Receipt) -> list[CheckoutBehind]:
        """The checkouts that do not show a committed call's commit, as the ledger has it
        (see :func:`applyonce.flow.inspect.calls.checkout_behind`)."""
        return calls_flow.checkout_behind(self.context, receipt)

    def diff(self, receipt: Receipt) -> CallDiff | None:
        """The unified diff of a committed call, from its commit (None: not committed)."""
        return calls_flow.diff_of(self.context, receipt)

    def plan_diff(self, view: PlanView) -> CallDiff:
        """The unified diff of a dry run's plan, built in memory (nothing is written)."""
        return calls_flow.diff_of_plan(self.context, view)

    def calls(self) -> list[CallSummary]:
        """Every call in the ledger, oldest first."""
        return calls_flow.calls(self.context)

    def call_ids(self) -> list[str]:
        """The IDs of every call with a receipt, sorted."""
        return calls_flow.call_ids(self.context)

    def find_by_tool_call_id(self, tool_call_id: str) -> str | None:
        """The latest call recorded under the model's tool-call ID, if any."""
        return calls_flow.latest_with_tool_call_id(self.context, tool_call_id)

    def branch(self, branch: str | None = None) -> str:
        """The ref a call on ``branch`` (None: HEAD's branch) commits to."""
        return self.context.store.resolve_branch(branch)

    def tip(self, ref: str) -> str | None:
        """The commit ``ref`` points at now (None: the branch does not exist yet)."""
        return self.context.publisher.tip(ref)

    def landed(
        self,
        ref: str,
        call_id: str,
        *,
        since: str | None = None,
        call: tuple[ApplyPatchArgs, CallIdentity] | None = None,
    ) -> list[str]:
        """The commits on ``ref`` (after ``since``) carrying ``call_id``: whether it landed.
        With ``call`` (its args and identity), only those that carry the call's change."""
        commits = self.context.publisher.landed(ref, call_id, since=since)
        if call is None:
            return commits
        return with_the_change(self.context, call[1], call[0], commits)

    def view(self, path: str, *, branch: str | None = None) -> FileView | FolderView:
        """What an agent's view of ``path`` on ``branch`` shows: a file's bytes or a folder's
        listing, from the checkout or the branch's tip. Writes nothing (see
        :mod:`applyonce.flow.inspect.view`)."""
        from applyonce.flow.inspect import view as view_flow

        return view_flow.view(self.context, path, ref=self.branch(branch))

    def commit_summary(self, commit: str) -> list[str]:
        """The Codex-style file lines of ``commit`` (``A path``, ``M path``, ``D path``)."""
        store = self.context.store
        letters = {"A": "A", "D": "D", "C": "A"}
        return [
            f"{letters.get(change.status, 'M')} {change.path}"
            for change in store.changes_in(store.parent_of(commit), commit)
        ]

    def identity_warning(self) -> str | None:
        """A one-line warning when commits here fall back to applyonce's own identity (no
        user.name/user.email in the git config, nor GIT_AUTHOR_*/GIT_COMMITTER_* set)."""
        if self.context.store.has_identity():
            return None
        return (
            "no git identity configured (user.name/user.email); committed as "
            f"{FALLBACK_NAME} <{FALLBACK_EMAIL}>; set them with git config"
        )

    def stored_receipt(self, call_id: str) -> Receipt:
        """The verified terminal receipt of ``call_id``."""
        return stored_receipt(self.context, call_id)

    def receipt_bytes(self, call_id: str) -> bytes | None:
        """The receipt file of ``call_id`` as stored (None: there is none)."""
        return self.context.receipts.read_bytes(call_id)


def _one_thread_at_a_time(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def serialized(self: Executor, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            if self.closed and method.__name__ != "close":
                raise ExecutorClosedError(f"{method.__name__}() on a closed executor")
            return method(self, *args, **kwargs)

    return serialized


class _Waiter:
    """A queued call and, once run, its result."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.result: CallOutcome | Exception | None = None


class _CallQueue:
    """The calls waiting for an executor, and which thread runs them (the leader): the first that
    finds no leader takes every call queued, runs them under the executor's lock, and hands each
    its result; the others wait for theirs, or lead the next group."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._waiting: list[_Waiter] = []
        self._leading = False

    def run(self, executor: Executor, request: Request) -> CallOutcome:
        if executor.closed:
            raise ExecutorClosedError("call() on a closed executor")
        waiter = _Waiter(request)
        with self._cond:
            self._waiting.append(waiter)
            while waiter.result is None and self._leading:
                self._cond.wait()
            if waiter.result is None:
                self._leading = True
        if waiter.result is None:
            self._lead(executor)
        assert waiter.result is not None
        if isinstance(waiter.result, Exception):
            raise waiter.result
        return waiter.result

    def _lead(self, executor: Executor) -> None:
        batch: list[_Waiter] = []
        try:
            # Its GIL given up for a moment (no wait when no other thread is ready): the callers
            # the last group just answered queue their next calls, and join this group.
            time.sleep(executor.group_window)
            with executor.lock:
                with self._cond:
                    batch, self._waiting = self._waiting, []
                if executor.closed:
                    raise ExecutorClosedError("call() on a closed executor")
                results = apply_many(executor.context, [w.request for w in batch])
            for waiter, result in zip(batch, results, strict=True):
                waiter.result = result
        except BaseException as exc:
            # Interrupted (Ctrl-C) or broken: every call of the batch gets the error (each left
            # in flight, if it was claimed, for 'applyonce recover').
            for waiter in batch:
                if waiter.result is None:
                    waiter.result = exc if isinstance(exc, Exception) else _interrupted(exc)
            raise
        finally:
            with self._cond:
                self._leading = False
                self._cond.notify_all()


def _interrupted(exc: BaseException) -> Exception:
    return ApplyOnceError(f"the call was interrupted in another thread ({type(exc).__name__})")


for _name, _member in list(vars(Executor).items()):
    # call() and apply() queue (see _CallQueue): the leader takes the lock.
    if callable(_member) and not _name.startswith("_") and _name not in ("call", "apply"):
        setattr(Executor, _name, _one_thread_at_a_time(_member))


class KeptExecutor:
    """One :class:`Executor` kept open for a process's calls, one call at a time, from whichever
    thread: no new ledger connection and migration check per call. A call that comes while another
    uses it (the MCP server's ``patch_receipt`` during a long check) gets an executor of its own,
    closed after it.

    Git refs, the ledger and the receipts are read anew by every call, so what other processes did
    in between is seen. Its files replaced or deleted in between (the Git directory, the state
    directory, the ledger or the receipts directory: an ``rm -rf .git/applyonce``), or a call that
    failed unexpectedly: the kept executor is closed and a new one opened, as each call did before.
    """

    def __init__(self, open_executor: Callable[[], Executor]) -> None:
        self._open = open_executor
        self._lock = threading.Lock()
        self._executor: Executor | None = None
        self._files: tuple[tuple[int, int] | None, ...] = ()
        self._spoiled = False

    @contextlib.contextmanager
    def use(self) -> Iterator[Executor]:
        """The kept executor (opened now if need be), or one of the call's own if it is busy.

        Raises:
            ApplyOnceError: the repository or the state directory cannot be opened.
        """
        if not self._lock.acquire(blocking=False):
            own = self._open()
            try:
                yield own
            finally:
                own.close()
            return
        try:
            if self._executor is not None and self._files != _files_of(self._executor):
                self._drop()
            if self._executor is None:
                self._executor = self._open()
            try:
                yield self._executor
            except ApplyOnceError:
                raise  # an expected refusal: the executor is fine
            except BaseException:
                self._spoiled = True
                raise
            finally:
                if self._spoiled:
                    self._drop()
                elif self._executor is not None:
                    # As the call left them: what the next call must find unchanged.
                    self._files = _files_of(self._executor)
        finally:
            self._lock.release()

    def spoil(self, executor: Executor) -> None:
        """``executor`` failed unexpectedly: if it is the kept one, it is closed after its use
        ends, whatever it was in the middle of."""
        if executor is self._executor:
            self._spoiled = True

    def _drop(self) -> None:
        executor, self._executor = self._executor, None
        self._spoiled = False
        if executor is not None:
            with contextlib.suppress(Exception):  # it may be broken: that is why it goes
                executor.close()

    def close(self) -> None:
        """Close the kept executor; a later call opens a new one."""
        with self._lock:
            self._drop()


def _files_of(executor: Executor) -> tuple[tuple[int, int] | None, ...]:
    """Which files the executor works on: the device and inode (None: missing) of the Git
    directory, the state directory, the ledger and the receipts directory."""
    context = executor.context
    state = context.state_dir
    found: list[tuple[int, int] | None] = []
    for path in (context.store.common_dir, state, state / LEDGER_FILE, state / "receipts"):
        try:
            stat = os.stat(path)
        except OSError:
            found.append(None)
        else:
            found.append((stat.st_dev, stat.st_ino))
    return tuple(found)


__all__ = [
    "ApprovalError",
    "Approver",
    "CallDiff",
    "CallOptions",
    "CallOutcome",
    "CheckoutBehind",
    "Executor",
    "ExecutorClosedError",
    "KeptExecutor",
    "PlanView",
    "ReplayNote",
    "UnknownConfigKeyWarning",
    "UnknownOutcomeError",
    "contract_digest",
]
