"""Tool-call adapter for Python agent harnesses: model tool calls in, tool results out.

Give :class:`ToolCallAdapter` what the model sent — Anthropic ``tool_use`` blocks, OpenAI Chat
Completions ``tool_calls``, Responses API ``function_call`` / ``custom_tool_call`` items, or the
whole assistant message — and append what it returns to the conversation::

    adapter = ToolCallAdapter("path/to/repo", approve=ask_user)
    results = adapter.run(response.content)              # Anthropic Messages
    messages.append({"role": "user", "content": results})

    messages.extend(adapter.run(completion.choices[0].message))   # OpenAI Chat Completions
    items.extend(adapter.run(response.output))                     # OpenAI Responses

Each ``apply_patch`` call passes three gates, in this order (docs/design.md §1, and the effects
ledger of
the seed articles):

1. **Has it happened?** The call's identity comes from the patch (with the tool-call ID recorded).
   A call that already finished returns its stored result and runs nothing — however often the
   harness replays the turn. A call left pending by a crash is reconciled through Git (a commit
   carrying its ``Call-Id`` means it landed), never run a second time.
2. **Should it happen?** The approval callback, for a call that is really about to run.
3. **Run it**: one commit, or nothing.

After the commit is published, the change has happened. If writing its receipt or ledger entry
then fails, the result says so — the change landed, its record did not, run ``applyonce recover``
— and is *not* an error: an error would make the model send the change again as a new call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from applyonce.adapters.schemas import TEXT_EDITOR_NAME, TOOL_NAME
from applyonce.adapters.texteditor import (
    UndoEditError,
    command_input,
    edit_document,
    edit_result,
    last_call_on,
    undo_text,
    view_result,
)
from applyonce.adapters.toolcalls import ToolCall, ToolCallShapeError, ToolInputError, tool_calls
from applyonce.core.hints import TEXT_EDITOR, TOOL_CALLS, Terms, render_text
from applyonce.core.identity import EMPTY_CONTRACT_SHA256, ApplyPatchArgs, CallIdentity
from applyonce.core.land import lane_branch
from applyonce.core.receipt import Receipt
from applyonce.core.texts import landed_text as landed_words
from applyonce.core.texts import rejection_text
from applyonce.errors import ApplyOnceError, UsageError
from applyonce.executor import (
    CallDiff,
    CallOptions,
    CallOutcome,
    CheckoutBehind,
    Executor,
    ExecutorClosedError,
    KeptExecutor,
    PlanView,
    ReplayNote,
    UnknownOutcomeError,
)
from applyonce.patch import PatchFormat
from applyonce.patch.searchreplace import blocks_for
from applyonce.state.ledger import CallBusyError

log = logging.getLogger("applyonce.agents")
# How many times one edit may be asked anew after later commits changed its files.
_EDIT_ATTEMPTS = 32


@dataclass(frozen=True)
class ToolOutput:
    """What a tool call returns to the model.

    ``receipt`` is the call's receipt when it has one. ``landed_commit`` is set only when the patch
    landed but its record could not be written (``recover`` finishes it). ``replayed``: the call
    had finished before and nothing ran. ``error``: the failure's ``kind``/``message``/``hint``
    when no receipt carries it (for the structured result).
    """

    text: str
    is_error: bool = False
    receipt: Receipt | None = None
    landed_commit: str | None = None
    replayed: bool = False
    # A repeat of a finished call: what it found (see applyonce.flow.repeat.ReplayNote).
    replay: ReplayNote | None = None
    error: dict[str, Any] | None = None
    # The checkouts that do not show the branch's tip after the call (said in ``text`` too).
    behind: tuple[CheckoutBehind, ...] = ()


@dataclass(frozen=True)
class DryRun:
    """What a dry run shows: the plan and the diff it would commit."""

    view: PlanView
    diff: CallDiff


def error_output(error: ApplyOnceError, terms: Terms = TOOL_CALLS) -> ToolOutput:
    """An expected failure, in the words a rejected receipt stores, its hint in ``terms``."""
    text = render_text(rejection_text(error.to_dict()), terms)
    return ToolOutput(text, is_error=True, error=error.to_dict())


def tool_text(outcome: CallOutcome, terms: Terms = TOOL_CALLS) -> str:
    """The text a model reads for a call's outcome: a replay says so first (what later commits
    did to the call's change, what to do, in ``terms``), then the stored output (its hints in
    ``terms``), then a line for each checkout that does not show the branch's tip."""
    head = outcome.replay.text(terms) if outcome.replay is not None else ""
    notes = "".join(f"{note.line()}\n" for note in outcome.behind)
    return head + render_text(outcome.receipt.output, terms) + notes


