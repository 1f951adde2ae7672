"""The commands around the core: ``mcp`` (the server), ``schema``, ``demo`` and ``version``."""

from __future__ import annotations

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
    DirtyOpt,
    LeaseOpt,
    LedgerOpt,
    NoVerifyOpt,
    RemoteOpt,
    RepoOpt,
    SignoffOpt,
    SignOpt,
    SkipCheckOpt,
    StateOpt,
    _emit_json,
    app,
    on_internal_error,
    version_line,
)
from applyonce.adapters.console import contract_sha256
from applyonce.errors import UsageError

if TYPE_CHECKING:
    from applyonce.flow.options import DirtyMode


@app.command(
    "mcp",
    epilog="Exit codes: 0 the client ended the session, 2 usage, 3 internal error.",
    cls=Command,
)
def mcp_command(
    ctx: typer.Context,
    repo: RepoOpt = Path("."),
    branch: BranchOpt = None,
    contract: ContractOpt = None,
    contract_sha: ContractShaOpt = None,
    attempt: AttemptOpt = 1,
    check: CheckOpt = None,
    check_timeout: CheckTimeoutOpt = 300.0,
    skip_check: SkipCheckOpt = None,
    dirty: DirtyOpt = None,
    no_verify: NoVerifyOpt = False,
    lease_seconds: LeaseOpt = None,
    state_dir: StateOpt = None,
    ledger: LedgerOpt = None,
    remote: RemoteOpt = None,
    sign: SignOpt = None,
    signoff: SignoffOpt = None,
    author: AuthorOpt = None,
    co_author: CoAuthorOpt = None,
    search_replace: Annotated[
        bool,
        typer.Option(
            "--search-replace",
            help="Serve replace_in_file too: SEARCH/REPLACE blocks on one file, as Cline's tool.",
        ),
    ] = False,
) -> None:
    """Serve apply_patch, patch_receipt, revert_patch and land_lane to an MCP client over stdio.

    Register it as a stdio MCP server: command 'applyonce', args 'mcp --repo PATH'.

    Stdout carries only the protocol; logs go to stderr.
    """
    from applyonce.executor import CallOptions
    from applyonce.flow.record.leases import checked_lease

    # The server fails as a whole only outside a call (a call's own failure is its tool
    # error), and a call that was running when it did ran to its end and was recorded.
    on_internal_error(
        ctx,
        "the calls the server ran are recorded, and repeating one returns its result: "
        "start 'applyonce mcp' again, and report the log",
    )
    if lease_seconds is not None:
        checked_lease(lease_seconds)  # refused now, not at every call
    from applyonce.adapters.agents import PatchRunner
    from applyonce.adapters.mcp_server import serve

    options = CallOptions(
        branch=branch,
        contract_sha256=contract_sha256(contract, contract_sha),
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
    serve(
        PatchRunner(repo, state_dir=state_dir, options=options, ledger=ledger, remote=remote),
        search_replace=search_replace,
    )


@app.command("schema", epilog="Exit codes: 0 printed, 2 usage.", cls=Command)
def schema_command(
    for_: Annotated[
        str,
        typer.Option("--for", help="openai, anthropic, mcp, or receipt.", show_default=False),
    ],
    api: Annotated[str, typer.Option(help="With --for openai: responses or chat.")] = "responses",
    variant: Annotated[
        str | None,
        typer.Option(help="With --for openai: function or custom (grammar); default both."),
    ] = None,
    tool: Annotated[
        str,
        typer.Option(
            help="apply-patch, text-editor (Claude's text editor tool; with --for anthropic), "
            "or search-replace (replace_in_file: SEARCH/REPLACE blocks on one file)."
        ),
    ] = "apply-patch",
    max_characters: Annotated[
        int | None,
        typer.Option(help="With --tool text-editor: truncate views to this many characters."),
    ] = None,
) -> None:
    """Print the apply_patch tool definition to register with a model API, as JSON.

    --for openai: the function tool and the custom tool held to a Lark grammar (pick one).

    --for anthropic: the Messages API tool. --for mcp: the tools 'applyonce mcp' lists.

    --for anthropic --tool text-editor: Claude's own text editor tool (text_editor_20250728),
    which ToolCallAdapter serves: edits exactly once, views read-only.

    --for receipt: the JSON Schema of a receipt (what 'show --json' prints; 'apply --json' adds
    'replayed'; both add 'checkout_behind' when a checkout does not show the call's commit).
    """
    if for_ == "receipt":
        if variant is not None or api != "responses":
            raise UsageError("--api and --variant are for --for openai only")
        if tool != "apply-patch" or max_characters is not None:
            raise UsageError("--tool and --max-characters are for --for anthropic only")
        _emit_json(receipt_schema())
        return
    from applyonce.adapters.schemas import schema_for

    _emit_json(
        schema_for(
            for_,
            api=api,  # type: ignore[arg-type]
            variant=variant,
            tool=tool,
            max_characters=max_characters,
        )
    )


def receipt_schema() -> dict[str, object]:
    """The JSON Schema of a receipt as ``apply --json`` and ``show --json`` print it and the
    receipts directory stores it, generated from the model that writes it."""
    from applyonce.core.receipt import Receipt

    schema = Receipt.model_json_schema(by_alias=True, mode="serialization")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


@app.command(
    epilog="Exit codes: 0 every step behaved as promised, 1 a step did not, 2 usage.", cls=Command
)
def demo(
    workspace: Annotated[
        Path | None, typer.Option(help="Workspace folder (default: the embedded demo).")
    ] = None,
    into: Annotated[
        Path | None, typer.Option(help="Where to build the demo repo (default: a temp folder).")
    ] = None,
) -> None:
    """Run the example workspace end to end, with a real crash and its recovery."""
    from applyonce.adapters.demo import run_demo

    raise typer.Exit(run_demo(workspace, into, echo=typer.echo))


@app.command(epilog="Exit codes: 0.", cls=Command)
def version() -> None:
    """Print the version, the package's folder and the Python version."""
    typer.echo(version_line())
