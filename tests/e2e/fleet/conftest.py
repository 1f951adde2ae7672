"""The fleet's fixtures: its servers, each Git server in turn, skipped where PostgreSQL, git
daemon, nginx or fcgiwrap is not installed, failed instead when ``APPLYONCE_REQUIRE_POSTGRES=1``
/ ``APPLYONCE_REQUIRE_GIT_DAEMON=1`` / ``APPLYONCE_REQUIRE_GIT_HTTP=1`` (the session's
``git_daemon`` and ``git_http`` fixtures say so for the Git servers)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Served, serve_on
from tests.e2e.fleet.servers import FleetServers, postgres_missing

# Each real Git server in turn; a CI run (APPLYONCE_TEST_SAMPLE) takes one of the two per test.
_EACH_SERVER = [
    pytest.param(kind, marks=pytest.mark.sampled(every=2)) for kind in ("daemon", "http")
]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module that sets ``OVER_EACH_SERVER = True`` runs its tests that use ``served`` over
    each real Git server: git daemon, then smart HTTP; .ci/run (its sample seed) runs one of the
    two, the other at the next commit. The others run over git daemon alone (CI's time)."""
    if "served" in metafunc.fixturenames and getattr(metafunc.module, "OVER_EACH_SERVER", False):
        metafunc.parametrize("served", _EACH_SERVER, indirect=True)


@pytest.fixture
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Served:
    """A repository on ``git daemon``, or (``served`` parametrized ``"http"``, above) on the
    smart-HTTP server (nginx + ``git http-backend``, basic authentication, the credentials in
    the clone's URL)."""
    kind = getattr(request, "param", "daemon")
    server = request.getfixturevalue("git_daemon" if kind == "daemon" else "git_http")
    return serve_on(server, tmp_path)


@pytest.fixture(params=_EACH_SERVER)
def fleet_servers(request: pytest.FixtureRequest) -> Iterator[FleetServers]:
    """A Git server (the session's ``git daemon``; or a smart-HTTP server of this test's own,
    which it restarts, its repository guarded by ``applyonce hook pre-receive``) and a PostgreSQL
    server of this test's own; skipped where the binaries are missing, unless
    ``APPLYONCE_REQUIRE_POSTGRES=1`` says they must be there."""
    http = request.param == "http"
    git_server = request.getfixturevalue("git_http" if http else "git_daemon")
    if http:
        from tests.httpserver import HttpServer

        git_server = HttpServer(Path(tempfile.mkdtemp(prefix="applyonce-http-")))
    if postgres_missing():
        if os.environ.get("APPLYONCE_REQUIRE_POSTGRES") == "1":
            pytest.fail("PostgreSQL is not installed (APPLYONCE_REQUIRE_POSTGRES=1)")
        pytest.skip("PostgreSQL is not installed")
    servers = FleetServers(git_server, server_hook=http)
    try:
        servers.start()
        yield servers
    finally:
        servers.stop()
        if http:
            git_server.stop()
            shutil.rmtree(git_server.state, ignore_errors=True)
