"""``applyonce revert``: undo a call's commit with one commit, exactly once."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from applyonce.adapters.cli.app import (
    AttemptOpt,
    AuthorOpt,
    CheckOpt,
    CheckTimeoutOpt,
    CoAuthorOpt,
    Command,
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
    app,
)
from applyonce.adapters.cli.apply import finish_call, show_dry_run
from applyonce.adapters.console import check_elapsed, status_line

if TYPE_CHECKING:
    from applyonce.flow.options import DirtyMode


@app.command(
    epilog="Exit codes: 0 committed (new or replayed; --dry-run: plan printed), 1 nothing left "
    "to undo, 2 usage or not a committed call on the branch, 3 internal, 4 later commits changed "
    "the same lines (retryable) or the call is running, 5 outcome unknown.",
    cls=Command,
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
    dirty: DirtyOpt = None,
    no_verify: NoVerifyOpt = False,
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
) -> None:
    """Undo a committed call with one new commit, exactly once.

    Repeating it returns the stored result; the new commit carries 'Reverts-Call-Id'.
    """
    from applyonce.executor import CallOptions, Executor

    options = CallOptions(
        branch=branch,
        attempt=attempt,
        checks=check,
        check_timeout=check_timeout,
        skip_checks=skip_check,
        dirty=cast("DirtyMode | None", dirty),  # checked by CallOptions
        no_verify=no_verify,
        lease_seconds=lease_seconds,
        sign=sign,
        signoff=signoff,
        author=author,
        co_authors=co_author or (),
    )
    executor = Executor(repo, state_dir=state_dir, ledger=ledger, remote=remote)
    full = executor.find_call(call_id)
    if dry_run:
        show_dry_run(executor, executor.dry_run_revert(full, options), diff=diff, json=json)
        return
    with status_line(json) as status:
        if status.enabled:  # no ticking thread where nothing would be shown
            options = replace(options, check_progress=check_elapsed(status))
        outcome = executor.revert(full, options)
    finish_call(executor, outcome, diff=diff, json=json)
