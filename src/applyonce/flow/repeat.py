"""A repeat of a call that already finished (docs/design.md §4): whether its stored rejection still
holds,
and what the caller is told beside its stored result.

**Which rejections are judged again.** A rejection is the call's answer *for the branch as it
was*: when it depends on the repository and the branch tip has moved since, a repeat runs the call
again (same call ID, a new execution; it may commit). On the tip it was rejected at, a repeat
returns the stored rejection. :data:`REEVALUATED_KINDS` is the one list of such rejections; every
other rejection depends on the patch (or a person) alone and is returned as stored, for ever:

* judged again: ``hunk-mismatch`` and ``ambiguous-context`` (the file's lines decide),
  ``plan`` (no such file, a directory there, the patch changes nothing: the tree decides; the
  rare plan refusals of the patch alone, two operations on one path, are judged again to the
  same answer), ``check-failed`` (built-in or ``--check``: the whole new tree is checked, and the
  built-in syntax check forgives what the base already failed), ``hook-failed`` and
  ``hook-modified-files`` (the repository's commit hooks judge the whole tree), ``base-moved``,
  ``binary-file`` (a patch edits a file that is binary *on the branch*: a later commit may make
  it text again);
* stored for ever: a patch refused as such (``unsafe-path``, ``git-metadata``, the size caps
  ``limit-exceeded``), and an approval *denied* (``approval``): a person said no to
  this change, and a moved tip must not ask them again and again; a new attempt (``--attempt``)
  asks anew.

Not in either list because they are never pinned: a rejection with ``retryable: true`` runs again
on any repeat, on the same tip too. That is how a dirty path (``dirty-path``: the user's checkout
decides, which is not part of the tip), an interrupted call, and a missing approver are stored.

**What a repeat says** (:class:`ReplayNote`): the commit and whether the branch still has it, and
which later commits changed the call's files (:func:`applyonce.git.history.later_changes`,
bounded), and the one that reverted it (:func:`applyonce.git.history.reverted_by`); for a
rejection, that the stored one is returned. Every adapter's text says it first
(:func:`applyonce.core.hints.replay_text`, in the adapter's terms), then gives the stored output,
byte for byte; the CLI also prints it as one line on stderr.
"""

from __future__ import annotations

from dataclasses import dataclass

from applyonce.core.hints import CLI, Terms, replay_lines, replay_text
from applyonce.core.receipt import Receipt, touched_paths_of
from applyonce.flow.context import Context
from applyonce.git.history import LaterCommit, later_changes, reverted_by

# The rejections a repeat judges again once the branch tip moved (see the module docstring).
REEVALUATED_KINDS: frozenset[str] = frozenset(
    {
        "hunk-mismatch",
        "ambiguous-context",
        "plan",
        "check-failed",
        "hook-failed",
        "hook-modified-files",
        "base-moved",
        "binary-file",
    }
)
_SHORT = 12
_PATHS_SHOWN = 3


def reevaluates(receipt: Receipt, tip: str | None) -> bool:
    """Whether a repeat of the call with this stored final rejection runs again on ``tip``."""
    kind = (receipt.error or {}).get("kind")
    return (
        receipt.status == "rejected"
        and not receipt.retryable
        and kind in REEVALUATED_KINDS
        and receipt.base_commit != tip
    )


@dataclass(frozen=True)
class ReplayNote:
    """What a repeat of a finished call says beside its stored result (the CLI's stderr line;
    facts an MCP server or harness may put in a structured result)."""

    call_id: str
    status: str
    ref: str
    commit: str | None = None
    on_branch: bool = True
    later: tuple[LaterCommit, ...] = ()
    more_later: bool = False  # more commits may have changed the files than ``later`` lists
    rejected_at: str | None = None  # a rejection: the tip it was rejected at
    error_kind: str | None = None
    reverted_by: str | None = None  # the later commit that reverted the call's change
    reverted_how: str | None = None  # applyonce (Reverts-Call-Id), git (git revert) or hand
    attempt: int = 1  # the call's attempt (the next one makes the change again)

    def lines(self, terms: Terms = CLI) -> list[str]:
        """The note as the model reads it, first in the result's text (see
        :func:`applyonce.core.hints.replay_lines`), in an adapter's terms."""
        return replay_lines(self, terms)

    def text(self, terms: Terms = CLI) -> str:
        """:meth:`lines` as text ending in ``its stored result:`` (the stored output follows)."""
        return replay_text(self, terms)

    def line(self) -> str:
        """The note as one line (no newline)."""
        head = f"replayed call {self.call_id[:_SHORT]}"
        if self.status != "committed":
            why = (
                f"{self.ref} is still at {str(self.rejected_at)[:_SHORT]}, where it was rejected"
                if self.error_kind in REEVALUATED_KINDS
                else f"{self.error_kind}: the patch itself was refused, whatever the branch holds"
            )
            return f"{head}: the stored rejection is returned ({why})"
        commit = str(self.commit)[:_SHORT]
        if not self.on_branch:
            return f"{head}: its commit {commit} is no longer on {self.ref}"
        text = f"{head}: its commit {commit} is on {self.ref}"
        if self.later:
            shown = [
                f"{c.commit[:_SHORT]} ({', '.join(c.paths[:_PATHS_SHOWN])}"
                + (", …" if len(c.paths) > _PATHS_SHOWN else "")
                + ")"
                for c in self.later
            ]
            text += "; later commits changed its files: " + ", ".join(shown)
            text += ", …" if self.more_later else ""
        return text


def replay_note(ctx: Context, receipt: Receipt) -> ReplayNote:
    """The note of a repeat that returns ``receipt`` (terminal) as stored."""
    if receipt.status != "committed" or receipt.commit is None:
        return ReplayNote(
            receipt.call_id,
            receipt.status,
            receipt.ref,
            rejected_at=receipt.base_commit,
            error_kind=(receipt.error or {}).get("kind"),
            attempt=receipt.attempt,
        )
    tip = ctx.publisher.tip(receipt.ref)
    if tip is None or not ctx.publisher.is_on(receipt.ref, receipt.commit):
        return ReplayNote(
            receipt.call_id,
            receipt.status,
            receipt.ref,
            receipt.commit,
            on_branch=False,
            attempt=receipt.attempt,
        )
    later = later_changes(ctx.store, tip, receipt.commit, touched_paths_of(receipt))
    # No later commit changed its paths: nothing can have reverted it.
    reverted = (
        reverted_by(ctx.store, tip, receipt.commit, receipt.call_id) if later.commits else None
    )
    return ReplayNote(
        receipt.call_id,
        receipt.status,
        receipt.ref,
        receipt.commit,
        later=later.commits,
        more_later=not later.complete,
        reverted_by=reverted[0] if reverted else None,
        reverted_how=reverted[1] if reverted else None,
        attempt=receipt.attempt,
    )
