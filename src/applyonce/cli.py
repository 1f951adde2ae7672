"""The command line: a thin typer layer over :class:`applyonce.executor.Executor`.

No business logic and no pygit2 here: resolve options, call the library, print, map errors to the
exit codes of DESIGN §8 through :func:`error_boundary`.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Annotated, Any, cast

import orjson
import typer
import typer.core

import applyonce
from applyonce.console import (
    contract_sha256,
    error_boundary,
    print_receipt,
    read_patch,
    terminal_approver,
)
from applyonce.errors import (
    EXIT_CONFLICT,
    EXIT_INTERRUPTED,
    EXIT_PROBLEMS,
    EXIT_UNKNOWN,
    EXIT_USAGE,
    UsageError,
)
from applyonce.executor import CallOptions, Executor
from applyonce.flow.leases import checked_lease
from applyonce.flow.recovery_report import RecoveryReport
from applyonce.flow.sync import sync_warnings
from applyonce.patch import PatchFormat


class _Commands(typer.core.TyperGroup):
    """Every command runs inside the one :func:`error_boundary`."""

    def invoke(self, ctx: Any) -> Any:
        with error_boundary():
            return super().invoke(ctx)


app = typer.Typer(
    cls=_Commands,
    name="applyonce",
    help="Exactly-once apply_patch for coding agents: one patch, one commit, a receipt.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

RepoOpt = Annotated[
    Path, typer.Option("--repo", "-C", help="Path inside the Git repository.", show_default=False)
]
StateOpt = Annotated[
    str | None,
    typer.Option(
        "--state-dir", help="Receipts and ledger directory (default: <git dir>/applyonce)."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")]
# Options that shape every call, shared by 'apply' and 'mcp'.
BranchOpt = Annotated[str | None, typer.Option(help="Branch to commit to (default: HEAD's).")]
ContractOpt = Annotated[
    Path | None, typer.Option(help="Task contract file; its sha256 is part of the call ID.")
]
ContractShaOpt = Annotated[str | None, typer.Option(help="The contract's sha256, given directly.")]
AttemptOpt = Annotated[int, typer.Option(min=1, help="The harness's attempt number.")]
CheckOpt = Annotated[
    list[str] | None, typer.Option(help="Command run in a scratch checkout; repeatable.")
]
CheckTimeoutOpt = Annotated[float, typer.Option(help="Seconds per --check command.")]
LeaseOpt = Annotated[
    float | None,
    typer.Option(
        help="Seconds a call's claim holds unless renewed (default: git config "
        "applyonce.leaseSeconds, else 30).",
        show_default=False,
    ),
]
SkipCheckOpt = Annotated[
    list[str] | None,
    typer.Option("--skip-check", help="Built-in check not to run: syntax or markers; repeatable."),
]


@app.command()
def apply(
    patch: Annotated[str, typer.Argument(help="Patch file, or - for standard input.")] = "-",
    repo: RepoOpt = Path("."),
    branch: BranchOpt = None,
    contract: ContractOpt = None,
    contract_sha: ContractShaOpt = None,
    attempt: AttemptOpt = 1,
    idempotency_key: Annotated[
        str | None, typer.Option(help="Caller-chosen call key (replaces attempt and arguments).")
    ] = None,
    tool_call_id: Annotated[
        str | None, typer.Option(help="The model's tool-call ID, recorded.")
    ] = None,
    format: Annotated[str, typer.Option(help="auto, codex, unified or edit-json.")] = "auto",
    check: CheckOpt = None,
    check_timeout: CheckTimeoutOpt = 300.0,
    skip_check: SkipCheckOpt = None,
    protect: Annotated[
        list[str] | None, typer.Option(help="Glob of paths that need approval; repeatable.")
    ] = None,
    confirm: Annotated[bool, typer.Option(help="Show the plan and ask before committing.")] = False,
    dry_run: Annotated[bool, typer.Option(help="Print the plan; write nothing.")] = False,
    lease_seconds: LeaseOpt = None,
    state_dir: StateOpt = None,
    json: JsonOpt = False,
) -> None:
    """Apply a patch as one commit, exactly once (exit 0 committed, 1 rejected, 4 conflict)."""
    if format not in ("auto", "codex", "unified", "edit-json"):
        raise UsageError(
            f"unknown --format {format!r}", hint="use auto, codex, unified or edit-json"
        )
    options = CallOptions(
        branch=branch,
        contract_sha256=contract_sha256(contract, contract_sha),
        attempt=attempt,
        idempotency_key=idempotency_key,
        tool_call_id=tool_call_id,
        format=cast(PatchFormat, format),
        checks=check or [],
        check_timeout=check_timeout,
        skip_checks=skip_check or [],
        protect=protect or [],
        approve=terminal_approver() if confirm else None,
        require_approval=confirm,
        lease_seconds=lease_seconds,
    )
    text = read_patch(patch)
    executor = Executor(repo, state_dir=state_dir)
    if dry_run:
        view = executor.dry_run(text, options)
        if json:
            typer.echo(orjson.dumps(view.to_dict(), option=orjson.OPT_INDENT_2).decode())
        else:
            base = str(view.base_commit)[:12]
            typer.echo(f"dry run: call {view.call_id[:12]} on {view.ref} at {base}")
            for line in view.lines():
                typer.echo(f"  {line}")
            typer.echo("nothing was written")
        return
    outcome = executor.call(text, options)
    print_receipt(executor, outcome.receipt, json)
    for warning in sync_warnings(outcome.sync_reports):
        typer.echo(f"warning: {warning}", err=True)
    executor.close()
    if outcome.receipt.exit_code:
        raise typer.Exit(outcome.receipt.exit_code)


@app.command()
def show(
    call_id: Annotated[str, typer.Argument(help="Call ID or a unique prefix (6+ characters).")],
    repo: RepoOpt = Path("."),
    state_dir: StateOpt = None,
    json: JsonOpt = False,
) -> None:
    """Show one call's verified receipt."""
    executor = Executor(repo, state_dir=state_dir, read_only=True)
    receipt = executor.show(executor.find_call(call_id))
    if json:
        print_receipt(executor, receipt, True)
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
    typer.echo(f"updated   {receipt.updated_at}")


