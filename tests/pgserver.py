"""A real PostgreSQL server for the tests, in a temporary directory, on a Unix socket only.

:class:`PostgresServer` runs ``initdb`` (trust authentication, superuser ``applyonce``) and
``pg_ctl start`` with ``listen_addresses=''`` and its socket in the same directory; ``url(db)``,
``create_database()``, ``restart()``, ``stop()`` and ``kill()`` (an immediate shutdown: every
backend dies at once, no checkpoint, the next start replays the WAL as after a crash).

``initdb`` refuses to run as root. As root, the server runs as an unprivileged user: ``postgres``
when it exists (the distribution's packages create it), else ``nobody``; its directory is given to
that user. The binaries are found on PATH or in ``/usr/lib/postgresql/*/bin``.

Also a tiny CLI for CI scripts: ``python3 tests/pgserver.py start DIR`` starts a server in DIR
(which must not exist or be empty) and prints its superuser URL; ``stop DIR`` stops it and removes its files.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

SUPERUSER = "applyonce"
_BINARIES = ("initdb", "pg_ctl", "postgres")


def find_binaries() -> Path | None:
    """The folder holding initdb, pg_ctl and postgres (None: PostgreSQL is not installed)."""
    on_path = shutil.which("initdb")
    candidates = [Path(on_path).resolve().parent] if on_path else []
    installed = glob.glob("/usr/lib/postgresql/*/bin")
    # The newest version first (by number: 15 is newer than 9.6).
    candidates += [Path(p) for p in sorted(installed, key=_version_of, reverse=True)]
    for folder in candidates:
        if all((folder / name).is_file() for name in _BINARIES):
            return folder
    return None


def _version_of(folder: str) -> tuple[int, ...]:
    digits = Path(folder).parent.name.split(".")
    return tuple(int(d) for d in digits if d.isdigit())


def _runner() -> dict[str, Any]:
    """What subprocess needs to run the server's programs: as an unprivileged user when this
    process is root (initdb and postgres refuse root), else as this user."""
    if os.geteuid() != 0:
        return {}
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            user = pwd.getpwnam(name)
            return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    raise RuntimeError("running as root, and there is neither a 'postgres' nor a 'nobody' user")


class PostgresServer:
    """One PostgreSQL server in ``base`` (a new temporary directory when None)."""

    def __init__(self, base: Path | None = None) -> None:
        binaries = find_binaries()
        if binaries is None:
            raise FileNotFoundError("PostgreSQL's initdb, pg_ctl and postgres are not installed")
        self.bin = binaries
        self.base = Path(base) if base else Path(tempfile.mkdtemp(prefix="applyonce-pg-"))
        self.base.mkdir(parents=True, exist_ok=True)
        self._as = _runner()
        # Where the server's files live: ``base``, or, as root, a folder of /tmp the server's user
        # can reach whatever the modes of base's parents (named in base/home for 'stop DIR').
        pointer = self.base / "home"
        if pointer.exists():
            self.home = Path(pointer.read_text().strip())
        elif self._as:
            self.home = Path(tempfile.mkdtemp(prefix="applyonce-pg-"))
            pointer.write_text(str(self.home))
        else:
            self.home = self.base
        self.data = self.home / "data"
        # The socket's path must stay under the 107 bytes of sun_path: a short folder of its own.
        self.socket_dir = self.home / "s"

    # --- the server's life ------------------------------------------------------------------------

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            check=check,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "LC_ALL": "C", "TZ": "UTC"},
            **self._as,
        )

    def start(self) -> PostgresServer:
        """initdb (once) and start the server; returns self."""
        if not (self.data / "PG_VERSION").exists():
            self.socket_dir.mkdir(exist_ok=True)
            if self._as:
                for path in (self.home, self.socket_dir):
                    os.chown(path, self._as["user"], self._as["group"])
            self._run(
                "initdb", "-D", str(self.data), "-A", "trust", "-U", SUPERUSER,
                "--no-sync", "--no-instructions", "-E", "UTF8", "--locale=C",
            )  # fmt: skip
        self._pg_ctl_start()
        return self

    def _pg_ctl_start(self) -> None:
        # Tests need speed, not durability across power cuts: no fsync (an immediate shutdown
        # still keeps every commit, the OS has them).
        options = (
            f"-k {self.socket_dir} -c listen_addresses='' -c fsync=off"
            " -c full_page_writes=off -c max_connections=200"
        )
        done = self._run(
            "pg_ctl", "start", "-w", "-t", "30", "-D", str(self.data), "-o", options,
            "-l", str(self.home / "server.log"), check=False,
        )  # fmt: skip
        if done.returncode != 0:
            log = (self.home / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"pg_ctl start failed: {done.stderr.strip()}\n{log}")

    def stop(self) -> None:
        """A fast shutdown (clients disconnected, a checkpoint); nothing if it is not running."""
        self._run("pg_ctl", "stop", "-w", "-m", "fast", "-D", str(self.data), check=False)

    def kill(self) -> None:
        """An immediate shutdown: the server and every backend die at once, as in a crash."""
        self._run("pg_ctl", "stop", "-w", "-m", "immediate", "-D", str(self.data), check=False)

    def restart(self) -> None:
        """Stop (fast) and start again: every connection is cut."""
        self.stop()
        self._pg_ctl_start()

    def ensure_running(self) -> None:
        """Start the server if it is down (after a test that killed it failed halfway)."""
        status = self._run("pg_ctl", "status", "-D", str(self.data), check=False)
        if status.returncode != 0:
            self._pg_ctl_start()

    def postmaster_pid(self) -> int:
        """The server's main process."""
        return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])

    def cleanup(self) -> None:
        """Stop the server and remove its directory."""
        self.stop()
        shutil.rmtree(self.home, ignore_errors=True)
        shutil.rmtree(self.base, ignore_errors=True)

    # --- URLs and databases -----------------------------------------------------------------------

    def url(self, db: str = "postgres") -> str:
        """The superuser's URL of database ``db``, on the server's socket."""
        return f"postgresql://{SUPERUSER}@/{db}?host={self.socket_dir}"

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        return create_database(self.url())


def create_database(superuser_url: str) -> str:
    """A new empty database on the server of ``superuser_url``; returns its URL (the same URL
    with the database's name in place of the first)."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(superuser_url, autocommit=True, connect_timeout=10) as conn:
        # template0: nothing a test run added to template1 leaks in.
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    parts = urllib.parse.urlsplit(superuser_url)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))


def _main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: pgserver.py start|stop DIR", file=sys.stderr)
        return 2
    server = PostgresServer(Path(argv[1]).resolve())
    if argv[0] == "start":
        server.start()
        print(server.url())
    else:
        server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
