"""The Python API: ``Executor(repo).apply(patch) -> Receipt``, approval callbacks, receipts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from applyonce import Executor, PlanView, Receipt
from applyonce.errors import ApplyOnceError
from tests.conftest import Repo

PATCH = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"


def test_apply_returns_a_receipt(repo: Repo) -> None:
    receipt = Executor(repo.path).apply(PATCH, tool_call_id="call_9")
    assert isinstance(receipt, Receipt)
    assert receipt.status == "committed"
    assert receipt.commit == repo.head()
    assert [(f.path, f.action) for f in receipt.files] == [("src/util.py", "update")]
    assert receipt.output == "Success. Updated the following files:\nM src/util.py\n"
    assert receipt.tool_call_id == "call_9"
    assert receipt.match_levels == {"src/util.py": ["exact"]}
    again = Executor(repo.path).apply(PATCH, tool_call_id="call_9")
    assert again == receipt


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


def test_bad_input_raises_without_writing(repo: Repo) -> None:
    with pytest.raises(ApplyOnceError, match=r"contains '\.\.'"):
        Executor(repo.path).apply(PATCH.replace("src/util.py", "../x.py"))
    assert not repo.state_dir().exists()


def test_no_temp_files_left_behind(repo: Repo) -> None:
    Executor(repo.path).apply(PATCH)
    leftovers = [p for p in repo.state_dir().rglob(".applyonce-tmp-*")]
    assert leftovers == []


@pytest.mark.skipif(shutil.which("script") is None, reason="needs util-linux script for a pty")
def test_confirm_asks_on_the_terminal(repo: Repo, tmp_path: Path) -> None:
    patch_file = tmp_path / "p.patch"
    patch_file.write_text(PATCH)
    command = f"{sys.executable} -m applyonce apply {patch_file} --repo {repo.path} --confirm"
    proc = subprocess.run(
        ["script", "-qec", command, "/dev/null"], input=b"y\n", capture_output=True,
        env=dict(os.environ), timeout=60,
    )
    out = proc.stdout.decode()
    assert "Apply this patch? [y/N]" in out and "update src/util.py" in out
    assert proc.returncode == 0, out
    assert repo.commit_count() == 2


def test_confirm_without_a_terminal_is_a_clear_error(repo: Repo, tmp_path: Path) -> None:
    patch_file = tmp_path / "p.patch"
    patch_file.write_text(PATCH)
    proc = subprocess.run(
        [sys.executable, "-m", "applyonce", "apply", str(patch_file), "--repo", str(repo.path),
         "--confirm"],
        capture_output=True, start_new_session=True, stdin=subprocess.DEVNULL, timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.decode().startswith("error: --confirm needs a terminal")
    assert repo.commit_count() == 1


def test_a_call_that_failed_halfway_in_this_process_can_be_repeated_here(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception (not a crash) after the publish leaves the call claimed by this live process;
    repeating it here must settle it through Git, not report it as running, nor apply it twice."""
    import applyonce.flow.apply as apply_module

    executor = Executor(repo.path)
    original = apply_module.fault

    def explode(point: str) -> None:
        if point == "after-publish":
            raise OSError("disk full while writing the receipt")
        original(point)

    monkeypatch.setattr(apply_module, "fault", explode)
    with pytest.raises(OSError):
        executor.apply(PATCH)
    monkeypatch.setattr(apply_module, "fault", original)
    receipt = executor.apply(PATCH)
    assert receipt.status == "committed" and receipt.reconciled
    assert repo.commit_count() == 2
