"""Tool definitions to register with a model API: OpenAI, Anthropic and MCP.

One description and one argument model serve every API, so what the model is taught is the same
wherever it calls ``apply_patch``. The OpenAI *custom* (freeform) variant constrains the model's
output with :data:`CODEX_LARK_GRAMMAR`, a Lark grammar of the canonical Codex patch format (the
grammar documented in :mod:`applyonce.patch.codex`, without the parser's leniencies: a model held
to the grammar writes the canonical spelling, and every text it accepts, the parser accepts).

``applyonce schema --for openai|anthropic|mcp`` prints these as JSON.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from applyonce.adapters.results import LandResult, PatchResult, ReceiptResult, output_schema
from applyonce.core.identity import TOOL
from applyonce.errors import UsageError

TOOL_NAME = TOOL
RECEIPT_TOOL_NAME = "patch_receipt"
REVERT_TOOL_NAME = "revert_patch"
# Lanes (docs/design.md §12): land the calls of an agent's lane onto the target branch.
LAND_TOOL_NAME = "land_lane"
# SEARCH/REPLACE blocks on one file, in the shape of Cline's tool of that name (Roo's apply_diff
# takes the same two arguments): opt-in, beside apply_patch, whose definition stays as it is.
REPLACE_TOOL_NAME = "replace_in_file"

EXAMPLE_PATCH = """\
*** Begin Patch
*** Update File: src/app.py
@@ def greet(name):
-    return 'hello ' + name
+    return f'hello {name}'
*** Add File: tests/test_app.py
+from src.app import greet
+
+
+def test_greet():
+    assert greet('ada') == 'hello ada'
*** Delete File: old_notes.txt
*** End Patch
"""

APPLY_PATCH_DESCRIPTION = f"""\
Change files in the repository with one multi-file patch. The whole patch lands as one Git \
commit, exactly once: if any part of it does not apply, nothing changes and the error says \
which patch line failed. Sending the same patch again does not apply it twice: it returns the \
stored result of the first call.

Format (every line ends with a newline; paths are relative to the repository root):
*** Begin Patch
*** Add File: <path>          then each line of the new file, prefixed with +
*** Delete File: <path>
*** Update File: <path>
*** Move to: <new path>       optional, right after Update File, to rename
@@ <anchor>                   optional: a line above the change (a def or class line)
 <context line>               prefixed with one space; about 3 lines around each change
-<removed line>
+<added line>
*** End of File               optional: the hunk ends at the end of the file
*** End Patch
Start a new @@ hunk for each separate place in a file. A hunk whose lines match at more than \
one place is refused, never guessed: give it an @@ anchor or more context.

Example:
{EXAMPLE_PATCH}
On success the result is 'Success. Updated the following files:' then one line per file: \
A added, M modified, D deleted. On failure it starts with one line 'error: ...'; when a \
hunk's lines were not found, every expected line follows, then the nearest lines of the file \
numbered 'NN | text': copy the lines to change from there."""

PATCH_FIELD_DESCRIPTION = "The whole patch text, from '*** Begin Patch' to '*** End Patch'."
ATTEMPT_FIELD_DESCRIPTION = (
    "Optional: 2, 3, ... to send a patch again as a new call when repeating it returns the stored "
    "result of the first one (e.g. after the change was undone); leave it out (or null) otherwise."
)
MAX_ATTEMPT = 2**53 - 1

REPLACE_DESCRIPTION = """\
Change one file by SEARCH/REPLACE blocks. All the blocks land as one Git commit, exactly once: \
if any block does not apply, nothing changes and the error says which block failed. Sending the \
same call again does not apply it twice: it returns the stored result of the first call.

Each block (the diff may hold several, applied in order, each to the result of the one before):
<<<<<<< SEARCH
exact lines of the file, whitespace and all
=======
the lines to put in their place
>>>>>>> REPLACE
The SEARCH lines must match one place in the file only: a block whose SEARCH lines are at two \
places is refused, never guessed; copy more lines around the change. Write whole lines. An \
empty SEARCH creates the file with the REPLACE lines (refused if the file exists). \
'------- SEARCH' / '+++++++ REPLACE' markers are accepted too.

On success the result is 'Success. Updated the following files:' then one line per file. On \
failure it starts with one line 'error: ...'; when SEARCH lines were not found, the nearest \
lines of the file follow, numbered 'NN | text': copy the lines to change from there."""

