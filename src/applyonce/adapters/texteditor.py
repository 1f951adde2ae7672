"""Claude's text editor tool (``text_editor_20250728``, named ``str_replace_based_edit_tool``),
answered for :class:`~applyonce.adapters.agents.ToolCallAdapter`.

The tool is schema-less: its commands are built into Claude 4 models. Register it with
``applyonce schema --for anthropic --tool text-editor``; the commands (``undo_edit`` is not one
of this version: an edit is a commit, and ``undo_edit`` is answered with the last call that
changed the path and the ``applyonce revert`` that undoes it, :func:`undo_text`)::

    view         path, view_range?   a file with line numbers, or a folder's listing
    create       path, file_text     a new file becomes exactly file_text (an existing one refuses)
    str_replace  path, old_str, new_str?
    insert       path, insert_line, insert_text (or new_str: the docs name it so, the models
                 send insert_text)

**Edits run exactly once**, as ``apply_patch`` calls do: each command becomes a one-command
edit-json document (:mod:`applyonce.patch.editjson`) and runs as a normal call — one commit, the
``tool_use`` ID recorded as its tool-call ID, a repeat answered from the stored receipt, a crash
settled through Git. The call's identity is that of the parsed document (docs/design.md §3): the
command
with its path normalised, so ``insert`` with ``new_str`` or with ``insert_text``, or ``./a.py`` and
``a.py``, are one call; a ``create`` is the same call as a Codex ``Add File`` of that content.
The result text is derived from the receipt alone, so a repeat reads exactly as the first answer.

**A view writes nothing**: it reads the checkout (or the branch's tip;
:mod:`applyonce.flow.inspect.view`) and numbers lines as ``cat -n`` does, counting them as
``insert_line`` counts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from applyonce.adapters.schemas import TEXT_EDITOR_NAME, TEXT_EDITOR_TYPE
from applyonce.adapters.toolcalls import ToolCall, ToolInputError
from applyonce.core.paths import normalise_path
from applyonce.core.receipt import Receipt, touched_paths_of
from applyonce.errors import ApplyOnceError
from applyonce.executor import Executor
from applyonce.flow.inspect.view import FileView, FolderView
from applyonce.patch.match import BinaryFileError, decode_text

EDIT_FIELDS: dict[str, frozenset[str]] = {
    "create": frozenset({"path", "file_text"}),
    "str_replace": frozenset({"path", "old_str", "new_str"}),
    "insert": frozenset({"path", "insert_line", "insert_text", "new_str"}),
}
VIEW_FIELDS = frozenset({"path", "view_range"})
COMMANDS = ("view", "create", "str_replace", "insert")
_HINT = "send one of the commands " + ", ".join(COMMANDS) + " with its fields"


class TextEditorInputError(ToolInputError):
    """A text editor call that is not one of the tool's commands with its fields."""

    kind = "tool-input"
    default_hint = _HINT


class UndoEditError(TextEditorInputError):
    """``undo_edit``: not a command here; the answer names the call to revert
    (:func:`undo_text`)."""


def command_input(call: ToolCall) -> dict[str, Any]:
    """The call's input object, with a known ``command`` and only that command's fields.

    Raises:
        TextEditorInputError: not an object, no or an unknown command, a field it does not take.
    """
    arguments = call.arguments
    if isinstance(arguments, str | bytes):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError as exc:
            raise TextEditorInputError(f"the tool input is not valid JSON ({exc})") from None
    if not isinstance(arguments, Mapping):
        raise TextEditorInputError("the tool input is not a JSON object")
    command = arguments.get("command")
    if command == "undo_edit":
        raise UndoEditError(
            f"undo_edit is not a command of {TEXT_EDITOR_TYPE}",
            hint="each edit is its own Git commit: undo it with 'applyonce revert <call>'",
            path=arguments.get("path") if isinstance(arguments.get("path"), str) else None,
        )
    if command not in COMMANDS:
        raise TextEditorInputError(f"unknown command {str(command)[:40]!r}")
    allowed = VIEW_FIELDS if command == "view" else EDIT_FIELDS[command]
    unknown = sorted(str(key) for key in arguments if key != "command" and key not in allowed)
    if unknown:
        raise TextEditorInputError(
            f"{command} takes no field {unknown[0][:40]!r}",
            hint=f"{command} takes " + ", ".join(sorted(allowed)),
        )
    if not isinstance(arguments.get("path"), str):
        raise TextEditorInputError(f"{command} needs a 'path' string")
    return dict(arguments)


