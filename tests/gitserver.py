"""A real Git server for tests: ``git daemon`` on loopback, with push enabled.

    python3 tests/gitserver.py start DIR   # prints the APPLYONCE_TEST_GIT_DAEMON value
    python3 tests/gitserver.py stop DIR

``APPLYONCE_TEST_GIT_DAEMON`` is ``<base-path>|git://127.0.0.1:PORT``: the fixtures in
``tests/conftest.py`` use that server when it is set, else start their own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

ENV = "APPLYONCE_TEST_GIT_DAEMON"
_GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}


def daemon_available() -> bool:
    """Whether this git has ``git daemon`` (some distributions package it apart)."""
    try:
        done = subprocess.run(
            ["git", "daemon", "--help"], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    exec_path = subprocess.run(
        ["git", "--exec-path"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return done.returncode in (0, 1) and Path(exec_path, "git-daemon").exists()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **_GIT_ENV},
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


class GitDaemon:
    """A ``git daemon`` serving every bare repository under ``base`` (``url`` given: one that
    runs already, which :meth:`stop` leaves running)."""

    def __init__(self, base: Path, url: str | None = None) -> None:
        self.base = Path(base)
        self.base.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None
        if url is not None:
            self.url = url.rstrip("/")
            return
        port = _free_port()
        self.proc = subprocess.Popen(
            [
                "git",
                "daemon",
                "--reuseaddr",
                "--export-all",
                "--enable=receive-pack",
                f"--base-path={self.base}",
                "--listen=127.0.0.1",
                f"--port={port}",
                str(self.base),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **_GIT_ENV},
            start_new_session=True,
        )
        self.url = f"git://127.0.0.1:{port}"
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("git daemon did not start") from None
                time.sleep(0.02)

    @classmethod
    def from_env(cls, value: str) -> GitDaemon:
        base, _, url = value.partition("|")
        return cls(Path(base), url)

    @property
    def env_value(self) -> str:
        return f"{self.base}|{self.url}"

    def make_bare(self, name: str | None = None) -> str:
        """A new empty bare repository on the server; its URL."""
        name = name or f"r-{uuid.uuid4().hex[:12]}"
        path = self.base / f"{name}.git"
        _git("init", "--quiet", "--bare", "--initial-branch=main", str(path))
        return f"{self.url}/{name}.git"

    def path_of(self, url: str) -> Path:
        """The bare repository on disk that ``url`` serves."""
        return self.base / url.removeprefix(self.url + "/")

    def clone(self, url: str, into: Path) -> Path:
        _git("clone", "--quiet", url, str(into))
        _git("config", "user.name", "Test Author", cwd=into)
        _git("config", "user.email", "author@example.invalid", cwd=into)
        return into

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: gitserver.py start|stop DIR", file=sys.stderr)
        return 2
    base = Path(argv[1]).resolve()
    pidfile = base / "daemon.pid"
    if argv[0] == "start":
        daemon = GitDaemon(base / "repos")
        assert daemon.proc is not None
        pidfile.write_text(f"{daemon.proc.pid}\n")
        daemon.proc = None  # it outlives this process; 'stop DIR' ends it
        print(daemon.env_value)
        return 0
    if pidfile.exists():
        pid = int(pidfile.read_text())
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        pidfile.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
