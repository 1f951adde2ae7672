"""The server side: ``hook pre-receive`` (run by git in a bare repository) and ``hook install``."""

from __future__ import annotations

import enum
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from applyonce.adapters.cli.app import Command, app
from applyonce.errors import UsageError


class HookAction(enum.StrEnum):
    PRE_RECEIVE = "pre-receive"
    INSTALL = "install"


_NOT_BARE_HINT = "pass the server's repository, e.g. --bare /srv/git/app.git"


@app.command(
    "hook",
    epilog="Exit codes: 0 the push may go on (pre-receive) or the hook is installed (install),"
    " 1 the push is refused (one line per refused ref), 2 usage (install: not a bare"
    " repository, or another pre-receive hook), 3 internal error (the push is refused too).",
    cls=Command,
)
def hook(
    action: Annotated[
        HookAction,
        typer.Argument(
            help="'pre-receive': run by git as a bare repository's pre-receive hook ('OLD NEW"
            " REF' lines on stdin). 'install': write that hook into --bare PATH.",
            show_default=False,
        ),
    ],
    bare: Annotated[
        Path | None,
        typer.Option(
            "--bare",
            metavar="PATH",
            help="install: the bare repository the server serves.",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="install: keep a pre-receive hook that is there as pre-receive.chained,"
            " which the new hook runs first.",
        ),
    ] = False,
) -> None:
    """The server's guard: refuse a push that would put a Call-Id on a branch that already
    holds it (the pushed commits' trailers and the push options 'call-id=ID'), one line per
    refused ref naming the call and the commit holding it. 'applyonce hook install --bare PATH'
    writes hooks/pre-receive (running this Python's 'applyonce hook pre-receive') and sets
    receive.advertisePushOptions, so that applyonce's clients name their calls in push options."""
    if action is HookAction.PRE_RECEIVE:
        _pre_receive()
    else:
        _install(bare, force=force)


def _pre_receive() -> None:
    from applyonce.git.serverhook import (
        UncheckedPushError,
        check_push,
        parse_updates,
        push_option_call_ids,
    )

    git_dir = Path(os.environ.get("GIT_DIR", "."))
    updates = parse_updates(sys.stdin.read().splitlines())
    try:
        refusals = check_push(
            git_dir,
            updates,
            push_option_call_ids(os.environ),
            incoming=os.environ.get("GIT_QUARANTINE_PATH"),
        )
    except UncheckedPushError as exc:
        # The pusher reads this line (and the model behind it): nothing to recover in its
        # clone, no traceback, no crash log's path of the server's.
        print(exc, file=sys.stderr)
        raise typer.Exit(3) from None
    for line in refusals:
        print(line, file=sys.stderr)
    if refusals:
        raise typer.Exit(1)


def _install(bare: Path | None, *, force: bool) -> None:
    from applyonce.git.serverhook import HooksElsewhereError, install_hook

    if bare is None:
        raise UsageError("hook install needs --bare PATH", hint=_NOT_BARE_HINT)
    if not (bare / "HEAD").is_file() or not (bare / "objects").is_dir():
        raise UsageError(f"{bare} is not a bare repository", hint=_NOT_BARE_HINT)
    try:
        installed, kept = install_hook(bare, sys.executable, force=force)
    except NotADirectoryError:
        raise UsageError(f"{bare} is not a bare repository", hint=_NOT_BARE_HINT) from None
    except HooksElsewhereError as exc:
        raise UsageError(
            f"git runs the hooks of {bare} from {exc.args[0]} (core.hooksPath), not from its"
            " hooks/ directory",
            hint="call 'applyonce hook pre-receive' from the pre-receive hook there, passing it"
            " the hook's stdin, or unset core.hooksPath",
        ) from None
    except FileExistsError as exc:
        if force:
            raise UsageError(
                f"{exc.args[0]} is there already, kept by an earlier install",
                hint=f"merge {bare / 'hooks' / 'pre-receive'} into it by hand, then install again",
            ) from None
        raise UsageError(
            f"{bare / 'hooks' / 'pre-receive'} is another pre-receive hook",
            hint="call 'applyonce hook pre-receive' from it, or pass --force to keep it as"
            " pre-receive.chained, run first",
        ) from None
    also = "" if kept is None else f" (the hook that was there kept as {kept}, run first)"
    print(f"installed {installed}{also}")