def edit_document(fields: Mapping[str, Any]) -> str:
    """The edit-json document (one command) an edit runs as: its fields as the model sent them,
    keys sorted. Its parse, not this spelling, is the call's identity.

    Raises:
        TextEditorInputError: a text that is not UTF-8 (a lone surrogate).
    """
    try:
        return orjson.dumps(dict(fields), option=orjson.OPT_SORT_KEYS).decode("utf-8")
    except TypeError as exc:
        raise TextEditorInputError(f"the tool input cannot be read as text ({exc})") from None


# --- results of edits ---------------------------------------------------------------------------


def last_call_on(executor: Executor, path: str, *, branch: str | None = None) -> Receipt | None:
    """The receipt of the last committed call on ``branch`` that changed ``path`` (None: none
    did); ``path`` as the model spells it (``./a.py``, an absolute path in the work tree)."""
    ref = executor.branch(branch)
    root = executor.context.store.workdir
    try:
        wanted = normalise_path(path, repo_root=None if root is None else str(root))
    except ApplyOnceError:
        return None
    for summary in reversed(executor.calls()):
        if summary.state != "committed" or summary.ref != ref or summary.commit is None:
            continue
        receipt = executor.show(summary.call_id)
        if wanted in touched_paths_of(receipt):
            return receipt
    return None


def undo_text(error: UndoEditError, last: Receipt | None, *, revert_tool: str | None) -> str:
    """The answer to ``undo_edit``: not a command here, the last call that changed the path, and
    how to undo it (``applyonce revert <call>``, or ``revert_tool`` where the harness serves one).
    Nothing was undone, and the text says so."""
    path = error.details.get("path")
    head = f"Error: {error.message}; nothing was undone."
    if last is None:
        what = f"changed {path}" if path else "made an edit"
        return f"{head} No applyonce call {what}; there is no edit to revert.\n"
    call = last.call_id[:12]
    commit = (last.commit or "")[:12]
    how = f"run 'applyonce revert {call}'"
    if revert_tool is not None:
        how += f" or call the {revert_tool} tool with call_id {call}"
    return (
        f"{head} The last edit of {path} is call {call} (commit {commit}); "
        f"to undo it, {how}: one new commit that reverts it.\n"
    )


def edit_result(
    fields: Mapping[str, Any], receipt: Receipt, *, tool_use_id: str | None = None
) -> tuple[str, bool] | None:
    """The text editor's result for an edit whose call has ``receipt``, and whether it is an
    error; None where the call's own output says it best (rejections other than these).

    Derived from the receipt's fields, the command and ``tool_use_id`` only, so a repeat of the
    call gives the same text. An edit whose call another tool call made before (the same
    command: the same call) is not applied again, and its text says so."""
    command = fields["command"]
    if receipt.status == "committed" and len(receipt.files) == 1:
        record = receipt.files[0]
        path = record.path
        if command == "create":
            text = f"File created successfully at: {path}\n"
        elif command == "str_replace":
            text = f"Successfully replaced text at exactly one location in {path}.\n"
        else:
            line = fields["insert_line"]
            where = "at the top" if line == 0 else f"after line {line}"
            text = f"Successfully inserted text {where} of {path}.\n"
        earlier = receipt.tool_call_id
        if tool_use_id is not None and earlier not in (None, tool_use_id) and receipt.commit:
            text += (
                f"Note: this is the same edit as tool call {earlier}, which made it as commit "
                f"{receipt.commit[:12]}; it was not applied a second time.\n"
            )
        return text, False
    error = receipt.error or {}
    if receipt.status != "rejected":
        return None
    if error.get("kind") == "binary-file":
        return f"Error: {error.get('message')}; the text editor edits UTF-8 text only\n", True
    if command == "create" and (error.get("kind") == "already-exists" or error.get("exists")):
        # Anthropic's reference tool refuses a create onto an existing file in these words.
        path = error.get("path", fields["path"])
        return (
            f"Error: File already exists at: {path}. Cannot overwrite files using command "
            "`create`; change it with str_replace or insert.\n",
            True,
        )
    if error.get("kind") != "edit-command":
        return None
    path = error.get("path", fields["path"])
    count = error.get("count")
    if count == 0:
        text = (
            f"Error: No match found for replacement text in {path}. Please check your text "
            "and try again: old_str must match the file exactly, whitespace included.\n"
        )
    elif isinstance(count, int):
        lines = error.get("lines") or []
        where = f" (lines {', '.join(map(str, lines))})" if lines else ""
        text = (
            f"Error: Found {count} matches for replacement text in {path}{where}. Please "
            "provide more context to make a unique match.\n"
        )
    elif "line_count" in error:
        total = error["line_count"]
        text = (
            f"Error: Invalid insert_line {error.get('insert_line')}: {path} has {total} lines; "
            f"use 0 to {total}.\n"
        )
    else:
        text = f"Error: File not found: {path}. Create it with the create command first.\n"
    return text, True


