"""The tool calls in what a model API returned: Anthropic ``tool_use`` blocks, OpenAI Chat
Completions ``tool_calls``, Responses API ``function_call`` / ``custom_tool_call`` items, read into
one :class:`ToolCall` shape, and the result block answering each in its own API's shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import orjson
from pydantic import ValidationError

from applyonce.adapters.schemas import PatchArguments, ReplaceArguments
from applyonce.errors import ApplyOnceError, UsageError

Api = Literal["anthropic", "openai-chat", "openai-responses"]
_Args = TypeVar("_Args", PatchArguments, ReplaceArguments)
_REPLACE_HINT = 'call replace_in_file with {"path": "...", "diff": "<<<<<<< SEARCH ..."}'


class ToolInputError(ApplyOnceError):
    """The model's tool call does not carry a usable patch (bad JSON, missing or mistyped field)."""

    kind = "tool-input"
    default_hint = 'call apply_patch with {"patch": "*** Begin Patch ... *** End Patch"}'


class ToolCallShapeError(UsageError):
    """A block looks like a tool call but lacks what every tool call has (an ID, a name)."""

    kind = "tool-call-shape"
    default_hint = "pass the blocks exactly as the model API returned them"


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model made, whatever API it came from.

    ``arguments`` is what the model wrote: Anthropic's ``input`` object, a function call's JSON
    string, or a custom (freeform) tool call's raw text.
    """

    api: Api
    freeform: bool
    id: str
    name: str
    arguments: Any
    block: Mapping[str, Any] = field(repr=False, compare=False)

    def result(self, text: str, *, is_error: bool = False) -> dict[str, Any]:
        """The tool-result block answering this call, in its API's shape."""
        if self.api == "anthropic":
            return {
                "type": "tool_result",
                "tool_use_id": self.id,
                "content": text,
                "is_error": is_error,
            }
        if self.api == "openai-chat":
            return {"role": "tool", "tool_call_id": self.id, "content": text}
        kind = "custom_tool_call_output" if self.freeform else "function_call_output"
        return {"type": kind, "call_id": self.id, "output": text}

    def patch_text(self) -> str:
        """The patch this ``apply_patch`` call carries.

        Raises:
            ToolInputError: the arguments are not ``{"patch": "<text>"}`` (or, freeform, text).
        """
        return self.patch_arguments().patch

    def patch_arguments(self) -> PatchArguments:
        """The arguments of this ``apply_patch`` call (a freeform call's text is its patch).

        Raises:
            ToolInputError: the arguments are not :class:`PatchArguments` (or, freeform, text).
        """
        if self.freeform:
            if not isinstance(self.arguments, str):
                raise ToolInputError("the tool input is not text")
            return PatchArguments(patch=self.arguments)
        return self._validated(PatchArguments)

    def replace_arguments(self) -> ReplaceArguments:
        """The arguments of a ``replace_in_file`` call.

        Raises:
            ToolInputError: the arguments are not :class:`ReplaceArguments` (a freeform call has
                no path).
        """
        if self.freeform:
            raise ToolInputError(
                "replace_in_file takes a path and a diff, not free text", hint=_REPLACE_HINT
            )
        return self._validated(ReplaceArguments, hint=_REPLACE_HINT)

    def _validated(self, model: type[_Args], hint: str | None = None) -> _Args:
        arguments = self.arguments
        if isinstance(arguments, str | bytes):
            try:
                arguments = orjson.loads(arguments)
            except orjson.JSONDecodeError as exc:
                raise ToolInputError(
                    f"the tool arguments are not valid JSON ({exc})", hint=hint
                ) from None
        try:
            return model.model_validate(arguments)
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(part) for part in problem["loc"]) or "arguments"
            raise ToolInputError(
                f"bad tool arguments: {where}: {problem['msg']}", hint=hint
            ) from None


def _plain(obj: Any) -> Any:
    """SDK objects (pydantic models of the anthropic and openai packages) as plain data."""
    dump = getattr(obj, "model_dump", None)
    return dump(mode="json") if callable(dump) else obj


def _field(block: Mapping[str, Any], key: str, what: str) -> str:
    value = block.get(key)
    if not isinstance(value, str) or not value:
        raise ToolCallShapeError(f"a {what} block has no {key!r} string")
    return value


def _tool_call(block: Mapping[str, Any]) -> ToolCall | None:
    """The tool call in ``block``, or None for a block that is not one (text, thinking, …)."""
    kind = block.get("type")
    if kind == "tool_use":
        return ToolCall(
            "anthropic",
            False,
            _field(block, "id", "tool_use"),
            _field(block, "name", "tool_use"),
            block.get("input"),
            block,
        )
    if kind in ("function_call", "custom_tool_call"):
        freeform = kind == "custom_tool_call"
        return ToolCall(
            "openai-responses",
            freeform,
            _field(block, "call_id", kind),
            _field(block, "name", kind),
            block.get("input" if freeform else "arguments"),
            block,
        )
    inner_key = "custom" if kind == "custom" else "function"
    inner = block.get(inner_key)
    if kind in ("function", "custom") or (kind is None and isinstance(inner, Mapping)):
        if not isinstance(inner, Mapping):
            raise ToolCallShapeError(f"a tool_calls item has no {inner_key!r} object")
        return ToolCall(
            "openai-chat",
            kind == "custom",
            _field(block, "id", "tool_calls item"),
            _field(inner, "name", "tool_calls item"),
            inner.get("input" if kind == "custom" else "arguments"),
            block,
        )
    return None


def tool_calls(message: Any) -> list[ToolCall]:
    """The tool calls in what a model API returned.

    Args:
        message: a list of blocks or items (Anthropic ``content``, Responses ``output``, Chat
            ``tool_calls``), one such block, or a whole message or response carrying them
            (``{"role": "assistant", "content": [...]}``, ``{"tool_calls": [...]}``,
            ``{"output": [...]}``). SDK objects are accepted as they come.

    Returns:
        The tool calls in order; text, thinking and reasoning blocks are skipped.

    Raises:
        ToolCallShapeError: a tool-call block without an ID or a name.
    """
    message = _plain(message)
    items: Iterable[Any]
    if isinstance(message, Mapping):
        for key in ("tool_calls", "output", "content"):
            if isinstance(message.get(key), list):
                items = message[key]
                break
        else:
            items = [message]
    elif isinstance(message, list | tuple):
        items = message
    else:
        raise ToolCallShapeError(f"expected tool-call blocks, got {type(message).__name__}")
    calls = []
    for item in items:
        block = _plain(item)
        if isinstance(block, Mapping) and (call := _tool_call(block)) is not None:
            calls.append(call)
    return calls
