"""What a caller gives a call (:class:`CallOptions`), and what a call gives back
(:class:`CallOutcome`); the plan a caller or an approver is shown (:class:`PlanView`)."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from applyonce.core.checks import check_skip_names
from applyonce.core.hints import PYTHON, Terms, render_text
from applyonce.core.identity import EMPTY_CONTRACT_SHA256
from applyonce.core.message import RESERVED_TRAILERS, check_message, check_trailers
from applyonce.core.plan import TreePlan
from applyonce.core.receipt import Receipt
from applyonce.errors import UsageError
from applyonce.flow.repeat import ReplayNote
from applyonce.git.checkouts import SyncReport
from applyonce.patch import PatchFormat
from applyonce.patch.mail import MailAuthor, read_mail


@dataclass(frozen=True)
class PlanView:
    """What a call would do: shown by ``--dry-run`` and to an approver."""

    call_id: str
    ref: str
    base_commit: str | None
    plan: TreePlan
    # --dirty commit: the touched paths whose uncommitted changes would be committed first.
    snapshot: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        out = [f"commit {path}  [your uncommitted changes, first]" for path in self.snapshot]
        for change in self.plan.changes:
            levels = ",".join(level.label for level in change.match_levels)
            moved = f" (from {change.from_path})" if change.from_path else ""
            out.append(
                f"{change.action:<6} {change.path}{moved}"
                + (f"  [match: {levels}]" if levels else "")
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        """The plan as ``apply --dry-run --json`` prints it."""
        return {
            "call_id": self.call_id,
            "ref": self.ref,
            "base_commit": self.base_commit,
            "changes": [
                {
                    "path": c.path,
                    "action": c.action,
                    "from": c.from_path,
                    "match_levels": [level.label for level in c.match_levels],
                }
                for c in self.plan.changes
            ],
            **({"snapshot": list(self.snapshot)} if self.snapshot else {}),
        }


Approver = Callable[[PlanView], bool]
DirtyMode = Literal["refuse", "commit"]
DIRTY_MODES: tuple[DirtyMode, ...] = ("refuse", "commit")


@dataclass(frozen=True)
class CallOptions:
    """Everything about a call besides its patch text. Frozen: one set of options may serve many
    calls (a server's template), and nothing a call does is written back into it."""

    branch: str | None = None
    contract_sha256: str = EMPTY_CONTRACT_SHA256
    attempt: int = 1
    idempotency_key: str | None = None
    tool_call_id: str | None = None
    format: PatchFormat = "auto"
    # None (unset): git config applyonce.check (multi-valued), else none. Given (even empty),
    # it replaces the config's.
    checks: Sequence[str] | None = None
    check_timeout: float = 300.0
    # Built-in checks not to run ("syntax", "markers"). Like ``checks``, not part of the call's
    # identity (docs/design.md §3: a call is its patch); the receipt lists each one as skipped.
    # None: git config applyonce.skipCheck.
    skip_checks: Sequence[str] | None = None
    # Globs of paths that need approval. None: git config applyonce.protect.
    protect: Sequence[str] | None = None
    approve: Approver | None = None
    require_approval: bool = False
    # How long this call's claim holds without renewal (None: git config applyonce.leaseSeconds,
    # else 30 s); not part of its identity.
    lease_seconds: float | None = None
    # Told about a --check still running, about once a second: (its command, seconds so far).
    # For a terminal's elapsed line; not part of the call's identity.
    check_progress: Callable[[str, float], None] | None = None
    # A touched path with uncommitted changes: "refuse" it (exit 4), or "commit" it first, in a
    # snapshot commit under the call's (see flow.dirty). None: git config applyonce.dirty, else
    # "refuse". Like ``checks``, not part of the call's identity.
    dirty: DirtyMode | None = None
    # The commit's wording (``--message``: subject, optional body; ``--trailer``: the caller's
    # trailers, before applyonce's). Presentation, not identity: a repeat returns the commit the
    # call made first, worded as it was then (core/message.py).
    message: str | None = None
    trailers: Sequence[tuple[str, str]] = ()
    # The commit's author: ``"Name <mail>"`` (``--author``: a bot author beside the human
    # committer) or a ``git format-patch`` mail's From: and Date: (see with_mail); None: git's
    # author for the repository. Presentation too, not identity.
    author: MailAuthor | str | None = None
    # Commit policy (docs/design.md §2), none of it part of the call's identity. ``sign``: sign
    # the commit as ``git commit -S`` (True, ``--sign``), not at all (False, ``--no-sign``), or
    # as git config commit.gpgSign says (None). ``signoff``: a DCO ``Signed-off-by:`` of the
    # committer (None: git config applyonce.signoff). ``co_authors``: ``"Name <mail>"`` each, a
    # ``Co-authored-by:`` trailer each.
    sign: bool | None = None
    signoff: bool | None = None
    co_authors: Sequence[str] = ()
    # Skip the repository's pre-commit and commit-msg hooks, as 'git commit --no-verify' does
    # (prepare-commit-msg still runs). Not part of the call's identity; the receipt records it.
    no_verify: bool = False

    def __post_init__(self) -> None:
        if not self.check_timeout > 0:
            raise UsageError(f"--check-timeout must be more than 0, not {self.check_timeout:g}")
        object.__setattr__(self, "message", check_message(self.message))
        object.__setattr__(self, "trailers", check_trailers(self.trailers))
        if self.skip_checks is not None:
            skip = (self.skip_checks,) if isinstance(self.skip_checks, str) else self.skip_checks
            object.__setattr__(self, "skip_checks", check_skip_names(skip))
        for name in ("checks", "protect"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))
        if isinstance(self.author, str):
            name, email = person(self.author, "--author")
            object.__setattr__(self, "author", MailAuthor(name, email, None, 0))
        co_authors = (self.co_authors,) if isinstance(self.co_authors, str) else self.co_authors
        object.__setattr__(
            self,
            "co_authors",
            tuple("{} <{}>".format(*person(text, "--co-author")) for text in co_authors),
        )
        if self.dirty is not None and self.dirty not in DIRTY_MODES:
            raise UsageError(
                f"unknown --dirty {self.dirty!r}", hint="use " + " or ".join(DIRTY_MODES)
            )


