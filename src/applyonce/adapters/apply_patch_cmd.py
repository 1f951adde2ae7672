"""``apply_patch``: Codex's command, exactly once (docs/reference/apply-patch.md).

Codex-style harnesses run ``apply_patch "<patch>"`` or ``apply_patch <<'EOF' … EOF``. This command
takes the patch the same two ways, with its paths relative to the current directory as Codex reads
them, applies it as one commit through :class:`~applyonce.executor.Executor`, prints what Codex
prints (the summary on stdout; on a failure Codex's own line where it names the failure right, then
applyonce's error and repair lines, on stderr) and exits as Codex exits (0, 1; 2 for a usage error).

The call's identity: ``$APPLYONCE_TOOL_CALL_ID`` when the harness sets it (the idempotency key and
the commit's ``Tool-Call-Id``: the same ID again is a replay); otherwise the patch and the branch
(:func:`attempt_for`): the same patch again is a replay while the branch still shows what the call
did, and a new attempt once it no longer does (reverted, reset, its files changed since).
"""

from __future__ import annotations

import os
import posixpath
import re
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import IO, TYPE_CHECKING

import typer

from applyonce.adapters.console import error_boundary, one_line_warnings
from applyonce.errors import (
    EXIT_INTERRUPTED,
    EXIT_REJECTED,
    EXIT_USAGE,
    ApplyOnceError,
    UsageError,
)

if TYPE_CHECKING:
    from applyonce.core.receipt import FileRecord
    from applyonce.executor import CallOptions, CallOutcome, Executor

TOOL_CALL_ID_ENV = "APPLYONCE_TOOL_CALL_ID"
USAGE = "Usage: apply_patch 'PATCH'\n       echo 'PATCH' | apply_patch\n"
HELP = (
    USAGE
    + "\nApply a Codex patch as one Git commit, exactly once (applyonce). Paths are relative to\n"
    "the current directory. The same patch sent again while the branch still shows it is a\n"
    f"replay; set {TOOL_CALL_ID_ENV} to the model's tool-call ID to key the call by it.\n"
    "Exit codes: 0 applied (or replayed), 1 failed, 2 usage, 3 internal error, 4 conflict\n"
    "(repeat the call), 5 outcome unknown (run 'applyonce recover'), 130 interrupted.\n"
)
# Patch errors Codex answers with 'Invalid patch' and exit 1 (applyonce's CLI: exit 2 or 1).
_PATCH_KINDS = frozenset({"patch-format", "patch-syntax"})
# The file headers whose paths Codex reads relative to the current directory.
# Padded ones too: the Codex parser reads a padded header as a header (docs/reference/formats.md).
_HEADER = re.compile(r"^(\s*\*\*\* (?:Add File|Delete File|Update File|Move to):[ \t]*)(.*?)(\s*)$")
_ORDER = {"add": 0, "update": 1, "move": 1, "delete": 2}
_LETTER = {"add": "A", "update": "M", "move": "M", "delete": "D"}
# A patch sent again while the branch shows each earlier attempt: far more attempts than a real
# session makes; past it the call is refused rather than walked for ever.
MAX_ATTEMPTS = 1000


@dataclass(frozen=True)
class Located:
    """A patch with its paths made relative to the repository's root, and the spelling each
    path had in the patch (what Codex prints)."""

    text: str
    spelled: Mapping[str, str]


def locate(text: str, cwd: str, root: str) -> Located:
    """``text`` with every file header's path read from ``cwd`` (inside the work tree ``root``)
    and written relative to ``root``, as Codex reads a path relative to its current directory.
    A path that leaves the work tree is kept as written: the call refuses it (unsafe path).

    Raises:
        UsageError: ``cwd`` is not inside ``root``.
    """
    prefix = os.path.relpath(os.path.realpath(cwd), os.path.realpath(root)).replace(os.sep, "/")
    if prefix == ".." or prefix.startswith("../"):
        raise UsageError(
            f"the current directory {cwd} is not inside the work tree {root}",
            hint="run apply_patch in a folder of the work tree",
        )
    prefix = "" if prefix == "." else prefix
    spelled: dict[str, str] = {}
    lines = text.split("\n")
    for number, line in enumerate(lines):
        match = _HEADER.match(line)
        if match is None:
            continue
        written = match.group(2).strip()
        path = _from_root(written, prefix, root)
        if path is None:
            continue
        spelled.setdefault(path, written)
        if path != written:
            lines[number] = match.group(1) + path + match.group(3)
    return Located("\n".join(lines), spelled)


