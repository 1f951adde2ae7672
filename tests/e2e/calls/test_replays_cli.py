"""Honest replays and rejections judged again, through the CLI on real repositories.

A repeat of a finished call returns its stored result on stdout (the agent's text, byte for byte)
and says on stderr, in one line, what it found: the commit still on the branch, later commits
that changed its files, or that a stored rejection is returned. A rejection that depends on the
repository (hunk mismatch, failed check, …) runs again once the branch tip moved; one caused by
the patch alone stays stored.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import orjson
import pytest

from applyonce.executor import Executor
from tests.conftest import Repo, apply, run_cli

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

NOTES = "*** Begin Patch\n*** Update File: notes.txt\n@@\n one\n-two\n+TWO\n*** End Patch\n"
UTIL = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"
# A .gitmodules that 'git fsck --strict' refuses: the patch alone decides, whatever the tip.
BAD_GITMODULES = (
    '*** Begin Patch\n*** Add File: .gitmodules\n+[submodule "x"]\n+\tpath = -x\n'
    "+\turl = https://example.invalid/x\n*** End Patch\n"
)


def _commit(repo: Repo, path: str, text: str, message: str) -> str:
    (repo.path / path).write_text(text)
    repo.git("add", path)
    repo.git("commit", "-q", "-m", message)
    return repo.head()


def _stored(text: str) -> str:
    """The stored output a replay's text gives after its note (``its stored result:``)."""
    head, sep, rest = text.partition("its stored result:\n")
    assert sep and head.startswith("replayed: this call "), text
    return rest


def _replay_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("applyonce: replayed call")]


def _events(repo: Repo, call_id: str) -> list[str]:
    executor = Executor(repo.path, read_only=True)
    try:
        return [e.kind for e in executor.ledger.events(call_id)]
    finally:
        executor.close()


def _all_clean(repo: Repo) -> None:
    replay = run_cli("replay", "--repo", str(repo.path))
    assert replay.returncode == 0 and replay.stdout.endswith("all agree\n"), replay
    audit = run_cli("audit", "--repo", str(repo.path))
    assert audit.returncode == 0, audit


# --- item 2: honest replays ----------------------------------------------------------------------


def test_a_repeat_names_its_commit_on_stderr_and_json_says_replayed(repo: Repo) -> None:
    first = apply(repo, UTIL, "--json")
    again = apply(repo, UTIL, "--json")
    text = apply(repo, UTIL)
    assert first.returncode == again.returncode == text.returncode == 0
    stored = orjson.loads(first.stdout)
    assert orjson.loads(first.stdout)["replayed"] is False and first.stderr == ""
    repeated = orjson.loads(again.stdout)
    assert repeated.pop("replayed") is True
    assert repeated.pop("replay_note") == (
        f"replayed: this call ({stored['call_id'][:12]}) ran before and made commit "
        f"{stored['commit'][:12]} on main; nothing ran now."
    )
    assert list(repeated) == sorted(repeated)  # the stored fields in their stored order
    shown = run_cli("show", stored["call_id"], "--repo", str(repo.path), "--json")
    assert repeated == orjson.loads(shown.stdout)  # values as stored; show stays the receipt
    assert "replayed" not in orjson.loads(shown.stdout)
    assert again.stdout.endswith(
        '"updated_at": "' + stored["updated_at"] + '",\n  "replayed": true\n}\n'
    )
    # The agent's text says it is a replay first, then gives the stored output, byte for byte;
    # stderr has the note as one line too.
    assert (
        text.stdout
        == (
            f"replayed: this call ({stored['call_id'][:12]}) ran before and made commit "
            f"{stored['commit'][:12]} on main; nothing ran now.\nits stored result:\n"
        )
        + stored["output"]
    )
    line = f"applyonce: replayed call {stored['call_id'][:12]}: its commit {stored['commit'][:12]} is on refs/heads/main\n"
    assert again.stderr == line and text.stderr == line
    assert repo.commit_count() == 2


