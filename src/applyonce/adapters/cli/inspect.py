"""The read-only commands: ``show``, ``log``, ``replay`` and ``audit``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from applyonce.adapters.cli.app import (
    Command,
    JsonOpt,
    LedgerOpt,
    RemoteOpt,
    RepoOpt,
    StateOpt,
    _emit_json,
    _emit_report,
    app,
    open_executor,
)
from applyonce.adapters.console import (
    SCHEMA_VERSION,
    diff_fields,
    print_diff,
    print_receipt,
    status_line,
)
from applyonce.errors import EXIT_PROBLEMS


@app.command(
    epilog="Exit codes: 0 shown, 2 usage (no such call), 3 internal error, "
    "5 the receipt does not verify.",
    cls=Command,
)
def show(
    call_id: Annotated[str, typer.Argument(help="Call ID or a unique prefix (6+ characters).")],
    repo: RepoOpt = Path("."),
    state_dir: StateOpt = None,
    ledger: LedgerOpt = None,
    remote: RemoteOpt = None,
    json: JsonOpt = False,
    diff: Annotated[
        bool,
        typer.Option(
            "--diff",
            help="Also print the call's unified diff, from its commit against its parent; "
            "with --json, a 'diff' field.",
        ),
    ] = False,
) -> None:
    """Show one call's verified receipt."""
    executor = open_executor(
        repo, state_dir=state_dir, read_only=True, ledger=ledger, remote=remote
    )
    receipt = executor.show(executor.find_call(call_id))
    committed = executor.diff(receipt) if diff else None
    behind = executor.checkout_behind(receipt)
    if json:
        extra = diff_fields(committed) if diff else {}
        if behind:
            extra["checkout_behind"] = [note.to_dict() for note in behind]
        print_receipt(executor, receipt, True, extra=extra or None)
        return
    typer.echo(f"call      {receipt.call_id}")
    typer.echo(
        f"status    {receipt.status} (exit {receipt.exit_code})"
        + ("  [reconciled]" if receipt.reconciled else "")
    )
    typer.echo(f"ref       {receipt.ref}  base {str(receipt.base_commit)[:12]}")
    if receipt.commit:
        typer.echo(f"commit    {receipt.commit}")
    for f in receipt.files:
        typer.echo(f"file      {f.action:<6} {f.path}" + (f" (from {f.from_})" if f.from_ else ""))
    for c in receipt.checks:
        typer.echo(f"check     {c.name}: exit {c.exit_code} in {c.duration_ms} ms")
    if receipt.error:
        typer.echo(f"error     {receipt.error.get('kind')}: {receipt.error.get('message')}")
    if receipt.note:
        typer.echo(f"note      {receipt.note}")
    for note in behind:
        typer.echo(f"checkout  behind: {note.reason}; run '{note.command}'")
    typer.echo(f"updated   {receipt.updated_at}")
    if committed is not None:
        print_diff(committed)
    elif diff:
        typer.echo("diff      none: the call committed nothing")


@app.command(
    epilog="Exit codes: 0 listed, 2 usage, 3 internal error, 5 unreadable state.", cls=Command
)
def log(
    repo: RepoOpt = Path("."),
    state_dir: StateOpt = None,
    ledger: LedgerOpt = None,
    remote: RemoteOpt = None,
    json: JsonOpt = False,
) -> None:
    """List the calls in the ledger, oldest first."""
    executor = open_executor(
        repo, state_dir=state_dir, read_only=True, ledger=ledger, remote=remote
    )
    rows = executor.calls()
    if json:
        # A list, as it always was (scripts iterate it); each row carries the schema version,
        # since a bare list has no place for one.
        _emit_json(
            [{"schema_version": SCHEMA_VERSION, **row.model_dump(mode="json")} for row in rows]
        )
        return
    if not rows:
        typer.echo("no calls yet")
    for r in rows:
        commit = (r.commit or "-")[:12]
        typer.echo(f"{r.updated_at}  {r.call_id[:12]}  {r.state:<9} {commit:<12}  {r.ref}")


