"""The stdio wire of ``applyonce mcp``: one JSON-RPC message a line, an answer for each bad one.

The SDK's stdio transport reads standard input as text with ``errors="replace"`` (a byte that is
not UTF-8 silently becomes U+FFFD, so a patch would be changed before it is applied) and drops
every line it cannot validate without a word: an escaped lone surrogate (``"\\ud800"``, which is
no Unicode character), truncated JSON, an array or a number, a request without ``method`` or with
``params`` that are not an object, an id that is null, fractional or too long. The client then
waits for an answer that never comes. Here each line is read as bytes and checked before the SDK
sees it; a bad one is answered with a JSON-RPC error and goes no further, and the session goes on
with the next line:

* ``-32700`` parse error — not UTF-8, or not JSON;
* ``-32600`` invalid request — JSON, but not a JSON-RPC 2.0 request, notification or response
  (not an object, ``jsonrpc`` not ``"2.0"``, no ``method``, an id that is not a string or an
  integer), or a lone surrogate outside ``params``;
* ``-32602`` invalid params — ``params`` not an object, or holding a lone surrogate.

The error carries the request's id when it can be read from the line, else ``null``, as JSON-RPC
2.0 asks. Wrong types inside well-formed ``params`` (a tool's arguments) are the SDK's and the
tools' to answer, as before. A blank line is no message and is skipped.

The end of standard input ends the session only once every request is answered: a piped client
(``cat requests | applyonce mcp``) closes its side after its last request and still reads the
answers, which the SDK alone would drop, cancelling what still runs (:class:`Unanswered`).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

RequestId = str | int


@dataclass(frozen=True)
class WireError:
    """Why a line is not a message the server can take, as the JSON-RPC error to answer."""

    code: int
    message: str
    id: RequestId | None = None

    def response(self) -> types.JSONRPCError:
        return types.JSONRPCError(
            jsonrpc="2.0", id=self.id, error=types.ErrorData(code=self.code, message=self.message)
        )


def check_line(raw: bytes) -> WireError | None:
    """None when the SDK reads ``raw`` as a JSON-RPC message the server can answer; else the
    error to answer instead (module docstring)."""
    checked = _checked(raw)
    return checked if isinstance(checked, WireError) else None


def _checked(raw: bytes) -> types.JSONRPCMessage | WireError:
    """The message the SDK reads from ``raw``, or the error to answer instead."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return WireError(
            types.PARSE_ERROR,
            f"parse error: the message is not UTF-8 (byte {exc.start}); send UTF-8 JSON text",
            _id_of(_loads(raw.decode("utf-8", "replace"))),
        )
    try:
        message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError:
        return _why_invalid(text)
    if isinstance(message, types.JSONRPCNotification):
        # A request whose id is not a string or an integer (null, 1.5) validates as a
        # notification (the id is dropped) and would never be answered.
        parsed = _loads(text)
        if isinstance(parsed, dict) and "id" in parsed:
            return _bad_id(parsed["id"])
    return message


def _why_invalid(text: str) -> WireError:
    """The error for a line the SDK's validation refuses."""
    parsed = _loads(text)
    if isinstance(parsed, _NotJson):
        return WireError(types.PARSE_ERROR, f"parse error: the message is not JSON ({parsed})")
    if not isinstance(parsed, dict):
        return WireError(
            types.INVALID_REQUEST,
            "invalid request: a message is one JSON object (batches are not supported)",
        )
    request_id = _id_of(parsed)
    if "id" in parsed and request_id is None:
        return _bad_id(parsed["id"])
    if parsed.get("jsonrpc") != "2.0":
        return WireError(
            types.INVALID_REQUEST, 'invalid request: "jsonrpc" must be "2.0"', request_id
        )
    method = parsed.get("method")
    if not isinstance(method, str) or _has_surrogate(method):
        return WireError(
            types.INVALID_REQUEST, 'invalid request: "method" must be a string', request_id
        )
    params = parsed.get("params")
    if params is not None and not isinstance(params, dict):
        return WireError(
            types.INVALID_PARAMS, 'invalid params: "params" must be an object', request_id
        )
    if _has_surrogate(params):
        return WireError(
            types.INVALID_PARAMS,
            "invalid params: a string holds an escaped lone surrogate (such as \\ud800), which "
            "is no Unicode character; send the text as UTF-8",
            request_id,
        )
    return WireError(
        types.INVALID_REQUEST, "invalid request: not a JSON-RPC 2.0 message", request_id
    )


def _bad_id(value: Any) -> WireError:
    return WireError(
        types.INVALID_REQUEST,
        f'invalid request: "id" must be a string or an integer, not {_json_type(value)}',
    )


class _NotJson(str):
    """What :func:`_loads` returns for a text that is not JSON: why, in a few words."""


