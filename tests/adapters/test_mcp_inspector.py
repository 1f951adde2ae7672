"""``applyonce mcp`` driven by a second, independent client: the MCP Inspector CLI (Node, the
protocol's own reference tooling, pinned ``@modelcontextprotocol/inspector@2.12.0``).

It must list both tools with their ``outputSchema`` and get ``structuredContent`` back from a
``tools/call`` (the Inspector checks it against the schema itself, and fails when it does not fit).

The Inspector: ``$APPLYONCE_INSPECTOR_BIN``, else the cache folder ``.ci/run`` installs it in
(``$XDG_CACHE_HOME`` or ``~/.cache``, then ``applyonce/inspector-2.12.0``). Missing (or no Node),
the test is skipped, unless ``APPLYONCE_REQUIRE_INSPECTOR=1`` (CI), then it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GIT_ENV, Repo
from tests.support.mcp_session import PATCH, SUCCESS

VERSION = "2.12.0"
REQUIRED = os.environ.get("APPLYONCE_REQUIRE_INSPECTOR") == "1"


def _find_inspector() -> str | None:
    given = os.environ.get("APPLYONCE_INSPECTOR_BIN")
    if given:
        return given if Path(given).is_file() else None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    found = cache / "applyonce" / f"inspector-{VERSION}" / "node_modules" / ".bin" / "mcp-inspector"
    return str(found) if found.is_file() and shutil.which("node") else None


# Found at import: the autouse fixture points HOME at a temp dir before each test runs.
INSPECTOR = _find_inspector()


@pytest.fixture
def inspector() -> str:
    if INSPECTOR is None:
        message = (
            f"the MCP Inspector {VERSION} is missing (set APPLYONCE_INSPECTOR_BIN or run .ci/run)"
        )
        if REQUIRED:
            pytest.fail(message + "; APPLYONCE_REQUIRE_INSPECTOR=1")
        pytest.skip(message)
    return INSPECTOR


def test_the_inspector_lists_both_tools_with_output_schemas_and_gets_structured_content(
    inspector: str, repo: Repo
) -> None:
    # A stdio client starts the server with a clean environment: pass on what it needs (the
    # source under test, and the tests' hermetic home and git identity).
    passed = {k: os.environ[k] for k in ("PYTHONPATH", "HOME") if k in os.environ} | GIT_ENV
    server = [sys.executable, "-m", "applyonce", "mcp", "--repo", str(repo.path)]
    env_args = [arg for k, v in passed.items() for arg in ("-e", f"{k}={v}")]
    base = [inspector, "--cli", *env_args, *server]
    call = ["--method", "tools/call", "--tool-name", "apply_patch", "--tool-arg", f"patch={PATCH}"]
    # Both at once: each pays for starting Node and the server.
    running = [
        subprocess.Popen(
            [*base, "--method", "tools/list"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=os.environ,
            cwd=repo.path,
        ),
        subprocess.Popen(
            [*base, *call],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=os.environ,
            cwd=repo.path,
        ),
    ]
    (listed_out, listed_err), (called_out, called_err) = (
        p.communicate(timeout=60) for p in running
    )
    assert running[0].returncode == 0, listed_err.decode()
    # The Inspector checks structuredContent against the outputSchema: a misfit fails the call
    # (exit 1, "data/status must be string" when the status was a number).
    assert running[1].returncode == 0, called_err.decode()

    tools = {tool["name"]: tool for tool in json.loads(listed_out)["tools"]}
    assert set(tools) == {"apply_patch", "patch_receipt", "revert_patch", "land_lane"}
    for tool in tools.values():
        assert tool["outputSchema"]["type"] == "object"
        assert "error" in tool["outputSchema"]["properties"]
        if tool["name"] != "land_lane":  # its result is the land report
            assert {"status", "call_id"} <= set(tool["outputSchema"]["properties"])

    result = json.loads(called_out)
    assert result["isError"] is False
    assert result["content"] == [{"type": "text", "text": SUCCESS}]
    structured = result["structuredContent"]
    assert structured["status"] == "committed" and structured["commit"] == repo.head()
    assert structured["files"] == [{"path": "src/util.py", "action": "update", "from": None}]
    assert structured["diff"] == repo.git("diff", "HEAD~1", "HEAD")
