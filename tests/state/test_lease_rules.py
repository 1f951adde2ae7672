"""The lease rules as pure decisions (:func:`applyonce.state.lease.hold_of`), and the heartbeat
that renews a lease from its own thread. The ledgers' use of them: test_ledger_contract.py."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from applyonce.state.lease import (
    DEFAULT_LEASE_S,
    Heartbeat,
    Lease,
    Owner,
    hold_of,
    stamp,
)

ME = Owner.me()
ELSEWHERE = Owner(ME.pid, "build-host-2.example.invalid", "12345")
NOW = time.time()


@dataclasses.dataclass(frozen=True)
class Row:
    call_id: str = "c" * 64
    owner: Owner | None = ELSEWHERE
    lease: Lease | None = None
    updated_at: str = stamp(NOW)


def test_a_row_before_leases_ends_one_claimant_lease_after_its_last_update() -> None:
    row = Row(updated_at=stamp(NOW - 10))
    assert hold_of(row, ME, now=NOW, lease_seconds=5) is None  # ended 5 s ago
    hold = hold_of(row, ME, now=NOW, lease_seconds=30)
    assert hold is not None and not hold.suspicious and hold.until == stamp(NOW + 20)


def test_a_row_updated_in_the_future_holds_and_says_so() -> None:
    row = Row(updated_at="2999-01-01T00:00:00.000Z")
    hold = hold_of(row, ME, now=NOW, lease_seconds=30)
    assert hold is not None and hold.suspicious
    assert hold.until == "2999-01-01T00:00:30.000Z"
    assert "more than a lease (30 s) ahead of this clock" in hold.message
    assert "applyonce resolve cccccccccccc --release" in hold.hint


def test_a_lease_up_to_one_length_ahead_is_an_ordinary_hold() -> None:
    ahead = Row(lease=Lease(stamp(NOW + 30.5), 30))  # a renewal from a clock half a second ahead
    hold = hold_of(ahead, ME, now=NOW, lease_seconds=DEFAULT_LEASE_S)
    assert hold is not None and not hold.suspicious
    far = Row(lease=Lease(stamp(NOW + 32), 30))
    hold = hold_of(far, ME, now=NOW, lease_seconds=DEFAULT_LEASE_S)
    assert hold is not None and hold.suspicious


@pytest.mark.parametrize("recorded", [0.0, -5.0, float("inf"), float("nan"), 1e9])
def test_a_recorded_lease_length_out_of_range_counts_as_the_claimants(recorded: float) -> None:
    # The row is untrusted: a forged length must not make a far-future lease look ordinary.
    row = Row(lease=Lease(stamp(NOW + 3600), recorded))
    hold = hold_of(row, ME, now=NOW, lease_seconds=30)
    assert hold is not None and hold.suspicious and "(30 s)" in hold.message


def test_no_owner_or_this_process_or_a_dead_one_here_never_holds() -> None:
    lease = Lease(stamp(NOW + 20), 30)
    assert hold_of(Row(owner=None, lease=lease), ME, now=NOW, lease_seconds=30) is None
    assert hold_of(Row(owner=ME, lease=lease), ME, now=NOW, lease_seconds=30) is None
    dead_here = Owner.local(2**22 + 7, "1")
    assert hold_of(Row(owner=dead_here, lease=lease), ME, now=NOW, lease_seconds=30) is None
    assert hold_of(Row(lease=lease), ME, now=NOW, lease_seconds=30) is not None


def test_a_dead_pid_here_in_another_namespace_or_recorded_without_one_holds_by_its_lease() -> None:
    # Its pid means another process (or none) in this namespace: only the lease can tell.
    lease = Lease(stamp(NOW + 20), 30)
    dead_here = Owner.local(2**22 + 7, "1")
    for pidns, boot in [("pid:[1]", dead_here.boot), (dead_here.pidns, "other"), ("", "")]:
        there = dataclasses.replace(dead_here, pidns=pidns, boot=boot)
        hold = hold_of(Row(owner=there, lease=lease), ME, now=NOW, lease_seconds=30)
        assert hold is not None and not hold.suspicious and hold.owner == there
        ended = Row(owner=there, lease=Lease(stamp(NOW - 1), 30))
        assert hold_of(ended, ME, now=NOW, lease_seconds=30) is None


def test_the_heartbeat_renews_every_third_of_a_lease_until_the_block_ends() -> None:
    calls: list[float] = []
    failures = iter([RuntimeError("ledger busy")])

    def renew() -> bool:
        calls.append(time.monotonic())
        failure = next(failures, None)
        if failure is not None:
            raise failure  # a failed renewal: the next beat tries again
        return True

    started = time.monotonic()
    with Heartbeat(0.3) as beat:
        time.sleep(0.2)
        assert calls == []  # not started yet: nothing is claimed
        beat.start(renew)
        beat.start(renew)  # once only
        time.sleep(0.55)
    ended = time.monotonic()
    count = len(calls)
    time.sleep(0.25)
    assert len(calls) == count  # stopped with the block
    assert count >= 3 and beat.renewals == count - 1
    assert all(b - a >= 0.09 for a, b in zip([started + 0.2, *calls], calls, strict=False))
    assert ended - started < 2.0  # the block ends without waiting out a beat
    assert not any(t.name == "applyonce-lease" for t in threading.enumerate())


def test_a_zombie_here_never_holds() -> None:
    """A killed process nobody reaped yet (its parent died too) runs no more: it holds nothing."""
    import os

    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                if handle.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    break
            time.sleep(0.01)
        zombie = dataclasses.replace(ME, pid=pid, start="")
        assert zombie.provably_dead()
        lease = Lease(stamp(NOW + 20), 30)
        assert hold_of(Row(owner=zombie, lease=lease), ME, now=NOW, lease_seconds=30) is None
    finally:
        os.waitpid(pid, 0)