@app.command()
def log(
    repo: RepoOpt = Path("."),
    state_dir: StateOpt = None,
    json: JsonOpt = False,
) -> None:
    """List the calls in the ledger, oldest first."""
    executor = Executor(repo, state_dir=state_dir, read_only=True)
    rows = executor.calls()
    if json:
        _emit_json([row.model_dump(mode="json") for row in rows])
        return
    if not rows:
        typer.echo("no calls yet")
    for r in rows:
        commit = (r.commit or "-")[:12]
        typer.echo(f"{r.updated_at}  {r.call_id[:12]}  {r.state:<9} {commit:<12}  {r.ref}")


def _emit_json(data: object) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")


@app.command()
def recover(
    repo: RepoOpt = Path("."),
    state_dir: StateOpt = None,
    json: JsonOpt = False,
) -> None:
    """Finish every interrupted call by asking Git; never applies a patch twice."""
    executor = Executor(repo, state_dir=state_dir)
    report = executor.recover()
    if json:
        _emit_json(report.to_dict())
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


@app.command()
def replay(
    repo: RepoOpt = Path("."),
    state_dir: StateOpt = None,
    json: JsonOpt = False,
) -> None:
    """Re-derive every call's decision and output from the ledger and receipts alone (no Git)."""
    executor = Executor(repo, state_dir=state_dir, read_only=True)
    report = executor.replay()
    if json:
        _emit_json(report.to_dict())
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


@app.command()
def audit(
    repo: RepoOpt = Path("."),
    branch: Annotated[
        str | None, typer.Option("--ref", "--branch", help="Branch to audit (default: HEAD's).")
    ] = None,
    since: Annotated[str | None, typer.Option(help="Only commits after this revision.")] = None,
    state_dir: StateOpt = None,
    json: JsonOpt = False,
) -> None:
    """Check every Call-Id commit against its receipt (exit 0 clean, 1 problems)."""
    executor = Executor(repo, state_dir=state_dir, read_only=True)
    progress = None
    if sys.stderr.isatty() and not json:

        def progress(count: int) -> None:
            sys.stderr.write(f"\raudit: {count} commits read")
            sys.stderr.flush()

    report = executor.audit(branch=branch, since=since, progress=progress)
    if progress is not None:
        sys.stderr.write("\r\033[K")
    if json:
        _emit_json(report.to_dict())
    else:
        for p in report.problems:
            typer.echo(f"{p.kind:<12} {p.call_id[:12]}  {p.message}; {p.hint}")
        verdict = "clean" if report.clean else f"{len(report.problems)} problem(s)"
        if report.copies:
            typer.echo(
                f"{report.copies} commit(s) copy a call that landed on another branch "
                "(cherry-picks); that branch's audit checks them"
            )
        typer.echo(
            f"audited {report.commits} Call-Id commit(s) on {report.ref} and "
            f"{report.receipts} receipt(s): {verdict}"
        )
    if not report.clean:
        raise typer.Exit(EXIT_PROBLEMS)


