"""The words an adapter tells a model or a person: hints in the adapter's own terms, and the note of
a replay. Pure.

**One source of hint text.** Hints are written once, naming the CLI's options (``pass --dirty
commit``); :func:`render_hint` renders them in an adapter's :class:`Terms`: the CLI keeps its
flags; the MCP server and the tool-call adapter name their tool arguments (``attempt: 2``) and,
for an option the model cannot pass, the server option that enables it with its git config key
(``git config applyonce.dirty commit``), never a ``--`` flag it has no way to pass. :data:`OPTIONS`
is the one table of those terms.

**The replay note.** A call repeated after it finished runs nothing and returns its stored
result; :func:`replay_text` says so *first*, in the text the model reads, and says what later
commits did to the call's change (reverted it: by ``applyonce revert`` or ``git revert``;
changed its files), with what to do (a new attempt) in the adapter's terms.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

_SHORT = 12
_PATHS_SHOWN = 3


@dataclass(frozen=True)
class Option:
    """One CLI option a hint may name, and what it is elsewhere.

    ``argument``: the tool argument that carries it in MCP and tool calls (None: the model cannot
    pass it). ``config``: the git config key that sets it for a server or harness (None: only the
    command that starts the server takes it, as ``name``).
    """

    name: str
    argument: str | None = None
    config: str | None = None


# The options hints name (docs/reference/cli.md): how each is said outside the CLI.
OPTIONS: dict[str, Option] = {
    opt.name: opt
    for opt in (
        Option("attempt", argument="attempt"),
        # Lanes (docs/design.md §12): apply_patch's lane, land_lane's lane, all and onto.
        Option("lane", argument="lane"),
        Option("all", argument="all"),
        Option("onto", argument="onto"),
        Option("dirty", config="applyonce.dirty"),
        Option("check", config="applyonce.check"),
        Option("protect", config="applyonce.protect"),
        Option("lease-seconds", config="applyonce.leaseSeconds"),
        Option("remote", config="applyonce.remote"),
        Option("confirm"),
        Option("branch"),
        Option("state-dir"),
        Option("repo"),
        Option("contract"),
        Option("contract-sha"),
        Option("format"),
        Option("idempotency-key"),
        Option("message"),
        Option("trailer"),
        # Commit policy (docs/design.md §2): server options, or the user's git config.
        Option("sign", config="commit.gpgSign"),
        Option("no-sign"),
        Option("signoff", config="applyonce.signoff"),
        Option("no-verify"),
        Option("author"),
        Option("co-author"),
    )
}


@dataclass(frozen=True)
class Terms:
    """How an adapter names what a caller can do.

    ``kind``: ``cli`` (flags), ``tool`` (MCP and tool calls: arguments, server options),
    ``editor`` (the text editor tool: it has no attempt argument; a new tool call with the same
    edit runs anew once later commits changed its file) or ``python`` (keyword arguments of
    :class:`~applyonce.CallOptions`).
    """

    kind: str

    def attempt(self, n: int) -> str:
        """What to do to run the same change again as attempt ``n``."""
        if self.kind == "cli":
            return f"pass --attempt {n}"
        if self.kind == "python":
            return f"call again with CallOptions(attempt={n})"
        if self.kind == "editor":
            return f"send the same edit in a new tool call (it runs as attempt {n})"
        return f"send it again with attempt: {n}"

    def option(self, name: str, value: str | None, *, verb: bool = False) -> str:
        """The option ``--name [value]`` in these terms. ``verb``: the hint said ``pass`` or
        ``use`` before it, and the words say what to do instead."""
        shown = f" {value}" if value else ""
        if self.kind == "cli":
            return ("pass " if verb else "") + f"--{name}{shown}"
        opt = OPTIONS.get(name, Option(name))
        if self.kind == "python":
            field = name.replace("-", "_")
            plain = value is None or value.isupper() or value.isdigit()
            told = field if value is None else f"{field}={value if plain else repr(value)}"
            return ("pass " if verb else "") + told
        if opt.argument is not None:
            told = f"{opt.argument}: {value}" if value else f"the {opt.argument} argument"
            return ("pass " if verb else "") + told
        if opt.config is not None:
            where = f"'git config {opt.config}{shown}' in the repository, then restart the server"
            if verb:
                return f"set the server's {name} option ({where})"
            return f"the server's {name} option ({where})"
        if verb:
            return f"start the server with its {name} option" + (
                f" set to {value}" if value else ""
            )
        return f"the server's {name} option (set where the server is started)"


CLI = Terms("cli")
MCP = Terms("tool")
TOOL_CALLS = Terms("tool")
TEXT_EDITOR = Terms("editor")
PYTHON = Terms("python")

# An option in a hint: '--name', then a value when one follows (an upper-case placeholder, a word,
# or a quoted string). Only the names in OPTIONS are rewritten ('git config --add' is git's).
_FLAG = re.compile(
    r"(?:\b(pass an existing|pass|use) )?(?<![\w-])--([a-z][a-z-]*)"
    r"(?: ('[^']*'|[A-Z_]+|[a-z0-9][\w.-]*))?"
)


def render_hint(hint: str, terms: Terms) -> str:
    """``hint`` (written with CLI flags) in ``terms``: each option of :data:`OPTIONS` it names is
    said as the adapter says it; the rest of the text is kept."""
    if terms.kind == "cli" or "--" not in hint:
        return hint

    def one(match: re.Match[str]) -> str:
        verb, name, value = match.group(1), match.group(2), match.group(3)
        if name not in OPTIONS:
            return match.group(0)
        if value is not None and value.startswith("'"):
            value = value.strip("'")
        if verb == "pass an existing":
            told = terms.option(name, value)
            if terms.kind in ("tool", "editor") and OPTIONS[name].argument is None:
                return f"start the server with its {name} option naming an existing {name}"
            return f"pass an existing {told}"
        return terms.option(name, value, verb=verb is not None)

    return _FLAG.sub(one, hint)


def render_text(text: str, terms: Terms) -> str:
    """A result's text with its ``error:`` and ``hint:`` lines rendered in ``terms`` (the rest,
    repair data holding the file's own lines, kept)."""
    if terms.kind == "cli" or "--" not in text:
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("error: ", "Error: ", "hint: ")):
            lines[i] = render_hint(line, terms)
    return "\n".join(lines)


