"""A real smart-HTTP Git server for tests: nginx + fcgiwrap + ``git http-backend`` on loopback,
basic authentication, push enabled.

    python3 tests/httpserver.py start DIR     # prints the APPLYONCE_TEST_GIT_HTTP value
    python3 tests/httpserver.py restart DIR   # the web server down and up again, same port
    python3 tests/httpserver.py stop DIR

Everything it writes is in DIR: nginx's configuration, pid file, logs and temp folders, the
password file, fcgiwrap's Unix socket, and the repositories (under ``DIR/repos``, the project
root that ``git http-backend`` serves). ``APPLYONCE_TEST_GIT_HTTP`` is
``<project-root>|http://USER:PASSWORD@127.0.0.1:PORT``: the fixtures in ``tests/conftest.py`` use
that server when it is set, else start their own. The password is made fresh at each start, a
string that appears nowhere else, so a test can look for it in every output.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ENV = "APPLYONCE_TEST_GIT_HTTP"
USER = "agent"
HTTP_BACKEND = "/usr/lib/git-core/git-http-backend"
_GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
# Enough fcgiwrap workers for a fleet's clients at once: each serves one request at a time.
WORKERS = 16


def _nginx() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None
    )


def _fcgiwrap() -> str | None:
    return shutil.which("fcgiwrap") or next(
        (p for p in ("/usr/sbin/fcgiwrap",) if os.access(p, os.X_OK)), None
    )


def _http_backend() -> str:
    exec_path = subprocess.run(
        ["git", "--exec-path"], capture_output=True, text=True, check=False
    ).stdout.strip()
    found = Path(exec_path, "git-http-backend")
    return str(found) if found.exists() else HTTP_BACKEND


def http_available() -> bool:
    """Whether this machine has nginx, fcgiwrap and ``git http-backend``."""
    return bool(_nginx() and _fcgiwrap() and os.access(_http_backend(), os.X_OK))


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
        raise RuntimeError(f"git {' '.join(args[:1])} failed: {done.stderr.strip()}")
    return done.stdout


def _ssha(password: str) -> str:
    """An nginx ``auth_basic_user_file`` entry's password: salted SHA-1 (``{SSHA}``)."""
    salt = secrets.token_bytes(8)
    digest = hashlib.sha1(password.encode() + salt).digest()
    return "{SSHA}" + base64.b64encode(digest + salt).decode()


def _nginx_conf(state: Path, port: int, root: Path) -> str:
    # As root, nginx's workers would switch to 'nobody', who can neither enter a private temp
    # folder nor connect to the socket: they stay root here (a test server on loopback).
    user = "user root root;\n" if os.geteuid() == 0 else ""
    backend = _http_backend()
    path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    return f"""{user}worker_processes 2;
daemon off;
pid {state}/nginx.pid;
error_log {state}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {state}/access.log;
    client_body_temp_path {state}/tmp/body;
    fastcgi_temp_path {state}/tmp/fastcgi;
    proxy_temp_path {state}/tmp/proxy;
    uwsgi_temp_path {state}/tmp/uwsgi;
    scgi_temp_path {state}/tmp/scgi;
    client_max_body_size 0;
    server {{
        listen 127.0.0.1:{port};
        server_name localhost;
        location / {{
            auth_basic "applyonce test";
            auth_basic_user_file {state}/htpasswd;
            fastcgi_pass unix:{state}/fcgiwrap.sock;
            fastcgi_read_timeout 300s;
            fastcgi_param SCRIPT_FILENAME {backend};
            fastcgi_param PATH_INFO $uri;
            fastcgi_param QUERY_STRING $args;
            fastcgi_param REQUEST_METHOD $request_method;
            fastcgi_param CONTENT_TYPE $content_type;
            fastcgi_param CONTENT_LENGTH $content_length;
            fastcgi_param HTTP_CONTENT_ENCODING $http_content_encoding;
            fastcgi_param GIT_PROTOCOL $http_git_protocol;
            fastcgi_param REMOTE_USER $remote_user;
            fastcgi_param REMOTE_ADDR $remote_addr;
            fastcgi_param SERVER_PROTOCOL $server_protocol;
            fastcgi_param GIT_PROJECT_ROOT {root};
            fastcgi_param GIT_HTTP_EXPORT_ALL "";
            fastcgi_param GIT_CONFIG_NOSYSTEM 1;
            fastcgi_param HOME {state};
            fastcgi_param PATH {path};
        }}
    }}
}}
"""