@app.command()
def resolve(
    call_id: Annotated[str, typer.Argument(help="Call ID or a unique prefix (6+ characters).")],
    as_: Annotated[
        str | None, typer.Option("--as", help="committed or rejected.", show_default=False)
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
    json: JsonOpt = False,
) -> None:
    """Settle a call whose outcome is unknown, by a person's decision; or free a stuck claim.

    --release: free the claim of a call whose process is gone where this host cannot see (another
    host, a renamed container); the next call or 'applyonce recover' settles it through Git.
    """
    if release:
        if as_ is not None or commit is not None:
            raise UsageError(
                "--release frees a claim; it cannot be combined with --as or --commit",
                hint="run 'applyonce resolve CALL_ID --release' alone",
            )
        released = Executor(repo, state_dir=state_dir).release(call_id, note=note or "")
        if json:
            _emit_json(released.to_dict())
        else:
            typer.echo(released.line())
        return
    if as_ is None or note is None:
        raise UsageError(
            "resolve needs --as committed|rejected with --note TEXT, or --release",
            hint="see 'applyonce resolve --help'",
        )
    executor = Executor(repo, state_dir=state_dir)
    full = executor.find_call(call_id)
    receipt = executor.resolve(full, outcome=as_, note=note, commit=commit)
    if json:
        print_receipt(executor, receipt, True)
    else:
        typer.echo(f"call {full[:12]} resolved as {receipt.status}")


@app.command("mcp")
def mcp_command(
    repo: RepoOpt = Path("."),
    branch: BranchOpt = None,
    contract: ContractOpt = None,
    contract_sha: ContractShaOpt = None,
    attempt: AttemptOpt = 1,
    check: CheckOpt = None,
    check_timeout: CheckTimeoutOpt = 300.0,
    skip_check: SkipCheckOpt = None,
    lease_seconds: LeaseOpt = None,
    state_dir: StateOpt = None,
) -> None:
    """Serve apply_patch and patch_receipt to an MCP client over stdin/stdout.

    Register it as a stdio MCP server: command 'applyonce', args 'mcp --repo PATH'.

    Stdout carries only the protocol; logs go to stderr.
    """
    if not check_timeout > 0:
        raise UsageError(f"--check-timeout must be more than 0, not {check_timeout:g}")
    if lease_seconds is not None:
        checked_lease(lease_seconds)  # refused now, not at every call
    from applyonce.agents import PatchRunner
    from applyonce.mcp_server import serve

    options = CallOptions(
        branch=branch,
        contract_sha256=contract_sha256(contract, contract_sha),
        attempt=attempt,
        checks=check or [],
        check_timeout=check_timeout,
        skip_checks=skip_check or [],
        lease_seconds=lease_seconds,
    )
    serve(PatchRunner(repo, state_dir=state_dir, options=options))


@app.command("schema")
def schema_command(
    for_: Annotated[
        str, typer.Option("--for", help="openai, anthropic or mcp.", show_default=False)
    ],
    api: Annotated[str, typer.Option(help="With --for openai: responses or chat.")] = "responses",
    variant: Annotated[
        str | None,
        typer.Option(help="With --for openai: function or custom (grammar); default both."),
    ] = None,
) -> None:
    """Print the apply_patch tool definition to register with a model API, as JSON.

    --for openai: the function tool and the custom tool held to a Lark grammar (pick one).

    --for anthropic: the Messages API tool. --for mcp: the tools 'applyonce mcp' lists.
    """
    from applyonce.schemas import schema_for

    _emit_json(schema_for(for_, api=api, variant=variant))  # type: ignore[arg-type]


@app.command()
def demo(
    workspace: Annotated[
        Path | None, typer.Option(help="Workspace folder (default: the embedded demo).")
    ] = None,
    into: Annotated[
        Path | None, typer.Option(help="Where to build the demo repo (default: a temp folder).")
    ] = None,
) -> None:
    """Run the example workspace end to end, with a real crash and its recovery."""
    from applyonce.demo import run_demo

    raise typer.Exit(run_demo(workspace, into, echo=typer.echo))


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(f"applyonce {applyonce.__version__}")


def _terminate(signum: int, frame: object) -> None:
    # SIGTERM unwinds like Ctrl-C does: a running --check is killed with its process group, and
    # whatever was in flight is left for 'applyonce recover', as after any crash.
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()

__all__ = ["EXIT_USAGE", "app", "main"]
