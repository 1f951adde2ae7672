"""A run of text-editor commands on one file costs O(file + commands), not O(file) per command.

The work is counted (how often the file is split into lines, and its dominant line ending
worked out), not timed. ``_reference`` below is the implementation this replaced (each insert
split the whole file again), kept as the specification the results must equal byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from applyonce.patch import (
    BinaryFileError,
    CreateCommand,
    EditCommandError,
    InsertCommand,
    StrReplaceCommand,
    apply_edit_commands,
    edit,
    match,
)
from applyonce.patch.model import EditCommand


def test_many_inserts_split_the_file_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"decode": 0, "dominant": 0}
    decode, dominant = match.decode_text, match._Text.dominant_end

    def counting_decode(*args: object, **kwargs: object) -> match._Text:
        calls["decode"] += 1
        return decode(*args, **kwargs)  # type: ignore[arg-type]

    def counting_dominant(self: match._Text) -> str:
        calls["dominant"] += 1
        return dominant(self)

    monkeypatch.setattr(edit, "decode_text", counting_decode)
    monkeypatch.setattr(match._Text, "dominant_end", counting_dominant)
    data = "".join(f"s{i}\n" for i in range(2_000)).encode()
    cmds = [InsertCommand(insert_line=0, insert_text=f"i{i}") for i in range(300)]
    out = apply_edit_commands(data, cmds, path="big.txt")
    assert out == ("".join(f"i{i}\n" for i in reversed(range(300))).encode() + data)
    assert calls == {"decode": 1, "dominant": 1}


def _reference(text: str, commands: Sequence[EditCommand]) -> bytes:
    """The former implementation: the file as text, every insert splitting it again."""
    for command in commands:
        if isinstance(command, StrReplaceCommand):
            text = edit._str_replace(text, command, "f")
            continue
        assert isinstance(command, InsertCommand)
        lines = edit._Lines.of(text.encode("utf-8"), "f")
        lines.insert(command, "f")
        text = lines.join()
    return text.encode("utf-8")


def _outcome(fn: Callable[..., bytes | None], *args: object) -> bytes | type[Exception] | None:
    try:
        return fn(*args)
    except (EditCommandError, BinaryFileError) as exc:
        return type(exc)


_PIECES = st.sampled_from(["a", "b", "\n", "\r\n", "\r", "\ufeff", "\x00", " "])
_TEXT = st.lists(_PIECES, max_size=8).map("".join)


@st.composite
def _commands(draw: st.DrawFn) -> list[EditCommand]:
    out: list[EditCommand] = []
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            line, text = draw(st.integers(0, 6)), draw(_TEXT.filter(bool))
            out.append(InsertCommand(insert_line=line, insert_text=text))
        else:
            old, new = draw(_TEXT.filter(bool)), draw(_TEXT)
            out.append(StrReplaceCommand(old_str=old, new_str=new))
    return out


@given(_TEXT, _commands())
def test_results_are_those_of_splitting_the_file_for_every_command(
    start: str, cmds: list[EditCommand]
) -> None:
    def run(data: bytes | None, todo: list[EditCommand]) -> bytes | None:
        return apply_edit_commands(data, todo, path="f")

    def reference_from_bytes(data: bytes) -> bytes:
        # The file read as it was: decoded and split once (refusing a binary file) before
        # the first command that reads it.
        return _reference(edit._Lines.of(data, "f").join(), cmds) if cmds else data

    data = start.encode()
    assert _outcome(run, data, cmds) == _outcome(reference_from_bytes, data)
    # After a create: the text is the command's, never read from bytes.
    created: list[EditCommand] = [CreateCommand(file_text=start), *cmds]
    assert _outcome(run, None, created) == _outcome(_reference, start, cmds)