# --- view ---------------------------------------------------------------------------------------


def view_result(
    executor: Executor,
    fields: Mapping[str, Any],
    *,
    branch: str | None,
    max_characters: int | None,
) -> tuple[str, bool]:
    """The text of a ``view`` and whether it is an error. Reads only."""
    view_range = fields.get("view_range")
    try:
        seen = executor.view(fields["path"], branch=branch)
        if isinstance(seen, FolderView):
            if view_range is not None:
                raise TextEditorInputError(
                    "view_range is for files, not folders", hint="view the folder without it"
                )
            text = folder_text(seen)
        else:
            text = file_text(seen, view_range)
    except BinaryFileError as exc:
        return f"Error: {exc.message}; a view shows UTF-8 text files only\n", True
    except ApplyOnceError as exc:
        return f"Error: {exc.one_line()}\n", True
    if max_characters is not None and len(text) > max_characters:
        text = (
            text[:max_characters]
            + f"\n<response clipped at {max_characters} characters: view a view_range to see "
            "the rest>\n"
        )
    return text, False


def file_text(seen: FileView, view_range: Any = None) -> str:
    """``cat -n`` of the file (of the lines of ``view_range``: ``[start, end]``, from 1, with
    ``end`` -1 for the last line; an ``end`` past the last line stops there).

    Raises:
        BinaryFileError: the file is not UTF-8 text.
        TextEditorInputError: a ``view_range`` that is not two line numbers of the file.
    """
    lines = decode_text(seen.data, path=seen.path).bodies
    first, last = 1, len(lines)
    if view_range is not None:
        first, last = _range(view_range, len(lines))
    header = f"Here's the result of running `cat -n` on {seen.path}"
    if not lines:
        return f"{header} (an empty file):\n"
    body = "".join(f"{n:6}\t{lines[n - 1]}\n" for n in range(first, last + 1))
    return f"{header}:\n{body}"


def _range(view_range: Any, count: int) -> tuple[int, int]:
    if (
        not isinstance(view_range, list | tuple)
        or len(view_range) != 2
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in view_range)
    ):
        raise TextEditorInputError(
            f"view_range must be two line numbers [start, end], not {str(view_range)[:60]}",
            hint="e.g. [1, 40], or [41, -1] for line 41 to the end",
        )
    start, end = view_range
    if not 1 <= start <= max(count, 1):
        raise TextEditorInputError(
            f"view_range {[start, end]}: the file has {count} lines; start at 1 to {count}",
            hint="view the file without view_range to see all of it",
        )
    if end == -1 or end > count:
        end = count
    if end < start:
        raise TextEditorInputError(
            f"view_range {[start, end]}: the end comes before the start",
            hint="give [start, end] with end >= start, or -1 for the last line",
        )
    return start, end


def folder_text(seen: FolderView) -> str:
    """A folder's listing, one path a line (folders end with ``/``, links with ``@``)."""
    shown = seen.path or "."
    header = f"Here are the files and directories up to 2 levels deep in {shown}, excluding .git:\n"
    lines = "".join(f"{entry}\n" for entry in seen.entries) or "(empty)\n"
    more = f"… and {seen.left_out} more entries\n" if seen.left_out else ""
    return header + lines + more


__all__ = [
    "COMMANDS",
    "TEXT_EDITOR_NAME",
    "TEXT_EDITOR_TYPE",
    "TextEditorInputError",
    "UndoEditError",
    "command_input",
    "edit_document",
    "edit_result",
    "file_text",
    "folder_text",
    "last_call_on",
    "undo_text",
    "view_result",
]
