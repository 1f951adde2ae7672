"""``--remote NAME``: the push to a shared remote is the commit point (issue 14, deliverable 2).

Every test runs the real CLI against a real ``git daemon`` on loopback (``tests/gitserver.py``,
one per session) with a fresh bare repository: racing clones, SIGKILLs at the fault points around
the push, recovery from the clone that crashed and from another one, a remote that is down, and a
server hook that refuses the push.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import APP_PATCH, UTIL_PATCH, Repo, Run, Served, run_cli
from tests.e2e.support import apply_remote, assert_linear, server_calls
from tests.gitserver import _free_port

pytestmark = pytest.mark.sampled(every=2, by="module")

# Its tests that use ``served`` run over git daemon, then over smart HTTP (nginx, basic
# authentication): tests/e2e/fleet/conftest.py.
OVER_EACH_SERVER = True

MAIN = "refs/heads/main"


def spawn(clone: Repo, patch: str) -> subprocess.Popen[str]:
    """``apply --remote origin --json`` started in the background (its patch from a file)."""
    path = clone.path.parent / f"patch-{abs(hash((patch, os.urandom(4))))}.txt"
    path.write_text(patch)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "applyonce",
            "apply",
            str(path),
            "--repo",
            str(clone.path),
            "--remote",
            "origin",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def pending_refs(served: Served) -> list[str]:
    return served.server_git(
        "for-each-ref", "--format=%(refname)", "refs/applyonce/pending/"
    ).split()


def test_a_call_lands_on_the_server_and_the_clone_follows(served: Served) -> None:
    clone = served.clone
    before = served.server_git("rev-parse", "main").strip()
    run = apply_remote(clone, UTIL_PATCH, "--json")
    assert run.returncode == 0, run.stderr
    receipt = json.loads(run.stdout)
    tip = served.server_git("rev-parse", "main").strip()
    assert receipt["commit"] == tip
    assert served.server_git("rev-parse", "main~1").strip() == before
    assert server_calls(served) == [receipt["call_id"]]
    assert receipt["remote"] == served.public_url
    assert receipt["ref"] == MAIN
    # The local branch, the remote-tracking ref and the checkout follow the remote.
    assert clone.head() == tip
    assert clone.git("rev-parse", "refs/remotes/origin/main").strip() == tip
    assert (clone.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert clone.git("status", "--porcelain") == ""
    assert pending_refs(served) == []


def test_clones_racing_different_calls_all_land_in_a_line(served: Served, tmp_path: Path) -> None:
    other = served.another_clone(tmp_path / "other")
    patches = [UTIL_PATCH, APP_PATCH]
    procs = [spawn(served.clone, UTIL_PATCH), spawn(other, APP_PATCH)]
    receipts = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, out + err
        receipts.append(json.loads(out))
    calls = server_calls(served)
    assert sorted(calls) == sorted(r["call_id"] for r in receipts)
    assert len(calls) == len(patches)
    assert_linear(served)
    assert {r["commit"] for r in receipts} <= set(served.server_git("rev-list", "main").split())


def test_the_same_call_from_two_clones_lands_once(served: Served, tmp_path: Path) -> None:
    """Two clones with ledgers of their own: the server's compare-and-swap lets one commit in,
    and the other clone adopts it by its Call-Id trailer."""
    other = served.another_clone(tmp_path / "other")
    landed = {}
    for patch in (UTIL_PATCH,):
        procs = [spawn(clone, patch) for clone in (served.clone, other)]
        receipts = []
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, out + err
            receipts.append(json.loads(out))
        assert receipts[0]["call_id"] == receipts[1]["call_id"]
        assert receipts[0]["commit"] == receipts[1]["commit"]
        landed[receipts[0]["call_id"]] = receipts[0]["commit"]
    calls = server_calls(served)
    assert sorted(calls) == sorted(landed)  # each call once
    assert set(landed.values()) <= set(served.server_git("rev-list", "main").split())
    assert_linear(served)
    for clone in (served.clone, other):
        assert (clone.path / "src/util.py").read_text() == "VALUE = 2\n"
    # One after the other: the second clone finds the call on the server before it runs, adopts
    # its commit, and its branch and checkout follow.
    first = apply_remote(served.clone, APP_PATCH, "--json")
    second = apply_remote(other, APP_PATCH, "--json")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert json.loads(first.stdout)["commit"] == json.loads(second.stdout)["commit"]
    assert other.head() == json.loads(first.stdout)["commit"]
    assert "hello {name}!" in (other.path / "src/app.py").read_text()
    assert other.git("status", "--porcelain") == ""
    assert len(server_calls(served)) == 2


def _recover(clone: Repo) -> Run:
    return run_cli("recover", "--repo", str(clone.path), "--remote", "origin")


def test_killed_after_pushing_the_objects_then_recovered_in_the_same_clone(
    served: Served,
) -> None:
    clone = served.clone
    before = served.server_git("rev-parse", "main").strip()
    run = apply_remote(clone, UTIL_PATCH, env={"APPLYONCE_FAULT": "after-push-objects"})
    assert run.returncode == -9
    assert served.server_git("rev-parse", "main").strip() == before  # not published
    assert len(pending_refs(served)) == 1  # but its objects are there
    done = _recover(clone)
    assert done.returncode == 0, done.stderr
    assert len(server_calls(served)) == 1
    assert pending_refs(served) == []
    assert clone.head() == served.server_git("rev-parse", "main").strip()
    assert (clone.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert_linear(served)


def test_killed_after_pushing_the_objects_then_recovered_from_another_clone(
    served: Served, tmp_path: Path
) -> None:
    run = apply_remote(served.clone, UTIL_PATCH, env={"APPLYONCE_FAULT": "after-push-objects"})
    assert run.returncode == -9
    other = served.another_clone(tmp_path / "other")  # it never had the commit object
    done = _recover(other)
    assert done.returncode == 0, done.stderr
    # Its ledger does not know the call, so nothing shows the commit carries the call's change
    # (anyone may push a pending ref): it is left, never published from here.
    assert "its call is not in this ledger" in done.stdout
    assert server_calls(served) == [] and len(pending_refs(served)) == 1
    # The clone that crashed publishes it, once, and the pending ref goes with the update.
    again = apply_remote(served.clone, UTIL_PATCH, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["commit"] == served.server_git("rev-parse", "main").strip()
    assert len(server_calls(served)) == 1
    assert pending_refs(served) == []
    assert_linear(served)


def test_killed_after_the_publish_then_recovered_from_either_clone(
    served: Served, tmp_path: Path
) -> None:
    run = apply_remote(served.clone, UTIL_PATCH, env={"APPLYONCE_FAULT": "after-publish"})
    assert run.returncode == -9
    assert len(server_calls(served)) == 1  # the remote took it: the call has taken effect
    other = served.another_clone(tmp_path / "other")
    assert _recover(other).returncode == 0
    done = _recover(served.clone)
    assert done.returncode == 0, done.stderr
    assert "committed" in done.stdout
    assert len(server_calls(served)) == 1
    assert pending_refs(served) == []


def test_an_unreachable_remote_is_one_line_and_exit_4(served: Served) -> None:
    clone = served.clone
    clone.git("remote", "set-url", "origin", f"git://bot:s3cret@127.0.0.1:{_free_port()}/gone.git")
    before = served.server_git("rev-parse", "main").strip()
    run = apply_remote(clone, UTIL_PATCH)
    assert run.returncode == 4, run.stderr
    assert "origin" in run.stderr and "Traceback" not in run.stderr
    assert "s3cret" not in run.stderr and "bot" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert served.server_git("rev-parse", "main").strip() == before
    receipts = clone.state_dir() / "receipts"
    assert not receipts.exists() or not any(receipts.iterdir())
    assert (clone.path / "src/util.py").read_text() == "VALUE = 1\n"


def test_a_push_refused_by_a_server_hook_is_one_line(served: Served) -> None:
    hook = served.server / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\nwhile read old new ref; do\n"
        '  case "$ref" in refs/heads/*) echo "main is frozen" >&2; exit 1;; esac\ndone\n'
    )
    hook.chmod(0o755)
    before = served.server_git("rev-parse", "main").strip()
    run = apply_remote(served.clone, UTIL_PATCH)
    assert run.returncode == 4, run.stdout + run.stderr
    assert "origin refused" in run.stderr and "main is frozen" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
    assert served.server_git("rev-parse", "main").strip() == before
    assert pending_refs(served) == []
    assert served.clone.git("status", "--porcelain") == ""


def test_a_connection_dropped_after_the_update_was_sent_leaves_the_call_in_flight(
    served: Served,
) -> None:
    """The server's receive-pack dies after reading the branch update (its hook kills it): the
    client cannot know whether the branch moved. The call is not rejected (exit 5, in flight);
    once the server answers again, recover rolls it forward."""
    hook = served.server / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\nwhile read old new ref; do\n"
        '  case "$ref" in refs/heads/*) kill -9 $PPID;; esac\ndone\n'
    )
    hook.chmod(0o755)
    before = served.server_git("rev-parse", "main").strip()
    run = apply_remote(served.clone, UTIL_PATCH)
    assert run.returncode == 5, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert served.server_git("rev-parse", "main").strip() == before
    hook.unlink()
    done = _recover(served.clone)
    assert done.returncode == 0, done.stderr
    assert len(server_calls(served)) == 1
    assert pending_refs(served) == []


def test_audit_asks_the_remote_when_the_local_branch_lags(served: Served) -> None:
    clone = served.clone
    assert apply_remote(clone, UTIL_PATCH).returncode == 0
    clone.git("reset", "-q", "--hard", "HEAD~1")  # the local branch lags the remote's
    local = run_cli("audit", "--repo", str(clone.path))
    assert local.returncode == 1  # the receipt's commit is not on the local branch
    remote = run_cli("audit", "--repo", str(clone.path), "--remote", "origin")
    assert remote.returncode == 0, remote.stdout + remote.stderr


def test_git_daemon_cli_starts_and_stops(tmp_path: Path) -> None:
    script = Path(__file__).parents[2] / "gitserver.py"
    started = subprocess.run(
        [sys.executable, str(script), "start", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ},
    )
    base, _, url = started.stdout.strip().partition("|")
    assert url.startswith("git://127.0.0.1:") and Path(base).is_dir()
    port = int(url.rpartition(":")[2])
    socket.create_connection(("127.0.0.1", port), timeout=5).close()  # it outlived 'start'
    subprocess.run([sys.executable, str(script), "stop", str(tmp_path)], check=True)
    assert not (tmp_path / "daemon.pid").exists()
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("git daemon still listening after 'stop'")


def test_a_receipt_names_the_remote_without_credentials_and_keeps_its_call_id() -> None:
    from applyonce.core.identity import CallIdentity
    from applyonce.core.receipt import Receipt, parse_receipt, public_url

    assert (
        public_url("https://bot:s3cret@git.example/team/r.git") == "https://git.example/team/r.git"
    )
    assert public_url("ssh://git@host:22/r.git") == "ssh://host:22/r.git"
    assert public_url("/srv/r.git") == "/srv/r.git"
    ident = CallIdentity.compute("a" * 64, contract_sha256="b" * 64, attempt=1)
    local = Receipt.of_call(ident, status="prepared", execution_id="e", ref=MAIN)
    remote = local.model_copy(update={"remote": "https://git.example/team/r.git"})
    assert b'"remote"' not in local.to_json()  # a schema-1 receipt as before
    assert parse_receipt(local.to_json(), call_id=ident.call_id).remote is None
    back = parse_receipt(remote.to_json(), call_id=ident.call_id)
    assert back.remote == "https://git.example/team/r.git"
    assert back.identity.recompute() == ident.call_id == local.identity.recompute()


def test_the_users_own_local_commits_are_never_overwritten(served: Served) -> None:
    clone = served.clone
    (clone.path / "mine.txt").write_text("my work\n")
    clone.git("add", "mine.txt")
    clone.git("commit", "-q", "-m", "my own commit, not pushed")
    mine = clone.head()
    run = apply_remote(clone, UTIL_PATCH, "--json")
    assert run.returncode == 0, run.stderr
    commit = json.loads(run.stdout)["commit"]
    assert served.server_git("rev-parse", "main").strip() == commit
    assert clone.head() == mine  # the local branch keeps the user's commit; 'git pull' merges
    assert clone.git("rev-parse", "refs/remotes/origin/main").strip() == commit
    assert clone.git("status", "--porcelain") == ""


def test_a_state_directory_is_not_a_record_two_clones_share(served: Served, tmp_path: Path) -> None:
    """A state directory's ledger serves the repository that made it: another clone given the
    same --state-dir is refused (exit 2) and touches nothing; clones share a record through a
    PostgreSQL ledger (the next test), whose calls are the remote's repository's."""
    shared = str(tmp_path / "shared-state")
    killed = apply_remote(
        served.clone, UTIL_PATCH, "--state-dir", shared,
        env={"APPLYONCE_FAULT": "after-push-objects"},
    )  # fmt: skip
    assert killed.returncode == -9
    before = pending_refs(served)
    other = served.another_clone(tmp_path / "other")
    done = run_cli(
        "recover", "--repo", str(other.path), "--remote", "origin", "--state-dir", shared
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "serves another repository" in done.stderr and "--state-dir" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert pending_refs(served) == before and server_calls(served) == []
    # Its own clone settles it.
    own = run_cli(
        "recover", "--repo", str(served.clone.path), "--remote", "origin", "--state-dir", shared
    )
    assert own.returncode == 0, own.stdout + own.stderr
    assert "published it now" in own.stdout
    assert len(server_calls(served)) == 1 and pending_refs(served) == []


def test_with_a_postgresql_ledger_another_clone_rolls_the_staged_commit_forward(
    served: Served, tmp_path: Path, pg_url: str
) -> None:
    """The fleet set-up: one PostgreSQL ledger, one remote. A call killed between the two pushes
    in one clone is published by a recover in another clone, which fetches its commit object."""
    fleet = ("--remote", "origin", "--ledger", pg_url)
    killed = apply_remote(
        served.clone, UTIL_PATCH, "--ledger", pg_url, env={"APPLYONCE_FAULT": "after-push-objects"}
    )
    assert killed.returncode == -9
    other = served.another_clone(tmp_path / "other")
    done = run_cli("recover", "--repo", str(other.path), *fleet)
    assert done.returncode == 0, done.stderr
    assert "published it now" in done.stdout
    assert len(server_calls(served)) == 1 and pending_refs(served) == []
    again = apply_remote(served.clone, UTIL_PATCH, "--ledger", pg_url, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["commit"] == served.server_git("rev-parse", "main").strip()
    assert len(server_calls(served)) == 1
