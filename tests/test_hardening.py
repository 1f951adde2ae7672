"""Regressions from review: lost state, overlapping executions, filters, worktrees, odd inputs."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import Repo, make_repo, run_cli

PATCH = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"
ADD = "*** Begin Patch\n*** Add File: new.txt\n+new\n*** End Patch\n"


def apply(repo: Repo, patch: str, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return run_cli("apply", "-", "--repo", str(repo.path), *args, input=patch, env=env)


def test_lost_state_dir_does_not_let_a_call_land_twice(repo: Repo) -> None:
    assert apply(repo, ADD).returncode == 0
    shutil.rmtree(repo.state_dir())
    assert apply(repo, PATCH).returncode == 0  # a new ledger is created by another call first
    again = apply(repo, ADD, "--json")
    assert again.returncode == 0
    receipt = orjson.loads(again.stdout)
    assert receipt["reconciled"] is True
    assert receipt["output"] == "Success. Updated the following files:\nA new.txt\n"
    ids = repo.call_ids()
    assert len(ids) == len(set(ids)) == 2


def test_overlapping_executions_with_separate_state_land_once(repo: Repo, tmp_path: Path) -> None:
    slow = subprocess.Popen(
        [sys.executable, "-m", "applyonce", "apply", "-", "--repo", str(repo.path),
         "--state-dir", str(tmp_path / "a"), "--check", "sleep 2"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    slow.stdin.write(ADD.encode())  # type: ignore[union-attr]
    slow.stdin.close()  # type: ignore[union-attr]
    time.sleep(0.8)
    fast = apply(repo, ADD, "--state-dir", str(tmp_path / "b"))
    assert fast.returncode == 0
    assert slow.wait(timeout=60) == 0
    assert len(repo.call_ids()) == 1


def test_key_reused_after_lost_ledger_is_still_a_conflict(repo: Repo) -> None:
    assert apply(repo, ADD, "--idempotency-key", "K1").returncode == 0
    shutil.rmtree(repo.state_dir())
    head = repo.head()
    clash = apply(repo, PATCH, "--idempotency-key", "K1")
    assert clash.returncode == 4, clash.stderr
    assert "was already used" in clash.stderr
    assert repo.head() == head


def test_known_call_replays_even_if_tree_changed_under_it(repo: Repo) -> None:
    patch = "*** Begin Patch\n*** Add File: d/x.txt\n+x\n*** End Patch\n"
    first = apply(repo, patch, "--json")
    repo.git("rm", "-q", "-r", "d")
    os.symlink(".", repo.path / "d")
    repo.git("add", "d")
    repo.git("commit", "-q", "-m", "d is a link now")
    again = apply(repo, patch, "--json")
    assert again.returncode == 0 and again.stdout == first.stdout


def test_linked_worktree_apply_syncs_and_guards_the_main_checkout(repo: Repo, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    repo.git("worktree", "add", "-q", str(linked), "-b", "feature")
    (repo.path / "src/util.py").write_text("VALUE = 1  # mine\n")
    refused = run_cli("apply", "-", "--repo", str(linked), "--branch", "main", input=PATCH)
    assert refused.returncode == 4 and "uncommitted changes" in refused.stderr
    repo.git("checkout", "--", "src/util.py")
    done = run_cli("apply", "-", "--repo", str(linked), "--branch", "main", input=PATCH)
    assert done.returncode == 0, done.stderr
    assert repo.git("status", "--porcelain") == ""
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"


def test_eol_filters_are_respected(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {".gitattributes": "*.txt text eol=crlf\n", "a.txt": "one\ntwo\n"})
    (repo.path / "a.txt").unlink()
    repo.git("checkout", "--", "a.txt")
    assert (repo.path / "a.txt").read_bytes() == b"one\r\ntwo\r\n"
    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-two\n+three\n*** Add File: b.txt\n+b\n*** End Patch\n"
    result = apply(repo, patch)
    assert result.returncode == 0, result.stderr
    assert (repo.path / "a.txt").read_bytes() == b"one\r\nthree\r\n"
    assert (repo.path / "b.txt").read_bytes() == b"b\r\n"
    assert repo.git("status", "--porcelain") == ""
    assert repo.git("show", "HEAD:a.txt") == "one\nthree\n"


def test_sync_failure_after_publish_is_a_warning_not_a_failure(repo: Repo) -> None:
    lock = repo.path / ".git" / "index.lock"
    lock.write_text("")
    result = apply(repo, PATCH, "--json")
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["status"] == "committed"
    assert "warning: committed, but the checkout was not updated" in result.stderr
    lock.unlink()
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    assert repo.git("status", "--porcelain") == ""


def test_symlink_replaced_by_added_file(repo: Repo) -> None:
    os.symlink("README.md", repo.path / "link")
    repo.git("add", "link")
    repo.git("commit", "-q", "-m", "link")
    result = apply(repo, "*** Begin Patch\n*** Add File: link\n+plain\n*** End Patch\n")
    assert result.returncode == 0, result.stderr
    assert not (repo.path / "link").is_symlink()
    assert (repo.path / "link").read_text() == "plain\n"
    assert (repo.path / "README.md").read_text() == "# demo\n"
    assert repo.git("status", "--porcelain") == ""
    assert repo.git("ls-tree", "HEAD", "link").split()[0] == "100644"


def test_symbolic_branch_means_its_target(repo: Repo) -> None:
    repo.git("symbolic-ref", "refs/heads/alias", "refs/heads/main")
    result = apply(repo, PATCH, "--branch", "alias", "--json")
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["ref"] == "refs/heads/main"


def test_odd_inputs_get_one_line_errors(repo: Repo, tmp_path: Path) -> None:
    cases = [
        (("--attempt", "99999999999999999999999"), 2),
        (("--check-timeout", "-1"), 2),
        (("--state-dir", "/dev/null/x"), 2),
    ]
    for args, code in cases:
        result = apply(repo, PATCH, *args)
        assert result.returncode == code, (args, result)
        assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    deep = "*** Begin Patch\n*** Add File: x.toml\n+a = " + "[" * 50_000 + "\n*** End Patch\n"
    result = apply(repo, deep)
    assert result.returncode == 1 and "x.toml" in result.stderr


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 128 + signal.SIGTERM)]
)
def test_interrupting_a_check_kills_it(repo: Repo, tmp_path: Path, sig: int, code: int) -> None:
    marker = tmp_path / "marker"
    proc = subprocess.Popen(
        [sys.executable, "-m", "applyonce", "apply", "-", "--repo", str(repo.path),
         "--check", f"sleep 2; touch {marker}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    proc.stdin.write(PATCH.encode())  # type: ignore[union-attr]
    proc.stdin.close()  # type: ignore[union-attr]
    time.sleep(1.0)
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == code
    time.sleep(2.0)
    assert not marker.exists()
    assert repo.commit_count() == 1

def test_scratch_checkout_drops_files_left_by_earlier_checks(repo: Repo) -> None:
    assert apply(repo, PATCH, "--check", "touch leftover.txt").returncode == 0
    result = apply(repo, ADD, "--check", "test ! -e leftover.txt")
    assert result.returncode == 0, result.stderr


def test_show_does_not_vouch_for_an_edited_receipt(repo: Repo) -> None:
    import hashlib

    receipt = orjson.loads(apply(repo, PATCH, "--json").stdout)
    forged = dict(receipt, output="Success. forged\n")
    forged["output_sha256"] = hashlib.sha256(forged["output"].encode()).hexdigest()
    (repo.state_dir() / "receipts" / f"{receipt['call_id']}.json").write_bytes(orjson.dumps(forged))
    shown = run_cli("show", receipt["call_id"], "--repo", str(repo.path))
    assert shown.returncode == 5 and "was changed after applyonce wrote it" in shown.stderr


def test_a_mistyped_branch_is_a_usage_error_not_a_new_branch(repo: Repo) -> None:
    result = apply(repo, ADD, "--branch", "nope")
    assert result.returncode == 2
    assert result.stderr.startswith("error: there is no branch 'nope'")
    assert repo.git("branch", "--list", "nope") == ""


def test_an_odd_ledger_state_never_makes_a_second_commit(repo: Repo) -> None:
    import sqlite3

    assert apply(repo, ADD).returncode == 0
    for state, retryable in (("bogus", 0), ("rejected", 1), ("prepared", 0)):
        db = sqlite3.connect(repo.state_dir() / "ledger.sqlite3")
        db.execute("UPDATE calls SET state = ?, retryable = ?, owner_pid = NULL", (state, retryable))
        db.commit()
        db.close()
        again = apply(repo, ADD)
        assert again.returncode == 0, (state, again.stderr)
        assert len(repo.call_ids()) == 1, state


def test_a_move_onto_a_json_file_is_syntax_checked_against_that_file(repo: Repo) -> None:
    (repo.path / "data.json").write_text('{"a": 1}\n')
    repo.git("add", "data.json")
    repo.git("commit", "-q", "-m", "json")
    patch = "*** Begin Patch\n*** Update File: src/util.py\n*** Move to: data.json\n*** End Patch\n"
    result = apply(repo, patch)
    assert result.returncode == 1 and "builtin:syntax" in result.stderr and "data.json" in result.stderr


def test_a_call_whose_commit_was_reset_away_does_not_report_success(repo: Repo) -> None:
    assert apply(repo, PATCH).returncode == 0
    repo.git("reset", "-q", "--hard", "HEAD~1")
    again = apply(repo, PATCH)
    assert again.returncode == 5
    assert "no longer on refs/heads/main (the branch was reset or rewritten)" in again.stderr
    assert "new attempt" in again.stderr
    assert apply(repo, PATCH, "--attempt", "2").returncode == 0


def test_nul_bytes_in_added_text_are_refused(repo: Repo) -> None:
    result = apply(repo, "*** Begin Patch\n*** Add File: nul.txt\n+a\x00b\n*** End Patch\n")
    assert result.returncode == 1
    assert result.stderr == (
        "error: nul.txt: the patch writes a NUL byte; applyonce only writes text; "
        "remove the NUL byte from the patch\n"
    )
    assert not (repo.path / "nul.txt").exists()


def test_recover_re_records_a_call_whose_commit_was_amended(repo: Repo) -> None:
    assert apply(repo, PATCH).returncode == 0
    repo.git("commit", "-q", "--amend", "--no-edit", "--date", "2001-01-01T00:00:00")
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 1
    result = run_cli("recover", "--repo", str(repo.path))
    assert "its commit was rewritten (amend, rebase); rebuilt it from commit" in result.stdout
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0


def test_recover_warns_that_an_edit_made_on_the_old_file_would_undo_the_commit(repo: Repo) -> None:
    crashed = apply(repo, PATCH, env={"APPLYONCE_FAULT": "after-publish"})
    assert crashed.returncode == -signal.SIGKILL
    (repo.path / "src/util.py").write_text("VALUE = 1  # my 3 a.m. edit\n")
    first = run_cli("recover", "--repo", str(repo.path))
    assert "left your uncommitted changes in src/util.py" in first.stdout
    assert "would undo that commit there" in first.stdout
    assert (repo.path / "src/util.py").read_text() == "VALUE = 1  # my 3 a.m. edit\n"
    # Still not in sync: the next recover says it again, until the user has merged.
    assert "left your uncommitted changes in src/util.py" in run_cli("recover", "--repo", str(repo.path)).stdout
    (repo.path / "src/util.py").write_text("VALUE = 2\n")
    assert "left your uncommitted" not in run_cli("recover", "--repo", str(repo.path)).stdout
