"""Calls on a PostgreSQL ledger (with the remote every clone publishes to: a shared ledger needs a
shared commit point), through the real CLI: a database that is down fails at once with one line
and writes nothing; a server killed mid-call ends the call like a crash (one line, exit 4), and
the call is settled later through Git, never applied twice; a call made on one clone is seen on
another."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from applyonce import Executor
from applyonce.flow.call import apply as apply_flow
from applyonce.flow.call.apply import UnrecordedCommitError
from applyonce.flow.record import settle
from applyonce.state.storage import LedgerUnavailableError
from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, Run, Served, run_cli, stored_text
from tests.e2e.support import server_calls
from tests.pgserver import PostgresServer

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

HINT = "start the database or fix --ledger/applyonce.ledger"


def _one_line_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def apply(repo: Repo, patch: str, *args: str) -> Run:
    """``apply`` in a clone of the served repository, its remote the commit point."""
    return run_cli("apply", "-", "--repo", str(repo.path), "--remote", "origin", *args, input=patch)


def test_a_database_that_is_not_listening_fails_at_once_and_writes_nothing(
    served: Served, tmp_path: Path
) -> None:
    repo = served.clone
    head, files = repo.head(), repo.files()
    url = f"postgresql://agent:s3cr3t-pw@/fleet?host={tmp_path}&connect_timeout=2"
    started = time.monotonic()
    result = apply(repo, PATCH, "--ledger", url)
    assert time.monotonic() - started < 10
    assert result.returncode == 4, result.stderr
    line = _one_line_error(result.stderr)
    assert f"cannot reach the ledger database 'fleet' on {tmp_path} as 'agent'" in line
    assert HINT in line and "s3cr3t-pw" not in result.stderr + result.stdout
    assert (repo.head(), repo.files()) == (head, files)
    assert repo.git("status", "--porcelain") == ""
    receipts = repo.state_dir() / "receipts"
    assert not receipts.exists() or not any(receipts.iterdir())


# A --check that crashes the ledger's server while the call runs (an immediate shutdown: every
# backend dies at once, the next start replays the WAL), and returns once it is down.
_KILL_SERVER = """
import os, signal, sys, time
pid = int(sys.argv[1])
os.kill(pid, signal.SIGQUIT)
for _ in range(500):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        break
    time.sleep(0.01)
"""


def test_a_server_killed_mid_call_ends_it_like_a_crash_and_git_settles_it(
    served: Served, pg_server: PostgresServer, tmp_path: Path
) -> None:
    repo = served.clone
    try:
        url = pg_server.create_database()
        script = tmp_path / "kill_server.py"
        script.write_text(_KILL_SERVER)
        check = f"{sys.executable} {script} {pg_server.postmaster_pid()}"
        head = repo.head()
        died = apply(repo, PATCH, "--ledger", url, "--check", check)
        assert died.returncode == 4, died.stderr
        line = _one_line_error(died.stderr)
        assert "lost the connection to the ledger database" in line and HINT in line
        assert repo.head() == head  # nothing published
        # In flight, as a crash leaves it: not settled as a rejection on the way out.
        [cached] = (repo.state_dir() / "receipts").glob("*.json")
        assert orjson.loads(cached.read_bytes())["status"] == "prepared"
        pg_server.restart()  # the database is back; the call is in flight in it
        assert _states(url) == ["prepared"]
        again = apply(repo, PATCH, "--ledger", url, "--json")
        assert again.returncode == 0, again.stderr
        receipt = orjson.loads(again.stdout)
        assert receipt["status"] == "committed"
        assert server_calls(served) == [receipt["call_id"]]  # applied once
        assert repo.head() == receipt["commit"]
        recovered = run_cli(
            "recover", "--repo", str(repo.path), "--ledger", url, "--remote", "origin"
        )
        assert recovered.returncode == 0, recovered.stderr
        assert _states(url) == ["committed"]
    finally:
        pg_server.ensure_running()


def test_the_server_lost_after_the_publish_is_an_unrecorded_commit_until_recovered(
    served: Served, pg_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed right after the publish (the fault point's hook kills the real server): the commit
    landed, its record could not be written, so exit 5 ("do not send it again"), never a
    rejection; 'recover' finishes the record once the database is back."""
    url = pg_server.create_database()
    arm = apply_flow.fault

    def kill_server_after_publish(point: str) -> None:
        if point == "after-publish":
            pg_server.kill()
        arm(point)

    monkeypatch.setattr(apply_flow, "fault", kill_server_after_publish)
    executor = Executor(served.clone.path, ledger=url, remote="origin")
    try:
        with pytest.raises(UnrecordedCommitError) as unrecorded:
            executor.apply(PATCH)
        assert unrecorded.value.exit_code == 5
        assert "lost the connection to the ledger" in unrecorded.value.message
        assert "start the ledger's database, then run 'applyonce recover'" in unrecorded.value.hint
        [call_id] = server_calls(served)  # it landed
        pg_server.restart()
        # This process holds the claim (it is alive: no other process may take it before its
        # lease ends); its own recover takes it over, on a new connection.
        report = executor.recover()
        assert [(o.call_id, o.now) for o in report.outcomes] == [(call_id, "committed")]
        assert _states(url) == ["committed"] and server_calls(served) == [call_id]
    finally:
        executor.close()
        pg_server.ensure_running()


