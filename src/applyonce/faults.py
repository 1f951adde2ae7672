"""Fault injection for crash tests and the demo (docs/design.md §7).

``APPLYONCE_FAULT=<point>`` makes the process SIGKILL itself when it reaches ``<point>``: no
``finally`` blocks, no atexit, no flushing — exactly what a power cut or an OOM kill leaves behind.
"""

from __future__ import annotations

import os
import signal

POINTS = (
    "after-claim",
    "after-prepared",
    "after-snapshot",  # --dirty commit: the snapshot commit object written, the call not staged
    "after-stage",
    "after-check",
    "after-hooks",  # the repository's commit hooks ran (or there are none), no commit object
    "after-commit-object",
    "after-push-objects",  # --remote: the commit's objects are on the remote, its branch not moved
    # --remote: a lagging checked-out branch moved to the remote's tip, its files not yet synced
    "during-catch-up",
    "during-publish",  # the branch's ref lock journaled, libgit2 not yet called
    "after-publish",
    "after-receipt-tmp",
    "after-receipt",
    "after-ledger",
    "during-sync",  # index.lock held, a checkout file's temp file written, not yet renamed
    "after-sync",
    "after-reject-receipt-tmp",
    # recover: a call's staged commit published (rolled forward), its checkout not yet synced
    "after-roll-forward",
)
ENV = "APPLYONCE_FAULT"


def fault(point: str) -> None:
    """Die here if ``APPLYONCE_FAULT`` names ``point``."""
    assert point in POINTS, point
    if os.environ.get(ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)
