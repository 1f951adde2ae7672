"""The fleet's fixture: its servers, skipped where PostgreSQL or git daemon is not installed,
failed instead when ``APPLYONCE_REQUIRE_POSTGRES=1`` / ``APPLYONCE_REQUIRE_GIT_DAEMON=1`` (the
session's ``git_daemon`` fixture says so for the daemon)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.fleet.servers import FleetServers, postgres_missing


@pytest.fixture
def fleet_servers(git_daemon: Any) -> Iterator[FleetServers]:
    """The session's git daemon and a PostgreSQL server of this test's own; skipped where the
    binaries are missing, unless ``APPLYONCE_REQUIRE_POSTGRES=1`` says they must be there."""
    if postgres_missing():
        if os.environ.get("APPLYONCE_REQUIRE_POSTGRES") == "1":
            pytest.fail("PostgreSQL is not installed (APPLYONCE_REQUIRE_POSTGRES=1)")
        pytest.skip("PostgreSQL is not installed")
    servers = FleetServers(git_daemon)
    servers.start()
    try:
        yield servers
    finally:
        servers.stop()