PATH_FIELD_DESCRIPTION = "The file to change, relative to the repository root."
DIFF_FIELD_DESCRIPTION = "One or more SEARCH/REPLACE blocks."

RECEIPT_DESCRIPTION = (
    "The verified receipt of one apply_patch call as JSON: status, commit, files and their "
    "digests, checks, and the exact output the call returned."
)

REVERT_DESCRIPTION = (
    "Undo an earlier apply_patch call: one new Git commit that reverts that call's commit, "
    "exactly once (sending it again returns the first result). Refused, changing nothing, when "
    "later commits changed the same lines. On success the result lists the files as "
    "apply_patch does; on failure it is one line starting with 'error: '."
)

LAND_DESCRIPTION = (
    "Land the calls of a lane (the branch agent/NAME that apply_patch with lane: NAME commits "
    "to) onto the target branch: each lane call not landed yet, oldest first, becomes one commit "
    "there, exactly once, its checks run again on the merged tree. Give lane: NAME, or all: true "
    "for every lane. A lane call that no longer applies blocks its lane only (the result is an "
    "error saying which call, why, and what to do; the later calls of that lane wait); the other "
    "lanes go on. Landing again lands only what is new."
)
LANE_FIELD_DESCRIPTION = (
    "Optional: commit to your own lane, the branch agent/NAME (made from the server's branch the "
    "first time), instead of the server's branch; land it with land_lane."
)

CODEX_LARK_GRAMMAR = r"""// Codex apply_patch, canonical form: one terminal per kind of line.
start: begin_patch operation+ end_patch
begin_patch: "*** Begin Patch" LF
end_patch: "*** End Patch" LF?

operation: add_file | delete_file | update_file
add_file: "*** Add File: " PATH LF ADDED*
delete_file: "*** Delete File: " PATH LF
update_file: "*** Update File: " PATH LF (move_to hunks? | hunks)
move_to: "*** Move to: " PATH LF

// Only the first hunk of a file may leave out its @@ line.
hunks: first_hunk hunk*
first_hunk: ANCHOR* body end_of_file?
hunk: ANCHOR+ body end_of_file?
// A hunk of context lines only changes nothing where it matches (with Move to: a rename).
body: (CONTEXT | REMOVED | ADDED)+
end_of_file: "*** End of File" LF

PATH: /[^\n]+/
ANCHOR: /@@( [^\n]*)?\n/
CONTEXT: / [^\n]*\n/
REMOVED: /-[^\n]*\n/
ADDED: /\+[^\n]*\n/
LF: "\n"
"""


def _lean(schema: dict[str, Any]) -> None:
    """Pydantic adds titles and the class docstring; a model reads these schemas, so only the
    field descriptions stay."""
    schema.pop("title", None)
    schema.pop("description", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_lean)


SUMMARY_LIMIT = 100  # a summary is a commit subject: one line, refused when longer


def _attempt_field() -> Any:
    """The optional ``attempt`` of every tool that makes a call: a new attempt is a new call
    (docs/design.md §3), as '--attempt' is on the command line."""
    return Field(default=None, ge=1, le=MAX_ATTEMPT, description=ATTEMPT_FIELD_DESCRIPTION)


def _summary_field() -> Any:
    """The optional ``summary`` of every tool that makes a call: the commit's subject."""
    return Field(
        default=None,
        max_length=SUMMARY_LIMIT,
        pattern=r"^[^\r\n]*\S[^\r\n]*$",
        description=(
            "Optional: one line (at most 100 characters) saying what the change does; it becomes "
            "the commit's subject."
        ),
    )


