"""The fleet's servers: the session's ``git daemon`` (tests/gitserver.py) or smart-HTTP server
(tests/httpserver.py, with the server hook installed) serving the one bare repository, and a
PostgreSQL server of the test's own (tests/pgserver.py; the scenario crashes and restarts it, so
it cannot share the session's); the fixture is in tests/e2e/fleet/conftest.py."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.conftest import make_repo
from tests.e2e.fleet.fleet import Call, git


class FleetServers:
    """A Git server and a PostgreSQL server of this test's own."""

    def __init__(self, daemon: Any, *, server_hook: bool = False) -> None:
        from tests.pgserver import PostgresServer

        self.daemon = daemon
        self.server_hook = server_hook
        # In a temporary directory of its own, not the test's: as root, the server runs as
        # another user, who cannot enter pytest's private folders.
        self.postgres = PostgresServer()

    def start(self) -> None:
        self.postgres.start()

    def stop(self) -> None:
        self.postgres.cleanup()

    def database(self) -> str:
        """A fresh database's URL."""
        url: str = self.postgres.create_database()
        return url

    def restart_web_server(self) -> bool:
        """The smart-HTTP server killed (SIGKILL: every connection cut) and started again on the
        same port; False for a ``git daemon``, left running."""
        restart = getattr(self.daemon, "restart", None)
        if restart is None:
            return False
        restart()
        return True

    def crash_database(self) -> None:
        """An immediate shutdown while calls run: every connection cut, no checkpoint."""
        self.postgres.kill()

    def start_database(self) -> None:
        """Up again after :meth:`crash_database`, replaying the WAL."""
        self.postgres.start()

    def server_with_clones(
        self, tmp: Path, files: Mapping[str, str], clients: int
    ) -> tuple[Path, list[Path], Path]:
        """The bare server repository (its branch ``main`` holding ``files``), a clone per client,
        and one more clone, the observer, that makes no call."""
        url = self.daemon.make_bare()
        seed = make_repo(tmp / "seed", files)
        git(seed.path, "push", "-q", url, "main:refs/heads/main")
        if self.server_hook:
            install_server_hook(self.daemon.path_of(url))
        clones = [self.daemon.clone(url, tmp / f"client{i}") for i in range(clients)]
        observer = self.daemon.clone(url, tmp / "observer")
        bare: Path = self.daemon.path_of(url)
        return bare, clones, observer

    def call_ids(self, where: Path, bare: Path, calls: Sequence[Call]) -> dict[str, str]:
        """Each call's Call-Id as applyonce computes it (in a plain clone: the identity does not
        depend on the clone, the ledger or the remote; a lane call's, on its lane's branch)."""
        from applyonce import Executor
        from applyonce.core.land import lane_branch
        from applyonce.flow.options import CallOptions

        git(where.parent, "clone", "-q", str(bare), str(where))
        for lane in sorted({call.lane for call in calls if call.lane}):
            git(where, "branch", lane_branch(lane))  # identify() names an existing branch
        executor = Executor(where)
        try:
            return {
                call.key: executor.identify(
                    call.patch,
                    CallOptions(
                        attempt=call.attempt,
                        tool_call_id=call.tool_call_id,
                        branch=lane_branch(call.lane) if call.lane else None,
                    ),
                )[1].call_id
                for call in calls
            }
        finally:
            executor.close()


def install_server_hook(bare: Path) -> None:
    """``applyonce hook install --bare BARE``, in its own process, as a server's admin runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "applyonce", "hook", "install", "--bare", str(bare)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def postgres_missing() -> bool:
    """Whether this machine has no PostgreSQL server binaries."""
    from tests.pgserver import find_binaries

    return find_binaries() is None