class HttpServer:
    """nginx + fcgiwrap + ``git http-backend`` serving every bare repository under
    ``state/repos`` (``url`` given: one that runs already, which :meth:`stop` leaves running)."""

    def __init__(self, state: Path, url: str | None = None, *, base: Path | None = None) -> None:
        self.state = Path(state)
        self.base = Path(base) if base is not None else self.state / "repos"
        self.base.mkdir(parents=True, exist_ok=True)
        self.nginx: subprocess.Popen[bytes] | None = None
        self.fcgiwrap: subprocess.Popen[bytes] | None = None
        if url is not None:
            self.url = url.rstrip("/")
            return
        self.password = "pw-" + secrets.token_hex(12)
        self.port = _free_port()
        for folder in ("body", "fastcgi", "proxy", "uwsgi", "scgi"):
            (self.state / "tmp" / folder).mkdir(parents=True, exist_ok=True)
        (self.state / "htpasswd").write_text(f"{USER}:{_ssha(self.password)}\n")
        (self.state / "nginx.conf").write_text(_nginx_conf(self.state, self.port, self.base))
        self.url = f"http://{USER}:{self.password}@127.0.0.1:{self.port}"
        self.start()

    @classmethod
    def from_env(cls, value: str) -> HttpServer:
        base, _, url = value.partition("|")
        return cls(Path(base).parent, url, base=Path(base))

    @property
    def env_value(self) -> str:
        return f"{self.base}|{self.url}"

    @property
    def password_in_url(self) -> str:
        """The password the URL carries (what no output may show)."""
        return urlsplit(self.url).password or ""

    @property
    def anonymous_url(self) -> str:
        """The server's URL without its credentials."""
        parts = urlsplit(self.url)
        return urlunsplit(parts._replace(netloc=f"{parts.hostname}:{parts.port}"))

    def with_password(self, password: str) -> str:
        """The server's URL with another password (a wrong one, say)."""
        parts = urlsplit(self.url)
        netloc = f"{parts.username}:{password}@{parts.hostname}:{parts.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    # --- processes ---

    def start(self) -> None:
        """fcgiwrap on its socket, then nginx; back once the port answers."""
        sock = self.state / "fcgiwrap.sock"
        sock.unlink(missing_ok=True)
        fcgiwrap, nginx = _fcgiwrap(), _nginx()
        if fcgiwrap is None or nginx is None:
            raise RuntimeError("nginx or fcgiwrap is not installed")
        self.fcgiwrap = subprocess.Popen(
            [fcgiwrap, "-c", str(WORKERS), "-s", f"unix:{sock}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.state / "fcgiwrap.log", "ab"),  # noqa: SIM115
            env={**os.environ, **_GIT_ENV},
            start_new_session=True,
        )
        self._wait(lambda: sock.exists(), self.fcgiwrap, "fcgiwrap")
        self.nginx = subprocess.Popen(
            [
                nginx,
                "-p",
                str(self.state),
                "-e",
                str(self.state / "error.log"),
                "-c",
                str(self.state / "nginx.conf"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.state / "nginx.log", "ab"),  # noqa: SIM115
            start_new_session=True,
        )
        self._wait(self._answers, self.nginx, "nginx")
        (self.state / "http.pids").write_text(f"{self.nginx.pid} {self.fcgiwrap.pid}\n")

    def _answers(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
        except OSError:
            return False
        return True

    def _wait(self, ready: object, proc: subprocess.Popen[bytes], what: str) -> None:
        deadline = time.monotonic() + 10
        while not ready():  # type: ignore[operator]
            if proc.poll() is not None or time.monotonic() > deadline:
                log = self.state / ("nginx.log" if what == "nginx" else "fcgiwrap.log")
                raise RuntimeError(f"{what} did not start: {log.read_text(errors='replace')}")
            time.sleep(0.02)

    def restart(self) -> None:
        """The web server and its workers down (SIGKILL: connections cut) and up again."""
        self._stop(signal.SIGKILL)
        self.start()

    def stop(self) -> None:
        self._stop(signal.SIGTERM)

    def _stop(self, sig: int) -> None:
        for proc in (self.nginx, self.fcgiwrap):
            if proc is None or proc.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.nginx = self.fcgiwrap = None

    # --- repositories ---

    def make_bare(self, name: str | None = None) -> str:
        """A new empty bare repository on the server; its URL."""
        name = name or f"r-{uuid.uuid4().hex[:12]}"
        path = self.base / f"{name}.git"
        _git("init", "--quiet", "--bare", "--initial-branch=main", str(path))
        _git("-C", str(path), "config", "http.receivepack", "true")
        return f"{self.url}/{name}.git"

    def path_of(self, url: str) -> Path:
        """The bare repository on disk that ``url`` serves."""
        return self.base / url.removeprefix(self.url + "/")

    def clone(self, url: str, into: Path) -> Path:
        _git("clone", "--quiet", url, str(into))
        _git("config", "user.name", "Test Author", cwd=into)
        _git("config", "user.email", "author@example.invalid", cwd=into)
        return into


def _kill_recorded(state: Path, sig: int) -> None:
    pids = state / "http.pids"
    if not pids.exists():
        return
    for pid in pids.read_text().split():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(pid), sig)
    pids.unlink()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "restart", "stop"):
        print("usage: httpserver.py start|restart|stop DIR", file=sys.stderr)
        return 2
    state = Path(argv[1]).resolve()
    if argv[0] == "start":
        state.mkdir(parents=True, exist_ok=True)
        server = HttpServer(state)
        (state / "env").write_text(server.env_value + "\n")
        server.nginx = server.fcgiwrap = None  # they outlive this process; 'stop DIR' ends them
        print(server.env_value)
        return 0
    if argv[0] == "restart":
        _kill_recorded(state, signal.SIGKILL)
        value = (state / "env").read_text().strip()
        server = HttpServer.from_env(value)
        server.port = int(urlsplit(server.url).port or 0)
        time.sleep(0.05)
        server.start()
        server.nginx = server.fcgiwrap = None
        return 0
    _kill_recorded(state, signal.SIGTERM)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
