"""What the CLI reads from and writes to the terminal: the error boundary every command runs in,
the patch (a file or standard input), the ``--confirm`` prompt, and a receipt's output.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import orjson
import typer
from pydantic import ValidationError

import applyonce
from applyonce.core.identity import EMPTY_CONTRACT_SHA256
from applyonce.core.receipt import Receipt
from applyonce.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, ApplyOnceError, UsageError
from applyonce.executor import CallDiff, Executor, PlanView, contract_digest


def die(error: ApplyOnceError) -> NoReturn:
    typer.echo(f"error: {error.one_line()}", err=True)
    raise typer.Exit(error.exit_code)


@contextlib.contextmanager
def error_boundary() -> Iterator[None]:
    """Expected failures: one line and their exit code. Anything else: exit 3 and a log file."""
    try:
        yield
    except ApplyOnceError as error:
        die(error)
    except (typer.Exit, typer.Abort, typer.TyperException, SystemExit):
        # typer's own: exits, and the usage errors of parsing (exit 2, its own message).
        raise
    except KeyboardInterrupt:
        typer.echo("interrupted; run 'applyonce recover' to finish any call in flight", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except Exception as exc:
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        fd, log = tempfile.mkstemp(prefix=f"applyonce-crash-{stamp}-", suffix=".log")
        with os.fdopen(fd, "w") as handle:
            handle.write(f"applyonce {applyonce.__version__}\nargv: {sys.argv!r}\n\n")
            handle.write(traceback.format_exc())
        typer.echo(
            f"internal error: {type(exc).__name__}: {str(exc)[:200]}; details in {log}; "
            "run 'applyonce recover', then report the log",
            err=True,
        )
        raise typer.Exit(EXIT_INTERNAL) from None


def contract_sha256(contract: Path | None, contract_sha: str | None) -> str:
    """--contract FILE or --contract-sha HEX (not both); the empty contract by default."""
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
    try:
        fields = orjson.loads(stored)
        same = isinstance(fields, dict) and Receipt.model_validate(fields) == receipt
    except (orjson.JSONDecodeError, ValidationError):
        same = False
    return fields if same else orjson.loads(receipt.to_json())  # type: ignore[no-any-return]