@app.command(
    epilog="Exit codes: 0 every call agrees, 1 some disagree, 2 usage, 3 internal error, "
    "5 unreadable state.",
    cls=Command,
)
def replay(
    repo: RepoOpt = Path("."),
    state_dir: StateOpt = None,
    ledger: LedgerOpt = None,
    remote: RemoteOpt = None,
    json: JsonOpt = False,
) -> None:
    """Re-derive every call's decision and output from the ledger and receipts alone (no Git)."""
    executor = open_executor(
        repo, state_dir=state_dir, read_only=True, ledger=ledger, remote=remote
    )
    report = executor.replay()
    if json:
        _emit_report(report.to_dict())
    else:
        for d in report.decisions:
            mark = "ok" if d.agrees else "DISAGREES"
            first = d.output.splitlines()[0] if d.output else ""
            exit_code = f"exit {d.exit_code!s:<4}"
            typer.echo(f"{d.call_id[:12]}  {d.state:<9}  {exit_code}  {mark:<9}  {first[:60]}")
            for problem in d.problems:
                typer.echo(f"    {problem}")
        typer.echo(
            f"replayed {len(report.decisions)} call(s): "
            + ("all agree" if not report.disagreements else f"{report.disagreements} disagree")
        )
    if report.disagreements:
        raise typer.Exit(EXIT_PROBLEMS)


@app.command(
    epilog="Exit codes: 0 clean, 1 problems found, 2 usage, 3 internal error, 4 history"
    " incomplete (a shallow clone), 5 unreadable state.",
    cls=Command,
)
def audit(
    repo: RepoOpt = Path("."),
    branch: Annotated[
        str | None, typer.Option("--ref", "--branch", help="Branch to audit (default: HEAD's).")
    ] = None,
    since: Annotated[str | None, typer.Option(help="Only commits after this revision.")] = None,
    full: Annotated[
        bool,
        typer.Option(
            "--full", help="The whole history, not only what is new since the last clean audit."
        ),
    ] = False,
    state_dir: StateOpt = None,
    ledger: LedgerOpt = None,
    remote: RemoteOpt = None,
    json: JsonOpt = False,
) -> None:
    """Check every Call-Id commit against its receipt (what is new since the last clean audit)."""
    executor = open_executor(
        repo, state_dir=state_dir, read_only=True, ledger=ledger, remote=remote
    )
    with status_line(json) as status:
        report = executor.audit(
            branch=branch,
            since=since,
            full=full,
            progress=lambda count: status.show(f"audit: {count} commits read"),
        )
    if json:
        _emit_report(report.to_dict())
    else:
        for p in report.problems:
            typer.echo(f"{p.kind:<12} {p.call_id[:12]}  {p.message}; {p.hint}")
        for r in report.rewritten:
            typer.echo(f"{'rewritten':<12} {r.call_id[:12]}  resolved by hand: {r.note}")
        verdict = "clean" if report.clean else f"{len(report.problems)} problem(s)"
        if report.copies:
            typer.echo(
                f"{report.copies} commit(s) copy a call that landed on another branch "
                "(cherry-picks); that branch's audit checks them"
            )
        if report.undone:
            typer.echo(
                f"{report.undone} commit(s) carrying a call's change were undone by a later "
                "commit (git revert); the change of each such call stands at most once"
            )
        if report.full_why:
            typer.echo(f"whole history audited: {report.full_why}")
        if report.incremental:
            inc = report.incremental
            typer.echo(
                f"checked {report.commits} new Call-Id commit(s) on {report.ref} since "
                f"{inc.since[:12]}; {inc.verified} before verified at {inc.at}; "
                f"{report.receipts} receipt(s): {verdict}"
            )
        else:
            typer.echo(
                f"audited {report.commits} Call-Id commit(s) on {report.ref} and "
                f"{report.receipts} receipt(s): {verdict}"
            )
    if not report.clean:
        raise typer.Exit(EXIT_PROBLEMS)
