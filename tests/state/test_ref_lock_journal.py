"""A branch's ref lock is libgit2's: recover removes one only when the journal proves it was taken
for a publish that died (content a prefix of what libgit2 writes, made right after the entry, the
ref not moved); a lock of anyone else at the same path stays.

The holder is a real process SIGKILLed inside :func:`journaled_ref_lock`. libgit2's part is played
by the child with libgit2's exact steps (refdb_fs.c ``loose_lock``: ``O_CREAT|O_EXCL``, nothing
written; ``loose_commit``: one write of the new oid and a newline, then fsync and rename): no fault
point can fire inside libgit2. tests/e2e/git/test_ref_locks.py makes libgit2 itself leave one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from applyonce.state.lockjournal import journaled_locks, remove_own_locks

OLD = "1" * 40
NEW = "2" * 40
REF = "refs/heads/main"

_HOLDER = textwrap.dedent(
    """
    import os, signal, sys, time
    from pathlib import Path
    from applyonce.state.lockjournal import journaled_ref_lock
    journal, lock, leave, then = sys.argv[1:]
    with journaled_ref_lock(
        Path(journal), Path(lock), ref="refs/heads/main", expected="1" * 40,
        content=("2" * 40 + "\\n").encode(),
    ):
        if leave != "none":
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, leave.encode())
        sys.stdout.write("inside\\n")
        sys.stdout.flush()
        if then == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)
    """
)


def _holder(tmp_path: Path, leave: str, then: str = "die") -> subprocess.Popen[str]:
    lock = tmp_path / "refs" / "heads" / "main.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path / "locks"), str(lock), leave, then],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "inside\n"
    if then == "die":
        assert proc.wait(timeout=10) == -signal.SIGKILL
    return proc


def _at(value: str | None) -> Callable[[str], str | None]:
    """The branch's value as recover reads it."""
    return lambda ref: value if ref == REF else None


@pytest.mark.parametrize(
    "leave",
    ["", NEW[:17], NEW + "\n"],
    ids=["empty: killed before libgit2 wrote", "partial write", "written, not yet renamed"],
)
def test_a_dead_publishs_ref_lock_is_removed(tmp_path: Path, leave: str) -> None:
    _holder(tmp_path, leave)
    lock = tmp_path / "refs" / "heads" / "main.lock"
    assert lock.read_bytes() == leave.encode()
    removed = remove_own_locks(tmp_path / "locks", ref_at=_at(OLD))
    assert removed == [str(lock)]
    assert not lock.exists()
    assert list((tmp_path / "locks").iterdir()) == []


@pytest.mark.parametrize(
    ("leave", "ref_now", "entry_age"),
    [
        ("3" * 40 + "\n", OLD, 0.0),  # someone else's update of the branch (git update-ref)
        ("", "3" * 40, 0.0),  # the branch moved: no git could have while the dead one's lock stood
        ("", OLD, 60.0),  # an empty lock made long after the entry: taken after the holder died
        (NEW + "\n", OLD, 120.0),  # a full one, likewise
    ],
    ids=["foreign content", "ref moved", "empty lock made later", "full lock made later"],
)
def test_a_lock_not_proven_the_dead_publishs_stays(
    tmp_path: Path, leave: str, ref_now: str, entry_age: float
) -> None:
    _holder(tmp_path, "none")  # killed before libgit2 took the lock
    lock = tmp_path / "refs" / "heads" / "main.lock"
    (entry,) = (tmp_path / "locks").glob("*.json")
    if entry_age:
        then = time.time() - entry_age
        os.utime(entry, (then, then))
    lock.write_text(leave)  # the user's lock, at the path the dead entry names
    assert journaled_locks(tmp_path / "locks") == {lock}
    assert remove_own_locks(tmp_path / "locks", ref_at=_at(ref_now)) == []
    assert lock.read_text() == leave
    assert list((tmp_path / "locks").iterdir()) == []  # the dead entry is gone: lock now reported


def test_a_live_publishs_lock_stays_until_its_holder_dies(tmp_path: Path) -> None:
    """The entry's flock tells a live holder (publishing right now) from a dead one."""
    proc = _holder(tmp_path, "", then="wait")
    lock = tmp_path / "refs" / "heads" / "main.lock"
    try:
        assert remove_own_locks(tmp_path / "locks", ref_at=_at(OLD)) == []
        assert lock.exists() and len(list((tmp_path / "locks").glob("*.json"))) == 1
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert remove_own_locks(tmp_path / "locks", ref_at=_at(OLD)) == [str(lock)]
