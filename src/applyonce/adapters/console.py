"""What the CLI reads from and writes to the terminal: the error boundary every command runs in,
the patch (a file or standard input), the ``--confirm`` prompt, and a receipt's output.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sys
import tempfile
import threading
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

import orjson
import typer

import applyonce
from applyonce.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    ApplyOnceError,
    UsageError,
)

if TYPE_CHECKING:
    # Imported where used: `applyonce --version` and `--help` need none of them.
    from applyonce.core.receipt import Receipt
    from applyonce.executor import CallDiff, Executor, PlanView

# The version of every JSON document the CLI prints besides a receipt (which has its own
# "schema"): reports, dry runs and errors. Raised when a field changes meaning or goes away.
SCHEMA_VERSION = 1
# A check that ends sooner needs no elapsed line.
CHECK_QUIET_S = 2.0


def die(error: ApplyOnceError) -> NoReturn:
    typer.echo(f"error: {error.one_line()}", err=True)
    raise typer.Exit(error.exit_code)


def emit_json(data: object) -> None:
    """``data`` as indented JSON on stdout, one document and a newline."""
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
    sys.stdout.flush()


def emit_json_error(exit_code: int, error: dict[str, Any]) -> None:
    """The one JSON document of a failure that has no receipt: what ``--json`` callers parse.
    Its error always says whether the same command may succeed if run again (``retryable``)."""
    error = {**error, "retryable": bool(error.get("retryable", False))}
    emit_json({"schema_version": SCHEMA_VERSION, "exit_code": exit_code, "error": error})


# What an internal error tells the user to do, unless the command says otherwise: a call may
# have been in flight, and recover finishes it from Git.
CRASH_HINT = "run 'applyonce recover', then report the log"


@contextlib.contextmanager
def error_boundary(
    as_json: Callable[[], bool] = lambda: False,
    crash_hint: Callable[[], str | None] = lambda: None,
) -> Iterator[None]:
    """Expected failures: one line and their exit code. Anything else: exit 3 and a log file.

    Args:
        as_json: whether the command line asked for ``--json``; asked only once a failure
            happened, so that it sees the parsed options. Then the failure is also printed as one
            JSON object on stdout (:func:`emit_json_error`), since no receipt will be.
        crash_hint: what the running command says to do after an internal error, if it says
            anything (asked once one happened); else :data:`CRASH_HINT`.
    """
    try:
        yield
    except ApplyOnceError as error:
        if as_json():
            emit_json_error(error.exit_code, error.to_dict())
        die(error)
    except (typer.Exit, typer.Abort, SystemExit):
        raise
    except typer.TyperException as exc:
        # typer's own usage errors while parsing (an unknown option or command, a bad value;
        # exit 2): one line in the style of every other error, not typer's usage block.
        code = getattr(exc, "exit_code", EXIT_USAGE)
        if not hasattr(exc, "format_message"):
            raise
        where = getattr(getattr(exc, "ctx", None), "command_path", None) or "applyonce"
        hint = f"see '{where} --help'"
        said = exc.format_message()
        if as_json():
            usage = {"kind": "usage", "message": said, "hint": hint}
            emit_json_error(code, {**usage, "retryable": False})
        first = said[:1].lower() + said[1:] if said[1:2].islower() else said
        typer.echo(f"error: {' '.join(first.split()).rstrip('.')}; {hint}", err=True)
        raise typer.Exit(code) from None
    except BrokenPipeError:
        # The reader went away (``applyonce log | head``): typer exits 1 quietly, as git does.
        raise
    except KeyboardInterrupt:
        message = "interrupted"
        hint = "run 'applyonce recover' to finish any call in flight"
        if as_json():
            interrupted = {"kind": "interrupted", "message": message, "hint": hint}
            emit_json_error(EXIT_INTERRUPTED, {**interrupted, "retryable": True})
        typer.echo(f"error: {message}; {hint}", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except Exception as exc:
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        fd, log = tempfile.mkstemp(prefix=f"applyonce-crash-{stamp}-", suffix=".log")
        with os.fdopen(fd, "w") as handle:
            # Never a database password (a --ledger connection string) in the log or the line.
            from applyonce.core.redaction import redact_secrets  # not for --help

            # Each word as given, before repr() escapes its quotes and backslashes, so the
            # password is masked as libpq reads it.
            argv = repr([redact_secrets(word) for word in sys.argv])
            handle.write(f"applyonce {applyonce.__version__}\nargv: {argv}\n\n")
            handle.write(redact_secrets(traceback.format_exc()))
        cause = _sole_cause(exc)
        reason = redact_secrets(str(cause))[:200]
        message = f"internal error: {type(cause).__name__}: {reason}; details in {log}"
        hint = crash_hint() or CRASH_HINT
        if as_json():
            internal = {"kind": "internal", "message": message, "hint": hint, "log": log}
            emit_json_error(EXIT_INTERNAL, {**internal, "retryable": False})
        typer.echo(f"error: {message}; {hint}", err=True)
        raise typer.Exit(EXIT_INTERNAL) from None


def _sole_cause(exc: Exception) -> BaseException:
    """The one exception inside nested exception groups (a task group wraps what a task
    raised), which names what went wrong; ``exc`` itself when it holds more or none."""
    cause: BaseException = exc
    while isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) == 1:
        cause = cause.exceptions[0]
    return cause


class StatusLine:
    """One line of progress on stderr, rewritten in place: on a terminal only, never under
    ``--json`` (so never in a pipe, a log or an agent's capture). Plain text and a carriage
    return, no escape sequences: what ``NO_COLOR`` and a dumb terminal can show."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._width = 0
        self._lock = threading.Lock()  # a check's ticker thread writes too

    def show(self, text: str) -> None:
        if not self.enabled:
            return
        with self._lock:
            sys.stderr.write("\r" + text.ljust(self._width))
            sys.stderr.flush()
            self._width = len(text)

    def clear(self) -> None:
        """Blank the line, so that what is printed next starts at its beginning."""
        with self._lock:
            if self._width:
                sys.stderr.write("\r" + " " * self._width + "\r")
                sys.stderr.flush()
                self._width = 0


@contextlib.contextmanager
def status_line(as_json: bool) -> Iterator[StatusLine]:
    """A :class:`StatusLine`, shown if stderr is a terminal and JSON was not asked, blanked at
    the end of the block whatever happens in it."""
    status = StatusLine(enabled=not as_json and sys.stderr.isatty())
    try:
        yield status
    finally:
        status.clear()


def check_elapsed(status: StatusLine) -> Callable[[str, float], None]:
    """The ``check_progress`` of a call: after 2 s, ``check 'pytest -q' running… 12 s``."""

    def show(command: str, seconds: float) -> None:
        if seconds >= CHECK_QUIET_S:
            status.show(f"check {command[:60]!r} running… {seconds:.0f} s")

    return show


def contract_sha256(contract: Path | None, contract_sha: str | None) -> str:
    """--contract FILE or --contract-sha HEX (not both); the empty contract by default."""
    from applyonce.core.identity import EMPTY_CONTRACT_SHA256
    from applyonce.executor import contract_digest

    if contract is not None and contract_sha is not None:
        raise UsageError("--contract and --contract-sha exclude each other")
    if contract is not None:
        return contract_digest(contract)
    return contract_sha or EMPTY_CONTRACT_SHA256


def read_patch(patch: str) -> str:
    if patch == "-":
        if sys.stdin.isatty():
            raise UsageError(
                "no patch given", hint="pass a patch file, or pipe one to 'applyonce apply -'"
            )
        data = sys.stdin.buffer.read()
    else:
        try:
            data = Path(patch).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read patch {patch}: {exc.strerror}") from None
    # A unified diff may carry file contents that are not UTF-8, applied byte for byte as git
    # applies them: such bytes travel as surrogate escapes; the other formats refuse them.
    return data.decode("utf-8", "surrogateescape")


def terminal_approver() -> Callable[[PlanView], bool]:
    """An approver that shows the plan and asks on the terminal (not stdin: it may carry the patch).

    Opened before the call starts, so a missing terminal is a usage error and not a rejection.
    """
    try:
        reader = open("/dev/tty", encoding="utf-8")  # noqa: SIM115 - kept for the callback
        writer = open("/dev/tty", "w", encoding="utf-8")  # noqa: SIM115
    except OSError:
        raise UsageError(
            "--confirm needs a terminal to ask on", hint="run it interactively, or drop --confirm"
        ) from None

    def ask(view: PlanView) -> bool:
        writer.write(f"applyonce: call {view.call_id[:12]} on {view.ref}\n")
        for line in view.lines():
            writer.write(f"  {line}\n")
        writer.write("Apply this patch? [y/N] ")
        writer.flush()
        return reader.readline().strip().lower() in ("y", "yes")

    return ask


def print_receipt(
    executor: Executor,
    receipt: Receipt,
    as_json: bool,
    *,
    extra: dict[str, Any] | None = None,
    replayed: bool | None = None,
) -> None:
    """The receipt's output (stdout when committed, else stderr), or with ``as_json`` the
    receipt as stored, with ``extra`` fields (``diff``) added beside its own, and, for a call
    (not ``show``), ``"replayed"`` after them all."""
    if as_json:
        data = executor.receipt_bytes(receipt.call_id) or receipt.to_json()
        if extra or replayed is not None:
            fields = stored_fields(data, receipt)
            if extra:
                fields = dict(sorted({**fields, **extra}.items()))
            if replayed is not None:
                fields.pop("replayed", None)
                fields["replayed"] = replayed
            data = orjson.dumps(fields, option=orjson.OPT_INDENT_2) + b"\n"
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    stream = sys.stdout if receipt.status == "committed" else sys.stderr
    stream.write(receipt.output)
    stream.flush()


def diff_fields(diff: CallDiff | None) -> dict[str, Any]:
    """The ``diff`` and ``diffstat`` fields of a ``--json --diff`` output (null: no commit)."""
    if diff is None:
        return {"diff": None, "diffstat": None}
    return {"diff": diff.as_text(), "diffstat": diff.diffstat()}


def diff_or_warning(executor: Executor, receipt: Receipt) -> CallDiff | None:
    """The diff of a call that has run, or None and a warning: the call's outcome, already
    decided, is never made an error by a diff that cannot be read."""
    try:
        return executor.diff(receipt)
    except Exception as exc:  # a display extra: the outcome stands whatever happens here
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        short = receipt.call_id[:12]
        typer.echo(f"warning: cannot show the diff of call {short}: {reason}", err=True)
        return None


def print_diff(diff: CallDiff) -> None:
    """The diff's bytes on stdout, after one empty line that ends what was printed before it."""
    sys.stdout.flush()
    sys.stdout.buffer.write(b"\n" + diff.text)
    sys.stdout.flush()


def stored_fields(stored: bytes, receipt: Receipt) -> dict[str, Any]:
    """The stored receipt's fields, in their stored order and with their stored values (printed
    again with two-space indents, as stored). Stored bytes that are no longer this call's
    receipt (rewritten meanwhile) give way to the receipt the call returned."""
    from pydantic import ValidationError

    from applyonce.core.receipt import Receipt

    try:
        fields = orjson.loads(stored)
        same = isinstance(fields, dict) and Receipt.model_validate(fields) == receipt
    except (orjson.JSONDecodeError, ValidationError):
        same = False
    return fields if same else orjson.loads(receipt.to_json())  # type: ignore[no-any-return]


def one_line_warnings() -> None:
    """Show the warnings applyonce issues (an unknown ``applyonce.*`` git config key:
    :class:`~applyonce.core.configkeys.UnknownConfigKeyWarning`) as one ``warning: ...`` line on
    stderr, as a command's other warnings are; any other warning keeps Python's form."""
    shown = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        # Imported here: `--version` and `--help` import no core module.
        from applyonce.core.configkeys import UnknownConfigKeyWarning

        if issubclass(category, UnknownConfigKeyWarning):
            print(f"warning: {message}", file=file or sys.stderr, flush=True)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show
