"""Credentials in a smart-HTTP remote's URL (``http://user:password@host/repo.git``, as a token
in a CI clone's URL is) never appear in anything applyonce shows or keeps: its output, its
errors, the receipts, the ledger, the logs in its state directory (issue 28, deliverable 1). And a git
too old for the atomic push is refused before anything runs."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from tests.conftest import UTIL_PATCH, Repo, Served, run_cli, serve_on
from tests.e2e.support import apply_remote, server_calls


def every_byte_under(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def assert_nowhere(secret: str, clone: Repo, *texts: str) -> None:
    assert secret
    for text in texts:
        assert secret not in text
    assert secret.encode() not in every_byte_under(clone.state_dir())


def test_a_call_over_http_shows_and_keeps_no_password(git_http: Any, tmp_path: Path) -> None:
    served = serve_on(git_http, tmp_path)
    password = git_http.password_in_url
    assert password in served.clone.git("remote", "get-url", "origin")
    run = apply_remote(served.clone, UTIL_PATCH, "--json")
    assert run.returncode == 0, run.stderr
    receipt = json.loads(run.stdout)
    assert receipt["remote"] == served.public_url
    assert "@" not in receipt["remote"]
    show = run_cli(
        "show", receipt["call_id"], "--repo", str(served.clone.path), "--remote", "origin"
    )
    audit = run_cli("audit", "--repo", str(served.clone.path), "--remote", "origin")
    assert show.returncode == 0 and audit.returncode == 0, show.stderr + audit.stderr
    again = apply_remote(served.clone, UTIL_PATCH)
    assert again.returncode == 0
    assert_nowhere(
        password,
        served.clone,
        run.stdout,
        run.stderr,
        show.stdout,
        show.stderr,
        audit.stdout,
        audit.stderr,
        again.stdout,
        again.stderr,
    )


def test_a_wrong_password_is_a_one_line_error_without_it(git_http: Any, tmp_path: Path) -> None:
    served: Served = serve_on(git_http, tmp_path)
    name = served.url.rsplit("/", 1)[1]
    wrong = "wrong-" + git_http.password_in_url[::-1]
    served.clone.git("remote", "set-url", "origin", f"{git_http.with_password(wrong)}/{name}")
    before = served.server_git("rev-parse", "main").strip()
    run = apply_remote(served.clone, UTIL_PATCH)
    assert run.returncode == 4, run.stdout + run.stderr
    assert run.stderr.startswith("error: ")
    assert "Authentication failed" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
    assert served.server_git("rev-parse", "main").strip() == before
    assert server_calls(served) == []
    assert (served.clone.path / "src/util.py").read_text() == "VALUE = 1\n"
    assert_nowhere(wrong, served.clone, run.stdout, run.stderr)
    assert_nowhere(git_http.password_in_url, served.clone, run.stdout, run.stderr)


def test_a_git_too_old_for_atomic_pushes_is_a_one_line_error(
    served: Served, tmp_path: Path
) -> None:
    """The git on PATH says it is 2.3.0 (no ``push --atomic``): refused before anything runs."""
    bin_dir = tmp_path / "oldgit"
    bin_dir.mkdir()
    real = shutil.which("git")
    fake = bin_dir / "git"
    fake.write_text(
        f'#!/bin/sh\nif [ "$1" = --version ]; then echo "git version 2.3.0"; exit 0; fi\n'
        f'exec {real} "$@"\n'
    )
    fake.chmod(0o755)
    before = served.server_git("rev-parse", "main").strip()
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    run = apply_remote(served.clone, UTIL_PATCH, env=env)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.startswith("error: --remote needs git 2.29.0 or newer")
    assert "this git is 2.3.0; install git 2.29.0 or newer" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert served.server_git("rev-parse", "main").strip() == before
    assert (served.clone.path / "src/util.py").read_text() == "VALUE = 1\n"
    receipts = served.clone.state_dir() / "receipts"
    assert not receipts.exists() or not any(receipts.iterdir())
