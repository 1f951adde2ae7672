"""The typer application every command registers on, and the options the commands share.

No business logic and no pygit2 in the CLI: resolve options, call the library, print, map errors to
the exit codes of DESIGN §8 through :func:`applyonce.console.error_boundary`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
import typer.core

from applyonce.console import error_boundary
from applyonce.errors import UsageError
from applyonce.flow.options import DIRTY_MODES, DirtyMode


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
    list[str] | None,
    typer.Option(
        help="Command run in a scratch checkout; repeatable. Replaces git config applyonce.check."
    ),
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
    typer.Option(
        "--skip-check",
        help="Built-in check not to run: syntax or markers; repeatable. Replaces git config "
        "applyonce.skipCheck.",
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


def dirty_mode(value: str | None) -> DirtyMode | None:
    """``--dirty``'s value, checked (None: not given; git config decides)."""
    if value is not None and value not in DIRTY_MODES:
        raise UsageError(f"unknown --dirty {value!r}", hint="use refuse or commit")
    return value


def _emit_json(data: object) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
