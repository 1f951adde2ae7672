"""The words the agent reads: every tool result text applyonce gives, built here and only here.

A committed call answers with the Codex summary; a rejected one with one ``error:`` line saying what
happened and what to do; a call whose outcome is unknown says so. ``applyonce replay`` derives the
stored output of a receipt again from its fields with :func:`receipt_text`, so what a call said and
what its record says can never drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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
        return error_text(receipt.error.get("message", ""), receipt.error.get("hint", ""))
    return None
