"""The smart-HTTP test server itself (tests/httpserver.py): a clone and a push go through nginx,
fcgiwrap and ``git http-backend`` with basic authentication; a wrong password is refused; a
restart keeps the port and the repositories."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.conftest import git, make_repo


def test_clone_and_push_over_smart_http(git_http: Any, tmp_path: Path) -> None:
    url = git_http.make_bare()
    assert url.startswith("http://")
    seed = make_repo(tmp_path / "seed", {"a.txt": "a\n"})
    seed.git("push", "-q", url, "main:refs/heads/main")
    clone = git_http.clone(url, tmp_path / "clone")
    assert git(clone, "rev-parse", "HEAD") == seed.git("rev-parse", "HEAD")
    assert git(git_http.path_of(url), "rev-parse", "main") == seed.git("rev-parse", "HEAD")


def test_a_wrong_password_is_refused(git_http: Any, tmp_path: Path) -> None:
    url = git_http.make_bare()
    name = url.rsplit("/", 1)[1]
    wrong = f"{git_http.with_password('not-the-password')}/{name}"
    done = subprocess.run(["git", "ls-remote", wrong], capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "Authentication failed" in done.stderr
    assert "not-the-password" not in done.stderr


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def test_the_cli_starts_restarts_and_stops_it(git_http: Any, tmp_path: Path) -> None:
    """``tests/httpserver.py start|restart|stop DIR`` as .ci/run runs it: the server outlives
    ``start``; ``restart`` brings it back on the same port with its repositories; ``stop`` ends
    it. Everything it wrote is inside DIR."""
    script = Path(__file__).parents[2] / "httpserver.py"
    state = tmp_path / "http"
    started = subprocess.run(
        [sys.executable, str(script), "start", str(state)],
        capture_output=True,
        text=True,
        check=True,
    )
    root, _, url = started.stdout.strip().partition("|")
    assert Path(root) == state / "repos" and url.startswith("http://agent:")
    port = int(url.rpartition(":")[2])
    try:
        assert _listening(port)
        git(tmp_path, "init", "-q", "--bare", str(state / "repos" / "x.git"))
        seed = make_repo(tmp_path / "seed", {"a.txt": "a\n"})
        seed.git("push", "-q", f"{url}/x.git", "main")
        subprocess.run([sys.executable, str(script), "restart", str(state)], check=True)
        done = subprocess.run(
            ["git", "ls-remote", f"{url}/x.git", "main"], capture_output=True, text=True
        )
        assert done.stdout.split() == [seed.head(), "refs/heads/main"], done.stderr
    finally:
        subprocess.run([sys.executable, str(script), "stop", str(state)], check=True)
    for _ in range(100):
        if not _listening(port):
            break
        time.sleep(0.05)
    else:
        raise AssertionError("nginx still listening after 'stop'")
    assert not (state / "http.pids").exists()