def _from_root(written: str, prefix: str, root: str) -> str | None:
    """``written`` (relative to the directory ``prefix`` of the work tree, or absolute) relative
    to the work tree's root; None when it is not inside it."""
    if not written:
        return None
    if os.path.isabs(written):
        real_root = os.path.realpath(root)
        candidate = os.path.normpath(written)
        for base in (os.path.normpath(root), real_root):
            if candidate == base or not candidate.startswith(base.rstrip(os.sep) + os.sep):
                continue
            return os.path.relpath(candidate, base).replace(os.sep, "/")
        return None
    path = posixpath.normpath(posixpath.join(prefix, written)) if prefix else written
    if path == ".." or path.startswith("../"):
        return None
    return path


def summary(files: Sequence[FileRecord], spelled: Mapping[str, str]) -> str:
    """Codex's success text: its header, then the added files, the modified (moved ones under
    their new path), then the deleted, each in patch order and spelled as in the patch."""
    ordered = sorted(files, key=lambda f: _ORDER[f.action])
    lines = "".join(f"{_LETTER[f.action]} {spelled.get(f.path, f.path)}\n" for f in ordered)
    return "Success. Updated the following files:\n" + lines


def codex_failure(error: Mapping[str, object], spelled: Mapping[str, str], cwd: str) -> str:
    """The line Codex prints for the same failure, where applyonce's error names the same
    failure (empty otherwise): the file is missing, the expected lines are not in it."""
    kind = error.get("kind")
    path = str(error.get("path") or "")
    where = os.path.normpath(os.path.join(cwd, spelled.get(path, path)))
    message = str(error.get("message") or "")
    expected = error.get("expected")
    if kind == "hunk-mismatch" and isinstance(expected, list):
        expected = [str(line) for line in expected]
        return f"Failed to find expected lines in {where}:\n" + "".join(f"{x}\n" for x in expected)
    if kind == "plan" and message.endswith(": no such file"):
        if message.startswith("cannot update "):
            return (
                f"Failed to read file to update {where}: No such file or directory (os error 2)\n"
            )
        if message.startswith("cannot delete "):
            return f"Failed to delete file {where}\n"
    return ""


def invalid_patch_line(text: str) -> str:
    """Codex's ``Invalid patch`` line for a patch without its first or last marker (empty when
    it has both: then applyonce's own line says what is wrong)."""
    lines = text.strip().splitlines()
    if not lines or lines[0].strip() != "*** Begin Patch":
        return "Invalid patch: The first line of the patch must be '*** Begin Patch'\n"
    if lines[-1].strip() != "*** End Patch":
        return "Invalid patch: The last line of the patch must be '*** End Patch'\n"
    return ""


def replay_text(outcome: CallOutcome, tool_call_id: str | None, *, shown: bool) -> str:
    """The line said first on stdout when nothing ran now: a repeat got the stored result.
    ``shown``: the branch still shows what the call did."""
    keyed = f" (tool-call ID {tool_call_id})" if tool_call_id else ""
    said = outcome.replay_note or f"replayed call {outcome.receipt.call_id[:12]}"
    if outcome.receipt.status != "committed":
        return f"Note: this call{keyed} was made before; nothing ran now ({said}).\n"
    if shown:
        return (
            f"Note: this patch was already applied by an earlier call{keyed}, and the branch "
            f"still shows its change; nothing was applied now ({said}). Its result then:\n"
        )
    return (
        f"Note: this call{keyed} was applied earlier; nothing was applied now, and the branch "
        f"no longer shows all of its change ({said}); re-read the files before you rely on "
        "them. Its result then:\n"
    )


