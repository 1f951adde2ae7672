"""``applyonce revert``: undo a call's commit with one commit, exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import orjson
import typer

from applyonce.cli.app import (
    AttemptOpt,
    CheckOpt,
    CheckTimeoutOpt,
    JsonOpt,
    LeaseOpt,
    RepoOpt,
    SkipCheckOpt,
    StateOpt,
    app,
)
from applyonce.console import diff_fields, diff_or_warning, print_diff, print_receipt
from applyonce.executor import CallOptions, Executor
from applyonce.flow.sync import sync_warnings


@app.command(
    epilog="Exit codes: 0 committed (new or replayed; --dry-run: plan printed), 1 nothing left "
    "to undo, 2 usage or not a committed call on the branch, 3 internal, 4 later commits changed "
    "the same lines (retryable) or the call is running, 5 outcome unknown."
)
def revert(
    call_id: Annotated[
        str, typer.Argument(help="The call to undo: its ID or a unique prefix (6+ characters).")
    ],
    repo: RepoOpt = Path("."),
    branch: Annotated[
        str | None, typer.Option(help="Branch to commit the revert to (default: the call's).")
    ] = None,
    attempt: AttemptOpt = 1,
    check: CheckOpt = None,
    check_timeout: CheckTimeoutOpt = 300.0,
    skip_check: SkipCheckOpt = None,
    dry_run: Annotated[bool, typer.Option(help="Print the plan; write nothing.")] = False,
    diff: Annotated[
        bool,
        typer.Option(
            "--diff",
            help="Also print the revert's unified diff (git's format), after its output and an "
            "empty line; with --json, a 'diff' field.",
        ),
    ] = False,
    lease_seconds: LeaseOpt = None,
    state_dir: StateOpt = None,
    json: JsonOpt = False,
) -> None:
    """Undo a committed call with one new commit, exactly once.

    Repeating it returns the stored result; the new commit carries 'Reverts-Call-Id'.
    """
    options = CallOptions(
        branch=branch,
        attempt=attempt,
        checks=check,
        check_timeout=check_timeout,
        skip_checks=skip_check,
        lease_seconds=lease_seconds,
    )
    executor = Executor(repo, state_dir=state_dir)
    full = executor.find_call(call_id)
    if dry_run:
        view = executor.dry_run_revert(full, options)
        planned = executor.plan_diff(view) if diff else None
        if json:
            fields = {**view.to_dict(), **(diff_fields(planned) if diff else {})}
            typer.echo(orjson.dumps(fields, option=orjson.OPT_INDENT_2).decode())
        else:
            base = str(view.base_commit)[:12]
            typer.echo(f"dry run: call {view.call_id[:12]} on {view.ref} at {base}")
            for line in view.lines():
                typer.echo(f"  {line}")
            if planned is not None:
                print_diff(planned)
            typer.echo("nothing was written")
        return
    outcome = executor.revert(full, options)
    committed = diff_or_warning(executor, outcome.receipt) if diff else None
    print_receipt(executor, outcome.receipt, json, extra=diff_fields(committed) if diff else None)
    if committed is not None and not json:
        print_diff(committed)
    for warning in sync_warnings(outcome.sync_reports):
        typer.echo(f"warning: {warning}", err=True)
    executor.close()
    if outcome.receipt.exit_code:
        raise typer.Exit(outcome.receipt.exit_code)
