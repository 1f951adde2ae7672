"""``applyonce serve``: the repository's resident server (docs/design.md §13)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from applyonce.adapters.cli.app import Command, RepoOpt, app
from applyonce.errors import UsageError

IDLE_KEY = "applyonce.serveIdle"


@app.command(
    "serve",
    epilog="Exit codes: 0 stopped (idle, SIGTERM or Ctrl-C) or another server serves the "
    "repository, 2 usage.",
    cls=Command,
)
def serve_command(
    repo: RepoOpt = Path("."),
    idle: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            help="Stop after this many seconds without a call (default: git config "
            "applyonce.serveIdle, else 60).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve this repository's 'apply', 'revert' and 'apply_patch' calls from a resident process.

    The calls hand themselves to it over a Unix socket in the repository's state folder
    (.git/applyonce/serve.sock) and run in a worker forked from it, with the caller's command
    line, folder, environment and standard streams: the same output, exit code, commit and
    receipt as in their own process, without the start-up. One server a repository (its linked
    worktrees included); it stops by itself after --idle seconds without a call.

    Calls start one on demand only with APPLYONCE_SERVE=1 or 'git config applyonce.serve true';
    APPLYONCE_SERVE=0 makes them ignore a running one.
    """
    from applyonce.adapters import resident

    start = str(repo.absolute())
    if idle is None:
        idle = _configured_idle(start)
    if not idle > 0:
        raise UsageError(f"--idle must be a positive number of seconds, not {idle:g}")
    try:
        resident.serve(
            start,
            idle,
            ready=lambda path: print(f"applyonce serve: listening on {path}", file=sys.stderr),
        )
    except LookupError:
        raise UsageError(
            f"{start} is not in a Git repository; pass --repo PATH inside one"
        ) from None
    except resident.AlreadyServing as taken:
        print(f"applyonce serve: another server serves {taken} already", file=sys.stderr)


def _configured_idle(start: str) -> float:
    """``applyonce.serveIdle`` from git config, else the default."""
    import subprocess

    from applyonce.adapters.resident import DEFAULT_IDLE

    found = subprocess.run(
        ["git", "-C", start, "config", "--get", IDLE_KEY],
        capture_output=True,
        text=True,
        check=False,
    )
    text = found.stdout.strip()
    if found.returncode != 0 or not text:
        return DEFAULT_IDLE
    try:
        return float(text)
    except ValueError:
        raise UsageError(
            f"git config {IDLE_KEY} is {text!r}, not a number of seconds; fix it with "
            f"'git config {IDLE_KEY} 60'"
        ) from None