def shows(executor: Executor, ref: str, commit: str) -> bool:
    """Whether ``ref`` still shows what ``commit`` did: the commit is on it, and each path the
    commit changed is at the tip as the commit left it (no later commit reverted or changed
    it, or they changed it back)."""
    context = executor.context
    if not context.publisher.is_on(ref, commit):
        return False
    tip = context.publisher.tip(ref)
    if tip is None or tip == commit:
        return tip is not None
    store = context.store
    touched = store.paths_changed(store.parent_of(commit), commit)
    return not touched & store.paths_changed(commit, tip)


def attempt_for(executor: Executor, text: str, options: CallOptions) -> int:
    """The attempt a call of ``text`` without a tool-call ID is (each attempt is a call of its
    own, docs/design.md §3).

    * No attempt was made: 1.
    * The latest attempt did not commit (rejected, in flight, outcome unknown): that one, whose
      repeat returns its stored rejection, judges it again or settles it as any repeat does.
    * An attempt committed and the branch still shows it (:func:`shows`): the latest such one, so
      the patch sent again is a replay.
    * Otherwise (every commit reverted, reset away, or its files changed since): a new attempt,
      and the patch runs again.

    A commit rewritten by the user (amend, rebase) that still carries the call's ``Call-Id``
    counts as shown: a repeat then says the call's outcome is unknown (exit 5), and the patch is
    not applied a second time.

    Raises:
        ApplyOnceError: the patch does not parse, or every attempt up to the bound was made.
    """
    context = executor.context
    latest: tuple[int, str] | None = None
    shown: int | None = None
    for attempt in range(1, MAX_ATTEMPTS + 1):
        _args, identity = executor.identify(text, replace(options, attempt=attempt))
        row = executor.ledger.get(identity.call_id)
        if row is None:
            break
        latest = (attempt, row.state)
        commit = row.commit_id if row.state == "committed" else None
        if commit is not None and (
            shows(executor, row.ref, commit)
            or (
                not context.publisher.is_on(row.ref, commit)
                and context.publisher.landed(row.ref, identity.call_id)
            )
        ):
            shown = attempt
    else:
        raise UsageError(
            f"this patch was sent {MAX_ATTEMPTS} times already",
            hint=f"set {TOOL_CALL_ID_ENV} to the tool call's ID",
        )
    if latest is None:
        return 1
    attempt, state = latest
    if state != "committed":
        return attempt
    return shown if shown is not None else attempt + 1


# Hints of errors that name the applyonce CLI's flags, in apply_patch's own terms (it takes no
# options): by kind, and by the words of a hint (rejections carry theirs in the stored output).
_HINTS = {
    "not-a-repository": "run apply_patch inside a Git work tree",
    "idempotency-key-reused": f"set a new {TOOL_CALL_ID_ENV} for a different patch",
}
_HINT_WORDS = (
    ("as a new attempt (--attempt)", f"under a new {TOOL_CALL_ID_ENV}"),
    ("pass --dirty commit", "run 'git config applyonce.dirty commit' to commit them first"),
    ("pass --branch NAME", "check out a branch"),
    (
        "repeat the call with --confirm (or an approve callback)",
        "a person applies it with 'applyonce apply --confirm'",
    ),
    ("pass --lease-seconds N, or run", "run"),
    ("pass --remote NAME", "run 'git config applyonce.remote NAME'"),
)


def in_our_terms(text: str) -> str:
    """``text`` (an error's line, a rejection's stored output) with the applyonce CLI's flags
    that apply_patch does not take worded as what to do instead."""
    for flag, instead in _HINT_WORDS:
        text = text.replace(flag, instead)
    return text