def test_a_claim_the_crashed_server_lost_leaves_nothing_only_its_clone_would_recover(
    served: Served, pg_server: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim commits without waiting for the disk; the server killed (an immediate shutdown)
    right after it loses it, and the call stops at its first write to the database. The
    ``prepared`` receipt is then not left in this clone's cache alone: another clone's
    ``recover`` says every call is settled, and that is true of this clone too (its own
    ``recover`` finds nothing). The prepared receipt used to be written to this clone's cache
    before the database was asked to keep it: only this clone's recover found it, later, as a
    call in flight, after the other's had said everything was settled."""
    import psycopg

    url = pg_server.create_database()
    made = settle.prepared_receipt

    def kill_server_before_the_prepared_receipt(*args: Any, **kwargs: Any) -> Any:
        # After the claim and every read of the call's: its next step writes the receipt.
        pg_server.kill()
        return made(*args, **kwargs)

    # The WAL writer puts a commit that did not wait for the disk there within
    # wal_writer_delay (200 ms): 10 s keeps the claim in the server's memory until the kill.
    with psycopg.connect(pg_server.url(), autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET wal_writer_delay = '10s'")
        conn.execute("SELECT pg_reload_conf()")
    monkeypatch.setattr(settle, "prepared_receipt", kill_server_before_the_prepared_receipt)
    mine, other = served.clone, served.another_clone(tmp_path / "other")
    executor = Executor(mine.path, ledger=url, remote="origin")
    try:
        with pytest.raises(LedgerUnavailableError, match="lost the connection"):
            executor.apply(PATCH)
        pg_server.ensure_running()
        assert _states(url) == []  # the claim was lost with the server (the case at hand)
        fleet = ("--ledger", url, "--remote", "origin", "--json")
        said = run_cli("recover", "--repo", str(other.path), *fleet)
        assert said.returncode == 0, said.stdout + said.stderr
        assert orjson.loads(said.stdout)["outcomes"] == []
        here = run_cli("recover", "--repo", str(mine.path), *fleet)
        assert here.returncode == 0, here.stdout + here.stderr
        assert orjson.loads(here.stdout)["outcomes"] == [], here.stdout
        assert _states(url) == []
        receipts = mine.state_dir() / "receipts"
        assert not receipts.exists() or not any(receipts.glob("*.json"))
        assert server_calls(served) == []  # nothing took effect
    finally:
        executor.close()
        pg_server.ensure_running()
        with psycopg.connect(pg_server.url(), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM RESET wal_writer_delay")
            conn.execute("SELECT pg_reload_conf()")


def _states(url: str) -> list[str]:
    """The states of the calls in the ledger at ``url``."""
    import psycopg

    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT state FROM calls")]


def test_a_call_made_on_one_clone_is_shown_on_another(
    served: Served, pg_url: str, tmp_path: Path
) -> None:
    fleet = ("--ledger", pg_url, "--remote", "origin")
    done = apply(served.clone, PATCH, "--ledger", pg_url, "--json")
    assert done.returncode == 0, done.stderr
    call_id = orjson.loads(done.stdout)["call_id"]
    clone = served.another_clone(tmp_path / "other").path
    shown = run_cli("show", call_id, "--repo", str(clone), *fleet, "--json")
    assert shown.returncode == 0, shown.stderr
    assert orjson.loads(shown.stdout)["call_id"] == call_id
    logged = run_cli("log", "--repo", str(clone), *fleet, "--json")
    assert logged.returncode == 0, logged.stderr
    assert call_id in logged.stdout
    audited = run_cli("audit", "--repo", str(clone), *fleet)
    assert audited.returncode == 0, audited.stdout + audited.stderr


@pytest.mark.parametrize("then", ["repeat", "recover"])
@pytest.mark.parametrize("fault", ["after-publish", "after-push-objects"])
def test_a_call_another_clone_recovered_is_brought_into_this_clones_checkout(
    served: Served, pg_url: str, tmp_path: Path, fault: str, then: str
) -> None:
    """A clone killed mid-call, its call settled by another clone's recover (as the README
    says to): that recover's ``synced`` is about its own checkout. The repeat, or a recover,
    in the killed clone brings its checkout up to the call's commit: nothing left there that
    the next 'git commit' would revert."""
    fleet = ("--ledger", pg_url, "--remote", "origin")
    mine, other = served.clone, served.another_clone(tmp_path / "other")
    killed = run_cli(
        "apply",
        "-",
        "--repo",
        str(mine.path),
        *fleet,
        input=PATCH,
        env={"APPLYONCE_FAULT": fault},
    )
    assert killed.returncode == -9
    recovered = run_cli("recover", "--repo", str(other.path), *fleet)
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    [call] = server_calls(served)
    if then == "repeat":
        again = run_cli("apply", "-", "--repo", str(mine.path), *fleet, input=PATCH)
        assert again.returncode == 0, again.stderr
        assert stored_text(again.stdout) == "Success. Updated the following files:\nM src/util.py\n"
    else:
        done = run_cli("recover", "--repo", str(mine.path), *fleet)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"the checkout at {mine.path.resolve()} brought up to main: src/util.py" in (
            done.stdout
        )
    assert server_calls(served) == [call]  # applied once
    assert mine.head() == served.server_git("rev-parse", "main").strip()
    assert (mine.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert mine.git("status", "--porcelain") == ""
    settled = run_cli("recover", "--repo", str(mine.path), *fleet)
    assert settled.returncode == 0, settled.stdout
    assert "every call is settled" in settled.stdout


@pytest.mark.parametrize("fault", ["after-publish", "after-push-objects"])
def test_a_clone_whose_edit_keeps_out_a_call_another_clone_recovered_is_told_by_recover(
    served: Served, pg_url: str, tmp_path: Path, fault: str
) -> None:
    """The killed clone's checkout holds the user's edit, made before the call, on the call's
    file: its recover leaves the edit as it is, says the checkout is behind with a command
    that keeps the edit, and does not call everything settled until it is in line."""
    fleet = ("--ledger", pg_url, "--remote", "origin")
    mine, other = served.clone, served.another_clone(tmp_path / "other")
    base = mine.head()
    killed = run_cli(
        "apply",
        "-",
        "--repo",
        str(mine.path),
        *fleet,
        input=PATCH,
        env={"APPLYONCE_FAULT": fault},
    )
    assert killed.returncode == -9
    (mine.path / "src/util.py").write_text("VALUE = 1\nMINE = 1\n")
    assert run_cli("recover", "--repo", str(other.path), *fleet).returncode == 0
    done = run_cli("recover", "--repo", str(mine.path), *fleet)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "not everything is settled" in done.stdout
    # The branch here follows the remote's only in the sync, which the kill cut short: it did
    # not move; the other clone's recover moved the remote's past it.
    command = "git pull --ff-only --autostash origin main"
    assert "main here has not followed origin's: the checkout holds changes of yours" in (
        done.stdout
    )
    assert mine.head() == base
    assert f"run '{command}' to bring it in line" in done.stdout
    assert (mine.path / "src/util.py").read_text() == "VALUE = 1\nMINE = 1\n"
    # The command: the edit and the call's change touch neighbouring lines, so git marks them
    # as a conflict in the file, on the branch's tip, and keeps the edit in the stash.
    subprocess.run(["sh", "-c", command], cwd=mine.path, capture_output=True, check=False)
    assert mine.git("symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert mine.head() == served.server_git("rev-parse", "main").strip()
    marked = (mine.path / "src/util.py").read_text()
    assert "<<<<<<<" in marked and "VALUE = 2" in marked and "MINE = 1" in marked
    assert "+MINE = 1" in mine.git("stash", "show", "-p")
    (mine.path / "src/util.py").write_text("VALUE = 2\nMINE = 1\n")
    mine.git("reset", "-q", "--", "src/util.py")
    mine.git("stash", "drop", "-q")
    settled = run_cli("recover", "--repo", str(mine.path), *fleet)
    assert settled.returncode == 0, settled.stdout
    assert mine.git("status", "--porcelain") == " M src/util.py\n"
