"""Claims are leases, with real processes: a call killed under another hostname is taken over once
its lease ends (``unshare --uts``, or an injected host ID), a long check keeps its claim renewed
against a concurrent retry, ``resolve --release`` frees a stuck claim by hand, and a lease dated
far ahead of the clock is never waited on."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import Repo, run_cli
from tests.e2e.crash.claims import OTHER_HOST, apply, ledger_events, ledger_rows
from tests.e2e.support import THREE_FILE_PATCH as PATCH

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

KILL_AFTER_CLAIM = {"APPLYONCE_FAULT": "after-claim"}


def _can_rename_host() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--uts", "hostname", "probe"], capture_output=True)
    return probe.returncode == 0


def _killed_under_another_hostname(repo: Repo) -> None:
    """``applyonce apply`` in a new UTS namespace whose hostname is changed first (a container
    renamed), SIGKILLed right after it claimed the call."""
    script = 'hostname other-host && exec "$@"'
    command = [sys.executable, "-m", "applyonce", "apply", "-", "--repo", str(repo.path)]
    proc = subprocess.run(
        ["unshare", "--uts", "sh", "-c", script, "sh", *command],
        input=PATCH.encode(),
        capture_output=True,
        env={**os.environ, **KILL_AFTER_CLAIM},
        timeout=60,
        check=False,
    )
    assert proc.returncode == -9, proc.stderr  # SIGKILL


def _landed_once(repo: Repo, base: str, call_id: str) -> None:
    """Exactly one commit carries the call, right on its base; the checkout is in sync; fsck is
    clean (the full docs/design.md §7 check, with the CLI, is tests/e2e/crash/test_recovery.py's)."""
    assert repo.call_ids() == [call_id]
    assert repo.git("rev-parse", "HEAD~1").strip() == base
    assert repo.git("status", "--porcelain") == ""
    assert repo.git("fsck", "--strict", "--no-dangling") == ""


def test_a_call_killed_under_another_hostname_is_taken_over_once_its_lease_ends(
    repo: Repo,
) -> None:
    # A real hostname change where the test may make one (root, unshare); else an injected one.
    base = repo.head()
    repo.git("config", "applyonce.leaseSeconds", "3")
    if _can_rename_host():
        _killed_under_another_hostname(repo)
        host = "other-host"
    else:
        killed = apply(repo, env={**KILL_AFTER_CLAIM, **OTHER_HOST})
        assert killed.returncode == -9, killed.stderr
        host = OTHER_HOST["APPLYONCE_HOST_ID"]
    [row] = ledger_rows(repo)
    assert (row["state"], row["owner_host"]) == ("claimed", host)
    call_id = str(row["call_id"])
    held = apply(repo)  # its lease has not ended: the other host's process may still run it
    assert held.returncode == 4, held.stderr
    assert f"is running in process {row['owner_pid']}" in held.stderr
    assert held.stderr.count("\n") == 1 and "Traceback" not in held.stderr
    # Nobody renews it: the lease ends, whatever host made the claim. (Before leases, the claim
    # of another host's process was taken to run for ever: this retry was refused, exit 4.)
    expires = time.time() + 3
    if row.get("lease_expires_at"):
        assert row["lease_seconds"] == 3
        expires = dt.datetime.fromisoformat(str(row["lease_expires_at"])).timestamp()
    time.sleep(max(0.0, expires - time.time()) + 0.1)
    retried = apply(repo)
    assert retried.returncode == 0, retried.stderr
    receipt = orjson.loads(retried.stdout)
    assert (receipt["call_id"], receipt["status"]) == (call_id, "committed")
    _landed_once(repo, base, call_id)
    assert ledger_events(repo, call_id)[:2] == ["claimed", "claimed"]  # taken over, then settled
    assert f"process {row['owner_pid']} on {host} (its lease runs until " in held.stderr


def _start_long_call(repo: Repo, tmp_path: Path, seconds: float) -> subprocess.Popen[bytes]:
    marker, patch = tmp_path / "check-started", tmp_path / "change.patch"
    patch.write_text(PATCH)
    check = f"touch {marker} && sleep {seconds}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "applyonce",
            "apply",
            str(patch),
            "--repo",
            str(repo.path),
            "--json",
            "--lease-seconds",
            "1",
            "--check",
            check,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the check never started"
        time.sleep(0.02)
    return proc


def test_a_long_check_keeps_its_claim_renewed_against_a_retry_from_another_host(
    repo: Repo, tmp_path: Path
) -> None:
    base = repo.head()
    runner = _start_long_call(repo, tmp_path, 5)
    marked = time.monotonic()
    call_id = str(ledger_rows(repo)[0]["call_id"])
    # On this host the owner is provably alive: releasing its claim by hand is refused.
    refused = run_cli("resolve", call_id[:12], "--release", "--repo", str(repo.path))
    assert refused.returncode == 4, refused.stderr
    assert refused.stderr.startswith(f"error: call {call_id[:12]} is held by process {runner.pid}")
    assert refused.stderr.count("\n") == 1 and "released" not in ledger_events(repo, call_id)
    # Past the first lease: only the heartbeat's renewals hold the claim now.
    time.sleep(max(0.0, marked + 1.2 - time.monotonic()))
    # From another host: the pid cannot be checked there, only the lease protects the call.
    retry = apply(repo, "--lease-seconds", "1", env=OTHER_HOST)
    assert retry.returncode == 4, retry.stderr
    assert f"is running in process {runner.pid} on " in retry.stderr
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 0, err
    assert orjson.loads(out)["status"] == "committed"
    _landed_once(repo, base, call_id)
    assert ledger_events(repo, call_id).count("claimed") == 1  # never taken over


def test_resolve_release_frees_a_stuck_claim_and_the_retry_settles_it(repo: Repo) -> None:
    base = repo.head()
    killed = apply(repo, env={**KILL_AFTER_CLAIM, **OTHER_HOST})  # lease: the default 30 s
    assert killed.returncode == -9
    [row] = ledger_rows(repo)
    call_id = str(row["call_id"])
    assert apply(repo).returncode == 4
    released = run_cli(
        "resolve", call_id[:8], "--release", "--note", "host gone", "--repo", str(repo.path)
    )
    assert released.returncode == 0, released.stderr
    assert released.stdout == (
        f"call {call_id[:12]} released: process {row['owner_pid']} on "
        f"{OTHER_HOST['APPLYONCE_HOST_ID']} held it (lease until {row['lease_expires_at']}); "
        "repeat the call, or run 'applyonce recover', to settle it through Git\n"
    )
    assert ledger_events(repo, call_id) == ["claimed", "released"]
    retried = apply(repo)
    assert retried.returncode == 0, retried.stderr
    _landed_once(repo, base, call_id)


def test_a_claim_dated_far_ahead_of_the_clock_is_reported_not_waited_on(repo: Repo) -> None:
    # Its owner's clock, or this one, stepped; or the row is forged. (A row with no lease, dated
    # ahead by its last update, is the same rule: tests/state/test_lease_rules.py.)
    killed = apply(repo, env={**KILL_AFTER_CLAIM, **OTHER_HOST})
    assert killed.returncode == -9
    db = sqlite3.connect(repo.state_dir() / "ledger.sqlite3")
    db.execute("UPDATE calls SET lease_expires_at = '2999-01-01T00:00:00.000Z'")
    db.commit()
    db.close()
    [row] = ledger_rows(repo)
    call_id = str(row["call_id"])
    started = time.monotonic()
    held = apply(repo)
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert time.monotonic() - started < 30  # two processes, neither waited out the lease
    assert held.returncode == 4, held.stderr
    assert held.stderr == (
        f"error: call {call_id[:12]} is claimed by process {row['owner_pid']} on "
        f"{OTHER_HOST['APPLYONCE_HOST_ID']} until 2999-01-01T00:00:00.000Z, more than a lease "
        "(30 s) ahead of this clock (a clock that stepped back, or a "
        f"forged record); if no process runs it, run 'applyonce resolve {call_id[:12]} "
        "--release'\n"
    )
    assert recovered.returncode == 4, recovered.stderr  # not settled: held
    assert f"{call_id[:12]}  claimed    held       call {call_id[:12]} is claimed by" in (
        recovered.stdout
    )
    assert "--release" in recovered.stdout and "every call is settled" not in recovered.stdout
    assert ledger_events(repo, call_id) == ["claimed"]  # neither wrote anything
    assert run_cli("resolve", call_id, "--release", "--repo", str(repo.path)).returncode == 0
    assert apply(repo).returncode == 0


def test_a_bad_lease_length_in_git_config_is_refused_before_anything_is_written(
    repo: Repo,
) -> None:
    repo.git("config", "applyonce.leaseSeconds", "soon")
    refused = apply(repo)
    assert refused.returncode == 2
    assert refused.stderr == (
        "error: applyonce.leaseSeconds in git config must be a number of seconds from 0.5 to "
        "86400, not 'soon'; pass --lease-seconds N, or run 'git config applyonce.leaseSeconds N'\n"
    )
    assert not repo.state_dir().exists() and repo.call_ids() == []


def _can_unshare_pids() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], check=False)
    return probe.returncode == 0


