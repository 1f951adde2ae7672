"""The command line: a thin typer layer over :class:`applyonce.executor.Executor`.

:mod:`~applyonce.adapters.cli.app` holds the typer app and the shared options; each command lives in
the module of its kind (``apply``; ``revert``; ``inspect``: show, log, replay, audit;
``recovery``: recover, resolve; ``serve``: mcp, schema, demo, version) and registers itself on
import. A module is imported when one of its commands is looked up (``app.COMMANDS``): a command
line loads the command it runs, ``--help`` and shell completion all of them.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

import typer.main

from applyonce.adapters.cli.app import app
from applyonce.adapters.console import one_line_warnings
from applyonce.errors import EXIT_INTERRUPTED, EXIT_USAGE


def _terminate(signum: int, frame: object) -> None:
    # SIGTERM unwinds like Ctrl-C does: a running --check is killed with its process group, and
    # whatever was in flight is left for 'applyonce recover', as after any crash.
    raise SystemExit(128 + signum)


# The click command of :data:`app`, built ahead by :func:`prebuild` (the resident server, before
# it forks its workers); None: each run builds its own, as typer does.
_prebuilt: Any = None


def prebuild(*commands: str) -> None:
    """Build the command line once, with ``commands`` and their options' converters, so that
    every later :func:`main` in this process (a resident server's forked workers) reuses them: a
    call through the server then parses its command line without building it again."""
    global _prebuilt
    group = typer.main.get_command(app)
    context = group.make_context("applyonce", [], resilient_parsing=True)
    built = [group, *(group.get_command(context, name) for name in commands)]  # type: ignore[attr-defined]
    for command in built:
        for param in command.get_params(context):
            runtime = getattr(param, "get_runtime_param", None)
            if runtime is not None:
                runtime()  # typer builds a converter at first use and keeps it on the option
    _prebuilt = group


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    one_line_warnings()
    try:
        # Named as installed, also under 'python -m applyonce': the usage lines say
        # 'applyonce ...', and shell completion reads _APPLYONCE_COMPLETE.
        if _prebuilt is not None:
            _prebuilt(prog_name="applyonce")
        else:
            app(prog_name="applyonce")
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)


__all__ = ["EXIT_USAGE", "app", "main", "prebuild"]
