"""Parser for text-editor commands as JSON (``--format edit-json``).

Grammar (JSON; the field names are those of Anthropic's text editor tool)::

    document  := [command, …]  |  {"commands": [command, …]}  |  command
    command   := {"command": "create",      "path": str, "file_text": str}
               | {"command": "str_replace", "path": str, "old_str": str, "new_str": str?}
               | {"command": "insert",      "path": str, "insert_line": int, "insert_text": str}
               | {"command": "delete",      "path": str}

* ``str_replace``: ``old_str`` (not empty) must occur exactly once in the file, as a substring;
  ``new_str`` defaults to ``""`` (the text is removed).
* ``insert``: ``insert_line`` is the line the text goes after (0: the top of the file);
  ``new_str`` is accepted for ``insert_text``, as some versions of the tool name it.
* ``create`` makes a file that is not there exactly ``file_text``; onto a file that is there it
  refuses the document (``already-exists``), as Anthropic's reference tool refuses it (and as
  applyonce refuses Codex's ``Add File`` there): a file is changed by ``str_replace``/``insert``,
  or replaced by ``delete`` then ``create``. ``delete`` removes the file.
* The whole document is **one call**: every command applies, or none does.
* Commands on one path apply **in order**, each to the result of the one before: they become one
  :class:`~applyonce.patch.model.EditFile` operation, at the place of the path's first command.
  A path spelled differently (``./a.py``, ``a//a.py``) is the same path; files do not depend on
  each other, so grouping never changes the outcome.
* A path's only command, when it is ``create`` or ``delete``, becomes an ``AddFile`` or
  ``DeleteFile``: the same operation, and the same call identity, as Codex's ``Add File`` or
  ``Delete File`` of that file.

Every refusal is one line naming the command by its index in the list (``commands[2]``): invalid
JSON, a document of another shape, an unknown command (``view`` and ``undo_edit`` are not edits),
a missing, unknown or mistyped field. Whether ``old_str`` occurs once and ``insert_line`` is in
range depends on the file: ``edit.py`` decides that when the call is planned.

The parser is pure: it never reads files and never decides whether a path is safe.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from applyonce.patch.codex import PatchSyntaxError
from applyonce.patch.model import (
    AddFile,
    CreateCommand,
    DeleteCommand,
    DeleteFile,
    EditCommand,
    EditFile,
    FileOp,
    InsertCommand,
    Patch,
    StrReplaceCommand,
    has_raw_bytes,
)


class _Input(BaseModel):
    # Built when an edit-json document is first parsed, not when applyonce starts: a call in
    # another format never uses these models.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    path: StrictStr = Field(min_length=1)


class _Create(_Input):
    command: Literal["create"]
    file_text: StrictStr


class _StrReplace(_Input):
    command: Literal["str_replace"]
    old_str: StrictStr = Field(min_length=1)
    new_str: StrictStr = ""


class _Insert(_Input):
    command: Literal["insert"]
    # At most 2**53-1: the largest integer the identity's JCS form (RFC 8785) can write.
    insert_line: StrictInt = Field(ge=0, le=2**53 - 1)
    insert_text: StrictStr | None = Field(default=None, min_length=1)
    new_str: StrictStr | None = Field(default=None, min_length=1)


class _Delete(_Input):
    command: Literal["delete"]


_SCHEMAS: dict[str, type[_Input]] = {
    "create": _Create,
    "str_replace": _StrReplace,
    "insert": _Insert,
    "delete": _Delete,
}


def looks_like_edit_json(text: str) -> bool:
    """True when ``text`` starts (after whitespace) with a JSON array or object."""
    return text.lstrip()[:1] in ("[", "{")


def parse_edit_json(text: str) -> Patch:
    """Parse text-editor commands (JSON) into a :class:`Patch`.

    Raises:
        PatchSyntaxError: one line naming the command index of the first problem.
    """
    if has_raw_bytes(text):
        raise PatchSyntaxError(
            "the commands are not UTF-8 text", hint="send the JSON commands as UTF-8 text"
        )
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise PatchSyntaxError(
            f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            hint="send a JSON list of text-editor commands",
        ) from None
    raw_commands = _command_list(document)
    groups: dict[str, tuple[str, list[EditCommand]]] = {}
    for index, raw in enumerate(raw_commands):
        path, command = _command(index, raw)
        key = _path_key(path)
        groups.setdefault(key, (path, []))[1].append(command)
    operations: list[FileOp] = []
    for path, commands in groups.values():
        (only, *rest) = commands
        if not rest and isinstance(only, CreateCommand):
            operations.append(AddFile(path=path, content=only.file_text, refuse_existing=True))
        elif not rest and isinstance(only, DeleteCommand):
            operations.append(DeleteFile(path=path))
        else:
            operations.append(EditFile(path=path, commands=tuple(commands)))
    return Patch(operations=tuple(operations))


def _command_list(document: Any) -> list[Any]:
    if isinstance(document, dict) and "command" in document:
        return [document]
    if isinstance(document, dict):
        if set(document) != {"commands"}:
            keys = ", ".join(repr(k) for k in list(document)[:5])
            raise PatchSyntaxError(
                f"a JSON object of edits needs one key, 'commands' (found {keys or 'none'})",
                hint='send [{"command": …}, …] or {"commands": [{"command": …}, …]}',
            )
        document = document["commands"]
    if not isinstance(document, list):
        raise PatchSyntaxError(
            f"the edit commands must be a JSON list, not {_json_type(document)}",
            hint='send [{"command": …}, …] or {"commands": [{"command": …}, …]}',
        )
    if not document:
        raise PatchSyntaxError("the list of edit commands is empty", hint="send at least one")
    return document


def _command(index: int, raw: Any) -> tuple[str, EditCommand]:
    where = f"commands[{index}]"
    if not isinstance(raw, dict):
        raise PatchSyntaxError(
            f"{where} is {_json_type(raw)}, not a JSON object",
            command=index,
            hint='write each command as {"command": …, "path": …, …}',
        )
    name = raw.get("command")
    if name is None:
        raise PatchSyntaxError(f"{where} has no 'command' field", command=index)
    schema = _SCHEMAS.get(name) if isinstance(name, str) else None
    if schema is None:
        raise PatchSyntaxError(
            f"{where}: unknown command {str(name)[:40]!r}",
            command=index,
            hint="use create, str_replace, insert or delete",
        )
    try:
        parsed = schema.model_validate(raw)
    except ValidationError as exc:
        raise PatchSyntaxError(f"{where} ({name}): {_first_problem(exc)}", command=index) from None
    if isinstance(parsed, _Create):
        return parsed.path, CreateCommand(file_text=parsed.file_text, index=index)
    if isinstance(parsed, _StrReplace):
        return parsed.path, StrReplaceCommand(
            old_str=parsed.old_str, new_str=parsed.new_str, index=index
        )
    if isinstance(parsed, _Insert):
        if (parsed.insert_text is None) == (parsed.new_str is None):
            raise PatchSyntaxError(
                f"{where} (insert): give the text to insert as 'insert_text' (or 'new_str'), once",
                command=index,
            )
        text = parsed.insert_text if parsed.insert_text is not None else parsed.new_str
        assert text is not None
        return parsed.path, InsertCommand(
            insert_line=parsed.insert_line, insert_text=text, index=index
        )
    return parsed.path, DeleteCommand(index=index)


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"]) or "the command"
    if error["type"] == "missing":
        return f"missing field {field!r}"
    if error["type"] == "extra_forbidden":
        return f"unknown field {field!r}"
    return f"field {field!r}: {error['msg'].lower()}"


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return "a number"


def _path_key(path: str) -> str:
    """Spellings of one path that ``paths.normalise_path`` makes equal (``./a``, ``a//b``).

    ``..`` is not resolved: a path with it stays apart, and is refused when paths are checked."""
    path = path.strip()
    root = "/" if path.startswith("/") else ""
    return root + "/".join(part for part in path.split("/") if part not in ("", "."))