_PERSON = re.compile(r"([^<>\n\r\0]*[^<>\s])\s*<([^<>\s]+)>")


def person(text: str, option: str) -> tuple[str, str]:
    """``Name <mail>`` as ``(name, mail)``, as ``git commit --author`` takes it.

    Raises:
        UsageError: not a name then an address in angle brackets.
    """
    found = _PERSON.fullmatch(text.strip())
    if found is None:
        raise UsageError(
            f"{option} {text[:60]!r} is not 'Name <mail>'",
            hint=f"write it as {option} 'Name <mail@example.com>'",
        )
    return found[1].strip(), found[2]


def with_mail(options: CallOptions, patch_text: str) -> CallOptions:
    """``options`` worded as the ``git format-patch`` mail ``patch_text`` is, as ``git am``
    commits it (:mod:`applyonce.patch.mail`): its subject and body as the message and its last
    paragraph's trailers before applyonce's, unless the caller gave a message; its From: and
    Date: as the author. Anything else: ``options`` as they are.

    Raises:
        MailSeriesError: the text holds several mails (one call is one commit).
    """
    if options.format not in ("auto", "unified"):
        return options
    mail = read_mail(patch_text, RESERVED_TRAILERS)
    if mail is None:
        return options
    if options.message is None:
        options = replace(
            options, message=mail.message, trailers=(*mail.trailers, *options.trailers)
        )
    return options if options.author is not None else replace(options, author=mail.author)


@dataclass(frozen=True)
class CheckoutBehind:
    """A checkout that does not show its branch's tip after a call (the call's commit, or,
    with ``paths``, the branch's version of them): where, why, and the command that brings it
    in line."""

    worktree: str | None
    branch: str
    paths: tuple[str, ...]
    reason: str
    command: str

    def line(self) -> str:
        """One line of the text the model and the user read."""
        where = f"the checkout at {self.worktree}" if self.worktree else "the checkout"
        if self.paths:
            shown = ", ".join(self.paths[:5]) + (" …" if len(self.paths) > 5 else "")
            what = f"{self.branch}'s version of {shown}"
        else:
            what = f"this commit of {self.branch}"
        return (
            f"note: {where} does not show {what} ({self.reason}); run '{self.command}' to"
            " bring it in line"
        )

    def to_dict(self) -> dict[str, Any]:
        """The note as ``apply --json`` and the MCP result carry it."""
        return {
            "worktree": self.worktree,
            "branch": self.branch,
            "paths": list(self.paths),
            "reason": self.reason,
            "command": self.command,
        }


@dataclass(frozen=True)
class CallOutcome:
    """What one call gives back: its receipt, what the checkout sync did, whether the call
    had finished before (``replayed``: nothing ran, the stored result was returned; ``replay``
    then says what the repeat found: the commit still on the branch, later commits that changed
    its files, or that a stored rejection was returned), and the checkouts that do not show the
    branch's tip after it (``behind``)."""

    receipt: Receipt
    sync_reports: tuple[SyncReport, ...] = field(default=())
    replayed: bool = False
    replay: ReplayNote | None = None
    behind: tuple[CheckoutBehind, ...] = ()

    @property
    def replay_note(self) -> str | None:
        """The replay as one line (the CLI's stderr line), or None for a call that ran."""
        return self.replay.line() if self.replay is not None else None

    def render(self, terms: Terms = PYTHON) -> str:
        """The text to give a model for this outcome: a replay says so first (that nothing ran
        now, what later commits did to the call's change, what to do, in ``terms``), then the
        stored output, its hints in ``terms``."""
        head = self.replay.text(terms) if self.replay is not None else ""
        return head + render_text(self.receipt.output, terms)

    @property
    def text(self) -> str:
        """:meth:`render` in the Python API's terms (``CallOptions(attempt=2)``)."""
        return self.render()


def contract_digest(path: str | os.PathLike[str]) -> str:
    """``--contract FILE``: the sha256 of the file's bytes."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as exc:
        raise UsageError(f"cannot read contract {path}: {exc.strerror}") from None
