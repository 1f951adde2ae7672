"""What the repository's commit hooks decide (pure: their results in, a message or an error out).

``git commit`` runs ``pre-commit``, then ``prepare-commit-msg`` and ``commit-msg`` on the message
file; applyonce runs them on the call's staged tree (:mod:`applyonce.flow.call.hooks`). A hook that
exits non-zero refuses the commit (:class:`HookFailedError`); a ``pre-commit`` hook that changed
files — a formatter, a whitespace fixer — refuses it too, as the ``pre-commit`` framework does, with
the diff it wanted (:class:`HookModifiedFilesError`): applyonce commits the patch it was given or
nothing. The message hooks may edit the message; the call's trailer block (``Call-Id`` … to the
end) stays last and intact (:func:`message_after_hooks`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from applyonce.core.message import MESSAGE_LIMIT, RESERVED_TRAILERS
from applyonce.core.receipt import CheckRecord
from applyonce.core.trailers import parse_trailers
from applyonce.errors import ApplyOnceError

DIFF_SHOWN = 8000  # characters of a hook's wanted diff kept in the error (and shown)
_TRAILER_TOKEN = re.compile(r"^([A-Za-z0-9-]+)\s*:")


class HookFailedError(ApplyOnceError):
    """A repository hook refused the commit (non-zero exit or timeout): a rejection (exit 1),
    as a failed check is; the same patch is judged again on a new branch tip."""

    kind = "hook-failed"
    default_hint = (
        "change the patch so the repository's hook passes (its output is below), and send it "
        "as a new attempt"
    )
    # The records of every check and hook that ran, the failed one last.
    checks: Sequence[CheckRecord] = ()


class HookModifiedFilesError(ApplyOnceError):
    """The ``pre-commit`` hook changed files of the staged tree instead of passing it."""

    kind = "hook-modified-files"
    default_hint = (
        "send a patch that already makes the hook's changes (its diff is below) as a new attempt"
    )
    checks: Sequence[CheckRecord] = ()


def call_block(message: str) -> list[str]:
    """The lines of the call's own trailer block in a message applyonce built: from the
    ``Call-Id`` line to the end."""
    lines = message.rstrip("\n").split("\n")
    start = max(i for i, line in enumerate(lines) if line.startswith("Call-Id: "))
    return lines[start:]


def cleanup(message: str) -> str:
    """``message`` as ``git commit -m`` cleans it (``commit.cleanup=whitespace``): trailing
    whitespace of each line removed, runs of blank lines made one, leading and trailing blank
    lines removed, a final newline; empty stays empty."""
    out: list[str] = []
    for line in message.split("\n"):
        line = line.rstrip()
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n" if out else ""


def message_after_hooks(built: str, edited: bytes, *, call_id: str) -> str:
    """The commit message once the message hooks edited ``built`` into ``edited``: cleaned as
    git cleans it, the call's trailer block last and intact — left where it is if the hooks kept
    it at the end, else removed from wherever they moved it (with any line of the last paragraph
    using a token applyonce reads) and appended again, in the last paragraph when that is a
    trailer block (a hook's ``Change-Id:``, ``Signed-off-by:``), else as a paragraph of its own.

    Raises:
        HookFailedError: the hooks left no message, a NUL byte, over 64 KiB, or a message whose
            trailers git would not read (a scissors line before them).
    """
    if b"\0" in edited or len(edited) > MESSAGE_LIMIT * 2:
        raise HookFailedError(
            "the commit-msg or prepare-commit-msg hook wrote a message with a NUL byte or over "
            "128 KiB",
            hint="fix the repository's hook, or pass --no-verify",
            hook="commit-msg",
        )
    block = call_block(built)
    text = cleanup(edited.decode("utf-8", "replace").replace("\r\n", "\n"))
    lines = text.rstrip("\n").split("\n") if text else []
    if lines[-len(block) :] != block:
        lines = [line for line in lines if line not in block]
        lines = cleanup("\n".join(lines)).rstrip("\n").split("\n") if lines else []
        cut = _last_paragraph(lines)
        tail = [line for line in lines[cut:] if not _reserved(line)]
        lines = lines[:cut] + tail
        body = cleanup("\n".join(lines))
        if not body.strip():
            raise HookFailedError(
                "the commit-msg or prepare-commit-msg hook left the commit message empty",
                hint="fix the repository's hook, or pass --no-verify",
                hook="commit-msg",
            )
        joined = cut > 0 and bool(parse_trailers(body.encode()).pairs) and bool(tail)
        text = body + ("" if joined else "\n") + "\n".join(block) + "\n"
    found = parse_trailers(text.encode())
    if found.get("Call-Id") != call_id or found.pairs[-len(block) :] != _pairs(block):
        raise HookFailedError(
            "the commit-msg or prepare-commit-msg hook wrote a message that hides the call's "
            "trailers from git (a scissors line?)",
            hint="fix the repository's hook, or pass --no-verify",
            hook="commit-msg",
        )
    return text


def _last_paragraph(lines: list[str]) -> int:
    """Where the last paragraph of ``lines`` starts (after the last blank line; 0: the whole
    message is one paragraph, the title)."""
    for i in range(len(lines) - 1, -1, -1):
        if not lines[i].strip():
            return i + 1
    return 0


def _reserved(line: str) -> bool:
    match = _TRAILER_TOKEN.match(line)
    return match is not None and match.group(1).lower() in RESERVED_TRAILERS


def _pairs(block: list[str]) -> list[tuple[str, str]]:
    return [(token.strip(), value.strip()) for token, _, value in (b.partition(":") for b in block)]
