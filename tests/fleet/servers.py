"""The fleet's servers: a ``git daemon`` serving the one bare repository and a PostgreSQL server of
the test's own (the scenario restarts it, so it cannot share the session's). Skipped when the
binaries are missing, failed instead when ``APPLYONCE_REQUIRE_POSTGRES=1`` /
``APPLYONCE_REQUIRE_GIT_DAEMON=1``."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from tests.conftest import make_repo
from tests.fleet.fleet import Call, git


class FleetServers:
    """One git daemon and one PostgreSQL server, both of this test's own."""

    def __init__(self, root: Path) -> None:
        from tests.gitserver import GitDaemon
        from tests.pgserver import PostgresServer

        self.daemon = GitDaemon(root / "git")
        self.postgres = PostgresServer(root / "pg")

    def start(self) -> None:
        self.daemon.start()
        self.postgres.start()

    def stop(self) -> None:
        try:
            self.postgres.stop()
        finally:
            self.daemon.stop()

    def database(self, name: str) -> str:
        """A fresh database's URL."""
        return self.postgres.create_database(name)

    def restart_database(self) -> None:
        """Down and up again while calls run: an immediate stop, so open connections break."""
        self.postgres.restart()

    def server_with_clones(
        self, tmp: Path, files: Mapping[str, str], clients: int
    ) -> tuple[Path, list[Path], Path]:
        """The bare server repository (its branch ``main`` holding ``files``), a clone per client,
        and one more clone, the observer, that makes no call."""
        bare = self.daemon.make_bare("server.git")
        seed = make_repo(tmp / "seed", files)
        git(seed.path, "push", "-q", str(bare), "main:main")
        clones = [self.daemon.clone(bare, tmp / f"client{i}") for i in range(clients)]
        observer = self.daemon.clone(bare, tmp / "observer")
        return bare, clones, observer

    def call_ids(self, where: Path, bare: Path, calls: Sequence[Call]) -> dict[str, str]:
        """Each call's Call-Id as applyonce computes it (in a plain clone: the identity does not
        depend on the clone, the ledger or the remote)."""
        from applyonce import Executor
        from applyonce.flow.options import CallOptions

        git(where.parent, "clone", "-q", str(bare), str(where))
        executor = Executor(where)
        try:
            return {
                call.key: executor.identify(
                    call.patch, CallOptions(attempt=call.attempt, tool_call_id=call.tool_call_id)
                )[1].call_id
                for call in calls
            }
        finally:
            executor.close()


def missing_servers() -> list[tuple[str, str]]:
    """The servers this machine cannot run: (what, the env variable that requires it)."""
    missing = []
    if not (shutil.which("initdb") and shutil.which("pg_ctl")):
        missing.append(("PostgreSQL (initdb, pg_ctl)", "APPLYONCE_REQUIRE_POSTGRES"))
    exec_path = subprocess.run(
        ["git", "--exec-path"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if not (Path(exec_path) / "git-daemon").exists():
        missing.append(("git daemon", "APPLYONCE_REQUIRE_GIT_DAEMON"))
    return missing


@pytest.fixture
def fleet_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetServers]:
    """A git daemon and a PostgreSQL server of this test's own; skipped where the binaries are
    missing, unless a ``APPLYONCE_REQUIRE_*=1`` says they must be there."""
    for what, require in missing_servers():
        if os.environ.get(require) == "1":
            pytest.fail(f"{require}=1 but {what} is not installed", pytrace=False)
        pytest.skip(f"{what} is not installed")
    servers = FleetServers(tmp_path_factory.mktemp("fleet-servers"))
    servers.start()
    try:
        yield servers
    finally:
        servers.stop()
