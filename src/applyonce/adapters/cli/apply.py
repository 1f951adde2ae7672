"""``applyonce apply``: one patch, one commit, exactly once."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from applyonce.adapters.cli.app import (
    AttemptOpt,
    AuthorOpt,
    BranchOpt,
    CheckOpt,
    CheckTimeoutOpt,
    CoAuthorOpt,
    Command,
    ContractOpt,
    ContractShaOpt,
    DiffOpt,
    DirtyOpt,
    DryRunOpt,
    JsonOpt,
    LeaseOpt,
    LedgerOpt,
    NoVerifyOpt,
    RemoteOpt,
    RepoOpt,
    SignoffOpt,
    SignOpt,
    SkipCheckOpt,
    StateOpt,
    _emit_report,
    app,
)
from applyonce.adapters.console import (
    check_elapsed,
    contract_sha256,
    diff_fields,
    diff_or_warning,
    print_diff,
    print_receipt,
    read_patch,
    status_line,
    terminal_approver,
)
from applyonce.errors import UsageError

if TYPE_CHECKING:
    # Imported when a command runs, not when it registers: `applyonce --help` needs none of them.
    from applyonce.executor import CallOutcome, Executor, PlanView
    from applyonce.flow.options import DirtyMode
    from applyonce.patch import PatchFormat


@app.command(
    epilog="Exit codes: 0 committed (new or replayed; with --dry-run: the plan printed), "
    "1 rejected, 2 usage, 3 internal error, 4 conflict (see the message; repeat the call), "
    "5 outcome unknown (run 'applyonce recover'), 130 interrupted.",
    cls=Command,
)
def apply(
    patch: Annotated[str, typer.Argument(help="Patch file, or - for standard input.")] = "-",
    repo: RepoOpt = Path("."),
    branch: BranchOpt = None,
    lane: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="Commit to the lane agent/NAME, made from the tip of --branch (default: HEAD's "
            "branch) if new; land it with 'applyonce land'.",
        ),
    ] = None,
    contract: ContractOpt = None,
    contract_sha: ContractShaOpt = None,
    attempt: AttemptOpt = 1,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            metavar="KEY", help="Caller-chosen call key (replaces attempt and arguments)."
        ),
    ] = None,
    tool_call_id: Annotated[
        str | None, typer.Option(metavar="ID", help="The model's tool-call ID, recorded.")
    ] = None,
    format: Annotated[
        str, typer.Option(help="auto, codex, unified, edit-json or search-replace.")
    ] = "auto",
    check: CheckOpt = None,
    check_timeout: CheckTimeoutOpt = 300.0,
    skip_check: SkipCheckOpt = None,
    protect: Annotated[
        list[str] | None,
        typer.Option(
            metavar="GLOB",
            help="Glob of paths that need approval; repeatable. Replaces git config "
            "applyonce.protect.",
        ),
    ] = None,
    dirty: DirtyOpt = None,
    no_verify: NoVerifyOpt = False,
    confirm: Annotated[bool, typer.Option(help="Show the plan and ask before committing.")] = False,
    dry_run: DryRunOpt = False,
    diff: DiffOpt = False,
    lease_seconds: LeaseOpt = None,
    state_dir: StateOpt = None,
    ledger: LedgerOpt = None,
    remote: RemoteOpt = None,
    json: JsonOpt = False,
    sign: SignOpt = None,
    signoff: SignoffOpt = None,
    author: AuthorOpt = None,
    co_author: CoAuthorOpt = None,
    message: Annotated[
        str | None,
        typer.Option(
            "--message",
            "-m",
            help="The commit's subject line, then an optional body after a blank line.",
        ),
    ] = None,
    trailer: Annotated[
        list[str] | None,
        typer.Option(help="A commit trailer, KEY=VALUE (e.g. Co-authored-by=...); repeatable."),
    ] = None,
) -> None:
    """Apply a patch as one commit, exactly once."""
    from applyonce.executor import CallOptions, Executor

    if format not in ("auto", "codex", "unified", "edit-json", "search-replace"):
        raise UsageError(
            f"unknown --format {format!r}",
            hint="use auto, codex, unified, edit-json or search-replace",
        )
    options = CallOptions(
        branch=branch,
        contract_sha256=contract_sha256(contract, contract_sha),
        attempt=attempt,
        idempotency_key=idempotency_key,
        tool_call_id=tool_call_id,
        format=cast("PatchFormat", format),
        checks=check,
        check_timeout=check_timeout,
        skip_checks=skip_check,
        protect=protect,
        dirty=cast("DirtyMode | None", dirty),  # checked by CallOptions
        no_verify=no_verify,
        approve=terminal_approver() if confirm else None,
        require_approval=confirm,
        lease_seconds=lease_seconds,
        message=message,
        trailers=[_trailer(item) for item in trailer or []],
        sign=sign,
        signoff=signoff,
        author=author,
        co_authors=co_author or (),
    )
    text = read_patch(patch)
    executor = Executor(repo, state_dir=state_dir, ledger=ledger, remote=remote)
    if lane is not None:
        options = replace(options, branch=executor.open_lane(lane, onto=branch))
    if dry_run:
        show_dry_run(executor, executor.dry_run(text, options), diff=diff, json=json)
        return
    with status_line(json) as status:
        if status.enabled:  # no ticking thread where nothing would be shown
            options = replace(options, check_progress=check_elapsed(status))
        outcome = executor.call(text, options)
    finish_call(executor, outcome, diff=diff, json=json)


def show_dry_run(executor: Executor, view: PlanView, *, diff: bool, json: bool) -> None:
    """A dry run's plan (``apply`` or ``revert``): its lines, its diff if asked, or JSON."""
    planned = executor.plan_diff(view) if diff else None
    if json:
        _emit_report({**view.to_dict(), **(diff_fields(planned) if diff else {})})
        return
    base = str(view.base_commit)[:12]
    typer.echo(f"dry run: call {view.call_id[:12]} on {view.ref} at {base}")
    for line in view.lines():
        typer.echo(f"  {line}")
    if planned is not None:
        print_diff(planned)
    typer.echo("nothing was written")