def test_a_repeat_after_a_git_revert_names_the_later_commit(repo: Repo) -> None:
    first = apply(repo, UTIL, "--json")
    call = orjson.loads(first.stdout)
    _commit(repo, "README.md", "# other\n", "unrelated")  # not one of the call's files
    repo.git("revert", "--no-edit", call["commit"])
    revert = repo.head()
    again = apply(repo, UTIL)
    assert again.returncode == 0 and _stored(again.stdout) == call["output"]
    # The model reads first that the change is gone, and what to do.
    assert again.stdout.startswith(
        f"replayed: this call ({call['call_id'][:12]}) ran before and made commit "
        f"{call['commit'][:12]} on main; nothing ran now.\n"
        f"reverted: commit {revert[:12]} (git revert) reverted it since: src/util.py no longer "
        "holds its change.\nto make this change again, pass --attempt 2.\nits stored result:\n"
    )
    assert again.stderr == (
        f"applyonce: replayed call {call['call_id'][:12]}: its commit {call['commit'][:12]} is on "
        f"refs/heads/main; later commits changed its files: {revert[:12]} (src/util.py)\n"
    )
    assert repo.commit_count() == 4  # nothing ran


def test_the_list_of_later_commits_is_bounded(repo: Repo) -> None:
    call = orjson.loads(apply(repo, UTIL, "--json").stdout)
    for n in range(7):
        _commit(repo, "src/util.py", f"VALUE = {n + 3}\n", f"change {n}")
    again = apply(repo, UTIL)
    [line] = _replay_lines(again.stderr)
    assert line.count("(src/util.py)") == 5 and line.endswith(", …")
    assert call["commit"][:12] in line


# --- item 3: rejections that depend on the repository ---------------------------------------------


def test_a_hunk_mismatch_runs_again_once_the_tip_moved_and_commits(repo: Repo) -> None:
    _commit(repo, "notes.txt", "one\n", "notes")
    first = apply(repo, NOTES, "--json")
    assert first.returncode == 1 and first.stderr == ""
    rejected = orjson.loads(first.stdout)
    assert rejected["error"]["kind"] == "hunk-mismatch" and rejected["replayed"] is False
    stored = (repo.state_dir() / "receipts" / f"{rejected['call_id']}.json").read_bytes()
    # The same tip: the stored rejection, byte for byte, and the stderr line says so.
    same = apply(repo, NOTES)
    assert same.returncode == 1
    # The stored output (the error line, then its repair data), then the line that says so.
    assert same.stderr.startswith(
        f"replayed: this call ({rejected['call_id'][:12]}) ran before and was rejected "
        f"(hunk-mismatch); nothing ran now.\nmain is still at {rejected['base_commit'][:12]}, "
        "where it was rejected.\n"
    )
    stored_text = _stored(same.stderr)
    assert stored_text.startswith(rejected["output"])
    [note] = stored_text.removeprefix(rejected["output"]).splitlines()
    assert note == (
        f"applyonce: replayed call {rejected['call_id'][:12]}: the stored rejection is returned "
        f"(refs/heads/main is still at {rejected['base_commit'][:12]}, where it was rejected)"
    )
    assert (repo.state_dir() / "receipts" / f"{rejected['call_id']}.json").read_bytes() == stored
    # Plain git makes the context match: the same call now commits, once.
    _commit(repo, "notes.txt", "one\ntwo\n", "two")
    now = apply(repo, NOTES, "--json")
    assert now.returncode == 0, now
    committed = orjson.loads(now.stdout)
    assert committed["call_id"] == rejected["call_id"] and committed["replayed"] is False
    assert committed["status"] == "committed" and now.stderr == ""
    assert repo.call_ids() == [rejected["call_id"]]
    assert (repo.path / "notes.txt").read_text() == "one\nTWO\n"
    assert repo.git("status", "--porcelain") == ""
    kinds = _events(repo, rejected["call_id"])
    assert kinds[:3] == ["claimed", "prepared", "staged"] or kinds[:2] == ["claimed", "prepared"]
    assert "rejected" in kinds and kinds.index("reevaluated") > kinds.index("rejected")
    assert kinds[-2:] == ["committed", "synced"]
    _all_clean(repo)


