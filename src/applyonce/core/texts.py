"""The words the agent reads: every tool result text applyonce gives, built here and only here.

A committed call answers with the Codex summary; a rejected one with one ``error:`` line saying what
happened and what to do; a call whose outcome is unknown says so. ``applyonce replay`` derives the
stored output of a receipt again from its fields with :func:`receipt_text`, so what a call said and
what its record says can never drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from applyonce.core.receipt import FileRecord, Receipt

_LETTERS = {"add": "A", "update": "M", "move": "M", "delete": "D"}
SUCCESS_HEADER = "Success. Updated the following files:\n"


def success_text(files: Sequence[FileRecord]) -> str:
    """The Codex-style summary an agent is given on success."""
    return SUCCESS_HEADER + "".join(f"{_LETTERS[f.action]} {f.path}\n" for f in files)


def error_text(message: str, hint: str = "") -> str:
    """A rejection: ``error: what happened; what to do`` on one line."""
    line = f"{message}; {hint}" if hint else message
    return f"error: {' '.join(line.split(chr(10)))}\n"


EXPECTED_SHOWN = 200  # expected lines shown at most (a receipt keeps them all)
_SHOWN_CHARS = 300


def _shown(line: str) -> str:
    line = line.rstrip("\r")
    return line if len(line) <= _SHOWN_CHARS else line[:_SHOWN_CHARS] + "…"


def _numbered(number: str, line: str) -> str:
    """``NN | text`` (no space after the bar for an empty line)."""
    line = _shown(line)
    return f"{number:>2} |" + (f" {line}" if line else "")


def repair_text(error: Mapping[str, Any]) -> str:
    """The lines after a rejection's ``error:`` line that help the model repair its patch: every
    expected line, the nearest region of the file numbered ``NN | text``, and a hint. Empty for
    an error without a ``region`` (and for receipts written before there was one, so their stored
    output is derived again unchanged)."""
    region = error.get("region")
    if not isinstance(region, list):
        return hook_text(error)
    path = str(error.get("path", "the file"))
    expected = [str(line) for line in error.get("expected") or []]
    start = int(error.get("region_start", 1))
    already = error.get("already_applied_at")
    out: list[str] = []
    if expected:
        out.append(f"expected lines ({len(expected)}), not found in {path}:")
        out += [_numbered("", line) for line in expected[:EXPECTED_SHOWN]]
        if len(expected) > EXPECTED_SHOWN:
            out.append(f"  … and {len(expected) - EXPECTED_SHOWN} more")
    stop = start + len(region) - 1
    if not region:
        out.append(f"{path} is empty")
    elif already is not None:
        out.append(f"{path}, lines {start}-{stop}, with the new lines at line {already}:")
    elif error.get("region_equal"):
        out.append(
            f"nearest lines in {path} (lines {start}-{stop}; {error['region_equal']} of "
            f"{len(expected)} expected lines equal, whitespace ignored):"
        )
    else:
        out.append(
            f"none of the expected lines is in {path}, whitespace ignored; lines {start}-{stop}, "
            "where the search began:"
        )
    width = len(str(stop))
    out += [_numbered(f"{n:>{width}}", line) for n, line in enumerate(region, start)]
    if already is not None:
        out.append(
            f"hint: from line {already} on, {path} already reads as the change would leave it; "
            "re-read it and send only what is still missing"
        )
    elif region:
        out.append(
            "hint: copy the lines to change from the numbered lines above, without the 'NN | ' "
            "prefix, then send the change again"
        )
    return "".join(line + "\n" for line in out)


def hook_text(error: Mapping[str, Any]) -> str:
    """The lines after the ``error:`` line of a call a repository hook refused: the diff the
    ``pre-commit`` hook wanted, then the hook's output (empty for any other error)."""
    hook = error.get("hook")
    if not isinstance(hook, str):
        return ""
    out = ""
    diff = error.get("hook_diff")
    if isinstance(diff, str) and diff:
        out += f"the {hook} hook wanted these changes:\n" + diff.rstrip("\n") + "\n"
    output = error.get("hook_output")
    if isinstance(output, str) and output.strip():
        out += f"output of the {hook} hook:\n" + output.rstrip("\n") + "\n"
    return out


def rejection_text(error: Mapping[str, Any]) -> str:
    """What a rejected call says: the ``error:`` line, then any repair data."""
    return error_text(str(error.get("message", "")), str(error.get("hint", ""))) + repair_text(
        error
    )


def unknown_text(call_id: str) -> str:
    """A call whose outcome a person must decide (``applyonce resolve``)."""
    return f"error: call {call_id[:12]}'s outcome is unknown\n"


def landed_text(lines: Iterable[str], *, commit: str, branch: str, reason: str) -> str:
    """A call that landed as ``commit`` but whose receipt or ledger entry could not be written.

    It is a success, not an error: an error would make the model send the change again.
    ``lines`` are the commit's own file lines (``M path``): it is what happened.
    """
    return (
        SUCCESS_HEADER
        + "".join(line + "\n" for line in lines)
        + f"warning: the patch landed as commit {commit[:12]} on {branch}, but applyonce could "
        f"not record it ({reason[:300]}); run 'applyonce recover' to finish the record\n"
    )


def receipt_text(receipt: Receipt) -> str | None:
    """The output the receipt's recorded decision gives (None for a call that is not terminal)."""
    if receipt.status == "committed":
        return success_text(receipt.files)
    if receipt.status == "rejected" and receipt.error is not None:
        return rejection_text(receipt.error)
    return None