class PatchArguments(_Arguments):
    """The arguments a model gives ``apply_patch`` (OpenAI function tool, Anthropic tool)."""

    patch: str = Field(description=PATCH_FIELD_DESCRIPTION)
    attempt: int | None = _attempt_field()
    summary: str | None = _summary_field()


class ReplaceArguments(_Arguments):
    """The arguments a model gives ``replace_in_file``: a path and its blocks (the call runs as
    the text :func:`applyonce.patch.searchreplace.blocks_for` makes of them)."""

    path: str = Field(min_length=1, description=PATH_FIELD_DESCRIPTION)
    diff: str = Field(description=DIFF_FIELD_DESCRIPTION)
    attempt: int | None = _attempt_field()
    summary: str | None = _summary_field()


_LANE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$"


def _lane_field() -> Any:
    """The optional ``lane`` of every MCP tool that makes a call (``apply --lane NAME``)."""
    return Field(
        default=None, max_length=100, pattern=_LANE_PATTERN, description=LANE_FIELD_DESCRIPTION
    )


class McpReplaceArguments(ReplaceArguments):
    """``replace_in_file`` over MCP: the caller may pass its tool-call ID, ask a dry run, and
    name its lane."""

    lane: str | None = _lane_field()

    tool_call_id: str | None = Field(
        default=None,
        description="Optional: your ID for this tool call, recorded in the commit and receipt.",
    )
    dry_run: bool = Field(
        default=False,
        description="Optional: only show what the blocks would do (the file and its diff); "
        "nothing is written and nothing is recorded.",
    )


class McpPatchArguments(PatchArguments):
    """Over MCP the server cannot see the model's tool-call ID, so the caller may pass it; and
    it may name its lane."""

    lane: str | None = _lane_field()

    tool_call_id: str | None = Field(
        default=None,
        description="Optional: your ID for this tool call, recorded in the commit and receipt.",
    )
    dry_run: bool = Field(
        default=False,
        description="Optional: only show what the patch would do (its files and diff); "
        "nothing is written and nothing is recorded.",
    )


class ReceiptArguments(_Arguments):
    call_id: str = Field(
        description=(
            "The call ID (64 hex digits, or a unique prefix of 6 or more), or the tool_call_id "
            "given to apply_patch."
        )
    )


class RevertArguments(_Arguments):
    call_id: str = Field(
        description=(
            "The apply_patch call to undo: its call ID (64 hex digits, or a unique prefix of 6 or "
            "more), or the tool_call_id given to apply_patch."
        )
    )


class LandArguments(_Arguments):
    """``land_lane``: one lane, or every lane, onto a branch."""

    lane: str | None = Field(
        default=None,
        max_length=100,
        pattern=_LANE_PATTERN,
        description="The lane to land: NAME of the branch agent/NAME. Give this or all.",
    )
    all: bool = Field(default=False, description="True: land every lane (every agent/* branch).")
    onto: str | None = Field(
        default=None,
        max_length=200,
        pattern=r"^[^\s~^:?*\[\\]+$",
        description="Optional: the target branch (default: the server's branch, else HEAD's).",
    )


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of an argument model."""
    return model.model_json_schema()


# --- OpenAI -------------------------------------------------------------------------------------


class _Tool(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class ResponsesFunctionTool(_Tool):
    """A function tool for the Responses API (``tools=[...]`` of ``responses.create``)."""

    type: Literal["function"] = "function"
    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool = True


class ChatFunction(_Tool):
    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool = True


class ChatFunctionTool(_Tool):
    """A function tool for the Chat Completions API."""

    type: Literal["function"] = "function"
    function: ChatFunction


class ResponsesGrammarFormat(_Tool):
    type: Literal["grammar"] = "grammar"
    syntax: Literal["lark"] = "lark"
    definition: str


class ResponsesCustomTool(_Tool):
    """A custom (freeform) tool for the Responses API: the model writes the patch itself, held
    to the grammar, and the call arrives as a ``custom_tool_call`` whose ``input`` is the patch."""

    type: Literal["custom"] = "custom"
    name: str
    description: str
    format: ResponsesGrammarFormat


class ChatGrammar(_Tool):
    syntax: Literal["lark"] = "lark"
    definition: str


class ChatGrammarFormat(_Tool):
    type: Literal["grammar"] = "grammar"
    grammar: ChatGrammar


class ChatCustom(_Tool):
    name: str
    description: str
    format: ChatGrammarFormat


class ChatCustomTool(_Tool):
    """A custom (freeform) tool for the Chat Completions API."""

    type: Literal["custom"] = "custom"
    custom: ChatCustom


OpenAIApi = Literal["responses", "chat"]
OpenAIVariant = Literal["function", "custom"]


def strict_parameters(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s schema as OpenAI's strict mode takes it: every property listed as required
    (an optional one says so by allowing null, as pydantic writes it), and no defaults; a
    string's length and pattern are left to the check here (``summary``)."""
    schema = input_schema(model)
    for prop in schema["properties"].values():
        prop.pop("default", None)
        for choice in prop.get("anyOf", []):
            choice.pop("maxLength", None)
            choice.pop("pattern", None)
    schema["required"] = list(schema["properties"])
    return schema


