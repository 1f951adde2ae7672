"""``applyonce mcp``: exactly-once ``apply_patch`` for any MCP-speaking agent, over stdio.

Built on the official ``mcp`` SDK's low-level :class:`mcp.server.Server` (v2 API: handlers passed to
the constructor), which leaves the tool results entirely to us: the text an agent gets is the
receipt's ``output`` (byte for byte on a repeat, after a note that says first it is a replay and
what later commits did to the change: :func:`applyonce.core.hints.replay_text`), its hints naming
tool arguments and server options, and a rejection is a tool error (``isError: true``) whose text
is the one-line reason.

Four tools (definitions in :mod:`applyonce.adapters.schemas`):

* ``apply_patch(patch, tool_call_id?, dry_run?, attempt?)`` — the patch lands as one commit,
  exactly once; a repeat returns the stored result and runs nothing (a new ``attempt`` is a
  new call). ``dry_run``: the plan and its diff, nothing written, nothing recorded.
* ``patch_receipt(call_id)`` — the verified receipt of a call as JSON.
* ``revert_patch(call_id)`` — undo a call's commit with one new commit, exactly once.
* ``land_lane(lane? | all?, onto?)`` — land the calls of a lane (``apply_patch`` with ``lane``
  commits to ``agent/NAME``) onto the target, each exactly once; a blocked lane is a tool error
  saying at which call, why and what to do; ``structuredContent`` is the LandReport.

With ``applyonce mcp --search-replace``, a fourth: ``replace_in_file(path, diff,
tool_call_id?, dry_run?, attempt?)`` — SEARCH/REPLACE blocks on one file (Cline's tool of that
name), run as an ``apply_patch`` call of the text ``searchreplace.blocks_for`` makes of them.

Every result carries, beside its text, ``structuredContent`` valid against the tool's
``outputSchema`` (:mod:`applyonce.adapters.results`): status, commit, replayed, files, match levels,
a bounded diff, and on failure the error's kind, message and hint.

Stdout is the protocol. Nothing else may reach it: while serving, the SDK points file descriptor 1
at stderr and keeps the wire on a private duplicate, so a stray ``print`` or a ``--check`` command's
output cannot corrupt a frame; every failure inside a handler becomes a tool error, with its
traceback on stderr.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
import sys
from typing import Any, cast

import anyio
import anyio.to_thread
import mcp_types as types
import orjson
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

import applyonce
from applyonce.adapters.agents import PatchRunner, ToolOutput, error_output, tool_text
from applyonce.adapters.mcp_wire import CheckedLines, ServerAnswers, Unanswered, claimed_stdin
from applyonce.adapters.results import (
    DIFF_CAP,
    BlockedLane,
    LandResult,
    PatchResult,
    ReceiptResult,
    dry_run_result,
    error_of,
    land_result,
    patch_result,
)
from applyonce.adapters.schemas import (
    LAND_TOOL_NAME,
    RECEIPT_TOOL_NAME,
    REPLACE_TOOL_NAME,
    REVERT_TOOL_NAME,
    TOOL_NAME,
    LandArguments,
    McpPatchArguments,
    McpReplaceArguments,
    ReceiptArguments,
    RevertArguments,
    dump,
    mcp_tools,
)
from applyonce.core.hints import render_hint
from applyonce.errors import ApplyOnceError, UsageError
from applyonce.executor import CallDiff, CallOptions, Executor, PlanView
from applyonce.patch import PatchFormat
from applyonce.patch.searchreplace import blocks_for

log = logging.getLogger("applyonce.mcp")

INSTRUCTIONS = (
    "Use apply_patch to change files: each patch lands as one Git commit, exactly once, or not at "
    "all. Repeating a call returns its first result. patch_receipt shows what a call did; "
    "revert_patch undoes a call with one new commit. With lane: NAME, apply_patch commits to "
    "your own lane; land_lane lands it onto the target branch."
)
_HEX_PREFIX = re.compile(r"^[0-9a-f]{6,64}$")


def _text(text: str, structured: PatchResult, *, is_error: bool = False) -> types.CallToolResult:
    """A tool result: the text the model reads, unchanged, and the same result as fields
    (``structuredContent``, valid against the tool's ``outputSchema``)."""
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
    return types.CallToolResult(
        content=content, structured_content=structured.to_json_dict(), is_error=is_error
    )


def _refused(text: str, kind: str) -> types.CallToolResult:
    """A tool error raised before any call existed: its text, and a rejection carrying it."""
    message, _, hint = text.removeprefix("error: ").rstrip("\n").partition("; ")
    error = {"kind": kind, "message": message, "hint": hint}
    return _text(text, patch_result(None, error=error), is_error=True)


def _bad_arguments_text(tool: str, exc: ValidationError) -> str:
    problem = exc.errors()[0]
    where = ".".join(str(part) for part in problem["loc"]) or "arguments"
    return f"error: bad arguments for {tool}: {where}: {problem['msg']}\n"


def _bad_arguments(tool: str, exc: ValidationError) -> types.CallToolResult:
    return _refused(_bad_arguments_text(tool, exc), "usage")


def _land_refused(text: str, kind: str) -> types.CallToolResult:
    """A ``land_lane`` refused before it landed anything: its one line, and an empty report
    carrying the error."""
    message, _, hint = text.removeprefix("error: ").rstrip("\n").partition("; ")
    structured = LandResult(
        target="",
        landed=[],
        blocked=[],
        already=0,
        exit_code={"usage": 2, "internal": 3}.get(kind, 1),
        error=error_of({"kind": kind, "message": message, "hint": hint}),
    )
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
    return types.CallToolResult(
        content=content, structured_content=structured.to_json_dict(), is_error=True
    )


def _unblock(stop: BlockedLane, target: str) -> str:
    """What to do about a blocked lane, by how it was stopped (docs/design.md §12)."""
    lane = stop.lane.removeprefix("refs/heads/")
    if stop.exit_code == 4:
        return (
            f"call land_lane again: the landing was held by another process or {target} kept "
            "moving; nothing of this lane call landed"
        )
    if stop.exit_code == 5:
        return (
            "whether this landing took effect cannot be told now: run 'applyonce recover' in the "
            "repository, then call land_lane again"
        )
    if stop.call_id is None:
        return f"lane {lane} stays blocked until that commit is off it"
    return (
        f"lane {lane} stays blocked until {target} changes: make this change on {target} "
        f"(apply_patch without lane), or undo what it conflicts with there, then call land_lane "
        f"again; it is tried again on {target}'s new tip"
    )


def land_text(result: LandResult) -> str:
    """What ``land_lane`` tells the model: each call landed now, each lane blocked (at which
    call, why, what to do, how many calls wait), then the count."""
    target = result.target.removeprefix("refs/heads/")
    lines = [
        f"landed: call {done.call_id[:12]} of {done.lane.removeprefix('refs/heads/')} as commit "
        f"{done.commit[:12]} on {target}"
        for done in result.landed
    ]
    for stop in result.blocked:
        at = f"call {stop.call_id[:12]}" if stop.call_id else f"commit {stop.lane_commit[:12]}"
        lines.append(
            f"error: lane {stop.lane.removeprefix('refs/heads/')} is blocked at {at}: "
            f"{stop.message} ({stop.kind}); {stop.waiting} later call(s) of the lane wait"
        )
        if stop.hint:
            lines.append(f"hint: {stop.hint}")
        lines += [f"  {line}" for line in stop.output.splitlines()[1:]]
        lines.append(f"next: {_unblock(stop, target)}")
    lines.append(
        f"{len(result.landed)} landed on {target}, {result.already} already there, "
        f"{len(result.blocked)} lane(s) blocked"
    )
    return "\n".join(lines) + "\n"


def dry_run_text(view: PlanView, diff: str | None, truncated: bool) -> str:
    """The text of a dry run: the plan as ``apply --dry-run --diff`` prints it."""
    lines = [f"dry run: call {view.call_id[:12]} on {view.ref} at {str(view.base_commit)[:12]}"]
    lines += [f"  {line}" for line in view.lines()]
    text = "\n".join(lines) + "\n"
    if diff:
        text += "\n" + diff
        if truncated:
            text += f"[the diff is longer than {DIFF_CAP} bytes and was cut here]\n"
    return text + "nothing was written\n"


class PatchServer:
    """The MCP handlers around one :class:`PatchRunner`. All blocking work runs off the event
    loop, on the runner's kept executor (one for the process; a call that comes while it is busy
    gets its own), so ``tools/list`` and ``patch_receipt`` answer while a long call (a slow
    ``--check``) runs. ``apply_patch`` calls run one at a time: of two at once
    with the same patch, one runs and the other then replays its result, as a repeat does."""

    def __init__(self, runner: PatchRunner, *, search_replace: bool = False) -> None:
        self.runner = runner
        self.search_replace = search_replace
        self.tools = [
            types.Tool.model_validate(dump(tool))
            for tool in mcp_tools(search_replace=search_replace)
        ]
        # tool_call_id -> call_id of this session's calls, so patch_receipt finds a call by the
        # ID the agent gave it even when the call was a repeat recorded under another one.
        self.by_tool_call_id: dict[str, str] = {}
        self._applies: anyio.CapacityLimiter | None = None

    def build(self) -> Server[Any]:
        return Server(
            "applyonce",
            version=applyonce.__version__,
            instructions=INSTRUCTIONS,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools)

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            if params.name == TOOL_NAME:
                return await self._apply_patch(params.arguments)
            if params.name == RECEIPT_TOOL_NAME:
                return await self._patch_receipt(params.arguments)
            if params.name == REVERT_TOOL_NAME:
                return await self._revert_patch(params.arguments)
            if params.name == LAND_TOOL_NAME:
                return await self._land_lane(params.arguments)
            if params.name == REPLACE_TOOL_NAME and self.search_replace:
                return await self._replace_in_file(params.arguments)
            names = [tool.name for tool in self.tools]
            return _refused(
                f"error: unknown tool {params.name[:100]!r}; the tools here are "
                f"{', '.join(names[:-1])} and {names[-1]}\n",
                "unknown-tool",
            )
        except Exception as exc:  # a bug here must not take the server down
            log.exception("tool %r failed", params.name[:100])
            text = (
                f"error: internal error ({type(exc).__name__}); details are in the server's "
                "stderr; run 'applyonce recover' before repeating the call\n"
            )
            # In the shape of the tool's outputSchema, which the client checks.
            if params.name == LAND_TOOL_NAME:
                return _land_refused(text, "internal")
            return _refused(text, "internal")

    async def _in_thread(
        self, fn: Any, *args: Any, one_at_a_time: bool = False, **kwargs: Any
    ) -> Any:
        """``fn(*args, **kwargs)`` in a worker thread (``one_at_a_time``: after the earlier such
        calls finished); the event loop goes on serving meanwhile."""
        limiter = None
        if one_at_a_time:
            if self._applies is None:
                self._applies = anyio.CapacityLimiter(1)
            limiter = self._applies
        return await anyio.to_thread.run_sync(
            functools.partial(fn, *args, **kwargs), limiter=limiter
        )

    async def _apply_patch(self, arguments: dict[str, Any] | None) -> types.CallToolResult:
        try:
            call = McpPatchArguments.model_validate(arguments or {})
        except ValidationError as exc:
            return _bad_arguments(TOOL_NAME, exc)
        return await self._apply(call.patch, call)

    async def _replace_in_file(self, arguments: dict[str, Any] | None) -> types.CallToolResult:
        try:
            call = McpReplaceArguments.model_validate(arguments or {})
            patch = blocks_for(call.path, call.diff)
        except ValidationError as exc:
            return _bad_arguments(REPLACE_TOOL_NAME, exc)
        except ApplyOnceError as exc:
            output = error_output(exc, self.runner.terms)
            return _text(output.text, patch_result(None, error=output.error), is_error=True)
        return await self._apply(patch, call, format="search-replace")

    async def _apply(
        self,
        patch: str,
        call: McpPatchArguments | McpReplaceArguments,
        format: PatchFormat | None = None,
    ) -> types.CallToolResult:
        """Run (or, ``dry_run``, plan) ``patch`` as one call and answer with its result."""
        if call.dry_run:
            # Not behind the applies: it writes nothing.
            planned = await self._in_thread(
                self.runner.dry_run,
                patch,
                tool_call_id=call.tool_call_id,
                attempt=call.attempt,
                format=format,
                lane=call.lane,
            )
            if isinstance(planned, ToolOutput):
                return _text(planned.text, patch_result(None, error=planned.error), is_error=True)
            result = dry_run_result(planned.view, planned.diff)
            text = dry_run_text(planned.view, result.diff, result.diff_truncated)
            return _text(text, result)
        output, diff = await self._in_thread(
            self._run_with_diff,
            patch,
            call.tool_call_id,
            call.attempt,
            call.summary,
            format,
            call.lane,
            one_at_a_time=True,
        )
        if call.tool_call_id is not None and output.receipt is not None:
            self.by_tool_call_id[call.tool_call_id] = output.receipt.call_id
        structured = patch_result(
            output.receipt,
            replayed=output.replayed,
            diff=diff,
            error=output.error,
            commit=output.landed_commit,
            behind=output.behind,
            replay=output.replay,
        )
        return _text(output.text, structured, is_error=output.is_error)

    def _run_with_diff(
        self,
        patch: str,
        tool_call_id: str | None,
        attempt: int | None = None,
        summary: str | None = None,
        format: PatchFormat | None = None,
        lane: str | None = None,
    ) -> tuple[ToolOutput, CallDiff | None]:
        """Run the call, then read its diff from its commit. The call's outcome stands whatever
        happens to the diff: a diff that cannot be read is left out, never made an error."""
        output = self.runner.run(
            patch,
            tool_call_id=tool_call_id,
            attempt=attempt,
            summary=summary,
            format=format,
            lane=lane,
        )
        if output.receipt is None or output.receipt.status != "committed":
            return output, None
        try:
            return output, self.runner.diff(output.receipt)
        except Exception:
            log.exception("cannot read the diff of call %s", output.receipt.call_id[:12])
            return output, None

    async def _patch_receipt(self, arguments: dict[str, Any] | None) -> types.CallToolResult:
        try:
            call = ReceiptArguments.model_validate(arguments or {})
        except ValidationError as exc:
            return _bad_arguments(RECEIPT_TOOL_NAME, exc)
        # Not behind the applies: a receipt is read while a call runs (receipts are replaced
        # atomically, and a busy kept executor makes the runner open one for this read).
        text, structured = await self._in_thread(self._receipt_json, call.call_id)
        return _text(text, structured, is_error=text.startswith("error: "))

    async def _revert_patch(self, arguments: dict[str, Any] | None) -> types.CallToolResult:
        try:
            call = RevertArguments.model_validate(arguments or {})
        except ValidationError as exc:
            return _bad_arguments(REVERT_TOOL_NAME, exc)
        # Behind the applies: a revert is a call that commits, like apply_patch.
        output, diff = await self._in_thread(self._revert, call.call_id.strip(), one_at_a_time=True)
        structured = patch_result(
            output.receipt,
            replayed=output.replayed,
            diff=diff,
            error=output.error,
            replay=output.replay,
        )
        return _text(output.text, structured, is_error=output.is_error)

    async def _land_lane(self, arguments: dict[str, Any] | None) -> types.CallToolResult:
        try:
            call = LandArguments.model_validate(arguments or {})
        except ValidationError as exc:
            return _land_refused(_bad_arguments_text(LAND_TOOL_NAME, exc), "usage")
        if (call.lane is None) == (not call.all):
            return _land_refused(
                "error: land_lane needs one of lane or all; pass lane: NAME, or all: true for "
                "every lane\n",
                "usage",
            )
        # Behind the applies: each landing is a call that commits.
        result = await self._in_thread(self._land, call, one_at_a_time=True)
        return cast("types.CallToolResult", result)

    def _land(self, call: LandArguments) -> types.CallToolResult:
        """Land the lane(s) ``call`` names, each lane call exactly once, and say what happened."""
        # As 'applyonce land' takes them: the lane calls' own checks, the server's timeouts.
        given = self.runner.options
        options = CallOptions(check_timeout=given.check_timeout, lease_seconds=given.lease_seconds)
        try:
            with self.runner.using() as executor:
                report = executor.land(
                    call.lane, onto=call.onto or self.runner.options.branch, options=options
                )
        except ApplyOnceError as exc:
            text = render_hint(f"error: {exc.one_line()}\n", self.runner.terms)
            return _land_refused(text, exc.kind)
        result = land_result(report)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=land_text(result))],
            structured_content=result.to_json_dict(),
            is_error=bool(report.blocked),
        )

    def _revert(self, key: str) -> tuple[ToolOutput, CallDiff | None]:
        """Revert the call ``key`` names, on the call's own branch, exactly once; and the
        revert's diff (left out, never an error, when it cannot be read)."""
        options = dataclasses.replace(self.runner.options, branch=None, tool_call_id=None)
        # The runner's kept executor (a new one if the repository or state directory went away).
        try:
            with self.runner.using() as executor:
                outcome = executor.revert(self._find_call(executor, key), options)
                receipt = outcome.receipt
                output = ToolOutput(
                    tool_text(outcome, self.runner.terms),
                    is_error=receipt.status != "committed",
                    receipt=receipt,
                    replayed=outcome.replayed,
                    replay=outcome.replay,
                )
                if receipt.status != "committed":
                    return output, None
                try:
                    return output, executor.diff(receipt)
                except Exception:
                    log.exception("cannot read the diff of call %s", receipt.call_id[:12])
                    return output, None
        except ApplyOnceError as exc:
            return error_output(exc, self.runner.terms), None

    def _receipt_json(self, key: str) -> tuple[str, ReceiptResult]:
        try:
            with self.runner.using() as executor:
                call_id = self._find_call(executor, key.strip())
                receipt = executor.stored_receipt(call_id)
                data = receipt.to_json()
                result = patch_result(
                    receipt, diff=executor.diff(receipt), behind=executor.checkout_behind(receipt)
                )
                return data.decode(), ReceiptResult(**dict(result), receipt=orjson.loads(data))
        except ApplyOnceError as exc:
            result = patch_result(None, error=exc.to_dict())
            return f"error: {exc.one_line()}\n", ReceiptResult(**dict(result), receipt=None)

    def _find_call(self, executor: Executor, key: str) -> str:
        """A call ID from a full ID, a unique prefix, or a tool-call ID."""
        if key in self.by_tool_call_id:
            return self.by_tool_call_id[key]
        known = executor.call_ids()
        if _HEX_PREFIX.match(key):
            matches = [c for c in known if c.startswith(key)]
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                raise UsageError(
                    f"{key!r} matches {len(matches)} calls", hint="give more characters"
                )
        # A tool-call ID: the latest call recorded under it.
        found = executor.find_by_tool_call_id(key)
        if found is not None:
            return found
        raise UsageError(
            f"no call {key[:80]!r} in this repository",
            hint="pass the call ID, a unique prefix of it, or the tool_call_id of apply_patch",
        )


