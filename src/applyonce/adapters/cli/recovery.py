"""The commands that settle calls: ``recover`` (by asking Git) and ``resolve`` (by a person)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from applyonce.adapters.cli.app import (
    Command,
    JsonOpt,
    LeaseOpt,
    LedgerOpt,
    RemoteOpt,
    RepoOpt,
    StateOpt,
    _emit_report,
    app,
    open_executor,
)
from applyonce.adapters.console import print_receipt, status_line
from applyonce.errors import EXIT_CONFLICT, EXIT_UNKNOWN, UsageError

if TYPE_CHECKING:
    from applyonce.flow.recovery.report import RecoveryReport


@app.command(
    epilog="Exit codes: 0 every call settled, 2 usage, 3 internal error, 4 a call held by a "
    "running process or a checkout not updated (run it again later), 5 a call's outcome is "
    "unknown (see 'applyonce resolve').",
    cls=Command,
)
def recover(
    repo: RepoOpt = Path("."),
    state_dir: StateOpt = None,
    ledger: LedgerOpt = None,
    remote: RemoteOpt = None,
    lease_seconds: LeaseOpt = None,
    json: JsonOpt = False,
) -> None:
    """Finish every interrupted call by asking Git; never applies a patch twice."""
    executor = open_executor(repo, state_dir=state_dir, ledger=ledger, remote=remote)
    with status_line(json) as status:
        report = executor.recover(
            progress=lambda done, total: status.show(
                f"recover: settling call {done + 1} of {total}"
            ),
            lease_seconds=lease_seconds,
        )
    if json:
        _emit_report(report.to_dict())
    else:
        _print_recovery(report)
    # Not everything settled: a call left for a person (5), or one another process's claim
    # holds, or a checkout not updated (4: repeat once that process is done).
    if report.unknown:
        raise typer.Exit(EXIT_UNKNOWN)
    if not report.settled:
        raise typer.Exit(EXIT_CONFLICT)


def _print_recovery(report: RecoveryReport) -> None:
    for note in report.notes:
        typer.echo(f"note: {note}")
    if not report.outcomes and not report.unsynced:
        typer.echo("nothing to recover: every call is settled")
    elif report.outcomes:
        typer.echo(f"{'call':<12}  {'was':<9}  {'now':<9}  why")
        for o in report.outcomes:
            typer.echo(f"{o.call_id[:12]}  {o.was:<9}  {o.now:<9}  {o.why}")
    if report.unsynced:
        typer.echo("not everything is settled: a checkout was not updated (see the notes above)")
    if report.removed:
        typer.echo(
            f"removed {len(report.removed)} stale file(s): "
            + ", ".join(Path(p).name for p in report.removed[:5])
            + (" …" if len(report.removed) > 5 else "")
        )


@app.command(
    epilog="Exit codes: 0 resolved or released, 2 usage (bad options, or a call that is not "
    "unknown), 3 internal error, 4 the claim is held by a live process, 5 unreadable state.",
    cls=Command,
)
def resolve(
    call_id: Annotated[str, typer.Argument(help="Call ID or a unique prefix (6+ characters).")],
    as_: Annotated[
        str | None,
        typer.Option(
            "--as",
            help="committed or rejected (an unknown call), or rewritten (a committed call whose "
            "commit a reset or squash removed).",
            show_default=False,
        ),
    ] = None,
    note: Annotated[
        str | None,
        typer.Option(help="Why: recorded in the ledger (and the receipt).", show_default=False),
    ] = None,
    commit: Annotated[
        str | None, typer.Option(help="With --as committed: the commit that counts.")
    ] = None,
    release: Annotated[
        bool,
        typer.Option(
            "--release", help="Free the claim of a call stuck in flight whose process is gone."
        ),
    ] = False,
    repo: RepoOpt = Path("."),
    state_dir: StateOpt = None,
    ledger: LedgerOpt = None,
    remote: RemoteOpt = None,
    json: JsonOpt = False,
) -> None:
    """Settle a call whose outcome is unknown, by a person's decision; record that a committed
    call's commit was rewritten away by hand; or free a stuck claim.

    --as rewritten: after a reset or squash removed the call's commit from its branch (exit 2 if
    it is still there); audit then lists the call as rewritten instead of a problem.

    --release: free the claim of a call whose process is gone where this host cannot see (another
    host, a renamed container); the next call or 'applyonce recover' settles it through Git.
    """
    if release:
        if as_ is not None or commit is not None:
            raise UsageError(
                "--release frees a claim; it cannot be combined with --as or --commit",
                hint="run 'applyonce resolve CALL_ID --release' alone",
            )
        released = open_executor(repo, state_dir=state_dir, ledger=ledger, remote=remote).release(
            call_id, note=note or ""
        )
        if json:
            _emit_report(released.to_dict())
        else:
            typer.echo(released.line())
        return
    if as_ is None or note is None:
        raise UsageError(
            "resolve needs --as committed|rejected|rewritten with --note TEXT, or --release",
            hint="see 'applyonce resolve --help'",
        )
    executor = open_executor(repo, state_dir=state_dir, ledger=ledger, remote=remote)
    full = executor.find_call(call_id)
    receipt = executor.resolve(full, outcome=as_, note=note, commit=commit)
    if json:
        print_receipt(executor, receipt, True)
    elif as_ == "rewritten":
        typer.echo(
            f"call {full[:12]} resolved as rewritten: its commit {str(receipt.commit)[:12]} is "
            f"no longer on {receipt.ref}; audit lists it as rewritten"
        )
    else:
        typer.echo(f"call {full[:12]} resolved as {receipt.status}")
