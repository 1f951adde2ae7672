"""Claims are leases (docs/design.md §5, §11): who holds a call, until when, and when another may
take it.

A claim records its :class:`Owner` (pid, host, the pid's start time) and a :class:`Lease`: when it
ends, and its length. The owner renews it while it runs (:class:`Heartbeat`, every third of a
lease). Another process takes the claim over (:func:`hold_of` says None) when:

* the owner runs on this host, in this PID namespace, since this boot, and is gone (its pid is
  dead, or reused): at once, whatever the lease;
* the lease has ended, whatever host made it (a machine that died, a container whose hostname
  changed): its owner stopped renewing it.

**A lease that ends more than one lease length after this clock's now** cannot come from a live
owner on a sane clock, since a renewal sets it to one lease ahead of the owner's now. It comes
from a clock that stepped back (this one, or the owner's being ahead of it) or from a forged
record. Such a claim is *held*, not taken (taking a live owner's call is the worse mistake:
applyonce would then rely on Git's compare-and-swap alone to stay exactly-once), and it is never
waited on: the refusal says what was found and that ``applyonce resolve CALL_ID --release`` frees
it if no process runs the call. An owner on this host whose pid is dead is still taken over at once,
and a lease written by a clock that later steps forward again simply ends. The other way round, a
clock that jumps ahead (or an owner stalled longer than a lease) lets a live owner's call be taken
over: exactly-once then rests on the publish's compare-and-swap and the check that the call has not
landed already, as it does for any takeover.

**Only a process that shares the owner's PID namespace and boot can judge its pid.** Two
containers of one pod (one hostname, a shared volume) number their processes apart: the owner's
pid means nothing, or another process, to the other. So the owner records the identity of its
PID namespace (``/proc/self/ns/pid``) and the boot (``/proc/sys/kernel/random/boot_id``); a
judge whose own differ (or an owner recorded by a version before this one, without them) lets the
lease decide: such an owner is neither provably dead nor provably alive here.

A claim written before leases existed has none: it is taken to end one lease (the claimant's)
after the row's last update. A lease or update stamp that cannot be read counts as ended: a live
owner would have written a readable one at its last renewal.

The host is ``socket.gethostname()``, or ``APPLYONCE_HOST_ID`` when set (tests, and hosts whose
name is not stable).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from applyonce.errors import ConflictError, UsageError

DEFAULT_LEASE_S = 30.0
MIN_LEASE_S = 0.5
MAX_LEASE_S = 86400.0
HOST_ENV = "APPLYONCE_HOST_ID"

log = logging.getLogger(__name__)


class ClaimStillHeldError(ConflictError):
    """``applyonce resolve --release`` of a claim whose owner provably runs on this host."""

    kind = "claim-held"
    default_hint = "let it finish, or stop that process first; its claim is freed when it dies"


class NothingToReleaseError(UsageError):
    kind = "nothing-to-release"
    default_hint = "only a call in flight (claimed or prepared) holds a claim"


def host_id() -> str:
    """This host's name as claims record it (``APPLYONCE_HOST_ID`` wins)."""
    return os.environ.get(HOST_ENV) or socket.gethostname()


@dataclass(frozen=True)
class Owner:
    """The process that holds a claim: pid, host, the pid's start time (a reused pid is not the
    same owner), and where its pid means something: its PID namespace and boot (empty: recorded
    by a version before they were, or a system without ``/proc``)."""

    pid: int
    host: str
    start: str
    pidns: str = ""
    boot: str = ""

    @classmethod
    def me(cls) -> Owner:
        return cls.local(os.getpid(), _process_start(os.getpid()) or "")

    @classmethod
    def local(cls, pid: int, start: str) -> Owner:
        """Process ``pid`` (started at ``start``) as seen from this process: this host, this PID
        namespace, this boot."""
        pidns, boot = namespace_id()
        return cls(pid, host_id(), start, pidns, boot)

    def on_this_host(self) -> bool:
        return self.host == host_id()

    def judgeable_here(self) -> bool:
        """Its pid means the same process here: same host, same PID namespace, same boot. An
        owner recorded without them (a version before this one) is not: its lease decides."""
        return self.on_this_host() and (self.pidns, self.boot) == namespace_id()

    def provably_alive(self) -> bool:
        """It runs here now (its pid lives, with the start time recorded)."""
        if not self.judgeable_here():
            return False
        start = _process_start(self.pid)
        return start is not None and (not self.start or start == self.start)

    def provably_dead(self) -> bool:
        """It ran here and no longer does (pid gone, or reused by another process)."""
        return self.judgeable_here() and not self.provably_alive()

    def describe(self) -> str:
        return f"process {self.pid} on {self.host or 'an unnamed host'}"

    def as_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "host": self.host, "start": self.start}