def test_a_call_running_in_another_pid_namespace_is_held_by_its_lease(
    repo: Repo, tmp_path: Path
) -> None:
    # Two containers of one pod: one hostname, one state directory, two PID namespaces. The
    # owner's pid means another process here (its pid 1 is this namespace's init): before the
    # owner recorded its namespace, the retry here judged it "dead" and ran the call again.
    if not _can_unshare_pids():
        pytest.skip("needs root and 'unshare --pid --fork --mount-proc' (a new PID namespace)")
    base = repo.head()
    marker, ran, patch = tmp_path / "started", tmp_path / "ran", tmp_path / "change.patch"
    release = tmp_path / "release"
    patch.write_text(PATCH)
    # The check holds the call until the retry has answered (not for a fixed time, which a
    # loaded machine can outlast before the retry even starts); 60 s at most.
    check = (
        f"echo ran >> {ran} && touch {marker} && "
        f"for i in $(seq 600); do [ -e {release} ] && break; sleep 0.1; done"
    )
    command = ["apply", str(patch), "--repo", str(repo.path), "--json", "--check", check]
    owner = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "applyonce", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert owner.poll() is None and time.monotonic() < deadline, "the check never started"
        time.sleep(0.02)
    [row] = ledger_rows(repo)
    call_id = str(row["call_id"])
    assert row.get("owner_pidns") != os.readlink("/proc/self/ns/pid")
    retry = run_cli(*command)  # the same call, on this host, inside the owner's lease
    assert retry.returncode == 4, retry.stderr
    assert f"is running in process {row['owner_pid']} on " in retry.stderr
    release.touch()
    out, err = owner.communicate(timeout=60)
    assert owner.returncode == 0, err
    assert orjson.loads(out)["status"] == "committed"
    _landed_once(repo, base, call_id)
    assert ran.read_text() == "ran\n"  # the check ran once: the call was never taken over
    assert ledger_events(repo, call_id).count("claimed") == 1
