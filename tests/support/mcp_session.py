"""An MCP client session on the real server (``applyonce mcp`` in a subprocess) and what its
tools answer."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.conftest import Repo

PATCH = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"


SUCCESS = "Success. Updated the following files:\nM src/util.py\n"


def with_session(
    repo: Repo, errlog: Path, scenario: Callable[[ClientSession], Awaitable[None]], *extra: str
) -> None:
    async def main() -> None:
        with anyio.fail_after(30), errlog.open("w") as err:
            async with (
                stdio_client(server_params(repo, *extra), errlog=err) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                await scenario(session)

    anyio.run(main)


def text_of(result: types.CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, types.TextContent)
    return content.text


def server_params(repo: Repo, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "applyonce", "mcp", "--repo", str(repo.path), *extra],
        env=dict(os.environ),  # the hermetic git environment of the test
    )