async def _serve(runner: PatchRunner, search_replace: bool) -> None:
    server = PatchServer(runner, search_replace=search_replace).build()
    # Two writers share the one wire: the server, and CheckedLines, which answers the malformed
    # lines it keeps from the SDK (which would drop them unanswered). Both send into one stream
    # that a single task copies to the transport; that task closes the transport's write side
    # only when both are done, so no answer still queued when standard input ends (a piped
    # client) is sent into a closed stream. And the end of the input reaches the server only
    # once every request it was given is answered (Unanswered), so none is cancelled unanswered.
    outgoing, to_wire = anyio.create_memory_object_stream[SessionMessage](16)
    unanswered = Unanswered()
    with claimed_stdin() as wire:
        lines = cast("anyio.AsyncFile[str]", CheckedLines(wire, outgoing.clone(), unanswered))
        async with (
            stdio_server(stdin=lines) as (read_stream, write_stream),
            anyio.create_task_group() as tasks,
        ):
            tasks.start_soon(_forward, to_wire, write_stream)
            # Each writer closes its side when it is done: the server when its input has ended,
            # CheckedLines at the end of its input.
            answers = ServerAnswers(outgoing, unanswered)
            await server.run(read_stream, answers, server.create_initialization_options())


async def _forward(outgoing: MemoryObjectReceiveStream[SessionMessage], write_stream: Any) -> None:
    """Copy every answer to the transport, in order, until both writers are done; then close
    the transport's write side, which writes what it holds and ends the session."""
    async with outgoing, write_stream:
        async for message in outgoing:
            await write_stream.send(message)


def serve(runner: PatchRunner, *, search_replace: bool = False) -> None:
    """Serve ``apply_patch`` over stdio until the client closes standard input
    (``search_replace``: and ``replace_in_file``)."""
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="applyonce mcp: %(levelname)s: %(message)s"
    )
    try:
        anyio.run(_serve, runner, search_replace)
    finally:
        runner.close()


__all__ = ["INSTRUCTIONS", "PatchServer", "land_text", "serve"]