class Later(Protocol):
    """A later commit that changed some of a call's paths."""

    @property
    def commit(self) -> str: ...

    @property
    def paths(self) -> tuple[str, ...]: ...


class ReplayFacts(Protocol):
    """What a repeat found (:class:`applyonce.flow.repeat.ReplayNote`)."""

    @property
    def call_id(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def ref(self) -> str: ...

    @property
    def commit(self) -> str | None: ...

    @property
    def on_branch(self) -> bool: ...

    @property
    def later(self) -> Sequence[Later]: ...

    @property
    def more_later(self) -> bool: ...

    @property
    def rejected_at(self) -> str | None: ...

    @property
    def error_kind(self) -> str | None: ...

    @property
    def reverted_by(self) -> str | None: ...

    @property
    def reverted_how(self) -> str | None: ...

    @property
    def attempt(self) -> int: ...


def _paths(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:_PATHS_SHOWN])
    return shown + (", …" if len(paths) > _PATHS_SHOWN else "")


_HOW = {"applyonce": "applyonce revert", "git": "git revert", "hand": "an undo by hand"}


def replay_lines(note: ReplayFacts, terms: Terms) -> list[str]:
    """The replay note as lines (no newlines): that the call ran before and nothing ran now, what
    later commits did to its change, and what to do to make the change again."""
    call = note.call_id[:_SHORT]
    branch = note.ref.removeprefix("refs/heads/")
    again = terms.attempt(note.attempt + 1)
    if note.status != "committed" or note.commit is None:
        at = str(note.rejected_at)[:_SHORT] if note.rejected_at else "its tip then"
        lines = [
            f"replayed: this call ({call}) ran before and was rejected"
            + (f" ({note.error_kind})" if note.error_kind else "")
            + "; nothing ran now."
        ]
        if note.error_kind in _REJUDGED:
            lines.append(f"{branch} is still at {at}, where it was rejected.")
        else:
            lines.append("the patch itself was refused, whatever the branch holds.")
        if note.error_kind == "approval":
            lines.append(f"to ask for approval anew, {again}.")
        else:
            lines.append("to make the change, send a corrected patch (a different patch runs).")
        return lines
    commit = note.commit[:_SHORT]
    lines = [
        f"replayed: this call ({call}) ran before and made commit {commit} on {branch}; "
        "nothing ran now."
    ]
    if not note.on_branch:
        lines.append(
            f"gone: commit {commit} is no longer on {branch} (reset or rewritten): the branch "
            "does not hold its change."
        )
        lines.append(f"to make this change again, {again}.")
        return lines
    later = list(note.later)
    if note.reverted_by is not None:
        how = _HOW.get(note.reverted_how or "", "a later commit")
        undone = next((c.paths for c in later if c.commit == note.reverted_by), ())
        held = f": {_paths(undone)} no longer holds its change" if undone else ""
        held = held.replace("holds", "hold") if len(undone) > 1 else held
        revert = note.reverted_by[:_SHORT]
        lines.append(f"reverted: commit {revert} ({how}) reverted it since{held}.")
        later = [c for c in later if c.commit != note.reverted_by]
    if later:
        shown = "; ".join(f"{c.commit[:_SHORT]} ({_paths(c.paths)})" for c in later)
        more = "; and maybe more" if note.more_later else ""
        lines.append(f"changed: later commits changed its files since: {shown}{more}.")
    if note.reverted_by is not None:
        lines.append(f"to make this change again, {again}.")
    elif later:
        lines.append(
            "re-read those files before editing them; "
            f"to make this change again on top of them, {again}."
        )
    return lines


def replay_text(note: ReplayFacts, terms: Terms) -> str:
    """:func:`replay_lines` as text, each line ending in a newline, followed by the line that
    introduces the stored result (``its stored result:``)."""
    return "".join(f"{line}\n" for line in replay_lines(note, terms)) + "its stored result:\n"


# The rejections a repeat judges again once the tip moved (flow.repeat.REEVALUATED_KINDS).
_REJUDGED = frozenset(
    {"hunk-mismatch", "ambiguous-context", "plan", "check-failed", "base-moved", "binary-file"}
)


__all__ = [
    "CLI",
    "MCP",
    "OPTIONS",
    "PYTHON",
    "TEXT_EDITOR",
    "TOOL_CALLS",
    "Option",
    "ReplayFacts",
    "Terms",
    "render_hint",
    "render_text",
    "replay_lines",
    "replay_text",
]
