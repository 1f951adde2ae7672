"""One source of hint text, rendered per adapter; the replay note in each adapter's terms."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from applyonce.core.hints import (
    CLI,
    MCP,
    OPTIONS,
    PYTHON,
    TEXT_EDITOR,
    TOOL_CALLS,
    render_hint,
    render_text,
    replay_lines,
    replay_text,
)
from applyonce.flow.repeat import ReplayNote
from applyonce.git.history import LaterCommit

_FLAG = re.compile(r"(?<![\w-])--(?:" + "|".join(map(re.escape, OPTIONS)) + r")\b")

# Each kind of hint that names an option, as flow and git write it (CLI terms), and what the MCP
# server and tool-call adapter say instead.
HINTS = [
    (
        "commit or stash them, or pass --dirty commit",
        "commit or stash them, or set the server's dirty option ('git config applyonce.dirty "
        "commit' in the repository, then restart the server)",
    ),
    (
        "if the change is still wanted, send it again as a new attempt (--attempt)",
        "if the change is still wanted, send it again as a new attempt (the attempt argument)",
    ),
    ("pass --attempt N", "pass attempt: N"),
    (
        "repeat the call with --confirm (or an approve callback)",
        "repeat the call with the server's confirm option (set where the server is started) "
        "(or an approve callback)",
    ),
    (
        "pass an existing --branch, or create it first with 'git branch NAME'",
        "start the server with its branch option naming an existing branch, or create it first "
        "with 'git branch NAME'",
    ),
    (
        "fix the patch, or use --format auto",
        "fix the patch, or start the server with its format option set to auto",
    ),
    (
        "pass --lease-seconds N, or run 'git config applyonce.leaseSeconds N'",
        "set the server's lease-seconds option ('git config applyonce.leaseSeconds N' in the "
        "repository, then restart the server), or run 'git config applyonce.leaseSeconds N'",
    ),
    (
        "fix the signing key (git config user.signingKey, gpg.format) and repeat the call, or "
        "repeat it with --no-sign (nothing was committed)",
        "fix the signing key (git config user.signingKey, gpg.format) and repeat the call, or "
        "repeat it with the server's no-sign option (set where the server is started) (nothing "
        "was committed)",
    ),
    (
        "fix the repository's hook, or pass --no-verify",
        "fix the repository's hook, or start the server with its no-verify option",
    ),
]


@pytest.mark.parametrize(("cli", "tool"), HINTS)
def test_each_hint_kind_in_cli_and_tool_terms(cli: str, tool: str) -> None:
    assert render_hint(cli, CLI) == cli
    assert render_hint(cli, MCP) == render_hint(cli, TOOL_CALLS) == tool
    assert not _FLAG.search(tool)
    assert not _FLAG.search(render_hint(cli, PYTHON))


def test_git_commands_and_unknown_flags_are_kept() -> None:
    hint = "fix it with 'git config --unset-all applyonce.dirty'; start with 'diff --git a/PATH'"
    assert render_hint(hint, MCP) == hint


def test_render_text_renders_error_and_hint_lines_only() -> None:
    text = (
        "error: src/a.py has uncommitted changes; commit or stash them, or pass --dirty commit\n"
        "  1 | x = '--dirty commit'\n"
        "hint: pass --attempt 2\n"
    )
    rendered = render_text(text, MCP)
    assert rendered.splitlines()[1] == "  1 | x = '--dirty commit'"  # the file's own line
    assert rendered.splitlines()[2] == "hint: pass attempt: 2"
    assert "git config applyonce.dirty commit" in rendered.splitlines()[0]
    assert render_text(text, CLI) == text


CALL = "9e4c209f619f" + "0" * 52
COMMIT = "ae08e4d5558b" + "1" * 28
REVERT = "a525d6a1f8cd" + "2" * 28
LATER = "0b0f2e346302" + "3" * 28


def test_the_replay_note_of_a_revert_in_each_adapters_terms() -> None:
    note = ReplayNote(
        CALL,
        "committed",
        "refs/heads/main",
        COMMIT,
        later=(LaterCommit(REVERT, ("cart.py",)),),
        reverted_by=REVERT,
        reverted_how="applyonce",
    )
    head = [
        "replayed: this call (9e4c209f619f) ran before and made commit ae08e4d5558b on main; "
        "nothing ran now.",
        "reverted: commit a525d6a1f8cd (applyonce revert) reverted it since: cart.py no longer "
        "holds its change.",
    ]
    assert replay_lines(note, CLI) == [*head, "to make this change again, pass --attempt 2."]
    assert replay_lines(note, MCP) == [
        *head,
        "to make this change again, send it again with attempt: 2.",
    ]
    assert replay_lines(note, PYTHON)[-1] == (
        "to make this change again, call again with CallOptions(attempt=2)."
    )
    assert replay_lines(note, TEXT_EDITOR)[-1] == (
        "to make this change again, send the same edit in a new tool call (it runs as attempt 2)."
    )
    assert replay_text(note, CLI).endswith("pass --attempt 2.\nits stored result:\n")
    assert note.text(MCP) == replay_text(note, MCP)


def test_the_replay_note_of_later_changes_gone_commits_and_rejections() -> None:
    changed = ReplayNote(
        CALL,
        "committed",
        "refs/heads/main",
        COMMIT,
        later=(LaterCommit(LATER, ("cart.py", "a.py", "b.py", "c.py")),),
        more_later=True,
        attempt=2,
    )
    assert replay_lines(changed, MCP)[1:] == [
        "changed: later commits changed its files since: 0b0f2e346302 (cart.py, a.py, b.py, …); "
        "and maybe more.",
        "re-read those files before editing them; to make this change again on top of them, "
        "send it again with attempt: 3.",
    ]
    gone = ReplayNote(CALL, "committed", "refs/heads/main", COMMIT, on_branch=False)
    assert replay_lines(gone, CLI)[1:] == [
        "gone: commit ae08e4d5558b is no longer on main (reset or rewritten): the branch does "
        "not hold its change.",
        "to make this change again, pass --attempt 2.",
    ]
    same = ReplayNote(CALL, "committed", "refs/heads/main", COMMIT)
    assert len(replay_lines(same, CLI)) == 1
    rejected = ReplayNote(
        CALL, "rejected", "refs/heads/main", rejected_at=LATER, error_kind="hunk-mismatch"
    )
    assert replay_lines(rejected, MCP) == [
        "replayed: this call (9e4c209f619f) ran before and was rejected (hunk-mismatch); "
        "nothing ran now.",
        "main is still at 0b0f2e346302, where it was rejected.",
        "to make the change, send a corrected patch (a different patch runs).",
    ]
    denied = ReplayNote(CALL, "rejected", "refs/heads/main", error_kind="approval")
    assert (
        replay_lines(denied, MCP)[-1] == "to ask for approval anew, send it again with attempt: 2."
    )


@dataclass(frozen=True)
class _Facts:
    """Any object with the facts renders (the apply_patch command's own, say)."""

    call_id: str = CALL
    status: str = "committed"
    ref: str = "refs/heads/dev"
    commit: str | None = COMMIT
    on_branch: bool = True
    later: tuple[LaterCommit, ...] = ()
    more_later: bool = False
    rejected_at: str | None = None
    error_kind: str | None = None
    reverted_by: str | None = None
    reverted_how: str | None = None
    attempt: int = 1


def test_replay_lines_takes_any_object_with_the_facts() -> None:
    assert replay_lines(_Facts(), CLI) == [
        "replayed: this call (9e4c209f619f) ran before and made commit ae08e4d5558b on dev; "
        "nothing ran now."
    ]
