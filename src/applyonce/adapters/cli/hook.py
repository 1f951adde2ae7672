"""The server side: ``hook pre-receive`` (run by git in a bare repository) and ``hook install``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from applyonce.adapters.cli.app import Command, app
from applyonce.errors import UsageError

hook_app = typer.Typer(
    name="hook",
    help="Server-side hooks: refuse a push that would land a call twice on a branch.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(hook_app)


@hook_app.command(
    "pre-receive",
    epilog="Exit codes: 0 the push may go on, 1 refused (one line per refused ref), "
    "3 internal error (the push is refused too).",
    cls=Command,
)
def pre_receive() -> None:
    """Run by git as a bare repository's pre-receive hook (reads 'OLD NEW REF' lines on stdin):
    refuses a push that would put a Call-Id on a branch that already holds it. The Call-Ids are
    those of the pushed commits' trailers and of the push options 'call-id=ID'."""
    from applyonce.git.serverhook import check_push, parse_updates, push_option_call_ids

    git_dir = Path(os.environ.get("GIT_DIR", "."))
    updates = parse_updates(sys.stdin.read().splitlines())
    refusals = check_push(
        git_dir,
        updates,
        push_option_call_ids(os.environ),
        incoming=os.environ.get("GIT_QUARANTINE_PATH"),
    )
    for line in refusals:
        print(line, file=sys.stderr)
    if refusals:
        raise typer.Exit(1)


@hook_app.command(
    "install",
    epilog="Exit codes: 0 installed, 2 usage (not a bare repository, another pre-receive hook).",
    cls=Command,
)
def install(
    bare: Annotated[
        Path,
        typer.Option(
            "--bare",
            metavar="PATH",
            help="The bare repository the server serves.",
            show_default=False,
        ),
    ],
    force: Annotated[
        bool, typer.Option("--force", help="Replace a pre-receive hook that is there.")
    ] = False,
) -> None:
    """Install the pre-receive hook in a bare repository (hooks/pre-receive runs this Python's
    'applyonce hook pre-receive') and set receive.advertisePushOptions, so that applyonce's
    clients name their calls in push options."""
    from applyonce.git.serverhook import install_hook

    if not (bare / "HEAD").is_file() or not (bare / "objects").is_dir():
        raise UsageError(
            f"{bare} is not a bare repository",
            hint="pass the server's repository, e.g. --bare /srv/git/app.git",
        )
    try:
        hook = install_hook(bare, sys.executable, force=force)
    except NotADirectoryError:
        raise UsageError(
            f"{bare} is not a bare repository",
            hint="pass the server's repository, e.g. --bare /srv/git/app.git",
        ) from None
    except FileExistsError:
        raise UsageError(
            f"{bare / 'hooks' / 'pre-receive'} is another pre-receive hook",
            hint="call 'applyonce hook pre-receive' from it, or pass --force to replace it",
        ) from None
    print(f"installed {hook}")
