"""The smart-HTTP test server itself (tests/httpserver.py): a clone and a push go through nginx,
fcgiwrap and ``git http-backend`` with basic authentication; a wrong password is refused; a
restart keeps the port and the repositories."""

from __future__ import annotations

import subprocess
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