def error_line(error: ApplyOnceError) -> str:
    """``error: what; what to do`` in apply_patch's terms."""
    if error.kind in _PATCH_KINDS:
        hint = "fix the patch and send it again"
    else:
        hint = in_our_terms(_HINTS.get(error.kind, error.hint or ""))
        if not hint and error.message.startswith(("the tool call ID ", "the idempotency key ")):
            hint = f"set {TOOL_CALL_ID_ENV} to the model's tool-call ID, or unset it"
    line = f"{error.message}; {hint}" if hint else error.message
    return f"error: {' '.join(line.split())}\n"


def run(
    argv: Sequence[str],
    *,
    stdin: IO[bytes],
    stdin_is_tty: bool,
    cwd: str,
    environ: Mapping[str, str],
) -> int:
    """One ``apply_patch`` command: its output on stdout and stderr; returns its exit code."""
    if list(argv) in (["--help"], ["-h"]):
        sys.stdout.write(HELP)
        return 0
    if len(argv) > 1:
        sys.stderr.write("Error: apply_patch accepts exactly one argument.\n")
        return EXIT_USAGE
    if argv:
        text = argv[0]
    else:
        data = b"" if stdin_is_tty else stdin.read()
        text = data.decode("utf-8", "surrogateescape")
        if not text.strip():
            sys.stderr.write(USAGE)
            return EXIT_USAGE
    tool_call_id = environ.get(TOOL_CALL_ID_ENV) or None
    try:
        return _call(text, cwd, tool_call_id)
    except ApplyOnceError as error:
        if error.kind in _PATCH_KINDS:
            sys.stderr.write(invalid_patch_line(text) + error_line(error))
            return EXIT_REJECTED
        sys.stderr.write(error_line(error))
        return error.exit_code


def _call(text: str, cwd: str, tool_call_id: str | None) -> int:
    from applyonce.executor import CallOptions, Executor

    executor = Executor(cwd)
    try:
        root = executor.context.store.workdir
        if root is None:
            raise UsageError(
                "apply_patch needs a work tree, and this is a bare repository",
                hint="run it in a checkout",
            )
        located = locate(text, cwd, str(root))
        # Codex's format only (with the wrappers agents put around it): no unified diff.
        options = CallOptions(format="codex")
        if tool_call_id is not None:
            options = replace(options, tool_call_id=tool_call_id, idempotency_key=tool_call_id)
        else:
            options = replace(options, attempt=attempt_for(executor, located.text, options))
        outcome = executor.call(located.text, options)
        return _report(executor, outcome, located, cwd, tool_call_id)
    finally:
        executor.close()


def _report(
    executor: Executor, outcome: CallOutcome, located: Located, cwd: str, tool_call_id: str | None
) -> int:
    receipt = outcome.receipt
    if outcome.replayed:
        shown = receipt.commit is not None and shows(executor, receipt.ref, receipt.commit)
        sys.stdout.write(replay_text(outcome, tool_call_id, shown=shown))
    if receipt.status == "committed":
        sys.stdout.write(summary(receipt.files, located.spelled))
        for note in outcome.behind:
            sys.stdout.write(note.line() + "\n")
        if not outcome.replayed and (unsigned := executor.identity_warning()) is not None:
            sys.stderr.write(f"warning: {unsigned}\n")
        return 0
    if receipt.error is not None:
        sys.stderr.write(codex_failure(receipt.error, located.spelled, cwd))
    said = receipt.output or f"error: call {receipt.call_id[:12]} did not commit\n"
    sys.stderr.write(in_our_terms(said))
    return receipt.exit_code or EXIT_REJECTED


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    """The ``apply_patch`` console script."""
    signal.signal(signal.SIGTERM, _terminate)
    one_line_warnings()
    code = EXIT_INTERRUPTED
    try:
        with error_boundary():
            code = run(
                sys.argv[1:],
                stdin=sys.stdin.buffer,
                stdin_is_tty=sys.stdin.isatty(),
                cwd=os.getcwd(),
                environ=os.environ,
            )
    except typer.Exit as exit_:
        code = exit_.exit_code
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    sys.stdout.flush()
    sys.exit(code)


__all__ = ["TOOL_CALL_ID_ENV", "Located", "attempt_for", "locate", "main", "run", "summary"]
