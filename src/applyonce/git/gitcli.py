"""Running the real ``git`` on the repository: where applyonce needs git's own behaviour —
its transports and credential helpers (a fetch, a push: :mod:`applyonce.git.remote`), or its
fetching of a partial clone's missing objects (:mod:`applyonce.git.promisor`) — which libgit2
does not have.

Never a prompt (a call does not wait for a password), git's messages in English (the words the
callers read), no automatic ``gc`` or maintenance in the middle of a call, and a bounded wait.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from dataclasses import dataclass

TIMEOUT_S = 60.0  # every git process: a remote that stops answering never hangs a call
# git's words for "the connection was never made": nothing reached the remote.
_NOT_CONNECTED = (
    "unable to connect",
    "could not resolve",
    "connection refused",
    "does not appear to be a git repository",
    "repository not exported",
    "repository not found",
    "no route to host",
    "network is unreachable",
)


@dataclass(frozen=True)
class GitRun:
    """What a git process gave: its exit code, its output (bytes) and its error output."""

    code: int
    out: bytes
    err: str

    @property
    def text(self) -> str:
        return self.out.decode("utf-8", "replace")


def run_git(
    git_dir: str, *args: str, input: bytes | None = None, timeout: float = TIMEOUT_S
) -> GitRun:
    """``git -c gc.auto=0 -c maintenance.auto=false ARGS`` on the repository at ``git_dir``
    (a timeout or a git that cannot run is a failed run, never an exception)."""
    env = {
        **os.environ,
        "GIT_TERMINAL_PROMPT": "0",  # never a credentials prompt: a call does not wait
        "LC_ALL": "C",  # git's messages in the words the callers read
        "GIT_DIR": git_dir,
    }
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    options = ["-c", "gc.auto=0", "-c", "maintenance.auto=false"]
    try:
        done = subprocess.run(
            ["git", *options, *args],
            env=env,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return GitRun(-1, b"", f"fatal: no answer within {timeout:.0f} s (timed out)")
    except OSError as exc:
        return GitRun(-1, b"", f"fatal: cannot run git: {exc.strerror}")
    return GitRun(done.returncode, done.stdout, done.stderr.decode("utf-8", "replace"))


def not_connected(err: str) -> bool:
    """Whether git's error output says the connection to the remote was never made."""
    low = err.lower()
    return any(words in low for words in _NOT_CONNECTED)


def last_error(err: str) -> str:
    """The line of git's error output that says what went wrong (a ``fatal:`` or ``error:``
    line, else the last line), at most 200 characters."""
    lines = [line.strip() for line in err.splitlines() if line.strip()]
    fatal = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return next(iter(fatal), lines[-1] if lines else "")[:200]


@functools.cache
def git_version() -> tuple[int, int, int] | None:
    """The version of the ``git`` on PATH, as ``(major, minor, patch)`` (None: it cannot be run,
    or says no version applyonce can read). Asked once a process."""
    try:
        done = subprocess.run(
            ["git", "--version"], capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", done.stdout)
    if done.returncode != 0 or found is None:
        return None
    return int(found[1]), int(found[2]), int(found[3] or 0)