class PatchRunner:
    """Runs ``apply_patch`` calls for a harness or a server; never raises for what a model sends.

    The runner keeps one :class:`Executor` open for all its calls (a
    :class:`~applyonce.executor.KeptExecutor`); it can be used from any thread. :meth:`close`
    (or the end of a ``with PatchRunner(...) as runner:`` block) closes it for good: a closed
    runner raises :class:`~applyonce.executor.ExecutorClosedError`.

    Args:
        repo: a path inside the repository.
        state_dir: receipts and ledger directory (default ``<git dir>/applyonce``).
        options: the template of every call's options (branch, contract, attempt, checks, protect);
            ``tool_call_id`` and ``approve`` are set per call.
        ledger, remote: where a fleet of clones shares its record and commit point (see
            :class:`~applyonce.executor.Executor`).

    Raises:
        ApplyOnceError: ``repo`` is not a repository, or the state directory is unusable.
    """

    def __init__(
        self,
        repo: str | Path = ".",
        *,
        state_dir: str | None = None,
        options: CallOptions | None = None,
        ledger: str | None = None,
        remote: str | None = None,
    ) -> None:
        self.repo = Path(repo)
        self.state_dir = state_dir
        self.ledger, self.remote = ledger, remote
        self.options = options or CallOptions()
        # The words of hints and replay notes: tool arguments and server options.
        self.terms: Terms = TOOL_CALLS
        if self.options.idempotency_key is not None:
            raise UsageError(
                "a runner cannot take an idempotency key: it would make every call the same call"
            )
        # The options are checked once, up front, not found wrong on every call.
        CallIdentity.compute(
            EMPTY_CONTRACT_SHA256,
            contract_sha256=self.options.contract_sha256,
            attempt=self.options.attempt,
        )
        self._kept = KeptExecutor(self.executor)
        self.closed = False
        with self.using() as probe:
            probe.branch(self.options.branch)

    def __enter__(self) -> PatchRunner:
        self.check_open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def check_open(self) -> None:
        """Raise :class:`~applyonce.executor.ExecutorClosedError` if the runner was closed."""
        if self.closed:
            raise ExecutorClosedError("the patch runner is closed")

    def executor(self) -> Executor:
        """A new executor on the runner's repository (closed by the caller)."""
        self.check_open()
        return Executor(self.repo, state_dir=self.state_dir, ledger=self.ledger, remote=self.remote)

    def using(self) -> contextlib.AbstractContextManager[Executor]:
        """The runner's kept executor, for one call (see :class:`~applyonce.executor.KeptExecutor`).

        Raises:
            ExecutorClosedError: the runner was closed.
            ApplyOnceError: the repository or the state directory cannot be opened.
        """
        self.check_open()
        return self._kept.use()

    def close(self) -> None:
        """Close the kept executor and the runner; a second close does nothing."""
        self.closed = True
        self._kept.close()

    def run(
        self,
        patch: str,
        *,
        tool_call_id: str | None = None,
        approve: Callable[[PlanView], bool] | None = None,
        format: PatchFormat | None = None,
        attempt: int | None = None,
        summary: str | None = None,
        lane: str | None = None,
    ) -> ToolOutput:
        """Apply ``patch`` exactly once and say what happened, in the words the model is given.

        Args:
            patch: the patch text.
            tool_call_id: the model's tool-call ID, recorded in the commit and receipt.
            approve: asked with the plan before a call that is about to run; a repeat or a
                reconciled call is never asked.
            format: the patch's format, where the caller knows it (default: the options').
            attempt: the model's attempt number (None: the options' one); a new attempt is a
                new call.
            summary: the commit's subject (one line), instead of the default one; not part of
                the call's identity.
            lane: commit to the lane ``agent/NAME`` (made from the options' branch, or HEAD's,
                the first time) instead of the options' branch (``apply --lane NAME``).

        Raises:
            ExecutorClosedError: the runner was closed (a harness's mistake, not the model's).
        """
        self.check_open()
        try:
            message = summary if summary is not None else self.options.message
            options = dataclasses.replace(self.options, message=message)
        except ApplyOnceError as exc:  # a summary the commit cannot carry
            return error_output(exc, self.terms)
        options = dataclasses.replace(
            options,
            attempt=self.options.attempt if attempt is None else attempt,
            tool_call_id=tool_call_id,
            approve=approve or self.options.approve,
            require_approval=self.options.require_approval or approve is not None,
            format=format or self.options.format,
        )
        try:
            with self.using() as executor:
                if lane is not None:
                    branch = executor.open_lane(lane, onto=self.options.branch)
                    options = dataclasses.replace(options, branch=branch)
                return self._run(executor, patch, options)
        except ApplyOnceError as exc:  # the repository or state directory went away; a bad lane
            return error_output(exc, self.terms)

    def _run(self, executor: Executor, patch: str, options: CallOptions) -> ToolOutput:
        try:
            args, ident = executor.identify(patch, options)
        except ApplyOnceError as exc:
            return error_output(exc, self.terms)
        # A repeat of a call that failed halfway here needs nothing special: Executor.apply takes
        # over this process's stale claim and asks Git first.
        tip_before = executor.tip(args.ref)
        try:
            outcome = executor.call(patch, options)
        except (CallBusyError, UnknownOutcomeError) as exc:
            # Another live process runs it (and records it), or a person must decide.
            return error_output(exc, self.terms)
        except Exception as exc:  # Git decides below what it means
            if not isinstance(exc, ApplyOnceError):
                # Whatever the executor was in the middle of, the next call starts afresh.
                self._kept.spoil(executor)
            return self._after_failure(executor, exc, args, ident, tip_before, patch, options)
        committed = outcome.receipt.status == "committed" and not outcome.replayed
        if committed and (unsigned := executor.identity_warning()) is not None:
            log.warning("%s", unsigned)  # stderr of a server, never the tool's text
        receipt = outcome.receipt
        if outcome.replay_note is not None:
            log.info("%s", outcome.replay_note)
        # A replay is said first, and a checkout that does not show the branch's tip after:
        # the files the model reads there next are not what the branch holds.
        return ToolOutput(
            tool_text(outcome, self.terms),
            is_error=receipt.status != "committed",
            receipt=receipt,
            replayed=outcome.replayed,
            replay=outcome.replay,
            behind=outcome.behind,
        )

    def dry_run(
        self,
        patch: str,
        *,
        tool_call_id: str | None = None,
        attempt: int | None = None,
        format: PatchFormat | None = None,
        lane: str | None = None,
    ) -> DryRun | ToolOutput:
        """What ``patch`` would do on the branch's tip, and its diff; writes nothing at all (no
        object, no receipt, no ledger entry). A refusal is an error output. ``format``: the
        patch's format, where the caller knows it (default: the options'). ``lane``: on the
        lane's tip (on the branch it would be made from, while it does not exist yet).

        Raises:
            ExecutorClosedError: the runner was closed.
        """
        self.check_open()
        options = dataclasses.replace(
            self.options,
            attempt=self.options.attempt if attempt is None else attempt,
            tool_call_id=tool_call_id,
            format=format or self.options.format,
        )
        try:
            with self.using() as executor:
                if lane is not None:
                    branch = lane_branch(lane)
                    if executor.tip(executor.branch(branch)) is not None:
                        options = dataclasses.replace(options, branch=branch)
                view = executor.dry_run(patch, options)
                return DryRun(view, executor.plan_diff(view))
        except ApplyOnceError as exc:
            return error_output(exc, self.terms)

    def diff(self, receipt: Receipt) -> CallDiff | None:
        """The diff of a committed call, from its commit (None: it committed nothing)."""
        with self.using() as executor:
            return executor.diff(receipt)

    def _after_failure(
        self,
        executor: Executor,
        exc: Exception,
        args: ApplyPatchArgs,
        ident: CallIdentity,
        tip_before: str | None,
        patch: str,
        options: CallOptions,
    ) -> ToolOutput:
        """The call raised. Ask Git whether it landed: that, not the exception, says whether the
        model's change happened."""
        call_id = ident.call_id
        if isinstance(exc, ApplyOnceError):
            reason = exc.one_line()
        else:
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        if not isinstance(exc, ApplyOnceError):
            log.error("call %s failed: %s", call_id[:12], reason, exc_info=exc)
        try:
            # A commit that copied the call's Call-Id but not its change is not the call's.
            landed = executor.landed(args.ref, call_id, since=tip_before, call=(args, ident))
        except Exception:  # cannot tell: say so
            log.exception("cannot tell whether call %s landed", call_id[:12])
            return ToolOutput(
                f"error: the call failed ({reason}) and whether it landed cannot be told now; "
                "run 'applyonce recover', then repeat the call to get its result\n",
                is_error=True,
                error={
                    "kind": UnknownOutcomeError.kind,
                    "message": f"the call failed ({reason}) and whether it landed cannot be told",
                    "hint": "run 'applyonce recover', then repeat the call to get its result",
                },
            )
        if landed:
            settled = self._settle(call_id, patch, options)
            if settled is not None and settled.status == "committed":
                return ToolOutput(settled.output, receipt=settled)
            log.error(
                "call %s landed as commit %s but its record was not written; run 'applyonce "
                "recover' in %s",
                call_id[:12],
                landed[0][:12],
                self.repo,
            )
            return ToolOutput(
                landed_text(executor, args, landed[0], reason), landed_commit=landed[0]
            )
        if isinstance(exc, ApplyOnceError):
            return error_output(exc, self.terms)
        branch = args.ref.removeprefix("refs/heads/")
        return ToolOutput(
            f"error: internal error ({reason}); the patch is not on {branch}; "
            "repeat the call to settle it\n",
            is_error=True,
            error={
                "kind": "internal",
                "message": f"internal error ({reason}); the patch is not on {branch}",
                "hint": "repeat the call to settle it",
            },
        )

    def _settle(self, call_id: str, patch: str, options: CallOptions) -> Receipt | None:
        """Finish the record of a call that landed: repeating it makes the executor take over its
        stale claim and reconcile it through Git (it never runs twice). Its receipt, or None."""
        executor = self.executor()
        try:
            receipt = executor.apply(patch, options)
        except Exception as exc:  # still unsettled; the next repeat tries again
            log.warning("could not settle call %s yet: %s", call_id[:12], exc)
            return None
        finally:
            executor.close()
        return receipt