def finish_call(executor: Executor, outcome: CallOutcome, *, diff: bool, json: bool) -> None:
    """Print a call's result (``apply`` or ``revert``) and exit with its code: the output first,
    byte for byte what the agent is given, then a line for each checkout that does not show the
    branch's tip (on stdout, where the agent reads; with ``--json``, a ``checkout_behind``
    field), then the diff if asked; on stderr the replay line and a missing git identity. A
    replay says so first, on the stream of the output (stdout when committed): that nothing ran
    now, what later commits did to the call's change, what to do (``replay_note`` with
    ``--json``)."""
    committed = diff_or_warning(executor, outcome.receipt) if diff else None
    extra = diff_fields(committed) if diff else {}
    if outcome.behind:
        extra["checkout_behind"] = [note.to_dict() for note in outcome.behind]
    if outcome.replay is not None:
        from applyonce.core.hints import CLI  # not for --help

        if json:
            extra["replay_note"] = "\n".join(outcome.replay.lines(CLI))
        else:
            stream = sys.stdout if outcome.receipt.status == "committed" else sys.stderr
            stream.write(outcome.replay.text(CLI))
            stream.flush()
    print_receipt(executor, outcome.receipt, json, extra=extra or None, replayed=outcome.replayed)
    for note in outcome.behind:
        typer.echo(note.line(), err=json)
    if committed is not None and not json:
        print_diff(committed)
    if outcome.replay_note is not None:
        typer.echo(f"applyonce: {outcome.replay_note}", err=True)
    new_commit = outcome.receipt.status == "committed" and not outcome.replayed
    if new_commit and (unsigned := executor.identity_warning()) is not None:
        typer.echo(f"warning: {unsigned}", err=True)
    executor.close()
    if outcome.receipt.exit_code:
        raise typer.Exit(outcome.receipt.exit_code)


def _trailer(item: str) -> tuple[str, str]:
    """``--trailer KEY=VALUE`` as ``(KEY, VALUE)`` (checked by ``CallOptions``)."""
    key, sep, value = item.partition("=")
    if not sep:
        raise UsageError(
            f"--trailer {item[:60]!r} is not KEY=VALUE",
            hint="write it as --trailer 'Co-authored-by=Name <mail>'",
        )
    return key, value