def namespace_id() -> tuple[str, str]:
    """This process's PID namespace (``pid:[inode]``) and boot id; empty where unreadable (no
    ``/proc``: then there are no PID namespaces to tell apart either)."""
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pidns = ""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            boot = handle.read().strip()
    except (OSError, UnicodeDecodeError):
        boot = ""
    return pidns, boot


def _process_start(pid: int) -> str | None:
    """The start time of ``pid`` (clock ticks since boot), so a reused pid is not taken as alive;
    None for a zombie, which never runs again (a killed orphan stays one where the PID 1 of a
    container does not reap it: an ``applyonce serve`` worker whose server was killed too)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        if fields[0] in (b"Z", b"X"):
            return None
        return fields[19].decode()
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return ""
        return ""


def stamp(at: float) -> str:
    """``at`` (seconds since the epoch) as the ledger writes times: UTC, milliseconds."""
    moment = dt.datetime.fromtimestamp(at, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_stamp(text: str | None) -> float | None:
    """A time the ledger wrote, as seconds since the epoch (None: absent or unreadable)."""
    if not text:
        return None
    try:
        moment = dt.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        return None
    return moment.timestamp()


@dataclass(frozen=True)
class Lease:
    """Until when a claim holds without renewal (``expires_at``, a ledger time stamp), and the
    lease length its owner chose."""

    expires_at: str
    seconds: float

    @classmethod
    def starting(cls, now: float, seconds: float) -> Lease:
        return cls(stamp(now + seconds), seconds)


@dataclass(frozen=True)
class Hold:
    """Why a claim still holds: what to tell a process that wanted it."""

    message: str
    hint: str
    owner: Owner
    until: str | None
    suspicious: bool  # ends more than one lease ahead of this clock: clock or record is wrong


class Claimed(Protocol):
    """What :func:`hold_of` reads of a call's row (a ledger's ``CallRow``)."""

    @property
    def call_id(self) -> str: ...
    @property
    def owner(self) -> Owner | None: ...
    @property
    def lease(self) -> Lease | None: ...
    @property
    def updated_at(self) -> str: ...


def hold_of(row: Claimed, claimant: Owner, *, now: float, lease_seconds: float) -> Hold | None:
    """Whether the claim on the in-flight call ``row`` still holds against ``claimant`` at ``now``
    (seconds since the epoch); ``lease_seconds`` is the claimant's lease, for a claim written
    before leases. The module docstring has the rules. None: it may be taken."""
    owner, lease = row.owner, row.lease
    if owner is None or owner == claimant:
        # No owner (released by hand), or this very process: an earlier apply here that failed
        # halfway (one call runs at most once at a time per process).
        return None
    if owner.provably_dead():
        return None
    recorded = lease.seconds if lease is not None else 0.0
    length = recorded if 0 < recorded <= MAX_LEASE_S else lease_seconds
    if lease is not None:
        until_text: str | None = lease.expires_at
        until = parse_stamp(lease.expires_at)
    else:
        last = parse_stamp(row.updated_at)
        until = None if last is None else last + lease_seconds
        until_text = None if until is None else stamp(until)
    if until is None or until <= now:
        return None
    short = row.call_id[:12]
    if until - now > length + 1.0:  # a second of slack for the clocks of two hosts
        return Hold(
            f"call {short} is claimed by {owner.describe()} until {until_text}, more than a "
            f"lease ({length:g} s) ahead of this clock (a clock that stepped back, or a forged "
            "record)",
            f"if no process runs it, run 'applyonce resolve {short} --release'",
            owner,
            until_text,
            suspicious=True,
        )
    return Hold(
        f"call {short} is running in {owner.describe()} (its lease runs until {until_text})",
        "wait for it to finish, then repeat the call to get its result",
        owner,
        until_text,
        suspicious=False,
    )


class Heartbeat:
    """Renews a claim's lease every third of a lease, from a daemon thread, from :meth:`start`
    until the ``with`` block ends (long checks included). ``renew`` runs in that thread and says
    whether the claim is still this process's. A failed renewal is logged and tried again at the
    next beat: the lease then runs out, which is what a stuck process should let happen."""

    def __init__(self, lease_seconds: float) -> None:
        self._every = lease_seconds / 3
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.renewals = 0

    def start(self, renew: Callable[[], bool]) -> None:
        """Begin renewing (once; later calls do nothing)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._beat, args=(renew,), name="applyonce-lease", daemon=True
            )
            self._thread.start()

    def __enter__(self) -> Heartbeat:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            # Bounded: a renewal blocked on a busy ledger is left behind (a daemon thread).
            self._thread.join(timeout=self._every + 1.0)

    def _beat(self, renew: Callable[[], bool]) -> None:
        while not self._stop.wait(self._every):
            try:
                if renew():
                    self.renewals += 1
            except Exception as exc:  # the ledger is busy or gone: try at the next beat
                log.debug("lease renewal failed: %s", exc)