def openai_tool(api: OpenAIApi = "responses", variant: OpenAIVariant = "function") -> BaseModel:
    """The ``apply_patch`` tool for one OpenAI API, as a JSON-schema function or a grammar tool."""
    parameters = strict_parameters(PatchArguments)
    if api == "responses":
        if variant == "function":
            return ResponsesFunctionTool(
                name=TOOL_NAME, description=APPLY_PATCH_DESCRIPTION, parameters=parameters
            )
        return ResponsesCustomTool(
            name=TOOL_NAME,
            description=APPLY_PATCH_DESCRIPTION,
            format=ResponsesGrammarFormat(definition=CODEX_LARK_GRAMMAR),
        )
    if variant == "function":
        return ChatFunctionTool(
            function=ChatFunction(
                name=TOOL_NAME, description=APPLY_PATCH_DESCRIPTION, parameters=parameters
            )
        )
    return ChatCustomTool(
        custom=ChatCustom(
            name=TOOL_NAME,
            description=APPLY_PATCH_DESCRIPTION,
            format=ChatGrammarFormat(grammar=ChatGrammar(definition=CODEX_LARK_GRAMMAR)),
        )
    )


def openai_replace_tool(api: OpenAIApi = "responses") -> BaseModel:
    """The ``replace_in_file`` function tool for one OpenAI API (there is no grammar variant)."""
    parameters = strict_parameters(ReplaceArguments)
    if api == "responses":
        return ResponsesFunctionTool(
            name=REPLACE_TOOL_NAME, description=REPLACE_DESCRIPTION, parameters=parameters
        )
    return ChatFunctionTool(
        function=ChatFunction(
            name=REPLACE_TOOL_NAME, description=REPLACE_DESCRIPTION, parameters=parameters
        )
    )


# --- Anthropic ----------------------------------------------------------------------------------


class AnthropicTool(_Tool):
    """A client tool for the Messages API (``tools=[...]`` of ``messages.create``)."""

    name: str
    description: str
    input_schema: dict[str, Any]


def anthropic_tool() -> AnthropicTool:
    return AnthropicTool(
        name=TOOL_NAME,
        description=APPLY_PATCH_DESCRIPTION,
        input_schema=input_schema(PatchArguments),
    )


def anthropic_replace_tool() -> AnthropicTool:
    return AnthropicTool(
        name=REPLACE_TOOL_NAME,
        description=REPLACE_DESCRIPTION,
        input_schema=input_schema(ReplaceArguments),
    )


# Claude's own text editor tool (Claude 4 models): schema-less, its commands are built into the
# model. ``ToolCallAdapter`` answers its calls (``applyonce.adapters.texteditor``).
TEXT_EDITOR_TYPE: Final = "text_editor_20250728"
TEXT_EDITOR_NAME: Final = "str_replace_based_edit_tool"