def _loads(text: str) -> Any:
    """``text`` as JSON, lone surrogates and all (Python's reader keeps them), or
    :class:`_NotJson`; NaN and Infinity are not JSON, nor is an integer of more digits than
    Python reads (4300)."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        return _NotJson("nested too deeply")
    except ValueError as exc:
        return _NotJson(str(exc)[:100])


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _id_of(parsed: Any) -> RequestId | None:
    """The message's id, when it is one JSON-RPC allows and it can be sent back as it came."""
    if not isinstance(parsed, dict):
        return None
    value = parsed.get("id")
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and not _has_surrogate(value):
        return value
    return None


def _has_surrogate(value: Any) -> bool:
    """Does ``value`` hold a string with a UTF-16 surrogate (no UTF-8 text can)? Iterative:
    the nesting of a message is the client's."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return "a fraction"
    if isinstance(value, str):
        return "a string that is not Unicode"
    return "an array" if isinstance(value, list) else "an object"


class Unanswered:
    """The requests passed on to the server and not answered yet.

    The SDK takes the end of its input for a client that has gone away: it cancels the
    requests still running and closes its side. A piped client closes its standard input
    after its last request and still reads the answers; so the end of the input reaches the
    SDK only once every request passed on has its answer (or was cancelled by the client,
    which is never answered). Ids are compared as the SDK compares them: ``"7"`` is ``7``.
    """

    def __init__(self) -> None:
        self._open: dict[RequestId, int] = {}
        self._none_open = anyio.Event()
        self._none_open.set()

    def asked(self, request_id: RequestId) -> None:
        key = _same_id(request_id)
        self._open[key] = self._open.get(key, 0) + 1
        if self._none_open.is_set():
            self._none_open = anyio.Event()

    def settled(self, request_id: RequestId | None) -> None:
        """A request was answered, or cancelled by the client; an unknown id changes nothing."""
        if request_id is None:
            return
        key = _same_id(request_id)
        left = self._open.get(key, 0) - 1
        if left > 0:
            self._open[key] = left
            return
        self._open.pop(key, None)
        if not self._open:
            self._none_open.set()

    async def all_answered(self) -> None:
        await self._none_open.wait()


def _same_id(request_id: RequestId) -> RequestId:
    """The id as the SDK matches it: a string that spells an integer is that integer."""
    if isinstance(request_id, str):
        try:
            return int(request_id)
        except ValueError:
            return request_id
    return request_id


class ServerAnswers:
    """The server's writer: each message goes on to ``outgoing``, and each answer it carries
    settles its request in ``unanswered``."""

    def __init__(
        self, outgoing: MemoryObjectSendStream[SessionMessage], unanswered: Unanswered
    ) -> None:
        self._outgoing = outgoing
        self._unanswered = unanswered

    async def send(self, item: SessionMessage, /) -> None:
        await self._outgoing.send(item)
        message = item.message
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self._unanswered.settled(message.id)

    async def aclose(self) -> None:
        await self._outgoing.aclose()

    async def __aenter__(self) -> ServerAnswers:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class CheckedLines:
    """Standard input for the SDK's stdio transport: the lines it can read, in order; every
    other line is answered through ``answers`` (module docstring). The input ends for the SDK
    once every request it was given is answered (:class:`Unanswered`)."""

    def __init__(
        self,
        wire: BinaryIO,
        answers: MemoryObjectSendStream[SessionMessage],
        unanswered: Unanswered,
    ) -> None:
        self._wire = anyio.wrap_file(wire)
        self._answers = answers
        self._unanswered = unanswered

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async with self._answers:
            async for raw in self._wire:
                if not raw.strip():
                    continue
                checked = _checked(raw)
                if isinstance(checked, WireError):
                    await self._answers.send(SessionMessage(checked.response()))
                    continue
                if isinstance(checked, types.JSONRPCRequest):
                    self._unanswered.asked(checked.id)
                elif (
                    isinstance(checked, types.JSONRPCNotification)
                    and checked.method == "notifications/cancelled"
                ):
                    self._unanswered.settled(_cancelled_id(checked.params))
                yield raw.decode("utf-8")
            await self._unanswered.all_answered()


def _cancelled_id(params: dict[str, Any] | None) -> RequestId | None:
    """The request a ``notifications/cancelled`` names, if it names one."""
    value = (params or {}).get("requestId")
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    return value


@contextmanager
def claimed_stdin() -> Iterator[BinaryIO]:
    """The wire on a private duplicate of fd 0, and fd 0 itself on the null device while
    serving (as the SDK does with the stdin it reads itself): a ``--check`` command or a git
    hook reads end of file, never the protocol. fd 0 is restored on exit.

    The duplicate is never closed: a worker thread may still block on it after the transport
    exits, and a closed descriptor's number could be reused under it.
    """
    private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield os.fdopen(private, "rb", closefd=False)
    finally:
        os.dup2(private, 0)


__all__ = [
    "CheckedLines",
    "ServerAnswers",
    "Unanswered",
    "WireError",
    "check_line",
    "claimed_stdin",
]