def test_a_patch_alone_rejection_stays_stored_after_the_tip_moved(repo: Repo) -> None:
    first = apply(repo, BAD_GITMODULES, "--json")
    assert first.returncode == 1, first
    rejected = orjson.loads(first.stdout)
    assert rejected["error"]["kind"] == "git-metadata"
    receipt = repo.state_dir() / "receipts" / f"{rejected['call_id']}.json"
    stored = receipt.read_bytes()
    _commit(repo, "README.md", "# moved on\n", "the tip moves")
    again = apply(repo, BAD_GITMODULES)
    assert again.returncode == 1
    assert "the patch itself was refused" in again.stderr.partition("its stored result:")[0]
    [error, note] = _stored(again.stderr).splitlines()
    assert error + "\n" == rejected["output"]
    assert note.endswith(
        "the stored rejection is returned (git-metadata: the patch itself was refused, whatever "
        "the branch holds)"
    )
    assert receipt.read_bytes() == stored
    assert "reevaluated" not in _events(repo, rejected["call_id"])


def test_a_failed_check_runs_again_once_the_tip_moved(repo: Repo) -> None:
    check = ["--check", "test -f ok.txt"]
    first = apply(repo, UTIL, *check, "--json")
    assert first.returncode == 1
    rejected = orjson.loads(first.stdout)
    assert rejected["error"]["kind"] == "check-failed"
    assert apply(repo, UTIL, *check).returncode == 1  # same tip: stored
    # The tip moves but the check still fails: judged again, rejected again at the new tip.
    moved = _commit(repo, "README.md", "# still no ok.txt\n", "unrelated")
    again = apply(repo, UTIL, *check, "--json")
    assert again.returncode == 1 and again.stderr == ""
    assert orjson.loads(again.stdout)["replayed"] is False
    assert orjson.loads(again.stdout)["base_commit"] == moved
    same = apply(repo, UTIL, *check)
    assert same.returncode == 1 and f"still at {moved[:12]}, where it was rejected" in same.stderr
    _commit(repo, "ok.txt", "ok\n", "what the check needs")
    now = apply(repo, UTIL, *check, "--json")
    assert now.returncode == 0, now
    assert orjson.loads(now.stdout)["call_id"] == rejected["call_id"]
    assert repo.call_ids() == [rejected["call_id"]]
    assert _events(repo, rejected["call_id"]).count("reevaluated") == 2


def test_a_dirty_path_refusal_is_never_pinned(repo: Repo) -> None:
    (repo.path / "src" / "util.py").write_text("VALUE = 1\n# mine\n")
    refused = apply(repo, UTIL)
    assert refused.returncode == 4 and "uncommitted changes" in refused.stderr
    repo.git("checkout", "--", "src/util.py")  # the user cleans up; the tip has not moved
    now = apply(repo, UTIL)
    assert now.returncode == 0, now
    assert len(repo.call_ids()) == 1


def test_a_rerun_killed_after_its_publish_is_recovered_as_committed(repo: Repo) -> None:
    _commit(repo, "notes.txt", "one\n", "notes")
    rejected = orjson.loads(apply(repo, NOTES, "--json").stdout)
    _commit(repo, "notes.txt", "one\ntwo\n", "two")
    killed = apply(repo, NOTES, env={"APPLYONCE_FAULT": "after-publish"})
    assert killed.returncode == -signal.SIGKILL
    assert repo.call_ids() == [rejected["call_id"]]  # it landed
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 0, recovered
    again = apply(repo, NOTES, "--json")
    assert again.returncode == 0 and orjson.loads(again.stdout)["status"] == "committed"
    assert orjson.loads(again.stdout)["reconciled"] is True
    assert repo.call_ids() == [rejected["call_id"]]
    assert repo.git("status", "--porcelain") == ""
    _all_clean(repo)


def test_two_concurrent_reruns_give_one_commit(repo: Repo) -> None:
    _commit(repo, "notes.txt", "one\n", "notes")
    rejected = orjson.loads(apply(repo, NOTES, "--json").stdout)
    _commit(repo, "notes.txt", "one\ntwo\n", "two")
    # A slow check keeps the first re-run busy while the second one arrives.
    argv = [
        sys.executable,
        "-m",
        "applyonce",
        "apply",
        "-",
        "--repo",
        str(repo.path),
        "--check",
        "sleep 1",
    ]
    procs = [
        subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(os.environ),
        )
        for _ in range(2)
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(NOTES.encode())
        proc.stdin.close()
    codes = sorted(proc.wait(timeout=60) for proc in procs)
    for proc in procs:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()
    assert codes[0] == 0 and codes[1] in (0, 4), codes
    assert repo.call_ids() == [rejected["call_id"]]
    assert _events(repo, rejected["call_id"]).count("reevaluated") == 1
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0