class AnthropicTextEditorTool(_Tool):
    """Anthropic's text editor tool, as ``tools=[...]`` of ``messages.create`` takes it.
    ``max_characters`` (optional) is where the harness truncates a view."""

    type: Literal["text_editor_20250728"] = TEXT_EDITOR_TYPE
    name: Literal["str_replace_based_edit_tool"] = TEXT_EDITOR_NAME
    max_characters: int | None = Field(default=None, ge=1)


def text_editor_tool(max_characters: int | None = None) -> dict[str, Any]:
    """The text editor tool definition, without ``max_characters`` unless it is given."""
    return AnthropicTextEditorTool(max_characters=max_characters).model_dump(
        mode="json", exclude_none=True
    )


# --- MCP ----------------------------------------------------------------------------------------


class McpToolAnnotations(_Tool):
    title: str
    read_only_hint: bool = Field(alias="readOnlyHint")
    destructive_hint: bool = Field(alias="destructiveHint")
    idempotent_hint: bool = Field(alias="idempotentHint")
    open_world_hint: bool = Field(alias="openWorldHint")


class McpTool(_Tool):
    """A tool as an MCP server lists it (``tools/list``), in the protocol's own field names."""

    name: str
    description: str
    input_schema: dict[str, Any] = Field(alias="inputSchema")
    # The JSON Schema of the tool's structuredContent (see applyonce.adapters.results).
    output_schema: dict[str, Any] | None = Field(default=None, alias="outputSchema")
    annotations: McpToolAnnotations


def mcp_replace_tool() -> McpTool:
    """``replace_in_file`` as ``applyonce mcp --search-replace`` serves it."""
    return McpTool(
        name=REPLACE_TOOL_NAME,
        description=REPLACE_DESCRIPTION,
        input_schema=input_schema(McpReplaceArguments),
        output_schema=output_schema(PatchResult),
        annotations=McpToolAnnotations(
            title="Change a file by SEARCH/REPLACE blocks as one commit, exactly once",
            read_only_hint=False,
            destructive_hint=True,  # a block may remove lines
            idempotent_hint=True,  # a repeat returns the stored result and changes nothing
            open_world_hint=False,
        ),
    )


def mcp_tools(*, search_replace: bool = False) -> list[McpTool]:
    """The tools ``applyonce mcp`` serves (``search_replace``: ``replace_in_file`` too, last)."""
    return [
        McpTool(
            name=TOOL_NAME,
            description=APPLY_PATCH_DESCRIPTION,
            input_schema=input_schema(McpPatchArguments),
            output_schema=output_schema(PatchResult),
            annotations=McpToolAnnotations(
                title="Apply a patch as one commit, exactly once",
                read_only_hint=False,
                destructive_hint=True,  # a patch may delete files
                idempotent_hint=True,  # a repeat returns the stored result and changes nothing
                open_world_hint=False,
            ),
        ),
        McpTool(
            name=RECEIPT_TOOL_NAME,
            description=RECEIPT_DESCRIPTION,
            input_schema=input_schema(ReceiptArguments),
            output_schema=output_schema(ReceiptResult),
            annotations=McpToolAnnotations(
                title="Show the receipt of an apply_patch call",
                read_only_hint=True,
                destructive_hint=False,
                idempotent_hint=True,
                open_world_hint=False,
            ),
        ),
        McpTool(
            name=REVERT_TOOL_NAME,
            description=REVERT_DESCRIPTION,
            input_schema=input_schema(RevertArguments),
            output_schema=output_schema(PatchResult),
            annotations=McpToolAnnotations(
                title="Undo an apply_patch call with one commit, exactly once",
                read_only_hint=False,
                destructive_hint=True,  # it may delete the files the call added
                idempotent_hint=True,  # a repeat returns the stored result and changes nothing
                open_world_hint=False,
            ),
        ),
        McpTool(
            name=LAND_TOOL_NAME,
            description=LAND_DESCRIPTION,
            input_schema=input_schema(LandArguments),
            output_schema=output_schema(LandResult),
            annotations=McpToolAnnotations(
                title="Land the calls of a lane onto the target branch, exactly once each",
                read_only_hint=False,
                destructive_hint=False,  # it only adds commits to the target
                idempotent_hint=True,  # landing again lands nothing twice
                open_world_hint=False,
            ),
        ),
    ] + ([mcp_replace_tool()] if search_replace else [])


