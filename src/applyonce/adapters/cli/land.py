"""``applyonce land``: move the calls of lanes onto a target branch, exactly once each."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from applyonce.adapters.cli.app import (
    CheckTimeoutOpt,
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
from applyonce.errors import UsageError


@app.command(
    epilog="Exit codes: 0 every lane landed (or had nothing to land), 1 a lane is blocked by a "
    "call that no longer applies or fails its checks (the others went on), 2 usage, 3 internal, "
    "4 a landing is held by another process or the target kept moving (run it again), "
    "5 outcome unknown (run 'applyonce recover').",
    cls=Command,
)
def land(
    repo: RepoOpt = Path("."),
    lane: Annotated[
        str | None, typer.Option(metavar="NAME", help="The lane to land (branch agent/NAME).")
    ] = None,
    all_lanes: Annotated[
        bool, typer.Option("--all", help="Land every lane (every branch agent/*).")
    ] = False,
    onto: Annotated[
        str | None,
        typer.Option(metavar="BRANCH", help="The target branch (default: HEAD's branch)."),
    ] = None,
    check_timeout: CheckTimeoutOpt = 300.0,
    lease_seconds: LeaseOpt = None,
    state_dir: StateOpt = None,
    ledger: LedgerOpt = None,
    remote: RemoteOpt = None,
    json: JsonOpt = False,
) -> None:
    """Land each call of a lane onto the target branch as one commit, exactly once.

    Each lane call is applied again on the target's tip with its own patch, its checks run on
    the merged tree; the commit carries 'Lands-Call-Id' and 'Lane-Commit'. A call that no longer
    applies blocks its lane only.
    """
    from applyonce.executor import CallOptions

    if (lane is None) == (not all_lanes):
        raise UsageError(
            "land needs one of --lane NAME or --all",
            hint="pass --lane NAME, or --all for every lane",
        )
    options = CallOptions(check_timeout=check_timeout, lease_seconds=lease_seconds)
    executor = open_executor(repo, state_dir=state_dir, ledger=ledger, remote=remote)
    report = executor.land(lane, onto=onto, options=options)
    executor.close()
    if json:
        _emit_report(
            {
                "target": report.target,
                "landed": [asdict(each) for each in report.landed],
                "blocked": [asdict(each) for each in report.blocked],
                "already": report.already,
                "exit_code": report.exit_code,
            }
        )
    else:
        target = report.target.removeprefix("refs/heads/")
        for done in report.landed:
            typer.echo(
                f"landed: call {done.call_id[:12]} of {done.lane.removeprefix('refs/heads/')} "
                f"as commit {done.commit[:12]} on {target} (lane commit {done.lane_commit[:12]})"
            )
        for stop in report.blocked:
            call = (
                f"call {stop.call_id[:12]}" if stop.call_id else f"commit {stop.lane_commit[:12]}"
            )
            typer.echo(
                f"blocked: lane {stop.lane.removeprefix('refs/heads/')} at {call}: "
                f"{stop.message} ({stop.kind}); {stop.waiting} later call(s) of the lane wait"
            )
            if stop.hint:
                typer.echo(f"  hint: {stop.hint}")
            for line in stop.output.splitlines()[1:]:
                typer.echo(f"  {line}")
        typer.echo(
            f"land: {len(report.landed)} landed on {target}, {report.already} already there, "
            f"{len(report.blocked)} lane(s) blocked"
        )
    if report.exit_code:
        raise typer.Exit(report.exit_code)