def landed_text(executor: Executor, args: ApplyPatchArgs, commit: str, reason: str) -> str:
    """The result of a call that landed but whose receipt or ledger entry could not be written.
    The file lines come from the commit itself: it is what happened."""
    lines = executor.commit_summary(commit)
    branch = args.ref.removeprefix("refs/heads/")
    return landed_words(lines, commit=commit, branch=branch, reason=reason)


CallApprover = Callable[[ToolCall, PlanView], bool]
FallbackHandler = Callable[[ToolCall], "str | ToolOutput"]


class ToolCallAdapter:
    """Answer a model's tool calls: ``apply_patch`` exactly once, Claude's text editor tool
    (edits exactly once, views read-only: :mod:`applyonce.adapters.texteditor`), anything else by
    ``fallback``.

    A context manager: ``with ToolCallAdapter(repo) as adapter:`` closes the executor it keeps
    open at the end of the block, as :meth:`close` does; a closed adapter raises
    :class:`~applyonce.executor.ExecutorClosedError` (kind ``executor-closed``, exit 2).

    Args:
        repo: a path inside the repository.
        state_dir: receipts and ledger directory (default ``<git dir>/applyonce``).
        options: options for every call (branch, contract, attempt, checks, protect globs).
        approve: ``approve(call, plan) -> bool``, asked before a patch or an edit runs (never
            for a repeat, never for a view). A denial is the call's stored, final result.
        fallback: ``fallback(call) -> str | ToolOutput`` for other tool names; without it they
            get an error result. An exception it raises becomes an error result.
        tool_name: the name the patch tool was registered under.
        text_editor_name: the text editor tool's name (None: its calls go to ``fallback``).
        replace_name: the name ``replace_in_file`` (``schema --tool search-replace``) was
            registered under; None (the default): its calls go to ``fallback``. A call runs
            as an ``apply_patch`` call of the text ``searchreplace.blocks_for`` makes of its
            path and diff, in the ``search-replace`` format.
        max_characters: where a text editor view is truncated (the tool's ``max_characters``).
    """

    def __init__(
        self,
        repo: str | Path = ".",
        *,
        state_dir: str | None = None,
        options: CallOptions | None = None,
        approve: CallApprover | None = None,
        fallback: FallbackHandler | None = None,
        tool_name: str = TOOL_NAME,
        text_editor_name: str | None = TEXT_EDITOR_NAME,
        max_characters: int | None = None,
        replace_name: str | None = None,
    ) -> None:
        self.runner = PatchRunner(repo, state_dir=state_dir, options=options)
        self.approve = approve
        self.fallback = fallback
        self.tool_name = tool_name
        self.text_editor_name = text_editor_name
        self.replace_name = replace_name
        if max_characters is not None and max_characters < 1:
            raise UsageError(f"max_characters must be 1 or more, not {max_characters}")
        self.max_characters = max_characters

    def __enter__(self) -> ToolCallAdapter:
        self.runner.check_open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the executor the adapter keeps open; a second close does nothing."""
        self.runner.close()

    def run(self, message: Any) -> list[dict[str, Any]]:
        """The result blocks for every tool call in ``message`` (see :func:`tool_calls`), in order.

        Raises:
            ToolCallShapeError: a tool-call block without an ID or a name.
            ExecutorClosedError: the adapter was closed.
        """
        self.runner.check_open()
        return [self.run_call(call) for call in tool_calls(message)]

    def run_call(self, call: ToolCall) -> dict[str, Any]:
        """The result block for one tool call.

        Raises:
            ExecutorClosedError: the adapter was closed.
        """
        self.runner.check_open()
        if call.name == self.text_editor_name:
            return self._text_editor(call)
        if self.replace_name is not None and call.name == self.replace_name:
            return self._replace_in_file(call)
        if call.name != self.tool_name:
            return self._fallback(call)
        try:
            arguments = call.patch_arguments()
        except ToolInputError as exc:
            return call.result(error_output(exc).text, is_error=True)
        output = self.runner.run(
            arguments.patch,
            tool_call_id=call.id,
            approve=self._approver(call),
            attempt=arguments.attempt,
            summary=arguments.summary,
        )
        return call.result(output.text, is_error=output.is_error)

    def _replace_in_file(self, call: ToolCall) -> dict[str, Any]:
        """A ``replace_in_file`` call: its blocks, on its path, as one exactly-once call."""
        try:
            arguments = call.replace_arguments()
            patch = blocks_for(arguments.path, arguments.diff)
        except ApplyOnceError as exc:
            return call.result(error_output(exc).text, is_error=True)
        output = self.runner.run(
            patch,
            tool_call_id=call.id,
            approve=self._approver(call),
            format="search-replace",
            attempt=arguments.attempt,
            summary=arguments.summary,
        )
        return call.result(output.text, is_error=output.is_error)

    def _text_editor(self, call: ToolCall) -> dict[str, Any]:
        """A text editor call: a view read-only, an edit as an exactly-once call of its
        one-command edit-json document (see :mod:`applyonce.adapters.texteditor`)."""
        try:
            fields = command_input(call)
            if fields["command"] == "view":
                text, is_error = self._view(fields)
                return call.result(text, is_error=is_error)
            document = edit_document(fields)
        except UndoEditError as exc:
            return call.result(self._undo(exc), is_error=True)
        except ApplyOnceError as exc:
            return call.result(f"Error: {exc.one_line()}\n", is_error=True)
        output = self._edit(call, document)
        # A call that landed without its record keeps the runner's words (they say so).
        if output.receipt is not None and output.landed_commit is None:
            derived = edit_result(fields, output.receipt, tool_use_id=call.id)
            if derived is not None:
                # A replay says so first: nothing ran now (see PatchRunner.run).
                head = output.replay.text(TEXT_EDITOR) if output.replay else ""
                return call.result(head + derived[0], is_error=derived[1])
        text = output.text
        head = ""
        if output.replay is not None:
            runner_head = output.replay.text(self.runner.terms)
            if text.startswith(runner_head):  # said again in the text editor's terms
                text, head = text.removeprefix(runner_head), output.replay.text(TEXT_EDITOR)
        if output.is_error and text.startswith("error: "):
            text = "Error: " + text.removeprefix("error: ")  # as the tool's docs spell errors
        return call.result(head + text, is_error=output.is_error)

    def _edit(self, call: ToolCall, document: str) -> ToolOutput:
        """Run one edit exactly once. The same edit asked again by a *new* tool call is the
        recorded call (a model's retry after a timeout must not insert twice), unless later
        commits changed its files since (the edit was undone, say): then it is asked anew, and
        runs as the next attempt, so the model is never told of a success the file lacks."""
        attempt: int | None = None
        for _ in range(_EDIT_ATTEMPTS):
            output = self.runner.run(
                document,
                tool_call_id=call.id,
                approve=self._approver(call),
                format="edit-json",
                attempt=attempt,
            )
            receipt, note = output.receipt, output.replay
            anew = (
                output.replayed
                and receipt is not None
                and receipt.status == "committed"
                and receipt.tool_call_id != call.id
                and note is not None
                and (bool(note.later) or not note.on_branch)
            )
            if not anew:
                return output
            assert receipt is not None
            attempt = receipt.attempt + 1
        return output

    def _undo(self, error: UndoEditError) -> str:
        """``undo_edit``: nothing is undone; the text names the last call that changed the path
        and the revert that undoes it."""
        path = error.details.get("path")
        last = None
        if isinstance(path, str):
            try:
                with self.runner.using() as executor:
                    last = last_call_on(executor, path, branch=self.runner.options.branch)
            except ApplyOnceError:
                last = None
        return undo_text(error, last, revert_tool=None)

    def _view(self, fields: dict[str, Any]) -> tuple[str, bool]:
        # The runner's kept executor: a view reads the checkout or the branch's tip only, never
        # the ledger, so it writes nothing.
        runner = self.runner
        try:
            with runner.using() as executor:
                try:
                    return view_result(
                        executor,
                        fields,
                        branch=runner.options.branch,
                        max_characters=self.max_characters,
                    )
                except ApplyOnceError:
                    raise
                except Exception as exc:  # the model gets the failure, the loop goes on
                    log.exception("view of %r failed", fields.get("path"))
                    return f"Error: the view failed: {type(exc).__name__}: {exc}\n", True
        except ApplyOnceError as exc:
            return f"Error: {exc.one_line()}\n", True

    def _approver(self, call: ToolCall) -> Callable[[PlanView], bool] | None:
        ask = self.approve
        if ask is None:
            return None
        return lambda view: bool(ask(call, view))

    def _fallback(self, call: ToolCall) -> dict[str, Any]:
        if self.fallback is None:
            names = (self.tool_name, self.text_editor_name, self.replace_name)
            tools = ", ".join(filter(None, names))
            return call.result(
                f"error: unknown tool {call.name!r}; the tools here are: {tools}\n",
                is_error=True,
            )
        try:
            output = self.fallback(call)
        except Exception as exc:  # the model gets the failure, the loop goes on
            log.exception("tool %r failed", call.name)
            text = f"error: {call.name} failed: {type(exc).__name__}: {exc}\n"
            return call.result(text, is_error=True)
        if isinstance(output, ToolOutput):
            return call.result(output.text, is_error=output.is_error)
        return call.result(str(output))


__all__ = [
    "CallApprover",
    "DryRun",
    "FallbackHandler",
    "PatchRunner",
    "ToolCall",
    "ToolCallAdapter",
    "ToolCallShapeError",
    "ToolInputError",
    "ToolOutput",
    "landed_text",
    "tool_calls",
]