def dump(model: BaseModel) -> dict[str, Any]:
    """A tool definition as the JSON its API expects (protocol field names, no unset extras)."""
    return model.model_dump(mode="json", by_alias=True)


def _replace_schema(target: str, api: str, variant: str | None) -> Any:
    """``schema_for(target, tool="search-replace")``."""
    if target == "openai":
        if api not in ("responses", "chat"):
            raise UsageError(f"unknown OpenAI API {api!r}", hint="use --api responses or chat")
        if variant not in (None, "function"):
            raise UsageError(
                f"--tool search-replace has no {variant!r} variant",
                hint="use --variant function, or leave it out",
            )
        return dump(openai_replace_tool(api))  # type: ignore[arg-type]
    if variant is not None or api != "responses":
        raise UsageError("--api and --variant are for --for openai only")
    if target == "anthropic":
        return dump(anthropic_replace_tool())
    if target == "mcp":
        return [dump(mcp_replace_tool())]
    raise UsageError(f"unknown target {target!r}", hint="use --for openai, anthropic or mcp")


def schema_for(
    target: str,
    *,
    api: OpenAIApi = "responses",
    variant: str | None = None,
    tool: str = "apply-patch",
    max_characters: int | None = None,
) -> Any:
    """What ``applyonce schema --for TARGET`` prints.

    Args:
        target: ``openai``, ``anthropic`` or ``mcp``.
        api: for OpenAI, ``responses`` or ``chat`` (Chat Completions).
        variant: for OpenAI, ``function`` or ``custom``; None prints both, keyed by variant.
        tool: ``apply-patch``, ``text-editor`` (Claude's text editor; ``anthropic`` only), or
            ``search-replace`` (``replace_in_file``: a function tool for OpenAI, the tool for
            Anthropic, the one tool ``applyonce mcp --search-replace`` adds for MCP).
        max_characters: with ``text-editor``, where a view is truncated.

    Raises:
        UsageError: an unknown target, API, variant or tool, or options that do not go together.
    """
    if tool not in ("apply-patch", "text-editor", "search-replace"):
        raise UsageError(
            f"unknown tool {tool!r}", hint="use --tool apply-patch, text-editor or search-replace"
        )
    if tool == "text-editor":
        if target != "anthropic":
            raise UsageError(
                f"--tool text-editor goes with --for anthropic, not --for {target}",
                hint="it is Anthropic's own tool: use --for anthropic --tool text-editor",
            )
        if variant is not None or api != "responses":
            raise UsageError("--api and --variant are for --for openai only")
        if max_characters is not None and max_characters < 1:
            raise UsageError(f"--max-characters must be 1 or more, not {max_characters}")
        return text_editor_tool(max_characters)
    if max_characters is not None:
        raise UsageError("--max-characters is for --tool text-editor only")
    if tool == "search-replace":
        return _replace_schema(target, api, variant)
    if target == "openai":
        if api not in ("responses", "chat"):
            raise UsageError(f"unknown OpenAI API {api!r}", hint="use --api responses or chat")
        if variant is None:
            return {v: dump(openai_tool(api, v)) for v in ("function", "custom")}
        if variant not in ("function", "custom"):
            raise UsageError(
                f"unknown variant {variant!r}", hint="use --variant function or custom"
            )
        return dump(openai_tool(api, variant))  # type: ignore[arg-type]
    if variant is not None or api != "responses":
        raise UsageError("--api and --variant are for --for openai only")
    if target == "anthropic":
        return dump(anthropic_tool())
    if target == "mcp":
        return [dump(mcp_tool) for mcp_tool in mcp_tools()]
    raise UsageError(
        f"unknown target {target!r}", hint="use --for openai, anthropic, mcp or receipt"
    )
