"""The typer application every command registers on, and the options the commands share.

No business logic and no pygit2 in the CLI: resolve options, call the library, print, map errors to
the exit codes of docs/design.md §8 through :func:`applyonce.adapters.console.error_boundary`.
"""

from __future__ import annotations

import os
import sys
from gettext import gettext as _
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.core
import typer.main

import applyonce
from applyonce.adapters.console import SCHEMA_VERSION, emit_json, error_boundary

if TYPE_CHECKING:
    from applyonce.executor import Executor

# ctx.meta, shared by a command's context and its group's: whether the command line asks for
# --json, and what an internal error tells the user to do, for the error boundary's sake.
_JSON = "applyonce.json"
_CRASH_HINT = "applyonce.crash_hint"


def on_internal_error(ctx: typer.Context, hint: str) -> None:
    """What the running command's internal error (exit 3) tells the user to do, when the
    generic advice (``console.CRASH_HINT``: run recover) is not what is true for it."""
    ctx.meta[_CRASH_HINT] = hint


def _asks_json(args: list[str]) -> bool:
    """Whether ``--json`` is among ``args`` (before a ``--``): for a command line typer could not
    parse, whose options are therefore unknown."""
    return "--json" in (args[: args.index("--")] if "--" in args else args)


class Command(typer.core.TyperCommand):
    """Every command (``@app.command(cls=Command)``): notes for the error boundary whether
    ``--json`` was asked."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # typer's help names each value by its Python type (<str>, <list[str]>, <path>): noise.
        # A value an option does not name itself is named after the option, as click does.
        for param in self.params:
            if param.metavar is None and not getattr(param, "is_flag", False) and param.name:
                param.metavar = param.name.rstrip("_").upper()

    def format_options(self, ctx: Any, formatter: Any) -> None:
        """The Arguments, then the Options, as typer writes them; an argument's line shows its
        name only (``PATCH``, not ``PATCH <str>``)."""
        arguments: list[tuple[str, str]] = []
        options: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append((param.metavar or record[0], record[1]))
            elif param.param_type_name == "option":
                options.append(record)
        if arguments:
            with formatter.section(_("Arguments")):
                formatter.write_dl(arguments)
        if options:
            with formatter.section(_("Options")):
                formatter.write_dl(options)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta[_JSON] = _asks_json(args)  # the raw guess stands if parsing fails
        rest: list[str] = super().parse_args(ctx, args)
        ctx.meta[_JSON] = bool(ctx.params.get("json"))
        return rest


# Every command, in the order ``--help`` lists them (the order a user meets them), and the module
# of this package that defines it. A module is imported when one of its commands is asked for, not
# before: a call loads the one command it runs.
COMMANDS = {
    "apply": "apply",
    "revert": "revert",
    "recover": "recovery",
    "audit": "inspect",
    "show": "inspect",
    "log": "inspect",
    "replay": "inspect",
    "resolve": "recovery",
    "land": "land",
    "mcp": "serve",
    "schema": "serve",
    "demo": "serve",
    "version": "serve",
    "hook": "hook",
    "serve": "resident",
}


class _Commands(typer.core.TyperGroup):
    """The group of commands, loaded lazily: listing them imports nothing; a command's module is
    imported, and its commands built, when the command is looked up. Every command runs inside
    the one :func:`error_boundary`.

    typer (0.29) bundles its own click and its group is no ``click.Group``: the documented way is
    ``Typer(cls=...)`` with a ``TyperGroup`` whose ``list_commands`` and ``get_command`` keep
    click's meaning (click's "Lazily Loading Subcommands"), and ``typer.main.get_command`` to build
    the commands an imported module registered. typer suggests near names from the commands
    already built, so an unknown name builds them all."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self._looked_up: set[str] = set()  # an unknown name is searched for once
        self._every_module = False

    def invoke(self, ctx: Any) -> Any:
        # ctx.args: the command's arguments (typer has taken its name off), for the case where
        # the command is not even found.
        ctx.meta[_JSON] = _asks_json(list(ctx.args))
        with error_boundary(lambda: bool(ctx.meta.get(_JSON)), lambda: ctx.meta.get(_CRASH_HINT)):
            return super().invoke(ctx)

    def list_commands(self, ctx: Any) -> list[str]:
        """The commands of :data:`COMMANDS`, then any other already built."""
        return [*COMMANDS, *(name for name in self.commands if name not in COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command ``cmd_name``, its module imported first; a name :data:`COMMANDS` does not
        know imports every module of the package (a usage error's suggestions name them all)."""
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name not in self._looked_up:
            self._looked_up.add(cmd_name)
            self._load(COMMANDS.get(cmd_name))
            command = super().get_command(ctx, cmd_name)
        return command

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """``--help``'s list of commands: every module imported at once, the commands built
        once."""
        self._load(None)
        super().format_commands(ctx, formatter)

    def shell_complete(self, ctx: Any, incomplete: str) -> Any:
        """Shell completion lists every command: every module imported at once."""
        self._load(None)
        return super().shell_complete(ctx, incomplete)

    def _load(self, module: str | None) -> None:
        """Import the command module ``module``, or every one (``None``), and add the commands
        they register."""
        if module is None:
            if self._every_module:
                return
            self._every_module = True
        import_commands(module)
        # typer's documented way to a click command: the app, with what is now registered.
        built = typer.main.get_command(app)
        assert isinstance(built, typer.core.TyperGroup)
        for name, each in built.commands.items():
            self.commands.setdefault(name, each)


def import_commands(module: str | None = None) -> None:
    """Import the command module ``module`` of this package, or every one (``None``): importing
    one registers its commands on :data:`app`."""
    import importlib
    import pkgutil

    package = __name__.rpartition(".")[0]
    if module is not None:
        importlib.import_module(f"{package}.{module}")
        return
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        importlib.import_module(f"{package}.{info.name}")


def version_line() -> str:
    """``applyonce <version> (<package folder>, python <x.y.z>)``: which applyonce runs, from
    where, on which Python (an editable checkout, a venv, a tool install)."""
    folder = os.path.dirname(os.path.abspath(applyonce.__file__))
    python = ".".join(str(part) for part in sys.version_info[:3])
    return f"applyonce {applyonce.__version__} ({folder}, python {python})"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit()


app = typer.Typer(
    cls=_Commands,
    name="applyonce",
    help="Exactly-once apply_patch for coding agents: one patch, one commit, a receipt.",
    no_args_is_help=True,
    # --install-completion / --show-completion (bash, zsh, fish, PowerShell).
    add_completion=True,
    pretty_exceptions_enable=False,
    # Plain help and usage errors, as git prints them: no boxes, no colours, on a terminal or not
    # (rich's boxed panels are unreadable in a pipe, a log or a screen reader).
    rich_markup_mode=None,
)


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Exactly-once apply_patch for coding agents: one patch, one commit, a receipt."""


RepoOpt = Annotated[
    Path,
    typer.Option(
        "--repo", "-C", metavar="PATH", help="Path inside the Git repository.", show_default=False
    ),
]
StateOpt = Annotated[
    str | None,
    typer.Option(
        "--state-dir",
        metavar="DIR",
        help="Receipts and ledger directory (default: <git dir>/applyonce).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")]
# Where a fleet of clones shares its record and its commit point (flow.context.Fleet).
LedgerOpt = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        metavar="URL",
        help="The ledger clones share: a postgresql:// URL, or 'local' for the state directory's "
        "own file (default: git config applyonce.ledger, else local).",
        show_default=False,
    ),
]
RemoteOpt = Annotated[
    str | None,
    typer.Option(
        "--remote",
        metavar="NAME",
        help="Publish to this remote's branch: the push is the commit point ('.': this "
        "repository's own branch; default: git config applyonce.remote, else the own branch).",
        show_default=False,
    ),
]
# Options that shape every call, shared by 'apply' and 'mcp'.
BranchOpt = Annotated[
    str | None, typer.Option(metavar="NAME", help="Branch to commit to (default: HEAD's).")
]
ContractOpt = Annotated[
    Path | None,
    typer.Option(metavar="FILE", help="Task contract file; its sha256 is part of the call ID."),
]
ContractShaOpt = Annotated[
    str | None, typer.Option(metavar="SHA256", help="The contract's sha256, given directly.")
]
AttemptOpt = Annotated[int, typer.Option(min=1, metavar="N", help="The harness's attempt number.")]
CheckOpt = Annotated[
    list[str] | None,
    typer.Option(
        metavar="CMD",
        help="Command run in a scratch checkout; repeatable. Replaces git config applyonce.check.",
    ),
]
CheckTimeoutOpt = Annotated[
    float, typer.Option(metavar="SECONDS", help="Seconds per --check command.")
]
LeaseOpt = Annotated[
    float | None,
    typer.Option(
        metavar="SECONDS",
        help="Seconds a call's claim holds unless renewed (default: git config "
        "applyonce.leaseSeconds, else 30).",
        show_default=False,
    ),
]
SkipCheckOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--skip-check",
        metavar="NAME",
        help="Built-in check not to run: syntax or markers; repeatable. Replaces git config "
        "applyonce.skipCheck.",
    ),
]
DryRunOpt = Annotated[bool, typer.Option(help="Print the plan; write nothing.")]
DiffOpt = Annotated[
    bool,
    typer.Option(
        "--diff",
        help="Also print the call's unified diff (git's format), after its output and an empty "
        "line; with --json, a 'diff' field.",
    ),
]
DirtyOpt = Annotated[
    str | None,
    typer.Option(
        "--dirty",
        help="A touched path with uncommitted changes: refuse the call (exit 4), or commit the "
        "changes first in a snapshot commit under the call's (default: git config "
        "applyonce.dirty, else refuse).",
        metavar="refuse|commit",
        show_default=False,
    ),
]
NoVerifyOpt = Annotated[
    bool,
    typer.Option(
        "--no-verify",
        help="Do not run the repository's pre-commit and commit-msg hooks, as 'git commit "
        "--no-verify' (recorded in the receipt).",
    ),
]

# The commit's policy (docs/design.md §2), shared by 'apply', 'revert' and 'mcp'.
SignOpt = Annotated[
    bool | None,
    typer.Option(
        "--sign/--no-sign",
        help="Sign the commit as 'git commit -S' does (gpg.format, user.signingKey), or not "
        "(default: git config commit.gpgSign).",
        show_default=False,
    ),
]
SignoffOpt = Annotated[
    bool | None,
    typer.Option(
        "--signoff/--no-signoff",
        help="Add a DCO 'Signed-off-by:' of the committer (default: git config applyonce.signoff).",
        show_default=False,
    ),
]
AuthorOpt = Annotated[
    str | None,
    typer.Option(
        metavar="'NAME <MAIL>'",
        help="The commit's author (e.g. a bot); the committer stays git's identity.",
        show_default=False,
    ),
]
CoAuthorOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--co-author",
        metavar="'NAME <MAIL>'",
        help="Add a 'Co-authored-by:' trailer; repeatable.",
        show_default=False,
    ),
]


def _emit_json(data: object) -> None:
    emit_json(data)


def _emit_report(data: dict[str, object]) -> None:
    """A report (recover, audit, replay, a dry run, a release) as JSON, with its schema version."""
    emit_json({"schema_version": SCHEMA_VERSION, **data})


def open_executor(
    repo: Path,
    *,
    state_dir: str | None = None,
    read_only: bool = False,
    ledger: str | None = None,
    remote: str | None = None,
) -> Executor:
    """The :class:`~applyonce.executor.Executor` of a command, imported when a command runs (not
    when the commands register: ``applyonce --help`` and ``--version`` need none of it)."""
    from applyonce.executor import Executor

    return Executor(repo, state_dir=state_dir, read_only=read_only, ledger=ledger, remote=remote)
