"""Approval of protected paths: the ``approve`` callback sees the plan and decides, ``--confirm``
asks on the terminal and refuses without one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from applyonce import Executor, PlanView
from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo


def test_approve_callback_sees_the_plan_and_can_deny(repo: Repo) -> None:
    seen: list[PlanView] = []

    def deny(view: PlanView) -> bool:
        seen.append(view)
        return False

    executor = Executor(repo.path)
    receipt = executor.apply(PATCH, protect=["src/*"], approve=deny)
    assert receipt.status == "rejected"
    assert receipt.error is not None and receipt.error["kind"] == "approval"
    assert seen[0].lines() == ["update src/util.py  [match: exact]"]
    assert repo.commit_count() == 1
    kinds = [e.kind for e in executor.ledger.events(receipt.call_id)]
    assert "denied" in kinds
    # A denial is final for that call: repeating it returns the stored rejection.
    assert Executor(repo.path).apply(PATCH, protect=["src/*"], approve=lambda v: True) == receipt


def test_approve_callback_approves(repo: Repo) -> None:
    executor = Executor(repo.path)
    receipt = executor.apply(PATCH, protect=["src/*"], approve=lambda view: True, attempt=2)
    assert receipt.status == "committed"
    assert "approved" in [e.kind for e in executor.ledger.events(receipt.call_id)]


@pytest.mark.skipif(shutil.which("script") is None, reason="needs util-linux script for a pty")
def test_confirm_asks_on_the_terminal(repo: Repo, tmp_path: Path) -> None:
    patch_file = tmp_path / "p.patch"
    patch_file.write_text(PATCH)
    command = f"{sys.executable} -m applyonce apply {patch_file} --repo {repo.path} --confirm"
    proc = subprocess.run(
        ["script", "-qec", command, "/dev/null"],
        input=b"y\n",
        capture_output=True,
        env=dict(os.environ),
        timeout=60,
    )
    out = proc.stdout.decode()
    assert "Apply this patch? [y/N]" in out and "update src/util.py" in out
    assert proc.returncode == 0, out
    assert repo.commit_count() == 2


def test_confirm_without_a_terminal_is_a_clear_error(repo: Repo, tmp_path: Path) -> None:
    patch_file = tmp_path / "p.patch"
    patch_file.write_text(PATCH)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "applyonce",
            "apply",
            str(patch_file),
            "--repo",
            str(repo.path),
            "--confirm",
        ],
        capture_output=True,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.decode().startswith("error: --confirm needs a terminal")
    assert repo.commit_count() == 1
